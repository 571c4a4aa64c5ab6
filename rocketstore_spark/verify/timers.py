"""Verify's checks of the timer files against the log (``store.timers`` for their layout, ``rocketmq.timers``
for RocketMQ's restart): the TimerLog units recovery keeps, each against the CommitLog record it names — a
record of ``rmq_sys_wheel_timer`` starting at offset_py with TOTALSIZE size_py, inside the log; the TimerLog's
end (non-zero bytes where recovery's walk stops: the units after it are truncated away); the wheel's slots
against the TimerLog's end. Vectorized: each segment's headers gathered at the units' offsets with numpy (no
per-unit Python); runs where verify runs (driver or CLI).
"""
from __future__ import annotations

import numpy as np

from rocketstore_spark.codec.commitlog import (FLAG_BORNHOST_V6, FLAG_STOREHOST_V6, MAGIC_V1, MAGIC_V2,
                                               POS_BODY_BH_SH)
from rocketstore_spark.findings import Finding, FindingCap, finding
from rocketstore_spark.rocketmq.timers import live_slots, recover
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.timers import (TIMER_TOPIC, UNIT_SIZE, read_timercheck, read_timerlog,
                                            read_wheel_slots)

_TOPIC = np.frombuffer(TIMER_TOPIC.encode(), np.uint8)
_HOST_V4, _HOST_V6 = 8, 20


def _be(buf: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """Big-endian signed integers of ``width`` bytes at ``pos`` (all inside ``buf``)."""
    v = np.zeros(len(pos), np.int64)
    for k in range(width):
        v = (v << 8) | buf[pos + k].astype(np.int64)
    sign = np.int64(1) << (8 * width - 1)
    return (v ^ sign) - sign


def timer_records(layout: StoreLayout, offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """For each (offset, size): whether a record of ``rmq_sys_wheel_timer`` with TOTALSIZE ``size`` starts at
    that physical offset (magic v1 or v2, the lengths inside the record, the topic's bytes)."""
    ok = np.zeros(len(offsets), bool)
    for seg in layout.segments:
        inside = np.flatnonzero((offsets >= seg.base_offset) & (offsets + np.maximum(sizes, 0) <= seg.base_offset
                                                                 + seg.size) & (sizes >= POS_BODY_BH_SH + 2 * _HOST_V4))
        if not len(inside):
            continue
        buf = np.memmap(seg.path, np.uint8, mode="r")
        p = offsets[inside] - seg.base_offset
        size, magic = _be(buf, p, 4), _be(buf, p + 4, 4)
        good = (size == sizes[inside]) & ((magic == MAGIC_V1) | (magic == MAGIC_V2))
        flag = _be(buf, p + 36, 4)
        bh = np.where(flag & FLAG_BORNHOST_V6, _HOST_V6, _HOST_V4)
        sh = np.where(flag & FLAG_STOREHOST_V6, _HOST_V6, _HOST_V4)
        body_at = POS_BODY_BH_SH + bh + sh
        good &= body_at <= size
        body = np.where(good, _be(buf, p + np.where(good, body_at - 4, 0), 4), 0)
        v2 = magic == MAGIC_V2
        tl_at = body_at + body
        good &= (body >= 0) & (tl_at + 2 + len(_TOPIC) <= size)
        tl_at = np.where(good, tl_at, 0)
        tlen = np.where(v2, _be(buf, p + tl_at, 2), buf[p + tl_at].astype(np.int64))
        good &= tlen == len(_TOPIC)
        topic_at = p + tl_at + np.where(v2, 2, 1)
        for k, byte in enumerate(_TOPIC):
            good &= np.where(good, buf[np.where(good, topic_at + k, 0)] == byte, False)
        ok[inside] = good
    return ok


def check_timers(layout: StoreLayout, log_end: int, precision_ms: int = 1000) -> list[Finding]:
    """The timer checks of ``layout`` against a log that ends at ``log_end`` (module comment); nothing for a
    store without timer files."""
    files = layout.files
    if files.root is None:
        return []
    log = read_timerlog(files)
    check = read_timercheck(files)
    try:
        slots = read_wheel_slots(files.timerwheel_path)
    except ValueError:
        slots = None            # RocketMQ refuses such a wheel: out of these checks' reach
    if not log.files and check is None and slots is None:
        return []
    cap = FindingCap()
    for f in log.files:
        if f.stop == "end of log":
            data = np.memmap(files.timerlog_dir / f.name, np.uint8, mode="r")
            if data[f.end:].any():
                cap.add(finding("timers.bad_unit", f"timerlog/{f.name}", f.end,
                                "the TimerLog's walk ends at bytes that are not a unit (bad magic or size, torn): "
                                "recovery truncates the TimerLog here", timerlog_offset=f.base_offset + f.end))
            break
    rec = recover(log, slots, check, precision_ms)
    units = rec.units
    off = units["offset"].to_numpy()
    opy, spy = units["offset_py"].to_numpy(), units["size_py"].to_numpy().astype(np.int64)
    names, pos = units["file"].to_numpy(zero_copy_only=False), units["position"].to_numpy()
    past = opy + spy > log_end
    for k in np.flatnonzero(past):
        cap.add(finding("timers.unit_past_log_end", f"timerlog/{names[k]}", int(pos[k]),
                        f"TimerLog unit at {int(off[k])} names a message at {int(opy[k])} ({int(spy[k])} bytes) "
                        f"past the end of the log at {log_end}", physical_offset=int(opy[k]),
                        timerlog_offset=int(off[k])))
    named = ~past & ~timer_records(layout, opy, spy)
    for k in np.flatnonzero(named):
        cap.add(finding("timers.unit_not_timer_message", f"timerlog/{names[k]}", int(pos[k]),
                        f"TimerLog unit at {int(off[k])} names {int(spy[k])} bytes at {int(opy[k])}, which are not "
                        f"a {TIMER_TOPIC} record of that size", physical_offset=int(opy[k]),
                        timerlog_offset=int(off[k])))
    if slots is not None:
        idx, times = live_slots(rec.slots, rec.curr_read_time_ms, precision_ms)
        beyond = rec.slots["last_pos"][idx] >= rec.process_offset
        for i, t in zip(idx[beyond].tolist(), times[beyond].tolist()):
            cap.add(finding("timers.slot_past_timerlog_end", "timerwheel", i * 32,
                            f"wheel slot {i} (due {t}) ends its chain at TimerLog offset "
                            f"{int(rec.slots['last_pos'][i])}, at or past the TimerLog's end {rec.process_offset}",
                            slot=i, last_pos=int(rec.slots["last_pos"][i])))
    return cap.findings()
