"""The incremental scrub (the nightly audit): every check and the recovery report per store, at the cost of what
changed since the last run — new, grown and changed CommitLog segments plus a rotating 1/N of the rest (N = 28 by
default: a full rotation in four weeks of nightly runs); the cross-checks (queues, IndexFiles, offsets,
checkpoint, recovery report) are carried over when no file of the store changed, else resumed on what was
written since the last run (or run whole when something under the last run's verified point changed).

Usage:
    ./spark-submit.sh jobs/scrub.py --store PATH [--store PATH ...] --state FILE [--rotation N]
        [--history DIR] [--json FILE|-] [--broker-conf broker.conf] [--rocketmq-version X.Y.Z] [--work-dir DIR]

The segment scans run as Spark tasks, one a segment; the cross-checks, when they run, on the driver. The state
(``--state``, one JSON file for any number of stores, written atomically, never under a store) keeps per segment
its size, time, a digest of sampled bytes, the scan's verdict and findings (rocketstore_spark/verify/scrub.py).
With --history, the run's findings and one summary row per store are appended with the run id to the Delta
tables ``DIR/findings`` and ``DIR/audit_runs``. With --json, the audit document (``rocketstore audit``'s, each
store with its ``scrub`` part). Exit status: 0 when nothing above info level was found and no restart would
lose anything, 3 otherwise, 2 for a bad argument or path (checked before Spark starts).
"""
from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import uuid


def parse_args(argv):
    from rocketstore_spark.verify.scrub import ROTATION
    p = argparse.ArgumentParser(prog="scrub", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (repeatable)")
    p.add_argument("--state", required=True, help="the scrub's state file (created on the first run)")
    p.add_argument("--rotation", type=int, default=ROTATION,
                   help=f"runs per full rotation of the unchanged segments (default {ROTATION})")
    p.add_argument("--history", help="directory of the Delta tables findings/ and audit_runs/ (appended)")
    p.add_argument("--json", help="write the audit document to this file ('-': stdout)")
    p.add_argument("--broker-conf", help="the broker's properties file (broker.conf), for every store")
    p.add_argument("--rocketmq-version", help="release to mirror, e.g. 4.9.8 or 5.5.1 (default: detected)")
    p.add_argument("--work-dir", help="where the queue check spills (default: TMPDIR; never inside a store)")
    args = p.parse_args(argv)
    if args.rotation < 1:
        p.error(f"--rotation {args.rotation}: must be 1 or more")
    return args


def main(spark, argv) -> int:
    from rocketstore_spark.report.documents import text_stream, write_document
    from rocketstore_spark.report.scrub import scrub_lines
    from rocketstore_spark.spark.history import append_history
    from rocketstore_spark.spark.scrub import scrub
    from rocketstore_spark.store.discovery import discover
    args = parse_args(argv)
    run_id, run_time = uuid.uuid4().hex, dt.datetime.now(dt.timezone.utc)
    # absolute: the executors open the segments (their working directory is not the driver's)
    layouts = [layout for path in args.store for layout in discover(os.path.abspath(path))]
    result = scrub(spark, layouts, args.state, rotation=args.rotation,
                   options={"rocketmqVersion": args.rocketmq_version}, broker_conf=args.broker_conf,
                   work_dir=args.work_dir)
    text = text_stream(args.json)
    for entry in result.audit.docs:
        print("\n".join(scrub_lines(entry)), file=text)
    if args.json:
        write_document(result.audit.document(), args.json)
    if args.history:
        append_history(spark, args.history, run_id, run_time, result.audit.docs)
        print(f"findings and per-store summary appended to {args.history}/findings and {args.history}/audit_runs "
              f"(run {run_id})", file=text)
    return 3 if result.audit.at_risk else 0


def check(argv) -> None:
    """Arguments, store paths, the state and the outputs (outside every store) are checked before Spark starts."""
    from rocketstore_spark.documents import DocumentError
    from rocketstore_spark.spark.entrypoint import check_stores, usage_error
    from rocketstore_spark.verify.scrub import load_state
    args = parse_args(argv)
    check_stores("scrub", args.store, broker_conf=args.broker_conf,
                 outputs=((args.state, "scrub state"), (args.json, "JSON document"), (args.history, "history"),
                          (args.work_dir, "work directory")))
    try:
        load_state(args.state)
    except DocumentError as e:
        usage_error("scrub", e)


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("scrub", main, check, sys.argv[1:], delta="--history" in sys.argv)
