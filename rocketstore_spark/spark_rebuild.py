"""The rebuild as a Spark job (driver plans, executors write): ConsumeQueues in parallel, one Spark task per
queue group, and each store's IndexFiles in one task (RocketMQ puts index keys in CommitLog order and a file
boundary depends on every key before it, so one store's index is one sequential stream).

The CommitLog is read through the ``rocketmq`` source (only the dispatch columns); each queue's entries go
through the same writer as the in-process rebuild (``rebuild.output``), so both produce the same bytes. The
output directory must be reachable by every executor at the same path (local mode, or a shared file system
on a cluster). Settings are resolved and the output directory checked on the driver before anything runs.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rocketstore_spark import dispatch
from rocketstore_spark.findings import Finding
from rocketstore_spark.rebuild.diff import Difference, compare
from rocketstore_spark.rebuild.output import (ConsumeQueueWriter, IndexWriter, SettingsConflict, check_output)
from rocketstore_spark.rebuild.settings import RebuildSettings, resolve
from rocketstore_spark.store.discovery import StorePathError, discover

QUEUE_SUMMARY = ("topic STRING, queue_id INT, files ARRAY<STRING>, max_offset BIGINT, written BIGINT, "
                 "skipped BIGINT, moved BIGINT, findings ARRAY<STRING>")
INDEX_SUMMARY = "files ARRAY<STRING>, keys BIGINT, findings ARRAY<STRING>"
_STRINGS = pa.list_(pa.field("element", pa.string()))
QUEUE_ARROW = pa.schema([("topic", pa.string()), ("queue_id", pa.int32()), ("files", _STRINGS),
                         ("max_offset", pa.int64()), ("written", pa.int64()), ("skipped", pa.int64()),
                         ("moved", pa.int64()), ("findings", _STRINGS)])
INDEX_ARROW = pa.schema([("files", _STRINGS), ("keys", pa.int64()), ("findings", _STRINGS)])


@dataclass
class SparkRebuild:
    store: str
    output: Path
    settings: RebuildSettings
    queues: list                     # Rows of QUEUE_SUMMARY
    index_files: list[str]
    findings: list[str]
    differences: list[Difference]


def plan(store: str, output, options: dict | None = None, broker_conf: str | None = None,
         allow_conflicts: bool = False):
    """(layout, output path, settings), checked on the driver before Spark work starts."""
    layouts = discover(store)
    if len(layouts) != 1:
        raise StorePathError(f"{store}: names {len(layouts)} stores; a rebuild takes one")
    layout = layouts[0]
    out = check_output(output, layout.files.root or layout.files.commitlog_dir.parent)
    settings = resolve(layout, options, broker_conf)
    if settings.conflicts and not allow_conflicts:
        raise SettingsConflict("; ".join(settings.conflicts) + " (--force to rebuild anyway)")
    return layout, out, settings


def rebuild(spark, store: str, output, options: dict | None = None, broker_conf: str | None = None,
            allow_conflicts: bool = False) -> SparkRebuild:
    """Rebuild one store's ConsumeQueues and IndexFiles into ``output`` with Spark, then compare (driver)."""
    layout, out, settings = plan(store, output, options, broker_conf, allow_conflicts)
    path = str(layout.files.root or layout.files.commitlog_dir)
    records = spark.read.format("rocketmq") \
        .option("messageDelayLevel", settings.message_delay_level) \
        .schema(", ".join(f"{c} {t}" for c, t in (
            ("topic", "STRING"), ("queue_id", "INT"), ("queue_offset", "BIGINT"), ("physical_offset", "BIGINT"),
            ("total_size", "INT"), ("tags_code", "BIGINT"), ("transaction_type", "STRING")))).load(path)
    cq_root, file_size = str(out / "consumequeue"), settings.consume_queue_file_size

    def write_queue(table: pa.Table) -> pa.Table:
        findings: list[Finding] = []
        writer = ConsumeQueueWriter(Path(cq_root), file_size, findings)
        writer.add(dispatch.queue_entries(table))
        writer.close()
        rows = [(q.topic, q.queue_id, q.files, q.state.max_offset, q.state.written, q.state.skipped, q.state.moved,
                 [f.render() for f in findings]) for q in writer.queues.values()]
        if not rows:               # a queue whose topic cannot be a directory: reported, not written
            topic, queue_id = table["topic"][0].as_py(), table["queue_id"][0].as_py()
            rows = [(topic, queue_id, [], 0, 0, 0, 0, [f.render() for f in findings])]
        return pa.Table.from_pylist([dict(zip(QUEUE_ARROW.names, r)) for r in rows], schema=QUEUE_ARROW)

    # collected as is and sorted here: an orderBy would run the writing stage a second time to sample it
    queues = sorted(records.where("transaction_type IN ('NOT_TYPE', 'COMMIT')")
                    .groupBy("topic", "queue_id").applyInArrow(write_queue, QUEUE_SUMMARY).collect(),
                    key=lambda q: (q.topic, q.queue_id))

    index_files, index_findings = [], []
    if settings.geometry is not None:
        geometry, release, delay = settings.geometry, settings.release, settings.message_delay_level
        index_root = str(out / "index")

        def write_index(batches):
            from rocketstore_spark.rebuild.output import dispatch_decoder
            from rocketstore_spark.store.records import iter_decoded
            for _ in batches:
                findings: list[Finding] = []
                writer = IndexWriter(Path(index_root), geometry)
                decoder = dispatch_decoder(delay)
                keys = 0
                for decoded in iter_decoded(discover(path)[0], decoder, findings):
                    batch = dispatch.index_keys(pa.Table.from_batches([decoded.batch]), release)
                    writer.add(batch)
                    keys += batch.num_rows
                writer.close()
                yield pa.RecordBatch.from_pylist([{"files": writer.files, "keys": keys,
                                                   "findings": [f.render() for f in findings]}], schema=INDEX_ARROW)

        row = spark.range(1).mapInArrow(write_index, INDEX_SUMMARY).collect()[0]
        index_files, index_findings = list(row.files), list(row.findings)
    findings = sorted({f for q in queues for f in q.findings} | set(index_findings))
    return SparkRebuild(layout.name, out, settings, queues, index_files, findings, compare(layout.files, out))


def output_for(output: str, store: str, several: bool) -> str:
    """One output directory per store when several are rebuilt at once: DIR/<store directory name>."""
    return os.path.join(output, Path(os.path.abspath(store)).name) if several else output
