"""What RocketMQ would do to a store on its next start — without touching the store.

Usage:
    ./spark-submit.sh jobs/recovery_report.py --store PATH [--json FILE|-] [--lost-output DIR]
        [--broker-conf broker.conf] [--rocketmq-version X.Y.Z] [--release-family 4.9.x|5.0-5.3.1|5.3.2-5.3.x|5.5.x]

Simulates RocketMQ's normal or crash recovery (docs/format/recovery.md) for the release family the store was
written by (detected, or from the options) and prints: why the start is normal or abnormal, the checkpoint,
where the CommitLog walk starts and exactly where and why it stops, the segments, ConsumeQueue entries and
IndexFiles the restart would delete, and what would be lost (valid, CRC-correct messages after the stop, per
topic and queue; consumer offsets left beyond their queue's end). --json writes the versioned document
(``document_version`` 1; ``-`` for stdout); --lost-output exports the messages that would be lost, every
column, as a Delta table with Spark (do it before restarting). Exit status: 0 when the restart loses nothing
and cuts nothing, 3 when it would, 2 for a bad argument or path (checked before Spark starts).
"""
from __future__ import annotations

import argparse
import sys

from rocketstore_spark.rocketmq.releases import FAMILY_NAMES


def parse_args(argv):
    p = argparse.ArgumentParser(prog="recovery_report", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", required=True, help="store root (the directory holding commitlog/ and abort)")
    p.add_argument("--json", help="write the JSON document to this file ('-': stdout)")
    p.add_argument("--lost-output", help="directory for a Delta table of the messages the restart would lose")
    p.add_argument("--broker-conf", help="the broker's properties file (checkCRCOnRecover, messageIndexSafe, ...)")
    p.add_argument("--rocketmq-version", help="the broker's release, e.g. 4.9.8 or 5.5.1 (default: detected)")
    p.add_argument("--release-family", choices=FAMILY_NAMES, help="mirror this family's recovery regardless of the "
                                                             "release")
    return p.parse_args(argv)


def report(argv) -> tuple[dict, int]:
    """(the document, the exit status) — no Spark needed."""
    from rocketstore_spark.recovery.report import harmful, recovery_report
    args = parse_args(argv)
    doc, _ = recovery_report(args.store, options={"rocketmqVersion": args.rocketmq_version},
                             broker_conf=args.broker_conf, release_family=args.release_family)
    return doc, 3 if harmful(doc) else 0


def main(spark, argv) -> int:
    from rocketstore_spark.recovery.report import final_process_offset
    from rocketstore_spark.report.documents import text_stream, write_document
    from rocketstore_spark.report.recovery_text import render_recovery
    args = parse_args(argv)
    doc, code = report(argv)
    text = text_stream(args.json)
    print(render_recovery(doc), file=text)
    if args.json:
        write_document(doc, args.json)
    # a clean start after this one may cut further back (later_starts): what it loses is exported too
    at_risk = doc["lost"]["messages"] + sum(later["lost"]["messages"] for later in doc["later_starts"])
    if args.lost_output and at_risk:
        lost = (spark.read.format("rocketmq").load(doc["store"])
                .where(f"physical_offset >= {final_process_offset(doc)} AND body_crc_ok"))
        lost.write.format("delta").mode("overwrite").save(args.lost_output)
        print(f"{at_risk} message(s) that the restart{' or a clean start after it' if doc['later_starts'] else ''} "
              f"would lose written to {args.lost_output}", file=text)
    return code


def check(argv) -> None:
    """Arguments and paths are checked before Spark starts; without --lost-output no Spark is needed, so the
    report is made here and the job ends."""
    from rocketstore_spark.recovery.report import RECOVERED
    from rocketstore_spark.spark.entrypoint import check_stores, usage_error
    from rocketstore_spark.store.engines import Work
    args = parse_args(argv)
    check_stores("recovery_report", args.store, refuse=(Work.RECOVER,), allow=RECOVERED,
                 outputs=((args.json, "JSON document"), (args.lost_output, "export of the lost messages")))
    if not args.lost_output:
        try:
            code = main(None, argv)
        except (ValueError, OSError) as e:
            usage_error("recovery_report", e)
        sys.exit(code)


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("recovery_report", main, check, sys.argv[1:])
