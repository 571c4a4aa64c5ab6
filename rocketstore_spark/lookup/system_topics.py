"""The system topics' state of one store, read-only (CLI ``rocketstore system``, the Spark sources
``rocketmq_delayed_pending``, ``rocketmq_transactions``, ``rocketmq_retries``; in-process wherever called):
the records of the topics concerned read through their ConsumeQueues where those account for every record
(``lookup.export.iter_slice``; scanned elsewhere), the config files beside them, and the rules of
``rocketmq.system_topics`` applied batch by batch — memory holds one decoded window plus the answer (and, for
transactions, a few narrow columns per half message).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.properties import parse_delay_levels
from rocketstore_spark.findings import Finding, distinct
from rocketstore_spark.lookup.export import Slice, iter_slice
from rocketstore_spark.rocketmq import system_topics as rules
from rocketstore_spark.rocketmq.consumequeue import queue_bounds
from rocketstore_spark.rocketmq.coverage import Coverage, coverage
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.files import read_consumer_offsets, read_delay_offsets, read_topics
from rocketstore_spark.store.records import iter_decoded
from rocketstore_spark.store.scan import scan_segment


def topic_batches(layout: StoreLayout, topic: str, columns, delay_levels: str | None = None,
                  cover: Coverage | None = None, findings: list[Finding] | None = None) -> Iterator[pa.Table]:
    """The records of ``topic`` (``columns``, which must hold ``topic``), a decoded window at a time;
    ``cover``: the store's coverage (``topics_coverage``) when several topics are read; ``findings``: receives
    what the reading met (``lookup.export.iter_slice``)."""
    kwargs = {"delay_levels": delay_levels} if delay_levels else {}
    covers = {layout.name: cover} if cover is not None else None
    for t in iter_slice([layout], Slice(topic=topic), columns=columns, covers=covers, findings=findings, **kwargs):
        yield t.drop_columns(["store"])


def topics_coverage(layout: StoreLayout, topics) -> Coverage | None:
    """One pass over the store's queue files for reading all of ``topics`` (None without queue files)."""
    return coverage(layout, frozenset(topics)) if layout.files.queue_dirs() else None


def last_store_time(layout: StoreLayout) -> int | None:
    """The store time (ms) of the newest record of the CommitLog: its last segment with records, scanned
    header by header (no CRC)."""
    for seg in reversed(layout.segments):
        newest = scan_segment(str(seg.path), seg.base_offset, check_crc=False).last_store_timestamp
        if newest is not None:
            return newest
    return None


def consumer_offsets(layout: StoreLayout) -> dict[tuple[str, str, int], int]:
    """(topic, group, queue id) -> committed offset, from config/consumerOffset.json (or its .bak)."""
    if layout.root is None:
        return {}
    return {(topic, group, q): offset for topic, group, q, offset in read_consumer_offsets(layout.files).rows}


# ----------------------------------------------------------------------------------------- delayed messages

@dataclass
class Delayed:
    """A store's delay levels (``rules.DELAY_LEVELS_SCHEMA``) and, when asked for, its pending messages
    (``rules.PENDING_DELAYED_SCHEMA``); how the level offsets were found."""
    levels: pa.Table
    pending: pa.Table | None
    offsets_file: str | None
    message_delay_level: str
    findings: list[Finding] = field(default_factory=list)      # what reading the CommitLog met


def delayed(layout: StoreLayout, options: dict | None = None, broker_conf: str | None = None,
            messages: bool = True) -> Delayed:
    """Pending delayed messages of ``layout`` (``rules``: delivery offsets from delayOffset.json and the
    SCHEDULE_TOPIC_XXXX queues' bounds as the broker loads them); the broker's ``messageDelayLevel`` and
    release from ``options`` / ``broker_conf`` / the store (``rocketmq.settings.resolve``). ``messages``: also
    the pending messages themselves (else only the per-level counts and due times)."""
    layout.refuse(Work.READ_COMMITLOG)
    layout.refuse(Work.READ_QUEUES)
    layout.refuse(Work.READ_CONFIG)
    settings = resolve(layout, options, broker_conf)
    spec = settings.message_delay_level
    delay_ms = parse_delay_levels(spec)
    source, file_offsets = None, {}
    if layout.root is not None:
        config = read_delay_offsets(layout.files)
        source, file_offsets = config.source, {r["delay_level"]: r["offset"] for r in config.rows}
    log_min = layout.segments[0].base_offset if layout.segments else 0
    bounds = {q: queue_bounds(str(d), log_min, settings.release.expired_min_is_max)
              for topic, q, d in layout.files.queue_dirs() if topic == rules.SCHEDULE_TOPIC}
    offsets = rules.delivery_offsets(len(delay_ms), file_offsets, bounds)
    kept, stats, findings = [], [], []
    for t in topic_batches(layout, rules.SCHEDULE_TOPIC, rules.DELAYED_COLUMNS, spec, findings=findings):
        pending = rules.pending_delayed(t, offsets)
        if pending.num_rows:
            stats.append(pending.group_by("delay_level").aggregate(
                [("delay_level", "count"), ("deliver_time", "min"), ("deliver_time", "max")]))
            if messages:
                kept.append(pending)
    levels = rules.delay_levels(pa.concat_tables(stats) if stats else None, delay_ms, file_offsets, bounds, offsets)
    pending = None
    if messages:
        pending = pa.concat_tables(kept).sort_by([("delay_level", "ascending"), ("queue_offset", "ascending")]) \
            if kept else rules.PENDING_DELAYED_SCHEMA.empty_table()
    return Delayed(levels, pending, source, spec, distinct(findings))


# ------------------------------------------------------------------------------------------- transactions

def transactions(layout: StoreLayout, as_of_ms: int | None = None, findings: list[Finding] | None = None
                 ) -> tuple[pa.Table, int | None]:
    """(every transaction of ``layout`` with its state, ``rules.TRANSACTIONS_SCHEMA``; the time pending ages
    are counted to: ``as_of_ms``, by default the store time of the CommitLog's newest record — when the broker
    last wrote). Reads the half and op topics and TRANS_CHECK_MAX_TIME_TOPIC through their queues, and the
    whole CommitLog's headers for COMMIT records; ``findings`` receives what the reading met, each once."""
    met: list[Finding] = []
    layout.refuse(Work.READ_COMMITLOG)
    layout.refuse(Work.READ_CONFIG)
    cover = topics_coverage(layout, (rules.HALF_TOPIC, rules.OP_TOPIC, rules.CHECK_MAX_TOPIC))
    half = [rules.narrow_half(t) for t in topic_batches(layout, rules.HALF_TOPIC, rules.HALF_COLUMNS, cover=cover,
                                                         findings=met)]
    half = pa.concat_tables(half) if half else rules.narrow_half(None)
    removals = [rules.op_removals(t) for t in topic_batches(layout, rules.OP_TOPIC, rules.OP_COLUMNS, cover=cover,
                                                            findings=met)]
    removals = pa.concat_tables(removals) if removals else rules.op_removals(None)
    discards = [t.select(["uniq_key"]) for t in topic_batches(layout, rules.CHECK_MAX_TOPIC,
                                                               ("topic", "physical_offset", "uniq_key"), cover=cover,
                                                               findings=met)]
    discards = pa.concat_tables(discards) if discards else pa.table({"uniq_key": pa.array([], pa.string())})
    commits = []
    if half.num_rows:
        decoder = RecordDecoder(rules.COMMIT_COLUMNS)
        for decoded in iter_decoded(layout, decoder, met):
            b = decoded.batch
            mask = pc.equal(pc.bit_wise_and(b.column("sys_flag"), rules.TRANSACTION_BITS), rules.COMMIT_TYPE)
            if pc.any(mask).as_py():
                commits.append(pa.Table.from_batches([b.filter(mask)]).select(list(rules.COMMIT_COLUMNS)))
    commits = pa.concat_tables(commits) if commits else pa.table(
        {c: pa.array([], pa.int64() if c != "sys_flag" else pa.int32()) for c in rules.COMMIT_COLUMNS})
    check = {q: off for (topic, group, q), off in consumer_offsets(layout).items()
             if topic == rules.HALF_TOPIC and group == rules.TRANSACTION_GROUP}
    if as_of_ms is None and half.num_rows:
        as_of_ms = last_store_time(layout)
    if findings is not None:
        findings.extend(distinct(met))
    return rules.transactions(half, removals, commits, discards, check, as_of_ms), as_of_ms


# ------------------------------------------------------------------------------------ retries, dead letters

def retry_topics(layout: StoreLayout) -> list[str]:
    """The store's %RETRY% and %DLQ% topics: those with a ConsumeQueue directory and those of topics.json (the
    broker adds them there when it creates them), sorted."""
    names = {topic for topic, _, _ in layout.files.queue_dirs()}
    if layout.root is not None:
        names |= {row["topic"] for row in read_topics(layout.files).rows}
    return sorted(n for n in names if n.startswith((rules.RETRY_PREFIX, rules.DLQ_PREFIX)))


def retries(layout: StoreLayout, topics: list[str] | None = None, findings: list[Finding] | None = None
            ) -> Iterator[pa.Table]:
    """The messages of the store's retry and dead-letter topics (``retry_topics``, or ``topics``), per topic a
    decoded window at a time, as ``rules.RETRIES_SCHEMA``. A store without ConsumeQueues (where every topic
    would be a scan) is scanned once for all of them (``topics`` then filters the rows). ``findings``
    receives what the reading met, each once, when the rows have all been read."""
    met: list[Finding] = []
    layout.refuse(Work.READ_COMMITLOG)
    layout.refuse(Work.READ_CONFIG)
    offsets = {k: v for k, v in consumer_offsets(layout).items()
               if k[0].startswith((rules.RETRY_PREFIX, rules.DLQ_PREFIX))}
    if not layout.files.queue_dirs():
        batches = (t.drop_columns(["store"]) for t in iter_slice([layout], Slice(), columns=rules.RETRY_COLUMNS,
                                                                 findings=met))
    else:
        topics_read = retry_topics(layout) if topics is None else topics
        cover = topics_coverage(layout, topics_read)
        batches = (t for topic in topics_read
                   for t in topic_batches(layout, topic, rules.RETRY_COLUMNS, cover=cover, findings=met))
    for t in batches:
        out = rules.retries(t, offsets)
        if topics is not None:
            out = out.filter(pc.is_in(out["topic"], pa.array(topics, pa.string())))
        if out.num_rows:
            yield out
    if findings is not None:
        findings.extend(distinct(met))


@dataclass
class GroupRetries:
    """What the retry and dead-letter topics hold for one consumer group and original topic."""
    consumer_group: str
    kind: str
    original_topic: str | None
    messages: int = 0
    unconsumed: int = 0                 # not yet consumed by the group (its offset below them, or none)
    max_reconsume_times: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    topics: set = field(default_factory=set)


def retry_summary(batches) -> list[GroupRetries]:
    """Per (group, RETRY or DLQ, original topic): counts and times of ``retries``' rows (aggregated a batch
    at a time), sorted."""
    out: dict[tuple, GroupRetries] = {}
    for t in batches:
        t = t.append_column("unconsumed", pc.cast(pc.invert(pc.fill_null(t["consumed"], False)), pa.int64()))
        t = t.append_column("ms", pc.cast(pc.cast(t["store_timestamp"], pa.timestamp("ms", tz="UTC")), pa.int64()))
        g = t.group_by(["consumer_group", "kind", "original_topic", "topic"]).aggregate(
            [("queue_offset", "count"), ("unconsumed", "sum"), ("reconsume_times", "max"), ("ms", "min"),
             ("ms", "max")])
        for row in g.to_pylist():
            key = (row["consumer_group"], row["kind"], row["original_topic"])
            s = out.setdefault(key, GroupRetries(*key))
            s.messages += row["queue_offset_count"]
            s.unconsumed += row["unconsumed_sum"]
            s.max_reconsume_times = max(s.max_reconsume_times, row["reconsume_times_max"])
            s.first_store_timestamp = _min(s.first_store_timestamp, row["ms_min"])
            s.last_store_timestamp = max(s.last_store_timestamp or row["ms_max"], row["ms_max"]) \
                if row["ms_max"] is not None else s.last_store_timestamp
            s.topics.add(row["topic"])
    return [out[k] for k in sorted(out, key=lambda k: tuple("" if v is None else v for v in k))]


def _min(a, b):
    return b if a is None else a if b is None else min(a, b)
