"""Consumer offsets against queue bounds: status and lag per group, topic and queue, and reset plans
(driver or CLI; reads ``config/consumerOffset.json`` — or its ``.bak`` as the broker would — and a few
queue entries and record headers).

Lag is counted as the broker counts it: ``max_offset - max(committed, min_offset)`` messages. Its age is the
store time of the oldest unconsumed message (the record at the committed offset, or at the queue's min when
the offset is below it) against the queue's newest message, so the figure means the same on a copy
examined days later. A reset plan is what ``kafka-consumer-groups --reset-offsets`` would print: per queue
the current and the new offset; it is data for an operator, never applied to the store.
"""
from __future__ import annotations

import contextlib
import csv
import datetime as dt
from dataclasses import dataclass, field

from rocketstore_spark.findings import Finding, FindingCap, finding
from rocketstore_spark.lookup.queue_files import QueueFiles, offset_by_time, store_timestamp_at
from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.rocksdb import QueueUnits, RocksDBUnreadable, open_readonly, queue_db
from rocketstore_spark.store.files import (read_consumer_offsets, read_delay_offsets, read_subscription_groups,
                                           read_topics)

STATUSES = ("in_range", "caught_up", "below_min", "beyond_max", "unknown_queue")


@dataclass
class QueueLag:
    store: str
    consumer_group: str
    topic: str
    queue_id: int
    consumer_offset: int
    min_offset: int | None
    max_offset: int | None
    status: str                             # one of STATUSES
    lag: int | None                         # messages not yet consumed
    expired: int                            # messages that expired before the group consumed them
    oldest_unconsumed_timestamp: int | None   # ms
    newest_timestamp: int | None              # ms: the queue's newest message
    lag_ms: int | None                        # newest - oldest unconsumed


@dataclass
class OffsetsReport:
    source: str | None
    lags: list[QueueLag] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def check_offsets(layout: StoreLayout, bounds: dict[tuple[str, int], tuple[int, int]],
                  group: str | None = None) -> OffsetsReport:
    """Every committed offset of the store against ``bounds`` ((topic, queue id) -> RocketMQ's (min, max)
    offsets of the queue, from ``verify.queues``). A file of offsets for queues the store lacks — 200,000 pairs
    are a valid ``consumerOffset.json`` — gives at most ``findings.CAP`` findings of each check in full
    (``FindingCap``); every pair still gets its lag row. ``group``: only that consumer group's offsets."""
    files = layout.files
    report = OffsetsReport(None)
    cap = FindingCap()
    if files.root is None:
        return report
    root = str(files.root)
    for reader in (read_consumer_offsets, read_topics, read_subscription_groups, read_delay_offsets):
        config = reader(files)
        for problem in config.problems:
            path, _, why = problem.partition(": ")
            cap.add(finding("offsets.unreadable", _relative(path, root), None, why or problem))
        if reader is read_consumer_offsets:
            report.source, rows = config.source, config.rows
    source = _relative(report.source, root) if report.source else "config/consumerOffset.json"
    queues: dict[tuple[str, int], QueueFiles] = {}
    with queue_entries(layout) as entries:
        _check_rows(layout, rows, group, bounds, entries, queues, source, report, cap)
    report.findings = cap.findings()
    return report


@contextlib.contextmanager
def queue_entries(layout: StoreLayout):
    """A function (topic, queue id) -> the queue's entries (``entry(queue_offset)``: ``QueueFiles``, or
    ``store.rocksdb.QueueUnits`` of a RocksDB ConsumeQueue, opened once read-only), None for a queue without any
    (or a database that cannot be read: ``offsets_against_stored_bounds`` reports it)."""
    db = queue_db(layout.files.root)
    if db is None:
        dirs = {(t, q): d for t, q, d in layout.files.queue_dirs()}          # listed once
        yield lambda key: QueueFiles(dirs[key]) if key in dirs else None
        return
    with contextlib.ExitStack() as stack:
        try:
            rd = stack.enter_context(open_readonly(db))
        except RocksDBUnreadable:
            rd = None
        yield (lambda key: QueueUnits(rd, *key)) if rd is not None else (lambda key: None)


def _check_rows(layout, rows, group, bounds, entries, queues, source, report, cap) -> None:
    for topic, consumer_group, queue_id, offset in rows:
        if group is not None and consumer_group != group:
            continue
        b = bounds.get((topic, queue_id))
        if b is None:
            report.lags.append(QueueLag(layout.name, consumer_group, topic, queue_id, offset, None, None,
                                        "unknown_queue", None, 0, None, None, None))
            cap.add(finding("offsets.unknown_queue", source, None,
                            f"group {consumer_group} has offset {offset} for {topic}/{queue_id}, which the "
                            "store has no ConsumeQueue for", topic=topic, queue_id=queue_id,
                            queue_offset=offset, consumer_group=consumer_group))
            continue
        lo, hi = b
        if (topic, queue_id) not in queues:
            queues[(topic, queue_id)] = entries((topic, queue_id))
        qf = queues[(topic, queue_id)]
        status = ("beyond_max" if offset > hi else "caught_up" if offset == hi else
                  "below_min" if offset < lo else "in_range")
        start = min(max(offset, lo), hi)
        time_at = lambda q: _time_at(layout, qf, q)          # noqa: E731
        oldest = time_at(start) if start < hi else None
        newest = time_at(hi - 1) if hi > lo else None
        # a negative offset (no commit yet, or damage) counts from 0; never an int64 overflow
        lag = QueueLag(layout.name, consumer_group, topic, queue_id, offset, lo, hi, status, hi - start,
                       max(0, lo - max(offset, 0)), oldest, newest,
                       newest - oldest if oldest is not None and newest is not None else None)
        report.lags.append(lag)
        where = dict(topic=topic, queue_id=queue_id, queue_offset=offset, consumer_group=consumer_group,
                     min_offset=lo, max_offset=hi)
        if status == "beyond_max":
            cap.add(finding("offsets.beyond_max", source, None,
                            f"group {consumer_group} committed {offset} for {topic}/{queue_id}, beyond its max "
                            f"offset {hi}", **where))
        elif status == "below_min":
            cap.add(finding("offsets.below_min", source, None,
                            f"group {consumer_group} committed {offset} for {topic}/{queue_id}, below its min "
                            f"offset {lo}: {lo - offset} message(s) expired unconsumed", **where))


def offsets_against_stored_bounds(layout: StoreLayout, expired_min_is_max: bool, group: str | None = None
                                  ) -> tuple[OffsetsReport, list[Finding]]:
    """``check_offsets`` against the bounds RocketMQ gives the store's queues as they are stored
    (``store_queue_bounds``), and a ``rocksdb.unreadable`` finding when the RocksDB ConsumeQueue cannot be
    read (its offsets are then not checked)."""
    try:
        bounds = store_queue_bounds(layout, expired_min_is_max)
    except RocksDBUnreadable as e:
        return OffsetsReport(None), [finding("rocksdb.unreadable", e.path, None, e.why)]
    return check_offsets(layout, bounds, group), []


def _time_at(layout: StoreLayout, queue: QueueFiles | None, queue_offset: int) -> int | None:
    e = queue.entry(queue_offset) if queue is not None else None
    return store_timestamp_at(layout, e[0]) if e is not None else None


def _relative(path: str, root: str) -> str:
    return path[len(root) + 1:] if path.startswith(root + "/") else path


RESETS = ("to-earliest", "to-latest", "to-datetime", "shift-by", "as-broker")


def reset_plan(layout: StoreLayout, lags: list[QueueLag], how: str = "as-broker", value: str | None = None,
               group: str | None = None) -> list[dict]:
    """New offsets per queue, as ``kafka-consumer-groups --reset-offsets`` plans them: ``to-earliest`` (the
    queue's min), ``to-latest`` (its max), ``to-datetime`` (``value``: ISO 8601; the first message stored at
    or after it), ``shift-by`` (``value``: N, clamped to the bounds), or ``as-broker`` (the default: only the
    offsets out of range, moved where the broker would move them on the next pull — below min to min, beyond
    max to max). Unknown queues are left out. ``group``: only that consumer group."""
    if how not in RESETS:
        raise ValueError(f"reset {how!r}: expected one of {', '.join(RESETS)}")
    when = None
    if how == "to-datetime":
        when = dt.datetime.fromisoformat(value or "")
        when = when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)
    shift = int(value or 0) if how == "shift-by" else 0
    with queue_entries(layout) as entries:
        return _plan(lags, how, group, shift, when, entries if how == "to-datetime" else (lambda key: None), layout)


def _plan(lags, how, group, shift, when, entries, layout) -> list[dict]:
    plan = []
    for lag in lags:
        if lag.min_offset is None or (group is not None and lag.consumer_group != group):
            continue
        lo, hi, cur = lag.min_offset, lag.max_offset, lag.consumer_offset
        if how == "as-broker":
            if lag.status not in ("below_min", "beyond_max"):
                continue
            new = lo if cur < lo else hi
        elif how == "to-earliest":
            new = lo
        elif how == "to-latest":
            new = hi
        elif how == "shift-by":
            new = min(max(cur + shift, lo), hi)
        else:
            queue = entries((lag.topic, lag.queue_id))
            if queue is None:                 # bounds without entries: nothing to search by time
                continue
            new = offset_by_time(queue, layout, lo, hi, int(when.timestamp() * 1000))
        plan.append({"store": lag.store, "consumer_group": lag.consumer_group, "topic": lag.topic,
                     "queue_id": lag.queue_id, "current_offset": cur, "new_offset": new})
    return plan


RESET_COLUMNS = ("store", "consumer_group", "topic", "queue_id", "current_offset", "new_offset")


@dataclass
class ConsumerLag:
    """The lag of the stores' consumer groups, the findings on their offsets and a reset plan (never applied)."""
    lags: list[QueueLag] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    plan: list[dict] = field(default_factory=list)          # reset_plan's rows, RESET_COLUMNS each


def consumer_lag(layouts: list[StoreLayout], how: str = "as-broker", value: str | None = None,
                 group: str | None = None, options: dict | None = None) -> ConsumerLag:
    """``check_offsets`` of each store against the bounds RocketMQ gives its queues (the release resolved
    from the store and ``options``, ``rocketmq.settings.resolve``), and the ``reset_plan`` (``how``,
    ``value``) of its lags; ``group``: only that consumer group's lags, findings and plan."""
    out = ConsumerLag()
    for layout in layouts:
        expired_min_is_max = resolve(layout, options).release.expired_min_is_max
        layout.refuse(Work.READ_OFFSETS)
        layout.refuse(Work.READ_QUEUE_UNITS)
        report, problems = offsets_against_stored_bounds(layout, expired_min_is_max, group)
        out.findings += problems
        out.lags += report.lags
        out.findings += report.findings
        out.plan += reset_plan(layout, report.lags, how, value, group)
    return out


def write_reset_plan(plan: list[dict], path: str) -> None:
    """A reset plan as CSV (a header of RESET_COLUMNS, a row per queue): for an operator to review and apply."""
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, RESET_COLUMNS)
        w.writeheader()
        w.writerows(plan)


__all__ = ["ConsumerLag", "OffsetsReport", "offsets_against_stored_bounds", "QueueLag", "RESETS", "RESET_COLUMNS", "STATUSES", "check_offsets",
           "consumer_lag", "reset_plan", "write_reset_plan"]
