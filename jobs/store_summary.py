"""Store summary: what is in a RocketMQ store, per topic, and whether its CommitLog segments are healthy.

Usage:
    ./spark-submit.sh jobs/store_summary.py --store PATH [--store PATH ...] [--output DELTA_DIR]

Prints, for each store: a header (its absolute path, segments, messages, time range, health), a table per
topic (messages, record and body bytes, first and last store time), one line per CommitLog segment (records,
where its valid data ends and why, CRC failures, findings) and every finding with its check id, file, byte
position and physical offset (docs/checks.md). Long tables are cut with a count of what was left out; the
Delta tables have everything. With --output, three Delta tables are written (overwritten): ``DIR/topics``,
``DIR/segments`` and ``DIR/findings`` (one row per finding). Exit status: 3 when a segment has a finding or
a CRC failure, 2 for a bad argument or a path that is not a store (checked before Spark starts), 0
otherwise.
"""
from __future__ import annotations

import argparse
import sys

from pyspark.sql import functions as F

from rocketstore_spark.report.text import cell, render_table

MAX_TOPICS = 50          # rows printed per store; the Delta tables hold all
MAX_SEGMENTS = 40
MAX_FINDINGS = 100


def parse_args(argv):
    p = argparse.ArgumentParser(prog="store_summary", description=__doc__.split("\n\n")[0])
    p.add_argument("--store", action="append", required=True, help="store root or CommitLog directory (glob ok)")
    p.add_argument("--output", help="directory for the Delta tables topics/, segments/ and findings/")
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
        .select("store", "segment", "base_offset", "file_size", "records", "valid_end", "stop_reason",
                "stop_position", "crc_failures", "first_crc_failure", "findings") \
        .orderBy("store", F.col("base_offset").asc_nulls_last())


def finding_rows(segments):
    """One row per finding of ``segment_health``: its physical offset where it is about a segment's bytes."""
    f = F.col("f")
    return segments.select("store", "segment", "base_offset", F.explode("findings").alias("f")).select(
        "store", "segment", f.check.alias("check"), f.severity.alias("severity"), f.file.alias("file"),
        f.file_position.alias("file_position"),
        F.when(F.col("segment").isNotNull(), F.col("base_offset") + f.file_position).alias("physical_offset"),
        f.message.alias("message"))


def _more(shown: int, total: int, what: str) -> list[str]:
    return [f"  … {total - shown} more {what} (all of them in the Delta tables: --output)"] if total > shown else []


def render_store(store: str, topics: list, segments: list) -> str:
    """The report of one store (driver): header, topics, segments, findings."""
    findings = [(seg, f) for seg in segments for f in seg.findings]
    errors = sum(f.severity == "error" for _, f in findings)
    warnings = sum(f.severity == "warning" for _, f in findings)
    crc = sum(s.crc_failures or 0 for s in segments)
    scanned = [s for s in segments if s.segment is not None]
    messages = sum(t.messages for t in topics)
    first = min((t.first_store_time for t in topics if t.first_store_time), default=None)
    last = max((t.last_store_time for t in topics if t.last_store_time), default=None)
    health = "healthy" if not (findings or crc) else \
        f"{errors} error(s), {warnings} warning(s), {crc} BODYCRC failure(s)"
    out = [f"Store {store}",
           f"  {len(scanned)} CommitLog segment(s), {cell(messages)} message(s) in {len(topics)} topic(s), "
           f"store time {cell(first)} .. {cell(last)} UTC",
           f"  health: {health}", "", "Topics"]
    out.append(render_table(["topic", "messages", "record bytes", "body bytes", "first store time", "last store time"],
                            [(t.topic, t.messages, t.record_bytes, t.body_bytes, t.first_store_time,
                              t.last_store_time) for t in topics[:MAX_TOPICS]],
                            numeric={"messages", "record bytes", "body bytes"}))
    out += _more(min(len(topics), MAX_TOPICS), len(topics), "topics")
    shown = scanned if len(scanned) <= MAX_SEGMENTS else \
        [s for s in scanned if s.findings or s.crc_failures][:MAX_SEGMENTS] or scanned[:MAX_SEGMENTS]
    out += ["", "CommitLog segments" + ("" if shown is scanned else " (those with findings)")]
    out.append(render_table(["segment", "records", "valid end", "stops at", "crc failures", "findings"],
                            [(s.segment, s.records, s.valid_end, s.stop_reason, s.crc_failures, len(s.findings))
                             for s in shown], numeric={"records", "valid end", "crc failures", "findings"}))
    out += _more(len(shown), len(scanned), "segments")
    if findings:
        out += ["", "Findings (docs/checks.md)"]
        out.append(render_table(
            ["severity", "check", "file", "byte", "physical offset", "message"],
            [(f.severity, f.check, f.file, f.file_position,
              s.base_offset + f.file_position if s.segment is not None and f.file_position is not None else None,
              f.message) for s, f in findings[:MAX_FINDINGS]],
            numeric={"byte", "physical offset"}, max_width=90))
        out += _more(min(len(findings), MAX_FINDINGS), len(findings), "findings")
    return "\n".join(out)


def main(spark, argv) -> int:
    args = parse_args(argv)
    topics = topic_summary(spark, args.store).cache()
    segments = segment_health(spark, args.store).cache()
    topic_rows, segment_rows = topics.collect(), segments.collect()
    stores = list(dict.fromkeys([s.store for s in segment_rows] + [t.store for t in topic_rows]))
    for store in stores:
        print(render_store(store, [t for t in topic_rows if t.store == store],
                           [s for s in segment_rows if s.store == store]))
        print()
    damaged = [s for s in segment_rows if s.findings or s.crc_failures]
    print(f"{len(stores)} store(s), {sum(s.segment is not None for s in segment_rows)} segment(s) scanned, "
          f"{sum(s.segment is not None for s in damaged)} with damage or CRC failures")
    if args.output:
        for name, df in (("topics", topics), ("segments", segments), ("findings", finding_rows(segments))):
            df.write.format("delta").mode("overwrite").option("overwriteSchema", "true").save(f"{args.output}/{name}")
        print(f"Delta tables topics, segments and findings written under {args.output}")
    return 3 if damaged else 0


def check_paths(argv) -> None:
    """Arguments and store paths are checked before Spark starts: a mistake costs no JVM start-up."""
    from rocketstore_spark.spark.entrypoint import check_stores
    from rocketstore_spark.store.engines import Work
    check_stores("store_summary", parse_args(argv).store, refuse=(Work.READ_COMMITLOG,))


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("store_summary", main, check_paths, sys.argv[1:])
