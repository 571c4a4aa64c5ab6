"""Incremental ingest: the CommitLog messages of RocketMQ stores into one Delta table, reading only what was
written since the last committed run, and snapshots of the stores' side tables for charts over days.

Usage:
    ./spark-submit.sh jobs/ingest.py --store PATH [--store PATH ...] --table DIR [--bodies]
        [--restart-at STORE=OFFSET ...] [--no-snapshots] [--writer arrow|spark]

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
``--writer spark`` writes the rows with Spark's Delta writer instead of the ingest's own (pyarrow in the Python
workers, committed through Delta's transaction: the default, the same table at a fraction of the cost).

Exit status: 0 when every store was ingested (or had nothing new) without damage; 3 when a store met damage
(bytes of the new range that were no record, BODYCRC failures) or was refused; 1 when another run of the same
store committed first (nothing of this run's for that store is in the table) or on an internal error; 2 for a
bad argument, a path that is not a store (checked before Spark starts) or a table this job must not write
(another kind, a newer format, bodies or not).
"""
from __future__ import annotations

import argparse
import os
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ingest", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (repeatable)")
    p.add_argument("--table", required=True, help="directory of the Delta table (created on the first run)")
    p.add_argument("--bodies", action="store_true", help="also the body and body_uncompressed columns")
    p.add_argument("--restart-at", action="append", default=[], metavar="STORE=OFFSET",
                   help="re-ingest STORE from physical offset OFFSET (0, or the end of an ingested record)")
    p.add_argument("--no-snapshots", action="store_true", help="do not append to DIR/_snapshots/")
    p.add_argument("--writer", choices=("arrow", "spark"), default="arrow",
                   help="who writes the Parquet files: the Python workers with pyarrow (default) or Spark's Delta "
                        "writer (the same table)")
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


def main(spark, argv) -> int:
    from rocketstore_spark.spark.ingest import ingest_stores
    args = parse_args(argv)
    return ingest_stores(spark, args.table, store_paths(args), args.bodies, args.restart,
                         snapshots=not args.no_snapshots, prog="ingest", writer=args.writer)[0]


def check(argv) -> None:
    """Arguments and store paths are checked before Spark starts; the table must lie outside every store."""
    from rocketstore_spark.spark.entrypoint import check_stores, usage_error
    from rocketstore_spark.store.engines import Work
    args = parse_args(argv)
    layouts = check_stores("ingest", args.store, refuse=(Work.READ_COMMITLOG,), outputs=((args.table, "Delta table"),))
    unknown = sorted(set(args.restart) - {os.path.abspath(layout.name) for layout in layouts})
    if unknown:
        usage_error("ingest", f"--restart-at names {', '.join(unknown)}, which is not among the --store paths")


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("ingest", main, check, sys.argv[1:])
