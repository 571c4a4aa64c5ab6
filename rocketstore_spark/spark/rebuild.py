"""The rebuild as a Spark job (driver plans, executors write), in two stages that meet through spill files
(``store.spill``):

1. scan: the CommitLog cut into ranges (``datasource.planning``: by default one per core), each read once by
   one task through the compiled dispatch; its ConsumeQueue entries go to spill files by queue group, its
   IndexFile keys, in put order, to a keys file;
2. write: one task per queue group writes its ConsumeQueues (the in-process rebuild's writer), one task per
   IndexFile its file: RocketMQ puts index keys in CommitLog order and a file takes ``maxIndexNum - 1`` of
   them, so with the keys counted per scan task every file's keys, and the previous file's last key its
   header is pre-set from, are known (``plan_index_files``).

What is dispatched is what the in-process rebuild dispatches (``rebuild.output``): by default the release's
own rebuild (``rocketmq.recovery.restart_dispatch``), each range it dispatches scanned in its turn (a range
dispatched again after the recovery's takes no index key below the last one put before it); with ``resync``
the whole log, and the write tasks count the entries the release would not have.

A store with BatchCQ topics (``config/topics.json``): their records get no ConsumeQueue entry; each scan task
reads those it dispatched again with their properties and spills their units by queue group
(``rebuild.parallel.spill_batch_units``), and each queue group's write task writes its ``batchconsumequeue/``
files too (``rebuild.parallel.write_batch_group``).

No per-record rows go through Spark (no shuffle: the tasks' inputs are their specs), and both stages produce
the bytes the in-process rebuild does. The output directory must be reachable by every executor at the same
path (local mode, or a shared file system on a cluster). Settings are resolved and the output directory
checked on the driver before anything runs; the spill files are removed when the job ends.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketstore_spark.datasource import session_cores
from rocketstore_spark.datasource.planning import SegmentRange, plan_partitions, plan_ranges
from rocketstore_spark.rebuild import parallel
from rocketstore_spark.rebuild.diff import Difference, beyond_differences, compare
from rocketstore_spark.rebuild.output import BEYOND_FIELDS, SPARK_REBUILT, BatchSeen, LmqSkips, index_name, prepare
from rocketstore_spark.rocketmq.batch_queues import BatchQueueError, batch_file_size, batch_topics
from rocketstore_spark.rocketmq.recovery import RestartDispatch, restart_dispatch
from rocketstore_spark.rocketmq.settings import BrokerSettings, lmq_mode
from rocketstore_spark.store import spill

QUEUE_SUMMARY = ("topic STRING, queue_id INT, files ARRAY<STRING>, max_offset BIGINT, written BIGINT, "
                 "skipped BIGINT, moved BIGINT, findings ARRAY<STRING>")
_STRINGS = pa.list_(pa.field("element", pa.string()))
QUEUE_ARROW = pa.schema([("topic", pa.string()), ("queue_id", pa.int32()), ("files", _STRINGS),
                         ("max_offset", pa.int64()), ("written", pa.int64()), ("skipped", pa.int64()),
                         ("moved", pa.int64()), ("findings", _STRINGS)])
SCAN_SPEC = "task INT, paths ARRAY<STRING>, base_offsets ARRAY<BIGINT>, starts ARRAY<BIGINT>, ends ARRAY<BIGINT>, " \
            "followed ARRAY<BOOLEAN>, key_floor BIGINT, delay STRING"
SCAN_RESULT = ("task INT, topics ARRAY<STRING>, keys BIGINT, findings ARRAY<STRING>, error STRING, "
               "error_rank ARRAY<BIGINT>")
SCAN_ARROW = pa.schema([("task", pa.int32()), ("topics", _STRINGS), ("keys", pa.int64()), ("findings", _STRINGS),
                        ("error", pa.string()), ("error_rank", pa.list_(pa.field("element", pa.int64())))])
WRITE_SPEC = "kind STRING, group_or_first BIGINT, count BIGINT, name STRING"
BEYOND_SUMMARY = ", ".join(f"{name} {'STRING' if name == 'topic' else 'INT' if name == 'queue_id' else 'BIGINT'}"
                           for name in BEYOND_FIELDS)
BEYOND_ARROW = pa.schema([(name, pa.string() if name == "topic" else pa.int32() if name == "queue_id" else pa.int64())
                          for name in BEYOND_FIELDS])
BATCH_SUMMARY = "topic STRING, queue_id INT, files ARRAY<STRING>, max_offset BIGINT"
BATCH_ARROW = pa.schema([("topic", pa.string()), ("queue_id", pa.int32()), ("files", _STRINGS),
                         ("max_offset", pa.int64())])
WRITE_RESULT = (f"kind STRING, name STRING, queues ARRAY<STRUCT<{QUEUE_SUMMARY}>>, findings ARRAY<STRING>, "
                f"beyond ARRAY<STRUCT<{BEYOND_SUMMARY}>>, batch ARRAY<STRUCT<{BATCH_SUMMARY}>>")
WRITE_ARROW = pa.schema([("kind", pa.string()), ("name", pa.string()), ("queues", pa.list_(pa.struct(QUEUE_ARROW))),
                         ("findings", _STRINGS), ("beyond", pa.list_(pa.struct(BEYOND_ARROW))),
                         ("batch", pa.list_(pa.struct(BATCH_ARROW)))])


@dataclass(frozen=True)
class _Segment:
    """A scan task's segment, as ``rebuild.output.LmqSkips`` names findings by it (executor)."""
    path: str
    base_offset: int


@dataclass
class SparkRebuild:
    store: str
    output: Path
    settings: BrokerSettings
    queues: list                     # Rows of QUEUE_SUMMARY
    index_files: list[str]
    findings: list[str]
    differences: list[Difference]
    resync: bool = False
    restart: RestartDispatch | None = None
    beyond: dict | None = None        # resync: (topic, queue id) -> [entries, queue offsets, physical offsets]
    batch_queues: list = field(default_factory=list)    # Rows of BATCH_SUMMARY: batchconsumequeue/ written


def rebuild(spark, store: str, output, options: dict | None = None, broker_conf: str | None = None,
            allow_conflicts: bool = False, split_size: int | None = None, resync: bool = False) -> SparkRebuild:
    """Rebuild one store's ConsumeQueues and IndexFiles into ``output`` with Spark, then compare (driver).
    ``split_size``: CommitLog bytes per scan task (default: the store over the session's cores, as the
    ``rocketmq`` source plans). By default what the release's own rebuild writes; ``resync``: every valid
    record (``rebuild.output.rebuild_store``)."""
    layout, out, settings = prepare(store, output, options, broker_conf, allow_conflicts, SPARK_REBUILT)
    # BatchCQ topics (config/topics.json): their records get units in batchconsumequeue/, no ConsumeQueue entry
    batch = sorted(batch_topics(layout.files)) if layout.files.root is not None else []
    batch_size = batch_file_size(layout.files, settings) if batch else 0
    restart = restart_dispatch(layout, settings)
    parallelism = session_cores(spark)
    if resync:
        stages = [(plan_partitions([(layout.name, seg, layout.followed(k)) for k, seg in enumerate(layout.segments)],
                                   split_size, parallelism), settings.message_delay_level)]
    else:                            # each dispatched range in its turn
        stages = [(plan_ranges([SegmentRange(layout.name, p.path, p.base_offset, p.start - p.base_offset,
                                             p.end - p.base_offset, p.followed)
                                for p in restart.pieces if p.phase == phase], split_size, parallelism),
                   restart.delay_levels(phase, settings.message_delay_level)) for _, _, phase in restart.ranges]
    work = out / spill.SPILL_DIR
    try:
        queues, index_files, findings, beyond, written_batch = _run(
            spark, stages, work, out, settings, max(parallelism, 1), restart.intervals if resync else None,
            batch, batch_size)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    findings = sorted(set(findings) | {f.render() for f in layout.findings})
    return SparkRebuild(layout.name, out, settings, queues, index_files, findings,
                        compare(layout.files, out) + beyond_differences(beyond, settings.release_label), resync,
                        restart, beyond, written_batch)


def _run(spark, stages, work: Path, out: Path, settings: BrokerSettings, groups: int, release=None,
         batch: list[str] = (), batch_size: int = 0):
    """The two stages (driver): (queue rows, IndexFile names, findings rendered, beyond, BatchConsumeQueue rows).
    ``stages``: (the scan tasks' partitions, the delay levels their dispatch uses), one per range dispatched,
    scanned in turn; ``release``: the intervals the release dispatches (resync: entries outside them are
    counted per queue); ``batch``: the BatchCQ topics (sorted), whose units go to batchconsumequeue/ in files of
    ``batch_size`` bytes. Raises the log's ``BatchQueueError`` (a property RocketMQ's dispatch cannot parse)
    before anything is written."""
    from pyspark.sql import Row
    geometry, index_tags = settings.geometry, settings.release.index_tags
    work_s, out_s, file_size = str(work), str(out), settings.consume_queue_file_size
    lmq = lmq_mode(settings)

    def scan(batches):
        for b in batches:
            for spec in b.to_pylist():
                ranges = list(zip(spec["paths"], spec["base_offsets"], spec["starts"], spec["ends"], spec["followed"]))
                # the multi-dispatch RocketMQ passes over, named by segment and byte (the task's segments)
                skipped = LmqSkips(sorted({(p, b): _Segment(p, b) for p, b, *_ in ranges}.values(),
                                          key=lambda seg: seg.base_offset))
                seen = BatchSeen(frozenset(batch))          # the BatchCQ records this task dispatches

                def each_window(w, names):
                    skipped.add(w)
                    seen.add(w, names)
                topics, keys, found = spill.scan_range(ranges, Path(work_s), spec["task"], groups, spec["delay"],
                                                       geometry is not None, index_tags, spec["key_floor"], lmq,
                                                       batch_topics=frozenset(batch),
                                                       each_window=each_window if lmq or batch else None)
                found = found + skipped.findings()
                error = parallel.spill_batch_units(ranges, Path(work_s), spec["task"], groups, batch, seen.physical(),
                                                   spec["delay"]) if batch else None
                yield pa.RecordBatch.from_pylist([{"task": spec["task"], "topics": topics, "keys": keys,
                                                   "findings": [f.render() for f in found],
                                                   "error": str(error) if error else None,
                                                   "error_rank": list(error.rank) if error else None}],
                                                 schema=SCAN_ARROW)

    scanned = []
    for partitions, delay in stages:
        # the last key put so far: a range dispatched again puts no key below it (IndexService.buildIndex)
        total = sum(r.keys for r in scanned)
        floor = spill.key_at(work, [r.keys for r in scanned], total - 1)[0] if total else -1
        specs = [{"task": len(scanned) + k, "paths": [r.path for r in p.ranges],
                  "base_offsets": [r.base_offset for r in p.ranges], "starts": [r.start for r in p.ranges],
                  "ends": [r.end for r in p.ranges], "followed": [r.followed for r in p.ranges], "key_floor": floor,
                  "delay": delay}
                 for k, p in enumerate(partitions)]
        scanned += sorted(_each(spark, specs, SCAN_SPEC, scan, SCAN_RESULT), key=lambda r: r.task)
    errors = [(tuple(r.error_rank), r.error) for r in scanned if r.error is not None]
    if errors:                       # what the in-process rebuild raises: the whole log's first error
        rank, message = min(errors)
        raise BatchQueueError(message, rank)
    topics = [list(r.topics) for r in scanned]
    task_keys = [r.keys for r in scanned]
    findings = [f for r in scanned for f in r.findings]

    files = plan_index_files(task_keys, geometry.index_num)[1] if geometry is not None else []
    names, previous_ms = [], None
    for first, _ in files:           # named by their first key's store time, kept increasing
        name, previous_ms = index_name(spill.key_at(work, task_keys, first)[1], previous_ms)
        names.append(name)

    def write(batches):
        for b in batches:
            for spec in b.to_pylist():
                if spec["kind"] == "index":
                    parallel.write_index_file(Path(work_s), task_keys, Path(out_s), spec["name"], geometry,
                                           spec["group_or_first"], spec["count"])
                    yield pa.RecordBatch.from_pylist([{"kind": "index", "name": spec["name"], "queues": [],
                                                       "findings": [], "beyond": [], "batch": []}], schema=WRITE_ARROW)
                    continue
                written, unsafe, found, beyond = parallel.write_queue_group(
                    Path(work_s), spec["group_or_first"], topics, Path(out_s), file_size, release)
                rows = [(q.topic, q.queue_id, q.files, q.state.max_offset, q.state.written, q.state.skipped,
                         q.state.moved) for q in written] + [(t, qid, [], 0, 0, 0, 0) for t, qid in unsafe]
                rendered = [f.render() for f in found]
                units, unsafe_batch = parallel.write_batch_group(Path(work_s), spec["group_or_first"], len(topics),
                                                                 batch, Path(out_s), batch_size) if batch else ([], [])
                yield pa.RecordBatch.from_pylist([{
                    "kind": "queues", "name": None, "findings": rendered + [f.render() for f in unsafe_batch],
                    "queues": [dict(zip(QUEUE_ARROW.names, r + (rendered,))) for r in rows],
                    "beyond": [dict(zip(BEYOND_FIELDS, (*name, *span))) for name, span in beyond.items()],
                    "batch": [{"topic": q.topic, "queue_id": q.queue_id, "files": q.files, "max_offset": q.max_offset}
                              for q in units]}],
                    schema=WRITE_ARROW)

    # the IndexFiles first: with few cores, each one is a task of its own next to the queue groups
    specs = [{"kind": "index", "group_or_first": first, "count": n, "name": name}
             for (first, n), name in zip(files, names)]
    specs += [{"kind": "queues", "group_or_first": g, "count": 0, "name": None} for g in range(groups)]
    built = _each(spark, specs, WRITE_SPEC, write, WRITE_RESULT)
    queues = sorted((Row(**q.asDict()) for r in built for q in r.queues), key=lambda q: (q.topic, q.queue_id))
    findings += [f for r in built for f in r.findings]
    # a queue is written by one task: its span comes whole from there
    beyond = {(b.topic, b.queue_id): [b[name] for name in BEYOND_FIELDS[2:]] for r in built for b in (r.beyond or [])}
    written_batch = sorted((Row(**q.asDict()) for r in built for q in (r.batch or [])),
                           key=lambda q: (q.topic, q.queue_id))
    return queues, sorted(r.name for r in built if r.kind == "index"), findings, beyond, written_batch


def _each(spark, specs: list[dict], spec_schema: str, task, result: str) -> list:
    """``task`` run over ``specs`` (executors; one partition per spec up to the session's cores, the specs
    in order: a local relation is sliced, not shuffled), its result rows collected (driver)."""
    if not specs:
        return []
    frame = spark.createDataFrame(specs, spec_schema)
    return frame.mapInArrow(task, result).collect()


def plan_index_files(partition_keys: list[int], index_num: int) -> tuple[list[int], list[tuple[int, int]]]:
    """(global rank of each partition's first key, (first rank, key count) of each IndexFile): RocketMQ fills
    a file with ``index_num - 1`` keys, so with the keys counted per partition in CommitLog order every
    file's share of them is known before any file is written."""
    starts = np.concatenate([[0], np.cumsum(partition_keys)[:-1]]).astype(np.int64).tolist() if partition_keys else []
    total, per_file = int(sum(partition_keys)), index_num - 1
    return starts, [(first, min(per_file, total - first)) for first in range(0, total, per_file)]


DIFFERENCES_SCHEMA = ("store STRING, kind STRING, store_file STRING, rebuilt_file STRING, status STRING, topic STRING, "
                      "queue_id INT, first_queue_offset BIGINT, entries_missing BIGINT, entries_extra BIGINT, "
                      "entries_changed BIGINT, detail STRING")


def differences_frame(spark, result: SparkRebuild):
    """The rebuild's comparison with the store's files as a DataFrame (DIFFERENCES_SCHEMA): one row per file
    pair, identical ones included (driver)."""
    return spark.createDataFrame([{"store": result.store, **d.as_row()} for d in result.differences],
                                 DIFFERENCES_SCHEMA)
