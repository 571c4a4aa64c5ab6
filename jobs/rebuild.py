"""Rebuild a store's ConsumeQueues and IndexFiles from its CommitLog into a separate directory, byte for byte
what RocketMQ writes, and show how they differ from the store's own.

Usage:
    ./spark-submit.sh jobs/rebuild.py --store PATH --output DIR [--broker-conf broker.conf]
        [--rocketmq-version X.Y.Z] [--mapped-file-size-consume-queue N] [--max-hash-slot-num N]
        [--max-index-num N] [--no-index] [--force] [--resync] [--differences DIR]

Writes DIR/consumequeue/ and DIR/index/, and DIR/batchconsumequeue/ for 5.x BatchCQ topics (DIR must not be
inside the store, and must not hold a rebuild already). Settings come from the options, else the broker's properties file, else what the store's files show,
else RocketMQ's defaults; the job prints each with its source, refuses settings that contradict the files
(--force to go ahead), then prints the differences between the rebuild and the store's files. IndexFile names
are the broker's wall clock when it created them, so IndexFiles are compared by content in name order.
By default the rebuild is what the release writes when it restarts without consumequeue/ and index/ (on a
damaged log: what its recovery keeps and its reput reads); --resync writes every valid record, reading on
past damage, and lists per queue the entries RocketMQ would not have (beyond_release differences).
Exit status: 0 when the store's files equal the rebuild, 3 when they differ or the CommitLog has damage, 2 for
a bad argument, path or setting (checked before Spark starts). With --differences DIR the comparison is also
appended to the Delta table DIR (one row per file pair: status, queue, first differing queue offset, entries
missing, extra and changed; outside the store).
"""
from __future__ import annotations

import argparse
import sys

from rocketstore_spark.findings import about_the_store
from rocketstore_spark.report.text import render_table


def parse_args(argv):
    p = argparse.ArgumentParser(prog="rebuild", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True, help="store root (the directory holding commitlog/)")
    p.add_argument("--output", required=True, help="directory for consumequeue/ and index/ (outside the store)")
    p.add_argument("--broker-conf", help="the broker's properties file (broker.conf)")
    p.add_argument("--rocketmq-version", help="release to mirror, e.g. 4.9.8 or 5.5.1 (default: detected)")
    p.add_argument("--mapped-file-size-consume-queue", type=int)
    p.add_argument("--max-hash-slot-num", type=int)
    p.add_argument("--max-index-num", type=int)
    p.add_argument("--no-index", action="store_true", help="messageIndexEnable=false: no IndexFiles")
    p.add_argument("--force", action="store_true", help="rebuild even where settings contradict the store's files")
    p.add_argument("--resync", action="store_true",
                   help="every valid record past damage, not what the release's own rebuild writes")
    p.add_argument("--differences", help="append the comparison to this Delta table (outside the store)")
    return p.parse_args(argv)


def options(args) -> dict:
    return {"rocketmqVersion": args.rocketmq_version, "mappedFileSizeConsumeQueue": args.mapped_file_size_consume_queue,
            "maxHashSlotNum": args.max_hash_slot_num, "maxIndexNum": args.max_index_num,
            "messageIndexEnable": False if args.no_index else None}


def main(spark, argv) -> int:
    from rocketstore_spark.spark.rebuild import rebuild
    args = parse_args(argv)
    from rocketstore_spark.rebuild.output import summary_lines
    r = rebuild(spark, args.store, args.output, options(args), args.broker_conf, args.force, resync=args.resync)
    s = r.settings
    print(f"Rebuild of {r.store} into {r.output}")
    print("\n".join(summary_lines(r.resync, s.release_label, r.restart, r.beyond or {})))
    print(render_table(["setting", "value", "from"], [
        ("RocketMQ release", str(s.release), s.sources.get("rocketmqVersion", "")),
        ("mappedFileSizeConsumeQueue", s.consume_queue_file_size, s.sources["mappedFileSizeConsumeQueue"]),
        ("maxHashSlotNum", s.geometry.hash_slot_num if s.geometry else None, s.sources["maxHashSlotNum"]),
        ("maxIndexNum", s.geometry.index_num if s.geometry else None, s.sources["maxIndexNum"]),
        ("messageIndexEnable", s.geometry is not None, s.sources["messageIndexEnable"])], max_width=70))
    written = sum(len(q.files) for q in r.queues)
    batch = (f", {len(r.batch_queues)} BatchConsumeQueue(s) in {sum(len(q.files) for q in r.batch_queues)} file(s)"
             if r.batch_queues else "")
    print(f"\n{len(r.queues)} queue(s), {written} ConsumeQueue file(s){batch}, {len(r.index_files)} IndexFile(s) "
          "written")
    unusual = [q for q in r.queues if q.skipped or q.moved]
    if unusual:
        print(render_table(["topic", "queue", "max offset", "skipped", "moved"],
                           [(q.topic, q.queue_id, q.max_offset, q.skipped, q.moved) for q in unusual],
                           numeric={"queue", "max offset", "skipped", "moved"}))
    for f in r.findings:
        print(f)
    changed = [d for d in r.differences if d.status != "identical"]
    print(f"\nAgainst the store: {len(r.differences) - len(changed)} file(s) identical, {len(changed)} differ")
    if changed:
        # the detail is the point of the table: never elided
        print(render_table(["kind", "store file", "rebuilt file", "status", "detail"],
                           [(d.kind, d.store_file, d.rebuilt_file, d.status, d.detail) for d in changed],
                           max_width=400))
    if args.differences:
        from rocketstore_spark.spark.rebuild import differences_frame
        differences_frame(spark, r).write.format("delta").mode("append").save(args.differences)
        print(f"the comparison was appended to the Delta table {args.differences}")
    return 3 if changed or about_the_store(r.findings) else 0


def check(argv) -> None:
    """Arguments, paths, output directory and settings are checked before Spark starts."""
    from rocketstore_spark.rebuild.output import SPARK_REBUILT, OutputError, SettingsConflict, prepare
    from rocketstore_spark.store.discovery import StorePathError
    from rocketstore_spark.store.outputs import outside_stores, store_roots
    args = parse_args(argv)
    try:
        layout, _, _ = prepare(args.store, args.output, options(args), args.broker_conf, args.force, SPARK_REBUILT)
        if args.differences:
            outside_stores(args.differences, store_roots([layout]), "differences table")
    except (StorePathError, OutputError, SettingsConflict, ValueError, OSError) as e:
        print(f"rebuild: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("rebuild", main, check, sys.argv[1:], delta="--differences" in sys.argv)
