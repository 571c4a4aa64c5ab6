"""The rebuild as a Spark job (driver plans, executors write): ConsumeQueues in parallel, one Spark task per
queue group, and IndexFiles in parallel, one task per file: RocketMQ puts index keys in CommitLog order and a
file takes ``maxIndexNum - 1`` of them, so once the keys are counted per partition (prefix sums) every file's
first key, and the previous file's last key its header is pre-set from, are known (``_index_files``).

The CommitLog is read through the ``rocketmq`` source (only the dispatch columns); each queue's entries go
through the same writer as the in-process rebuild (``rebuild.output``), so both produce the same bytes. The
output directory must be reachable by every executor at the same path (local mode, or a shared file system
on a cluster). Settings are resolved and the output directory checked on the driver before anything runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketstore_spark import dispatch
from rocketstore_spark.findings import Finding
from rocketstore_spark.rebuild.diff import Difference, compare
from rocketstore_spark.rebuild.output import ConsumeQueueWriter, index_name, prepare, write_index_file
from rocketstore_spark.rebuild.settings import RebuildSettings
from rocketstore_spark.store.discovery import discover

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


def rebuild(spark, store: str, output, options: dict | None = None, broker_conf: str | None = None,
            allow_conflicts: bool = False, split_size: int | None = None) -> SparkRebuild:
    """Rebuild one store's ConsumeQueues and IndexFiles into ``output`` with Spark, then compare (driver).
    ``split_size``: CommitLog bytes per Spark partition of the reads (the source's ``splitSize``)."""
    layout, out, settings = prepare(store, output, options, broker_conf, allow_conflicts)
    path = str(layout.files.root or layout.files.commitlog_dir)

    def read(schema: str):
        r = spark.read.format("rocketmq").option("messageDelayLevel", settings.message_delay_level)
        return (r.option("splitSize", str(split_size)) if split_size else r).schema(schema).load(path)

    records = read("topic STRING, queue_id INT, queue_offset BIGINT, physical_offset BIGINT, total_size INT, "
                   "tags_code BIGINT, transaction_type STRING")
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
        index_files, index_findings = _index_files(spark, read(DISPATCH_SCHEMA), path, settings, out / "index")
    findings = sorted({f for q in queues for f in q.findings} | set(index_findings))
    return SparkRebuild(layout.name, out, settings, queues, index_files, findings, compare(layout.files, out))


DISPATCH_SCHEMA = ("physical_offset BIGINT, total_size INT, topic STRING, queue_id INT, queue_offset BIGINT, "
                   "transaction_type STRING, tags_code BIGINT, store_timestamp TIMESTAMP, uniq_key STRING, "
                   "keys ARRAY<STRING>, tags STRING")
COUNT_ARROW = pa.schema([("partition", pa.int32()), ("keys", pa.int64())])
BOUNDARY_ARROW = pa.schema([("rank", pa.int64()), ("physical_offset", pa.int64()), ("store_timestamp", pa.int64()),
                            ("order_in_record", pa.int64())])


def plan_index_files(partition_keys: list[int], index_num: int) -> tuple[list[int], list[tuple[int, int]]]:
    """(global rank of each partition's first key, (first rank, key count) of each IndexFile): RocketMQ fills
    a file with ``index_num - 1`` keys, so with the keys counted per partition in CommitLog order every
    file's share of them is known before any file is written."""
    starts = np.concatenate([[0], np.cumsum(partition_keys)[:-1]]).astype(np.int64).tolist() if partition_keys else []
    total, per_file = int(sum(partition_keys)), index_num - 1
    return starts, [(first, min(per_file, total - first)) for first in range(0, total, per_file)]


def _index_files(spark, records, path: str, settings: RebuildSettings, root: Path) -> tuple[list[str], list[str]]:
    """IndexFiles built in parallel: (1) keys counted per partition, (2) the first and last key of every
    file located (their physical offset, store time, and place among their record's keys), (3) one task per
    file reads the CommitLog from its first key's record and writes the file. Passes 1 and 2 decode only the
    dispatch columns."""
    from pyspark import TaskContext
    geometry, release, delay = settings.geometry, settings.release, settings.message_delay_level

    def keys_of(batch) -> pa.Table:
        return dispatch.index_keys(pa.Table.from_batches([batch]), release)

    def count(batches):
        n = sum(keys_of(b).num_rows for b in batches)
        yield pa.RecordBatch.from_pylist([{"partition": TaskContext.get().partitionId(), "keys": n}],
                                         schema=COUNT_ARROW)

    counts = {r.partition: r.keys for r in records.mapInArrow(count, "partition INT, keys BIGINT").collect()}
    starts, files = plan_index_files([counts.get(p, 0) for p in range(max(counts, default=-1) + 1)],
                                     geometry.index_num)
    if not files:
        return [], []
    wanted = sorted({first for first, _ in files} | {first + n - 1 for first, n in files})

    def boundaries(batches):
        rank = starts[TaskContext.get().partitionId()]
        for b in batches:
            keys = keys_of(b)
            n = keys.num_rows
            if n:
                ranks = np.arange(rank, rank + n)
                hit = np.flatnonzero(np.isin(ranks, wanted))
                if len(hit):
                    phys = keys["physical_offset"].to_numpy()
                    order = np.arange(n) - np.searchsorted(phys, phys, side="left")
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(ranks[hit]), pa.array(phys[hit]), pa.array(keys["store_timestamp"].to_numpy()[hit]),
                         pa.array(order[hit])], schema=BOUNDARY_ARROW)
            rank += n

    at = {r.rank: r for r in records.mapInArrow(
        boundaries, "rank BIGINT, physical_offset BIGINT, store_timestamp BIGINT, order_in_record BIGINT").collect()}
    specs, previous_ms = [], None
    for k, (first, n) in enumerate(files):
        name, previous_ms = index_name(at[first].store_timestamp, previous_ms)
        last_before = at.get(first - 1)
        specs.append({"name": name, "start_physical": at[first].physical_offset, "skip": at[first].order_in_record,
                      "count": n, "preset_phy": last_before.physical_offset if last_before else None,
                      "preset_ts": last_before.store_timestamp if last_before else None})
    store, root_s = path, str(root)

    def build(batches):
        for b in batches:
            for spec in b.to_pylist():
                findings: list[Finding] = []
                preset = None if spec["preset_phy"] is None else (spec["preset_phy"], spec["preset_ts"])
                write_index_file(discover(store)[0], Path(root_s), spec["name"], geometry, release, delay,
                                 spec["start_physical"], spec["skip"], spec["count"], preset, findings)
                yield pa.RecordBatch.from_pylist([{"name": spec["name"], "findings": [f.render() for f in findings]}],
                                                 schema=BUILT_ARROW)

    spec_schema = ("name STRING, start_physical BIGINT, skip BIGINT, count BIGINT, preset_phy BIGINT, "
                   "preset_ts BIGINT")           # explicit: a store's only file has no preset to infer a type from
    built = spark.createDataFrame(specs, spec_schema).repartition(len(specs)).mapInArrow(
        build, "name STRING, findings ARRAY<STRING>").collect()
    return sorted(r.name for r in built), sorted({f for r in built for f in r.findings})


BUILT_ARROW = pa.schema([("name", pa.string()), ("findings", pa.list_(pa.field("element", pa.string())))])


DIFFERENCES_SCHEMA = ("store STRING, kind STRING, store_file STRING, rebuilt_file STRING, status STRING, topic STRING, "
                      "queue_id INT, first_queue_offset BIGINT, entries_missing BIGINT, entries_extra BIGINT, "
                      "entries_changed BIGINT, detail STRING")


def differences_frame(spark, result: SparkRebuild):
    """The rebuild's comparison with the store's files as a DataFrame (DIFFERENCES_SCHEMA): one row per file
    pair, identical ones included (driver)."""
    return spark.createDataFrame([{"store": result.store, **d.as_row()} for d in result.differences],
                                 DIFFERENCES_SCHEMA)
