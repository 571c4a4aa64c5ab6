"""Verify as a Spark job over any number of stores (driver plans, executors check): the same units as the
in-process ``verify.store``, distributed.

1. ``rocketmq_segments`` scans every segment with BODYCRC, the 5.x ``__CRC32#`` property and store-time
   checks in the Python workers; only verdicts and findings come back, never bodies.
2. ``rocketmq`` reads the dispatch columns; the records that get a ConsumeQueue entry are grouped by store,
   topic and queue, co-grouped with the queue directories the driver listed (a queue without records, or
   records without a queue, still meet), and each group is checked in one task (``verify.queues``). The
   records of BatchCQ topics (5.x ``queue.type=BatchCQ``) are left out: read again with their properties, they
   are grouped by queue and co-grouped with the ``batchconsumequeue/`` directories, each queue's units checked
   in one task (``verify.batch_queues``), on the stores that have such directories.
3. One task per IndexFile (``verify.index``): it reads the CommitLog range the file covers.
4. On the driver, small reads: checkpoint, abort and lock (``verify.state``), each queue directory's kind
   against its topic's queue.type (``verify.batch_queues.queue_type_mismatches``), consumer offsets against the
   queue bounds of step 2 (``verify.offsets``).

Every executor must see the stores at the paths the driver resolved (local mode, or a shared file system).
The result keeps each unit's findings (capped per unit, ``findings.capped``), the queue bounds and the lag
table; ``findings_frame``/``lag_frame`` turn them into DataFrames for Delta, ``document`` into JSON.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema

from rocketstore_spark.datasource.schemas import struct
from rocketstore_spark.documents import header
from rocketstore_spark.findings import FIELDS, Finding, Severity, finding
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.batch_queues import batch_topics
from rocketstore_spark.rocketmq.releases import Release
from rocketstore_spark.rocketmq.settings import BrokerSettings, lmq_mode, resolve
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.engines import Work
from rocketstore_spark.verify.batch_queues import queue_type_mismatches
from rocketstore_spark.verify.offsets import OffsetsReport, QueueLag, check_offsets
from rocketstore_spark.verify.queues import LogBounds
from rocketstore_spark.verify.state import LogState, check_state
from rocketstore_spark.verify.timers import check_timers
from rocketstore_spark.verify.store import (has_consume_queue_ext, index_views, relative, segment_locator,
                                            segment_names, store_root)

FINDINGS_SCHEMA = ("run_id STRING, run_time TIMESTAMP, store STRING, check STRING, severity STRING, file STRING, "
                   "file_position BIGINT, physical_offset BIGINT, topic STRING, queue_id INT, queue_offset BIGINT, "
                   "message STRING, evidence MAP<STRING, STRING>")
LAG_SCHEMA = ("run_id STRING, run_time TIMESTAMP, store STRING, consumer_group STRING, topic STRING, queue_id INT, "
              "consumer_offset BIGINT, min_offset BIGINT, max_offset BIGINT, status STRING, lag BIGINT, "
              "expired BIGINT, oldest_unconsumed_time TIMESTAMP, newest_time TIMESTAMP, lag_ms BIGINT")
QUEUE_RESULT = ("store STRING, topic STRING, queue_id INT, files INT, min_offset BIGINT, max_offset BIGINT, "
                "entries BIGINT, expired BIGINT, records BIGINT, dispatch_max_offset BIGINT, findings ARRAY<STRING>")
INDEX_RESULT = "store STRING, file STRING, entries BIGINT, keys_expected BIGINT, findings ARRAY<STRING>"
# the Arrow schemas the workers build their results in: derived from the Spark DDL above, so the two never differ
QUEUE_ARROW = to_arrow_schema(struct(QUEUE_RESULT))
INDEX_ARROW = to_arrow_schema(struct(INDEX_RESULT))
RECORD_COLUMNS = ("store STRING, topic STRING, queue_id INT, queue_offset BIGINT, physical_offset BIGINT, "
                  "total_size INT, tags_code BIGINT, transaction_type STRING")


@dataclass
class StoreReport:
    """One store's verdict (driver)."""
    store: str
    settings: BrokerSettings
    log: LogBounds
    segments: int = 0
    records: int = 0
    crc_failures: int = 0
    properties_crc_failures: int = 0
    queues: list = field(default_factory=list)          # Rows of QUEUE_RESULT (without findings)
    index_files: int = 0
    offsets: OffsetsReport | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def worst(self) -> str:
        order = {"info": 0, "warning": 1, "error": 2}
        return max((str(f.severity) for f in self.findings), key=order.get, default="clean")

    def counts(self) -> Counter:
        return Counter((f.check, str(f.severity)) for f in self.findings)


@dataclass
class VerifyRun:
    run_id: str
    run_time: dt.datetime
    stores: list[StoreReport]
    seconds: dict = field(default_factory=dict)          # wall time per step: segments, queues, index, driver

    @property
    def problems(self) -> bool:
        """Anything above info level in any store."""
        return any(f.severity != Severity.INFO for s in self.stores for f in s.findings)


@dataclass(frozen=True)
class _Context:
    """What an executor needs to check one store's queues and IndexFiles (small, pickled into tasks)."""
    path: str
    root: str
    log: LogBounds
    file_size: int
    release: tuple
    delay_levels: str
    segments: tuple          # (base offset, file name relative to root)
    consume_queue_ext: bool
    commitlog_dirs: tuple = ()   # a multi-path CommitLog's directories (store.multipath), as the sources take them


def verify(spark, paths, options: dict | None = None, broker_conf: str | None = None, check_crc: bool = True,
           split_size: int | None = None) -> VerifyRun:
    """Verify every store ``paths`` names (a path, or a list of them). ``options``: broker settings and
    ``rocketmqVersion`` as for the rebuild, applied to every store; ``split_size``: CommitLog bytes per Spark
    partition of the record read."""
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    # resolved on the driver: the sources name stores by the path they are given, executors need it absolute
    found = [layout for p in paths for layout in discover(os.path.abspath(str(p)))]
    layouts: list[StoreLayout] = list({layout.name: layout for layout in found}.values())     # each store once
    for layout in layouts:
        # the job checks ConsumeQueue files (a RocksDB ConsumeQueue: `rocketstore verify` checks its units)
        layout.refuse(Work.READ_QUEUES)
    run = VerifyRun(uuid.uuid4().hex, dt.datetime.now(dt.timezone.utc), [])
    if not layouts:
        return run
    settings = {layout.name: resolve(layout, options, broker_conf) for layout in layouts}
    load_paths = [store_root(layout) if layout.files.root else str(layout.files.commitlog_dir) for layout in layouts]

    clock = time.perf_counter()

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        run.seconds[step] = round(now - clock, 3)
        clock = now

    # 1. segments
    seg_rows = []
    for load, dirs in _reads(layouts, load_paths):
        seg_rows += (spark.read.format("rocketmq_segments").option("checkCrc", str(check_crc).lower())
                     .option("checkPropertiesCrc", "true").option("checkTimes", "true").options(**dirs)
                     .option("paths", ",".join(load)).load().collect())
    by_store: dict[str, list] = {}
    for r in seg_rows:
        by_store.setdefault(r.store, []).append(r)
    reports: dict[str, StoreReport] = {}
    contexts: dict[str, _Context] = {}
    for layout in layouts:
        rows = [r for r in by_store.get(layout.name, []) if r.segment is not None]
        root = store_root(layout)
        first = layout.segments[0].base_offset if layout.segments else 0
        log = LogBounds(first, max((r.base_offset + r.data_end for r in rows if r.records), default=first))
        rep = StoreReport(layout.name, settings[layout.name], log, len(rows), sum(r.records for r in rows),
                          sum(r.crc_failures for r in rows), sum(r.properties_crc_failures or 0 for r in rows))
        for r in by_store.get(layout.name, []):
            rep.findings += [Finding.from_row(f.asDict()) for f in r.findings]
        reports[layout.name] = rep
        s = settings[layout.name]
        contexts[layout.name] = _Context(
            store_root(layout) if layout.files.root else str(layout.files.commitlog_dir), root, log,
            s.consume_queue_file_size, s.release.version, s.message_delay_level,
            segment_names(layout, root), has_consume_queue_ext(layout), tuple(map(str, layout.files.commitlog_dirs)))

    lap("segments (CRC audit)")
    # 2. queues
    queue_rows = _queues(spark, layouts, settings, contexts, split_size)
    for row in queue_rows:
        rep = reports[row["store"]]
        rep.findings += [Finding.from_row(json.loads(f)) for f in row["findings"]]
        rep.queues.append({k: v for k, v in row.items() if k != "findings"})

    lap("ConsumeQueues")
    # 2b. BatchConsumeQueues (5.x BatchCQ topics), the stores that have them
    batch = _batch_queues(spark, layouts, settings, contexts, split_size)
    for name, found in batch.items():
        reports[name].findings += found
    if batch:
        lap("BatchConsumeQueues")
    # 3. IndexFiles
    for row in _index(spark, layouts, settings, contexts):
        reports[row["store"]].index_files += 1
        reports[row["store"]].findings += [Finding.from_row(json.loads(f)) for f in row["findings"]]

    lap("IndexFiles")
    # 4. driver: shutdown state and consumer offsets
    for layout in layouts:
        rep, root = reports[layout.name], store_root(layout)
        views = [v for v in index_views(layout, settings[layout.name]) if v.geometry is not None]
        last_ts = max((r.last_store_timestamp for r in by_store.get(layout.name, []) if r.last_store_timestamp),
                      default=None)
        # Spark hands timestamps back as naive local times: .timestamp() reads them as such
        last_ms = int(last_ts.timestamp() * 1000) if last_ts else None
        rep.findings += check_state(layout.files, LogState(last_ms, rep.log.end),
                                    views[-1].header["end_timestamp"] if views else None)
        rep.findings += check_timers(layout, rep.log.end)          # the timer files against the log (driver)
        rep.findings += queue_type_mismatches(layout.files, settings[layout.name].release.family)
        rep.offsets = check_offsets(layout, {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
                                             for q in rep.queues if q["files"]})
        rep.findings += rep.offsets.findings
        rep.findings = [relative(f, root) for f in rep.findings]
        rep.queues.sort(key=lambda q: (q["topic"], q["queue_id"]))
        run.stores.append(rep)
    lap("checkpoint and consumer offsets")
    return run


def _reads(layouts, load_paths) -> list[tuple[list[str], dict]]:
    """The source reads that cover ``layouts`` (loaded as ``load_paths``): one for every store whose CommitLog
    is in its own directory, one per multi-path store (its directories as option ``storePathCommitLog``)."""
    classic = [p for layout, p in zip(layouts, load_paths) if not layout.files.commitlog_dirs]
    return ([(classic, {})] if classic else []) + [
        ([p], {"storePathCommitLog": ",".join(map(str, layout.files.commitlog_dirs))})
        for layout, p in zip(layouts, load_paths) if layout.files.commitlog_dirs]


def _records(spark, layouts, settings, contexts, split_size, columns: str):
    """The ``columns`` (DDL) of every record of ``layouts``' logs, one read per delay-level setting and log kind."""
    by_delay: dict[str, list] = {}
    for layout in layouts:
        by_delay.setdefault(settings[layout.name].message_delay_level, []).append(layout)
    records = None
    for delay, group in by_delay.items():
        for load, dirs in _reads(group, [contexts[layout.name].path for layout in group]):
            r = spark.read.format("rocketmq").option("messageDelayLevel", delay).options(**dirs)
            r = r.option("splitSize", str(split_size)) if split_size else r
            df = r.schema(columns).option("paths", ",".join(load)).load()
            records = df if records is None else records.unionByName(df)
    return records


def _of_topics(topics: dict[str, frozenset[str]]):
    """The Spark condition: a record of one of ``topics[store]`` (none: false)."""
    from pyspark.sql import functions as F
    cond = F.lit(False)
    for store, names in topics.items():
        if names:
            cond = cond | ((F.col("store") == store) & F.col("topic").isin(*sorted(names)))
    return cond


def _queues(spark, layouts, settings, contexts, split_size) -> list[dict]:
    from pyspark.sql import functions as F
    records = _records(spark, layouts, settings, contexts, split_size, RECORD_COLUMNS)
    records = records.where(F.col("transaction_type").isin(*dispatch.QUEUED_TYPES)).drop("transaction_type")
    # a BatchCQ topic's records go to its BatchConsumeQueue (``_batch_queues``), not to consumequeue/
    batch = {layout.name: batch_topics(layout.files) for layout in layouts if layout.files.root is not None}
    if any(batch.values()):
        records = records.where(~_of_topics(batch))
    multi = [layout for layout in layouts if lmq_mode(settings[layout.name])]
    if multi:
        # the entries LMQ multi-dispatch adds (codec.lmq): met by their %LMQ% queue as its records are
        records = records.unionByName(_lmq_entries(spark, multi, settings, split_size))
    dirs = [(layout.name, t, q, str(d)) for layout in layouts for t, q, d in layout.files.queue_dirs()]
    queue_dirs = spark.createDataFrame(dirs, "store STRING, topic STRING, queue_id INT, dir STRING")
    ctx = contexts

    def check(left: pa.Table, right: pa.Table) -> pa.Table:
        from rocketstore_spark.verify.queues import check_queue
        one = left if left.num_rows else right
        store, topic, queue_id = (one[c][0].as_py() for c in ("store", "topic", "queue_id"))
        c = ctx[store]
        if left.num_rows:           # (a record naming one %LMQ% queue twice: its entries in dispatch order)
            left = left.sort_by([("physical_offset", "ascending"), ("queue_offset", "ascending")])
        cols = {"queue_offset": left["queue_offset"], "physical_offset": left["physical_offset"],
                "size": left["total_size"], "tags_code": left["tags_code"]}
        cols = {k: v.to_numpy() if left.num_rows else np.zeros(0, np.int64) for k, v in cols.items()}
        queue_dir = right["dir"][0].as_py() if right.num_rows else None
        v = check_queue(topic, queue_id, queue_dir, c.root, cols, c.log, c.file_size, segment_locator(c.segments),
                        Release(c.release).expired_min_is_max, c.consume_queue_ext)
        return pa.Table.from_pylist([{
            "store": store, "topic": topic, "queue_id": queue_id, "files": v.files, "min_offset": v.min_offset,
            "max_offset": v.max_offset, "entries": v.entries, "expired": v.expired, "records": v.records,
            "dispatch_max_offset": v.dispatch_max_offset,
            "findings": [f.to_json() for f in v.findings]}], schema=QUEUE_ARROW)

    keys = ["store", "topic", "queue_id"]
    return [r.asDict() for r in records.groupBy(*keys).cogroup(queue_dirs.groupBy(*keys))
            .applyInArrow(check, QUEUE_RESULT).collect()]


LMQ_SPEC = "store STRING, delay STRING, lmq INT, paths ARRAY<STRING>, base_offsets ARRAY<BIGINT>, " \
           "starts ARRAY<BIGINT>, ends ARRAY<BIGINT>, followed ARRAY<BOOLEAN>"
LMQ_ARROW = to_arrow_schema(struct(RECORD_COLUMNS.rsplit(", ", 1)[0]))


def _lmq_entries(spark, layouts, settings, split_size):
    """The LMQ multi-dispatch entries of ``layouts``' logs (``codec.lmq``), as rows of the record columns the
    queue check groups (without transaction_type): one per entry, its record's physical offset, size and
    tagsCode at the queue offset INNER_MULTI_QUEUE_OFFSET gives, in the queue (queue id 0 for a ``%LMQ%``
    name) INNER_MULTI_DISPATCH names. Each task reads its CommitLog ranges through the compiled dispatch
    (executor; the queue names numbered by the decoder, decoded once a window by Arrow: no per-entry Python).
    A name is only a value here: the queue's directory comes from the driver's listing."""
    from rocketstore_spark.datasource import session_cores
    from rocketstore_spark.datasource.planning import plan_partitions
    specs = []
    for layout in layouts:
        s = settings[layout.name]
        parts = plan_partitions([(layout.name, seg, layout.followed(k)) for k, seg in enumerate(layout.segments)],
                                split_size, session_cores(spark))
        specs += [{"store": layout.name, "delay": s.message_delay_level, "lmq": lmq_mode(s),
                   "paths": [r.path for r in p.ranges], "base_offsets": [r.base_offset for r in p.ranges],
                   "starts": [r.start for r in p.ranges], "ends": [r.end for r in p.ranges],
                   "followed": [r.followed for r in p.ranges]} for p in parts]
    schema = LMQ_ARROW

    def scan(batches):
        from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
        from rocketstore_spark.store.segment_reader import SegmentReader
        for b in batches:
            for spec in b.to_pylist():
                decoder = DispatchDecoder(spec["delay"], index=False, lmq=spec["lmq"])
                for path, base, start, end, followed in zip(spec["paths"], spec["base_offsets"], spec["starts"],
                                                            spec["ends"], spec["followed"]):
                    for decoded in SegmentReader(path, base, decoder, start, end, followed=followed):
                        w = decoded.batch
                        if w.lmq_row is None or not len(w.lmq_row):
                            continue
                        rows = w.lmq_row
                        names = pa.DictionaryArray.from_arrays(pa.array(w.lmq_topic, pa.int32()),
                                                               pa.array(decoder.topics, pa.string()))
                        yield pa.RecordBatch.from_arrays([
                            pa.repeat(pa.scalar(spec["store"], pa.string()), len(rows)),
                            names.dictionary_decode(), pa.array(w.lmq_queue_id, pa.int32()),
                            pa.array(w.lmq_queue_offset, pa.int64()), pa.array(w.physical_offset[rows], pa.int64()),
                            pa.array(w.size[rows], pa.int32()), pa.array(w.tags_code[rows], pa.int64())],
                            schema=schema)

    frame = spark.createDataFrame(specs, LMQ_SPEC)
    return frame.repartition(max(1, len(specs))).mapInArrow(scan, RECORD_COLUMNS.rsplit(", ", 1)[0])


BATCH_COLUMNS = RECORD_COLUMNS + ", store_timestamp TIMESTAMP, properties MAP<STRING, STRING>"
BATCH_RESULT = "store STRING, findings ARRAY<STRING>, error STRING, error_rank ARRAY<BIGINT>"
BATCH_ARROW = to_arrow_schema(struct(BATCH_RESULT))


def _batch_queues(spark, layouts, settings, contexts, split_size) -> dict[str, list[Finding]]:
    """The BatchConsumeQueue findings of each of ``layouts``' stores that has ``batchconsumequeue/`` directories
    (``verify.batch_queues``: what ``rocketstore verify`` finds), a queue per task: the records of its BatchCQ
    topics (config/topics.json) grouped by queue and co-grouped with the queue directories the driver listed,
    each group's units computed as RocketMQ's dispatch writes them and compared with the directory's
    (``compare_queue``). A property RocketMQ cannot parse is the store's one finding, as in-process: the tasks'
    errors ranked (``BatchQueueError.rank``) give the whole log's first."""
    topics, dirs, found = {}, [], {}
    for layout in layouts:
        queues = layout.files.batch_queue_dirs() if layout.files.root is not None else []
        if not queues:
            continue
        topics[layout.name], found[layout.name] = batch_topics(layout.files), []
        # (the directories of other topics: ``queue_type_mismatches``, on the driver)
        dirs += [(layout.name, t, q, str(d)) for t, q, d in queues if t in topics[layout.name]]
    reading = [layout for layout in layouts if topics.get(layout.name)]
    if not reading:
        return found
    records = _records(spark, reading, settings, contexts, split_size, BATCH_COLUMNS).where(_of_topics(topics))
    queue_dirs = spark.createDataFrame(dirs, "store STRING, topic STRING, queue_id INT, dir STRING")
    ctx = contexts

    def check(left: pa.Table, right: pa.Table) -> pa.Table:
        from rocketstore_spark.rocketmq.batch_queues import BatchQueueError, expected_queues
        from rocketstore_spark.store.layout import StoreMap
        from rocketstore_spark.verify.batch_queues import compare_queue, unparsable
        one = left if left.num_rows else right
        store, topic, queue_id = (one[c][0].as_py() for c in ("store", "topic", "queue_id"))
        files = StoreMap.of_root(ctx[store].root)
        row = {"store": store, "findings": [], "error": None, "error_rank": None}
        try:
            want = expected_queues(left, frozenset([topic])) if left.num_rows else []
        except BatchQueueError as e:
            row.update(error=unparsable(files, e).to_json(), error_rank=list(e.rank))
        else:
            if right.num_rows:
                row["findings"] = [f.to_json() for f in compare_queue(files, topic, queue_id, right["dir"][0].as_py(),
                                                                       want[0].units if want else None)]
        return pa.Table.from_pylist([row], schema=BATCH_ARROW)

    keys = ["store", "topic", "queue_id"]
    rows = records.groupBy(*keys).cogroup(queue_dirs.groupBy(*keys)).applyInArrow(check, BATCH_RESULT).collect()
    for layout in reading:
        mine = [r for r in rows if r.store == layout.name]
        errors = [(tuple(r.error_rank), r.error) for r in mine if r.error is not None]
        found[layout.name] = [Finding.from_row(json.loads(min(errors)[1]))] if errors else \
            found[layout.name] + [Finding.from_row(json.loads(f)) for r in mine for f in r.findings]
    return found


def _index(spark, layouts, settings, contexts) -> list[dict]:
    specs = []
    for layout in layouts:
        s = settings[layout.name]
        views = index_views(layout, s)
        known = [v for v in views if v.geometry is not None]
        for v in views:
            if v.geometry is None:
                specs.append({"store": layout.name, "path": v.path, "newest": False, "problem": v.problem or "",
                              "previous_end": None})
        specs += [{"store": layout.name, "path": v.path, "newest": k == len(known) - 1, "problem": None,
                   "previous_end": known[k - 1].header["end_timestamp"] if k else None}
                  for k, v in enumerate(known)]
    if not specs:
        return []
    ctx = contexts
    geometry = {layout.name: settings[layout.name].geometry for layout in layouts}

    def build(batches):
        from rocketstore_spark.store.indexes import read_index_file
        from rocketstore_spark.verify.index import check_index_file
        for b in batches:
            for spec in b.to_pylist():
                c, g = ctx[spec["store"]], geometry[spec["store"]]
                name = os.path.relpath(spec["path"], c.root)
                if spec["problem"] is not None:
                    found = [finding("index.unknown_geometry", name, None, spec["problem"])]
                    entries = expected = 0
                else:
                    view = read_index_file(spec["path"], g.hash_slot_num)
                    layout = discover(c.path, c.commitlog_dirs or None)[0]
                    v = check_index_file(layout, view, c.root, g, Release(c.release),
                                         c.delay_levels, c.log, spec["newest"], spec["previous_end"])
                    found, entries, expected = v.findings, v.entries, v.keys_expected
                yield pa.RecordBatch.from_pylist([{"store": spec["store"], "file": name, "entries": entries,
                                                   "keys_expected": expected,
                                                   "findings": [f.to_json() for f in found]}], schema=INDEX_ARROW)

    df = spark.createDataFrame(specs, "store STRING, path STRING, newest BOOLEAN, problem STRING, previous_end BIGINT")
    return [r.asDict() for r in df.repartition(len(specs)).mapInArrow(build, INDEX_RESULT).collect()]


def _ms(ts_ms: int | None):
    return None if ts_ms is None else dt.datetime.fromtimestamp(ts_ms / 1000, dt.timezone.utc)


def finding_rows(run: VerifyRun) -> list[dict]:
    return [{"run_id": run.run_id, "run_time": run.run_time, "store": s.store, **f.as_row()}
            for s in run.stores for f in s.findings]


def lag_rows(run: VerifyRun) -> list[dict]:
    return lag_records(run.run_id, run.run_time, [x for s in run.stores for x in (s.offsets.lags if s.offsets else [])])


def lag_records(run_id: str, run_time: dt.datetime, lags) -> list[dict]:
    """Rows of LAG_SCHEMA for ``lags`` (``verify.offsets.QueueLag``): the verify job's and the ingest's snapshots."""
    return [{"run_id": run_id, "run_time": run_time, "store": x.store, "consumer_group": x.consumer_group,
             "topic": x.topic, "queue_id": x.queue_id, "consumer_offset": x.consumer_offset,
             "min_offset": x.min_offset, "max_offset": x.max_offset, "status": x.status, "lag": x.lag,
             "expired": x.expired, "oldest_unconsumed_time": _ms(x.oldest_unconsumed_timestamp),
             "newest_time": _ms(x.newest_timestamp), "lag_ms": x.lag_ms}
            for x in lags]


def findings_frame(spark, run: VerifyRun):
    """The run's findings as a DataFrame of FINDINGS_SCHEMA (one row per finding)."""
    return spark.createDataFrame(finding_rows(run), FINDINGS_SCHEMA)


def lag_frame(spark, run: VerifyRun):
    """Consumer lag per store, group, topic and queue (LAG_SCHEMA)."""
    return spark.createDataFrame(lag_rows(run), LAG_SCHEMA)


DOCUMENT_TYPE = "rocketstore-spark/verify"
DOCUMENT_VERSION = 1


def document(run: VerifyRun) -> dict:
    """The run as one JSON-ready document (``documents.header``, type rocketstore-spark/verify, version 1): per
    store its settings (the resolved ones, ``BrokerSettings.to_json``, with mappedFileSizeConsumeQueue,
    maxHashSlotNum and maxIndexNum as followed), summary counts, queues, lag and findings (each in the findings
    schema)."""
    def lag(x: QueueLag) -> dict:
        return {k: getattr(x, k) for k in QueueLag.__dataclass_fields__}
    return header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {
        "run_id": run.run_id, "run_time": run.run_time.isoformat(),
        "seconds": run.seconds,
        "stores": [{
            "store": s.store, "worst": s.worst,
            "rocketmq_version": str(s.settings.release),
            "settings": s.settings.to_json() | {
                         "mappedFileSizeConsumeQueue": s.settings.consume_queue_file_size,
                         "maxHashSlotNum": s.settings.geometry.hash_slot_num if s.settings.geometry else None,
                         "maxIndexNum": s.settings.geometry.index_num if s.settings.geometry else None,
                         "sources": s.settings.sources},
            "commitlog": {"min_offset": s.log.min_offset, "end": s.log.end, "segments": s.segments,
                          "records": s.records, "crc_failures": s.crc_failures,
                          "properties_crc_failures": s.properties_crc_failures},
            "summary": [{"check": c, "severity": sev, "findings": n} for (c, sev), n in sorted(s.counts().items())],
            "queues": s.queues, "index_files": s.index_files,
            "consumer_offsets": {"source": s.offsets.source if s.offsets else None,
                                 "queues": [lag(x) for x in (s.offsets.lags if s.offsets else [])]},
            "findings": [f.as_row() for f in s.findings],
        } for s in run.stores],
    }


__all__ = ["FIELDS", "FINDINGS_SCHEMA", "LAG_SCHEMA", "StoreReport", "VerifyRun", "document", "findings_frame",
           "lag_frame", "verify"]
