"""The timers of one store, read-only (CLI ``rocketstore system timers``, the Spark sources ``rocketmq_timerlog``,
``rocketmq_timerwheel``, ``rocketmq_timers_pending``; the repair's list of lost timers; in-process wherever
called): the timer files (``store.timers``), RocketMQ's restart and delivery rules on them (``rocketmq.timers``)
and the timer messages of ``rmq_sys_wheel_timer`` they point to (``lookup.system_topics.topic_batches``).

Pending timers (``PENDING_TIMERS_SCHEMA``): what the timer store of a broker restarted on this store would
still deliver — every unit of the live slots' chains whose message it can read, DELETE units and the units they
cancel left out (source ``timerlog``), then the timer messages of ``rmq_sys_wheel_timer``/0 from the offset
where enqueueing resumes (source ``queue``: enqueued after the restart, due at their ``TIMER_OUT_MS``). Units
whose message is not a timer record of the log at (offset, size) are listed apart (``Timers.unreadable``):
RocketMQ skips them (``StoreUtil.getMessage`` finds nothing) or, where the log has since been rewritten,
reads something else there (docs/format/timers.md).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.arrow import TIMESTAMP_TYPE
from rocketstore_spark.findings import Finding, distinct
from rocketstore_spark.lookup.system_topics import topic_batches
from rocketstore_spark.rocketmq import timers as rules
from rocketstore_spark.rocketmq.consumequeue import queue_bounds
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import Work
from rocketstore_spark.rocketmq.system_topics import _java_int
from rocketstore_spark.store.timers import (TIMER_TOPIC, UNIT_SIZE, TimerCheck, TimerLog, read_timer_metrics,
                                            read_timercheck, read_timerlog, read_wheel_slots, wheel_table)

TIMER_COLUMNS = ("topic", "queue_id", "queue_offset", "physical_offset", "total_size", "store_timestamp",
                 "properties", "uniq_key", "keys", "tags")
_I32, _I64, _STR = pa.int32(), pa.int64(), pa.string()
PENDING_TIMERS_SCHEMA = pa.schema([
    ("source", _STR), ("due_time", TIMESTAMP_TYPE), ("timerlog_offset", _I64), ("magic", _I32),
    ("roll", pa.bool_()), ("physical_offset", _I64), ("size", _I32), ("timer_queue_offset", _I64),
    ("timer_out_ms", _I64), ("real_topic", _STR), ("real_queue_id", _I32), ("uniq_key", _STR),
    ("keys", pa.list_(pa.field("element", _STR))), ("tags", _STR), ("store_timestamp", TIMESTAMP_TYPE)])


@dataclass
class Timers:
    """A store's timer state: its files as read, RocketMQ's recovery of them, and what it would deliver."""
    check: TimerCheck | None
    timerlog: TimerLog
    wheel: pa.Table                     # the wheel file's non-zero slots (store.timers.TIMERWHEEL_SCHEMA)
    recovered: rules.Recovered | None
    resume_queue_offset: int | None
    pending: pa.Table                   # PENDING_TIMERS_SCHEMA
    unreadable: pa.Table                # chain units whose message is not a timer record at (offset, size)
    metrics: dict[str, int] | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def present(self) -> bool:
        return bool(self.timerlog.files) or self.check is not None or self.wheel.num_rows > 0


def _timer_records(layout: StoreLayout, findings: list[Finding]) -> pa.Table:
    batches = list(topic_batches(layout, TIMER_TOPIC, TIMER_COLUMNS, findings=findings))
    if not batches:
        return pa.table({"queue_id": pa.array([], _I32), "queue_offset": pa.array([], _I64),
                         "physical_offset": pa.array([], _I64), "total_size": pa.array([], _I32),
                         "store_timestamp": pa.array([], TIMESTAMP_TYPE),
                         "properties": pa.array([], pa.map_(_STR, _STR)), "uniq_key": pa.array([], _STR),
                         "keys": pa.array([], pa.list_(pa.field("element", _STR))), "tags": pa.array([], _STR)})
    t = pa.concat_tables(batches)
    return t.drop_columns(["topic"])


def _narrow(records: pa.Table) -> pa.Table:
    """The timer records with what a delivery needs instead of their properties (Arrow joins take no maps)."""
    cols = {"queue_id": records["queue_id"], "queue_offset": records["queue_offset"],
            "physical_offset": records["physical_offset"], "total_size": records["total_size"],
            **_message_columns(records), "del_key": _prop(records, "TIMER_DEL_UNIQKEY")}
    return pa.table(cols)


def _prop(t: pa.Table, name: str):
    return pc.map_lookup(t["properties"], name, "first")


def _java_long(values) -> pa.Array:
    return _java_int(values, 64)


def _message_columns(t: pa.Table) -> dict:
    """The delivery's columns of timer records ``t``."""
    return {"timer_out_ms": _java_long(_prop(t, "TIMER_OUT_MS")), "real_topic": _prop(t, "REAL_TOPIC"),
            "real_queue_id": pc.cast(_java_int(_prop(t, "REAL_QID"), 32), _I32), "uniq_key": t["uniq_key"],
            "keys": t["keys"], "tags": t["tags"], "store_timestamp": t["store_timestamp"]}


def _slot_key(t: pa.Table, key) -> pa.Array:
    """``slot time|key`` per row: a DELETE unit cancels the units of its own slot whose UNIQ_KEY it names."""
    return pc.binary_join_element_wise(pc.cast(t["slot_time_ms"], _STR), key, "|")


def _ms_time(ms) -> pa.Array:
    """Epoch milliseconds (int64) as ``TIMESTAMP_TYPE``."""
    return pc.cast(pc.cast(ms, pa.timestamp("ms", tz="UTC")), TIMESTAMP_TYPE)


def _delivery(t: pa.Table) -> dict:
    return {c: t[c] for c in ("timer_out_ms", "real_topic", "real_queue_id", "uniq_key", "keys", "tags",
                              "store_timestamp")}


def timers(layout: StoreLayout, now_ms: int | None = None, precision_ms: int = 1000,
           findings: list[Finding] | None = None) -> Timers:
    """The timers of ``layout`` (module comment). ``now_ms``: when the broker is taken to restart (None: right
    after its last write — no timer is too old for the wheel); ``precision_ms``: the broker's
    ``timerPrecisionMs``; ``findings`` receives what reading the CommitLog met."""
    layout.refuse(Work.READ_COMMITLOG)
    met: list[Finding] = []
    files = layout.files
    check = read_timercheck(files)
    timerlog = read_timerlog(files)
    slots = read_wheel_slots(files.timerwheel_path)
    metrics = read_timer_metrics(files)
    empty = PENDING_TIMERS_SCHEMA.empty_table()
    if slots is None and not timerlog.files and check is None:
        return Timers(None, timerlog, wheel_table(None), None, None, empty, timerlog.units.slice(0, 0), metrics)
    rec = rules.recover(timerlog, slots, check, precision_ms, now_ms)
    units = rules.pending_units(rec, precision_ms)
    records = _narrow(_timer_records(layout, met))
    rec_off = records["physical_offset"].to_numpy()
    by_off = np.argsort(rec_off, kind="stable")
    want = units["offset_py"].to_numpy()
    at = np.searchsorted(rec_off[by_off], want)
    hit = at < len(rec_off)
    hit[hit] = rec_off[by_off[at[hit]]] == want[hit]
    row = np.where(hit, by_off[np.minimum(at, max(len(rec_off) - 1, 0))], 0) if len(rec_off) else at
    hit &= records["total_size"].to_numpy()[row] == units["size_py"].to_numpy() if len(rec_off) else hit
    unreadable = units.filter(pa.array(~hit))
    ok = units.filter(pa.array(hit))
    msg = records.take(pa.array(row[hit], _I64))
    ok = pa.table({**{c: ok[c] for c in ok.column_names}, **{c: msg[c] for c in msg.column_names}})
    delete = (ok["delete"].to_numpy(zero_copy_only=False) & ~ok["roll"].to_numpy(zero_copy_only=False))
    normal = ok.filter(pa.array(~delete))
    if delete.any():
        dels = ok.filter(pa.array(delete))
        cancelled = pc.is_in(_slot_key(normal, normal["uniq_key"]), value_set=_slot_key(dels, dels["del_key"]))
        normal = normal.filter(pc.invert(pc.fill_null(cancelled, False)))
    wheel_rows = pa.table({
        "source": pa.array(["timerlog"] * normal.num_rows, _STR),
        "due_time": _ms_time(normal["slot_time_ms"]),
        "timerlog_offset": normal["offset"], "magic": normal["magic"], "roll": normal["roll"],
        "physical_offset": normal["offset_py"], "size": normal["size_py"],
        "timer_queue_offset": normal["queue_offset"], **_delivery(normal)}, schema=PENDING_TIMERS_SCHEMA)
    # where enqueueing resumes: after the message of the TimerLog's last unit
    last = rec.units.filter(pc.equal(rec.units["offset"], rec.process_offset - UNIT_SIZE))
    last_q = None
    if last.num_rows:
        hit = records.filter(pc.and_(pc.equal(records["physical_offset"], last["offset_py"][0]),
                                     pc.equal(records["total_size"], last["size_py"][0])))
        last_q = hit["queue_offset"][0].as_py() if hit.num_rows else None
    qdir = files.queue_dir(TIMER_TOPIC, 0) if files.root is not None else None
    log_min = layout.segments[0].base_offset if layout.segments else 0
    qmin, qmax = queue_bounds(str(qdir), log_min) if qdir is not None and qdir.is_dir() else (0, 0)
    resume = rules.resume_queue_offset(last_q, check, qmin, qmax)
    backlog = records.filter(pc.and_(pc.equal(records["queue_id"], 0),
                                     pc.greater_equal(records["queue_offset"], resume))).sort_by("queue_offset")
    out_ms = backlog["timer_out_ms"]
    queue_rows = pa.table({
        "source": pa.array(["queue"] * backlog.num_rows, _STR),
        "due_time": _ms_time(out_ms),
        "timerlog_offset": pa.nulls(backlog.num_rows, _I64), "magic": pa.nulls(backlog.num_rows, _I32),
        "roll": pa.nulls(backlog.num_rows, pa.bool_()), "physical_offset": backlog["physical_offset"],
        "size": backlog["total_size"], "timer_queue_offset": backlog["queue_offset"], **_delivery(backlog)},
        schema=PENDING_TIMERS_SCHEMA)
    if findings is not None:
        findings.extend(distinct(met))
    return Timers(check, timerlog, wheel_table(slots, precision_ms), rec, resume,
                  pa.concat_tables([wheel_rows, queue_rows]), unreadable, metrics, distinct(met))
