"""RocketMQ's timer store rules on a store's timer files (rocketmq-store 5.5.1, TimerMessageStore: ``recover``,
``recoverAndRevise``, ``TimerWheel.checkPhyPos``, ``dequeue``); the files' layout is in ``store.timers``. Pure
numpy on the files' arrays, vectorized across units and slots; runs wherever called (CLI, Spark executor, tests).

Restart (``TimerMessageStore.load`` -> ``recover``)
    1. ``recoverAndRevise(lastTimerLogFlushPos - <last file's size>, check)``: from the TimerLog file holding
       that offset, every unit is walked (``store.timers.walk_timerlog_file``) and put back into the wheel:
       ``reviseSlot(delayed time, IGNORE, unit offset, force)`` — a slot holding another time is overwritten
       with (time, unit, unit), num and magic kept; a slot holding that time gets the unit as its last. The walk
       ends at the first bad unit; the TimerLog is truncated there (``truncateDirtyFiles``): that offset is
       ``processOffset``, where the next unit will be written.
    2. ``currReadTimeMs`` = timercheck's lastReadTimeMs, raised to now - 7 days + 60 slots when older (timers
       of a broker down for longer than the wheel's span are skipped).
    3. ``checkPhyPos(currReadTimeMs, processOffset)``: the smallest first_pos of the live slots (the 2 x 7 days
       from currReadTimeMs) whose last_pos is beyond processOffset; when below processOffset, the units from
       there are walked again without the check (``recoverAndRevise(minFirst, false)``).
    4. ``currQueueOffset`` (where enqueueing resumes in ``rmq_sys_wheel_timer``/0): after the queue offset of
       the message of the TimerLog's last unit, else timercheck's lastTimerQueueOffset; at most
       masterTimerQueueOffset; clamped into the queue's [min, max].
    Nothing in it compares a unit's CommitLog offset with the CommitLog: docs/format/timers.md says what that
    means after a cut.

Delivery (``dequeue``, one slot per ``timerPrecisionMs`` from currReadTimeMs)
    The slot's chain is read from last_pos back through prev_pos until -1; its units are delivered oldest
    first, DELETE units (without ROLL) first cancelling the units of the same slot whose message has that
    UNIQ_KEY. A unit's message is read at (offset_py, size_py) (``StoreUtil.getMessage``): absent, the unit is
    skipped. ``pending_units`` gives the units a restart would still deliver, with their slot.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketstore_spark.store.timers import MAGIC_DELETE, MAGIC_ROLL, WHEEL_SLOTS, TimerCheck, TimerLog

TIMER_BLANK_SLOTS = 60
SLOTS_TOTAL = WHEEL_SLOTS // 2


@dataclass
class Recovered:
    """What ``recover`` leaves: the wheel (native structured array), the TimerLog's end (processOffset, where
    the next unit goes), currReadTimeMs, and the units recovery keeps (offset < process_offset)."""
    slots: np.ndarray
    process_offset: int
    curr_read_time_ms: int
    units: pa.Table
    rechecked_from: int | None          # checkPhyPos' minFirst when the walk was repeated


def _revise(slots: np.ndarray, offsets: np.ndarray, delayed: np.ndarray, precision: int) -> None:
    """reviseSlot(delayed, IGNORE, offset, force=true) for each unit in order, vectorized: per slot, the units'
    final run of one time decides it (a run that starts on a slot holding another time rewrites first_pos)."""
    if not len(offsets):
        return
    t = delayed // precision
    idx = (t % WHEEL_SLOTS).astype(np.int64)
    order = np.argsort(idx, kind="stable")
    idx, t, off = idx[order], t[order], offsets[order]
    n = len(idx)
    last_of_group = np.r_[idx[1:] != idx[:-1], True]
    new_group = np.r_[True, idx[1:] != idx[:-1]]
    run_start = new_group | np.r_[False, t[1:] != t[:-1]]
    start_pos = np.maximum.accumulate(np.where(run_start, np.arange(n), 0))
    group_start = np.maximum.accumulate(np.where(new_group, np.arange(n), 0))
    ends = np.flatnonzero(last_of_group)
    g_idx, g_t, g_last = idx[ends], t[ends], off[ends]
    g_run0 = start_pos[ends]
    whole = g_run0 == group_start[ends]
    rewrite = ~(whole & (slots["time"][g_idx] == g_t))
    slots["time"][g_idx] = g_t
    slots["last_pos"][g_idx] = g_last
    slots["first_pos"][g_idx[rewrite]] = off[g_run0[rewrite]]


def _walk(timerlog: TimerLog, begin: int, check: bool) -> tuple[np.ndarray, int]:
    """recoverAndRevise's walk from the file holding ``begin``: (indices of the units it revises, checkOffset)."""
    files = timerlog.files
    if not files:
        return np.zeros(0, np.int64), 0
    index = max([i for i, f in enumerate(files) if begin >= f.base_offset] or [0])
    offsets = timerlog.units["offset"].to_numpy()
    lo = np.searchsorted(offsets, files[index].base_offset)
    check_offset = files[index].base_offset
    hi = lo
    for f in files[index:]:
        hi = np.searchsorted(offsets, f.base_offset + f.end)
        check_offset = f.base_offset + f.end
        if f.stop == "end of log":
            break
    return np.arange(lo, hi), check_offset


def live_slots(slots: np.ndarray, from_ms: int, precision: int) -> tuple[np.ndarray, np.ndarray]:
    """(slot indices, times in ms) of the slots live in the wheel's span from ``from_ms`` (2 x 7 days of slots,
    as dequeue and checkPhyPos look at them): the stored time equals the time the slot stands for."""
    base = from_ms // precision
    k = np.arange(WHEEL_SLOTS, dtype=np.int64)
    times = base + k
    idx = (times % WHEEL_SLOTS).astype(np.int64)
    live = slots["time"][idx] == times
    return idx[live], times[live] * precision


def recover(timerlog: TimerLog, slots: np.ndarray | None, check: TimerCheck | None, precision: int = 1000,
            now_ms: int | None = None) -> Recovered:
    """TimerMessageStore.recover on the files (module comment). ``slots``: the wheel as read (copied, never
    changed; None: an empty wheel, as RocketMQ creates one); ``now_ms``: when the broker restarts (None: no
    floor on currReadTimeMs, as a restart right after the last write)."""
    wheel = np.zeros(WHEEL_SLOTS, dtype=np.dtype([("time", "i8"), ("first_pos", "i8"), ("last_pos", "i8"),
                                                  ("num", "i4"), ("magic", "i4")])) if slots is None else slots.copy()
    units = timerlog.units
    offsets = units["offset"].to_numpy()
    delayed = units["delayed_time_ms"].to_numpy()
    last_flush = check.last_timerlog_flush_pos if check else 0
    if timerlog.files:
        last_flush -= timerlog.files[-1].size
    walked, process = _walk(timerlog, max(last_flush, 0), True)
    _revise(wheel, offsets[walked], delayed[walked], precision)
    kept = units.slice(0, int(np.searchsorted(offsets, process)))
    read_ms = check.last_read_time_ms if check else 0
    if now_ms is not None:
        read_ms = max(read_ms, now_ms // precision * precision - SLOTS_TOTAL * precision + TIMER_BLANK_SLOTS * precision)
    idx, _ = live_slots(wheel, read_ms, precision)
    beyond = wheel["last_pos"][idx] > process
    min_first = int(wheel["first_pos"][idx][beyond].min()) if beyond.any() else None
    if min_first is not None and min_first < process:
        kept_offsets = kept["offset"].to_numpy()
        bases = [f.base_offset for f in timerlog.files if min_first >= f.base_offset]
        lo = np.searchsorted(kept_offsets, max(bases) if bases else 0)
        _revise(wheel, kept_offsets[lo:], kept["delayed_time_ms"].to_numpy()[lo:], precision)
    return Recovered(wheel, process, read_ms, kept, min_first if min_first is not None and min_first < process
                     else None)


def pending_units(rec: Recovered, precision: int = 1000) -> pa.Table:
    """The units a restart would still deliver: every live slot's chain from last_pos through prev_pos over the
    units recovery kept, in delivery order (slot time, then oldest first). Columns: the unit's
    (``store.timers.TIMERLOG_SCHEMA``) plus ``slot_time_ms``, ``roll`` and ``delete`` (the magic's bits). A
    chain step to an offset that holds no unit ends the chain (RocketMQ reads bytes there: a unit recovery
    walked, or nothing it can deliver). Vectorized over slots: one numpy step per chain link."""
    units = rec.units
    offsets = units["offset"].to_numpy()
    prev = units["prev_pos"].to_numpy()
    idx, times = live_slots(rec.slots, rec.curr_read_time_ms, precision)
    heads = rec.slots["last_pos"][idx]

    def locate(pos: np.ndarray) -> np.ndarray:
        at = np.searchsorted(offsets, pos)
        ok = (at < len(offsets)) & (pos >= 0)
        ok[ok] = offsets[at[ok]] == pos[ok]
        return np.where(ok, at, -1)

    cur, slot_of = locate(heads), times.copy()
    seen = np.zeros(len(offsets), bool)
    got_unit, got_slot, got_depth = [], [], []
    depth = 0
    while True:
        keep = cur >= 0
        cur, slot_of = cur[keep], slot_of[keep]
        if not len(cur):
            break
        fresh = ~seen[cur]                 # a cycle in a damaged log ends its chain
        cur, slot_of = cur[fresh], slot_of[fresh]
        seen[cur] = True
        got_unit.append(cur)
        got_slot.append(slot_of)
        got_depth.append(np.full(len(cur), depth))
        depth += 1
        cur = locate(prev[cur])
    if got_unit:
        u, s, d = np.concatenate(got_unit), np.concatenate(got_slot), np.concatenate(got_depth)
    else:
        u = s = d = np.zeros(0, np.int64)
    order = np.lexsort((-d, s))            # per slot, the chain's oldest first
    u, s = u[order], s[order]
    out = units.take(pa.array(u, pa.int64()))
    magic = out["magic"].to_numpy()
    return (out.append_column("slot_time_ms", pa.array(s, pa.int64()))
            .append_column("roll", pa.array((magic & MAGIC_ROLL) != 0))
            .append_column("delete", pa.array((magic & MAGIC_DELETE) != 0)))


def resume_queue_offset(last_unit_queue_offset: int | None, check: TimerCheck | None, queue_min: int,
                        queue_max: int) -> int:
    """recover's currQueueOffset: after the queue offset of the TimerLog's last unit's message (None: it could
    not be read), else timercheck's lastTimerQueueOffset; at most masterTimerQueueOffset; into [min, max]."""
    q = last_unit_queue_offset + 1 if last_unit_queue_offset is not None else (
        check.last_timer_queue_offset if check else 0)
    q = min(q, check.master_timer_queue_offset if check else 0)
    return min(max(q, queue_min), queue_max)



@dataclass
class TimerCut:
    """How the timer files follow a CommitLog cut at ``log_end`` (``cut``): the TimerLog ends at ``end`` (the
    first unit whose message lies past the cut, and every unit after it, dropped); ``file_cut`` (name, position:
    zero from there) and ``files_deleted``; the wheel slots that referred to dropped units, with their new
    32-byte values (``slots``: index, time, first_pos, last_pos, num, magic; all zero: emptied); the timercheck
    fields that change; the dropped units' offsets."""
    end: int
    file_cut: tuple[str, int] | None
    files_deleted: list[str]
    slots: list[tuple[int, int, int, int, int, int]]
    timercheck: dict
    dropped: np.ndarray

    @property
    def changes(self) -> bool:
        return bool(self.file_cut or self.files_deleted or self.slots or self.timercheck)


def cut(timerlog: TimerLog, slots: np.ndarray | None, check: TimerCheck | None, log_end: int, queue_max: int,
        precision: int = 1000) -> TimerCut:
    """The timer files as they must be for a CommitLog that ends at ``log_end``, so that RocketMQ's restart
    (module comment) neither keeps a unit whose message is gone nor a slot pointing past the TimerLog's end:
    the TimerLog is cut before its first unit whose message (offset_py + size_py) ends past ``log_end`` — the
    timer store enqueues in ``rmq_sys_wheel_timer`` order, which is the log's order, so every later unit's
    message is gone too — and each wheel slot that referred to a dropped unit is rewritten from the units kept
    in it (its last kept unit; its first, or the first kept; num less the dropped units, deletes counted -1),
    or emptied; timercheck's lastTimerLogFlushPos is brought to the new end and its queue offsets to
    ``queue_max`` (the rebuilt ``rmq_sys_wheel_timer``/0's max) where they are beyond."""
    units = timerlog.units
    offsets = units["offset"].to_numpy()
    reach = units["offset_py"].to_numpy() + units["size_py"].to_numpy()
    past = np.flatnonzero(reach > log_end)
    end = int(offsets[past[0]]) if len(past) else timerlog.end
    dropped_rows = np.arange(int(past[0]) if len(past) else len(offsets), len(offsets))
    file_cut, deleted = None, []
    for f in timerlog.files:
        if f.base_offset >= end:
            deleted.append(f.name)
        elif f.base_offset <= end < f.base_offset + f.size and end < f.base_offset + f.end:
            file_cut = (f.name, end - f.base_offset)
    changed: list[tuple[int, int, int, int, int, int]] = []
    if slots is not None and len(dropped_rows):
        delayed = units["delayed_time_ms"].to_numpy() // precision
        magic = units["magic"].to_numpy()
        sign = np.where((magic & MAGIC_DELETE) != 0, -1, 1)
        refers = np.flatnonzero((slots["last_pos"] >= end) | (slots["first_pos"] >= end))
        refers = refers[(slots["last_pos"][refers] != 0) | (slots["first_pos"][refers] != 0)
                        | (slots["time"][refers] != 0)]
        slot_of = delayed % WHEEL_SLOTS
        for i in refers.tolist():      # slots touched by the dropped units: few, each a vectorized selection
            s = slots[i]
            mine = (slot_of == i) & (delayed == s["time"])
            kept = np.flatnonzero(mine & (offsets < end))
            gone = np.flatnonzero(mine & (offsets >= end))
            if not len(kept):
                changed.append((i, 0, 0, 0, 0, 0))
                continue
            first = int(s["first_pos"]) if s["first_pos"] < end else int(offsets[kept[0]])
            changed.append((i, int(s["time"]), first, int(offsets[kept[-1]]), int(s["num"] - sign[gone].sum()),
                            int(s["magic"])))
    fields = {}
    if check is not None:
        if check.last_timerlog_flush_pos > end:
            fields["last_timerlog_flush_pos"] = end
        if check.last_timer_queue_offset > queue_max:
            fields["last_timer_queue_offset"] = queue_max
        if check.master_timer_queue_offset > queue_max:
            fields["master_timer_queue_offset"] = queue_max
    return TimerCut(end, file_cut, deleted, changed, fields, offsets[dropped_rows])
