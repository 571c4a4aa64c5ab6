"""Verify RocketMQ stores offline: every BODYCRC (past the first failure), CommitLog <-> ConsumeQueue <->
IndexFile consistency, the checkpoint, and consumer offsets against queue bounds, with lag.

Usage:
    ./spark-submit.sh jobs/verify.py --store PATH [--store PATH ...] [--json FILE|-] [--output DELTA_DIR]
        [--broker-conf broker.conf] [--rocketmq-version X.Y.Z] [--no-crc]
        [--reset-plan as-broker|to-earliest|to-latest|to-datetime|shift-by] [--reset-value V]
        [--reset-group GROUP] [--reset-file PLAN.csv]

Prints per store: the release and settings used, counts per check (docs/checks.md), the findings that matter
first (file, byte position, physical offset, queue and queue offset), consumer lag per group and queue, and a
reset plan (by default ``as-broker``: only offsets out of range, moved where the broker would move them).
Nothing is ever written under a store: the plan is printed, and written to --reset-file on request.
With --json, one JSON document (``document_version`` 1; ``-`` for stdout, the text report then goes to
stderr). With --output, the findings and the lag are appended to the Delta tables ``DIR/findings`` and
``DIR/consumer_lag`` with a run id and time. Exit status: 0 when nothing above info level was found, 3 when
something was, 2 for a bad argument or path (checked before Spark starts).
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys

REPORT_PLAN_KINDS = ("as-broker", "to-earliest", "to-latest", "to-datetime", "shift-by")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="verify", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (repeatable)")
    p.add_argument("--json", help="write the JSON document to this file ('-': stdout)")
    p.add_argument("--output", help="directory of the Delta tables findings/ and consumer_lag/ (appended)")
    p.add_argument("--broker-conf", help="the broker's properties file (broker.conf), for every store")
    p.add_argument("--rocketmq-version", help="release to mirror, e.g. 4.9.8 or 5.5.1 (default: detected)")
    p.add_argument("--no-crc", action="store_true", help="skip the BODYCRC check (structure only)")
    p.add_argument("--reset-plan", choices=REPORT_PLAN_KINDS, default="as-broker",
                   help="how the printed reset plan moves offsets (default: as-broker)")
    p.add_argument("--reset-value", help="to-datetime: ISO 8601 time (UTC if no zone); shift-by: N")
    p.add_argument("--reset-group", help="plan only this consumer group")
    p.add_argument("--reset-file", help="also write the plan as CSV (store,consumer_group,topic,queue_id,"
                                        "current_offset,new_offset)")
    args = p.parse_args(argv)
    if args.reset_plan in ("to-datetime", "shift-by") and not args.reset_value:
        p.error(f"--reset-plan {args.reset_plan} needs --reset-value")
    if args.reset_plan == "to-datetime":
        try:
            dt.datetime.fromisoformat(args.reset_value)
        except ValueError:
            p.error(f"--reset-value {args.reset_value!r}: not an ISO 8601 time (e.g. 2026-11-22T04:14:00)")
    if args.reset_plan == "shift-by":
        try:
            int(args.reset_value)
        except ValueError:
            p.error(f"--reset-value {args.reset_value!r}: not an integer")
    return args


def main(spark, argv) -> int:
    from rocketstore_spark.report.documents import text_stream, write_document
    from rocketstore_spark.report.verify_text import render_plan, render_store
    from rocketstore_spark.spark.verify import document, findings_frame, lag_frame, verify
    from rocketstore_spark.store.discovery import discover
    from rocketstore_spark.verify.offsets import reset_plan
    args = parse_args(argv)
    options = {"rocketmqVersion": args.rocketmq_version}
    run = verify(spark, args.store, options, args.broker_conf, check_crc=not args.no_crc)
    text = text_stream(args.json)
    plan = []
    for rep in run.stores:
        print(render_store(rep), file=text)
        if rep.offsets and rep.offsets.lags:
            layout = discover(rep.store)[0]
            plan += reset_plan(layout, rep.offsets.lags, args.reset_plan, args.reset_value, args.reset_group)
        print(file=text)
    if any(rep.offsets and rep.offsets.lags for rep in run.stores):
        print(render_plan(plan, args.reset_plan), file=text)
    problems = sum(1 for rep in run.stores if rep.worst in ("warning", "error"))
    print(f"\n{len(run.stores)} store(s) verified, {problems} with findings above info level (run {run.run_id}); "
          "seconds per step: " + ", ".join(f"{k} {v}" for k, v in run.seconds.items()), file=text)
    if args.reset_file:
        with open(args.reset_file, "w", newline="") as f:
            w = csv.DictWriter(f, ["store", "consumer_group", "topic", "queue_id", "current_offset", "new_offset"])
            w.writeheader()
            w.writerows(plan)
        print(f"reset plan written to {args.reset_file} ({len(plan)} row(s))", file=text)
    if args.json:
        doc = document(run)
        doc["reset_plan"] = {"how": args.reset_plan, "value": args.reset_value, "queues": plan}
        write_document(doc, args.json)
    if args.output:
        findings_frame(spark, run).write.format("delta").mode("append").save(f"{args.output}/findings")
        lag_frame(spark, run).write.format("delta").mode("append").save(f"{args.output}/consumer_lag")
        print(f"findings and consumer lag appended to the Delta tables under {args.output} (run {run.run_id})",
              file=text)
    return 3 if run.problems else 0


def check(argv) -> None:
    """Arguments, store paths and the broker.conf path are checked before Spark starts."""
    from rocketstore_spark.spark.entrypoint import check_stores, usage_error
    from rocketstore_spark.store.engines import Work
    args = parse_args(argv)
    # the job checks ConsumeQueue files (not a RocksDB ConsumeQueue)
    check_stores("verify", args.store, refuse=(Work.READ_COMMITLOG, Work.READ_QUEUES), broker_conf=args.broker_conf,
                 outputs=((args.json, "JSON document"), (args.reset_file, "reset plan"), (args.output, "Delta output")))
    if args.rocketmq_version:
        from rocketstore_spark.rocketmq.releases import Release
        try:
            Release.parse(args.rocketmq_version)
        except ValueError as e:
            usage_error("verify", e)


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("verify", main, check, sys.argv[1:], delta="--output" in sys.argv)
