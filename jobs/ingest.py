"""Incremental ingest: the CommitLog messages of RocketMQ stores into one Delta table, reading only what was
written since the last committed run, and snapshots of the stores' side tables for charts over days.

Usage:
    ./spark-submit.sh jobs/ingest.py --store PATH [--store PATH ...] --table DIR [--bodies]
        [--restart-at STORE=OFFSET ...] [--no-snapshots]

The table (``DIR``): every column of the ``rocketmq`` source (``store`` is the store's absolute path; ``body``
and ``body_uncompressed`` only with --bodies, fixed when the table is created) and ``store_date``, partitioned
by ``store`` and ``store_date`` (README: "Incremental ingest into Delta Lake", layout and figures). Each store is
its own Delta commit: its rows and its watermark (the end of its last row) land together or not at all.

A run per store: checks that the record the table ends with is still the store's record at that offset
(refused otherwise: a repair cut the log, or another broker's store is at the path), reads the CommitLog from
the watermark only (segments below it are not opened), and replaces the store's rows from the watermark on
with what it read (so a retried or racing run never duplicates). An incomplete last record is left for the next
run. ``--restart-at STORE=OFFSET`` re-ingests a store from OFFSET (0, or the end of an ingested record), replacing
its rows from there in one commit: the way on after a refusal. Snapshots (``DIR/_snapshots/``: ingest_runs,
segments, queues, consumer_lag, topics, subscription_groups) get a row set per run with its id and time.

Exit status: 0 when every store was ingested (or had nothing new) without damage; 3 when a store met damage
(bytes of the new range that were no record, BODYCRC failures) or was refused; 1 when another run of the same
store committed first (nothing of this run's for that store is in the table) or on an internal error; 2 for a
bad argument, a path that is not a store (checked before Spark starts) or a table this job must not write
(another kind, a newer format, bodies or not).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import uuid


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ingest", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (repeatable)")
    p.add_argument("--table", required=True, help="directory of the Delta table (created on the first run)")
    p.add_argument("--bodies", action="store_true", help="also the body and body_uncompressed columns")
    p.add_argument("--restart-at", action="append", default=[], metavar="STORE=OFFSET",
                   help="re-ingest STORE from physical offset OFFSET (0, or the end of an ingested record)")
    p.add_argument("--no-snapshots", action="store_true", help="do not append to DIR/_snapshots/")
    args = p.parse_args(argv)
    args.restart = {}
    for item in args.restart_at:
        store, _, offset = item.rpartition("=")
        if not store or not offset.isdigit():
            p.error(f"--restart-at {item!r}: expected STORE=OFFSET, OFFSET a physical offset (e.g. 0)")
        args.restart[os.path.abspath(store)] = int(offset)
    return args


def store_paths(args) -> list[str]:
    """Every store, by absolute path (the ``store`` column: the same store under another spelling is the same)."""
    from rocketstore_spark.store.discovery import discover
    return list(dict.fromkeys(os.path.abspath(layout.name) for layout in discover(args.store)))


def render(run) -> list[str]:
    """The report lines of one store's run."""
    head = f"{run.store}: "
    if run.status == "ingested":
        lines = [head + f"{run.messages:,} message(s) ingested, physical offsets {run.start_offset:,} .. "
                        f"{run.end_offset:,} ({run.end_offset - run.start_offset:,} bytes) in {run.seconds:.1f} s"]
    elif run.status == "unchanged":
        lines = [head + f"nothing new since physical offset {run.start_offset:,} ({run.seconds:.1f} s)"]
    else:
        lines = [head + f"{run.status}: {run.message}"]
    if run.tail:
        lines.append(f"  at {run.end_offset:,} the store holds {run.tail}: the next run reads it whole")
    if run.skipped_bytes:
        lines.append(f"  damage: {run.skipped_bytes:,} bytes of the new range were no record and were skipped "
                     "(the executor log names them; `rocketstore verify` for the findings)")
    if run.crc_failures:
        lines.append(f"  damage: {run.crc_failures:,} message(s) fail BODYCRC (ingested, body_crc_ok = false)")
    return lines


def main(spark, argv) -> int:
    from rocketstore_spark.spark.ingest import IngestRefused, ingest_store, open_table
    from rocketstore_spark.spark.snapshots import append_snapshots, snapshot_frames
    from rocketstore_spark.store.discovery import discover
    args = parse_args(argv)
    run_id, run_time = uuid.uuid4().hex, dt.datetime.now(dt.timezone.utc)
    table = os.path.abspath(args.table)
    try:
        open_table(spark, table, args.bodies)
    except IngestRefused as e:
        print(f"ingest: {e}", file=sys.stderr)
        return 2
    layouts = [discover(path)[0] for path in store_paths(args)]
    runs = []
    for layout in layouts:
        run = ingest_store(spark, table, layout, args.bodies, args.restart.get(layout.name))
        runs.append(run)
        print("\n".join(render(run)))
    if not args.no_snapshots:
        append_snapshots(spark, table, snapshot_frames(spark, layouts, runs, run_id, run_time))
    print(f"{len(runs)} store(s), {sum(r.messages for r in runs):,} message(s) ingested into {table} (run {run_id})")
    if any(r.status == "conflict" for r in runs):
        return 1
    return 3 if any(r.status == "refused" or r.damaged for r in runs) else 0


def check(argv) -> None:
    """Arguments and store paths are checked before Spark starts; the table must lie outside every store."""
    from rocketstore_spark.store.discovery import StorePathError, discover
    from rocketstore_spark.store.engines import UnsupportedStore, Work
    from rocketstore_spark.store.outputs import OutputError, outside_stores, store_roots
    args = parse_args(argv)
    try:
        layouts = [layout for path in store_paths(args) for layout in discover(path)]
        for layout in layouts:
            layout.refuse(Work.READ_COMMITLOG)
        outside_stores(args.table, store_roots(layouts), "Delta table")
        unknown = sorted(set(args.restart) - {layout.name for layout in layouts})
        if unknown:
            raise StorePathError(f"--restart-at names {', '.join(unknown)}, which is not among the --store paths")
    except (StorePathError, OutputError, UnsupportedStore) as e:
        print(f"ingest: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("ingest", main, check, sys.argv[1:])
