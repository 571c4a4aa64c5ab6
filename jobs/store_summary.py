"""Store summary: what is in a RocketMQ store, per topic, and whether its CommitLog segments are healthy.

Usage:
    ./spark-submit.sh jobs/store_summary.py --store PATH [--store PATH ...] [--output DELTA_DIR]

Prints, per store and topic, the message count, record and body bytes, and the first and last store time;
then one line per CommitLog segment whose scan found damage or CRC failures. With --output, both tables are
also written as Delta Lake tables (``DIR/topics`` and ``DIR/segments``, overwritten). Exit status 3 when a
segment is damaged, 2 for a bad argument or a path that is not a store (checked before Spark starts), 0
otherwise.
"""
from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F


def parse_args(argv):
    p = argparse.ArgumentParser(prog="store_summary", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (glob ok)")
    p.add_argument("--output", help="directory for Delta tables topics/ and segments/")
    return p.parse_args(argv)


def topic_summary(spark, stores):
    messages = spark.read.format("rocketmq") \
        .schema("store STRING, topic STRING, total_size INT, body_length INT, store_timestamp TIMESTAMP") \
        .load(",".join(stores))
    return messages.groupBy("store", "topic").agg(
        F.count("*").alias("messages"), F.sum("total_size").alias("record_bytes"),
        F.sum("body_length").alias("body_bytes"), F.min("store_timestamp").alias("first_store_time"),
        F.max("store_timestamp").alias("last_store_time")).orderBy("store", F.desc("messages"), "topic")


def segment_health(spark, stores):
    return spark.read.format("rocketmq_segments").load(",".join(stores)) \
        .select("store", "segment", "records", "stop_reason", "stop_position", "crc_failures",
                "first_crc_failure", F.size("findings").alias("findings")).orderBy("store", "segment")


def main(spark, argv) -> int:
    args = parse_args(argv)
    topics = topic_summary(spark, args.store).cache()
    segments = segment_health(spark, args.store).cache()
    topics.show(1000, truncate=False)
    damaged = segments.where("findings > 0 OR crc_failures > 0")
    n_damaged = damaged.count()
    print(f"{segments.count()} segments scanned, {n_damaged} with damage or CRC failures")
    if n_damaged:
        damaged.show(1000, truncate=False)
    if args.output:
        topics.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(f"{args.output}/topics")
        segments.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(f"{args.output}/segments")
        print(f"Delta tables written under {args.output}")
    return 3 if n_damaged else 0


def check_paths(argv) -> None:
    """Arguments and store paths are checked before Spark starts: a mistake costs no JVM start-up."""
    from rocketstore_spark.store.discovery import StorePathError, discover
    args = parse_args(argv)
    try:
        discover(args.store)
    except StorePathError as e:
        print(f"store_summary: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    check_paths(sys.argv[1:])
    from rocketstore_spark.session import get_spark
    session = get_spark("store_summary")
    code = main(session, sys.argv[1:])
    session.stop()
    sys.exit(code)
