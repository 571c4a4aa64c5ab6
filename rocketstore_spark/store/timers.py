"""The timer files of a 5.x store (``timerWheelEnable``, on by default since 5.0): what RocketMQ's
TimerMessageStore keeps beside the log (rocketmq-store 5.5.1, ``org.apache.rocketmq.store.timer``; the broker
attaches it, BrokerController). Read-only, numpy, whole files (small: a wheel is 38.7 MB, a TimerLog file
``mappedFileSizeTimerLog``, 100 MiB by default); runs wherever called (CLI, Spark executor, tests).
docs/format/timers.md describes the same layout with RocketMQ's restart rules.

A timer message (producer property ``TIMER_DELIVER_MS`` / ``TIMER_DELAY_SEC`` / ``TIMER_DELAY_MS``) is stored by
the broker in topic ``rmq_sys_wheel_timer``, queue 0, with ``TIMER_OUT_MS`` (its due time, rounded down to
``timerPrecisionMs``), ``REAL_TOPIC`` and ``REAL_QID``. The timer store reads that queue (from
``currQueueOffset``) and appends one TimerLog unit per message; when a slot falls due it puts the message back to
its real topic (or, for a ROLL unit, to ``rmq_sys_wheel_timer`` again).

``timerlog/{20-digit base offset}``: MappedFileQueue files of ``mappedFileSizeTimerLog`` bytes; units of 52
bytes, big-endian (TimerLog.UNIT_SIZE; TimerMessageStore.doEnqueue writes them)::

     0 int32 size           52
     4 int64 prev_pos       TimerLog offset of the previous unit of the same wheel slot (-1: the slot's first)
    12 int32 magic          1 DEFAULT | 2 ROLL | 4 DELETE; RocketMQ accepts any (magic | 0xF) == 0xF
    16 int64 write_time_ms  currWriteTimeMs when enqueued
    24 int32 delay_ms       delayed time - write time (the slot the unit was put in)
    28 int64 offset_py      CommitLog offset of the timer message      (UNIT_PRE_SIZE_FOR_MSG = 28)
    36 int32 size_py        its size
    40 int32 topic_hash     String.hashCode() of its REAL_TOPIC (metrics)
    44 int64 reserved       0

A unit never straddles two files: when fewer than 52 + 16 bytes remain, a 16-byte blank is written (int32 bytes
remaining, int64 0, int32 BLANK_MAGIC ``0xBBCCDDEE ^ 1880681586 + 8`` = -875286124) and the file ends there.
Recovery (``recoverAndRevise``) reads a file unit by unit from position 0: a blank ends the file; a unit with a
bad magic or a size other than 52 (zeros after the last unit: size 0) ends the log.

``timerwheel``: 2 x 7 x 86,400 slots (TIMER_WHEEL_TTL_DAY x DAY_SECS, whatever ``timerPrecisionMs``) of 32
bytes = 38,707,200 bytes, big-endian (Slot, TimerWheel.putSlot)::

     0 int64 time           delayed time / timerPrecisionMs
     8 int64 first_pos      TimerLog offset of the slot's first unit
    16 int64 last_pos       its last unit (the head of the prev_pos chain)
    24 int32 num            units put in the slot (delete units count -1)
    28 int32 magic          0 (unused)

The slot of time t is ``t / precision % slots``; it holds t only if its stored time equals ``t / precision``
(TimerWheel.getSlot), else it is empty for t. With ``timerWheelSnapshotFlush`` the wheel is flushed to
``timerwheel.<timerlog offset>`` snapshots instead (not read here).

``config/timercheck`` (TimerCheckpoint, a mapped 4 KiB page): int64 lastReadTimeMs, lastTimerLogFlushPos,
lastTimerQueueOffset, masterTimerQueueOffset, then the DataVersion's stateVersion, timestamp, counter.
``config/timermetrics`` (+ ``.bak``; TimerMetrics, a ConfigManager JSON): ``{"dataVersion": ...,
"timingCount": {topic: {"count": n, "timeStamp": ms}}}`` — timers pending per real topic, as counted.
"""
from __future__ import annotations

import json
import mmap
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketstore_spark.store.layout import StoreMap

UNIT_SIZE = 52
MIN_BLANK_LEN = 16
BLANK_MAGIC = -875286124                    # TimerLog.BLANK_MAGIC_CODE
MAGIC_DEFAULT, MAGIC_ROLL, MAGIC_DELETE = 1, 2, 4
SLOT_SIZE = 32
WHEEL_SLOTS = 2 * 7 * 86400                 # slotsTotal * 2
WHEEL_SIZE = WHEEL_SLOTS * SLOT_SIZE
TIMER_TOPIC = "rmq_sys_wheel_timer"

UNIT_DTYPE = np.dtype([("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"), ("write_time_ms", ">i8"),
                       ("delay_ms", ">i4"), ("offset_py", ">i8"), ("size_py", ">i4"), ("topic_hash", ">i4"),
                       ("reserved", ">i8")])
SLOT_DTYPE = np.dtype([("time", ">i8"), ("first_pos", ">i8"), ("last_pos", ">i8"), ("num", ">i4"), ("magic", ">i4")])
assert UNIT_DTYPE.itemsize == UNIT_SIZE and SLOT_DTYPE.itemsize == SLOT_SIZE

_I32, _I64, _STR = pa.int32(), pa.int64(), pa.string()
TIMERLOG_SCHEMA = pa.schema([
    ("file", _STR), ("position", _I32), ("offset", _I64), ("size", _I32), ("prev_pos", _I64), ("magic", _I32),
    ("write_time_ms", _I64), ("delay_ms", _I32), ("delayed_time_ms", _I64), ("offset_py", _I64),
    ("size_py", _I32), ("topic_hash", _I32), ("reserved", _I64)])
TIMERWHEEL_SCHEMA = pa.schema([
    ("index", _I32), ("time_ms", _I64), ("first_pos", _I64), ("last_pos", _I64), ("num", _I32), ("magic", _I32)])


def magic_ok(magic):
    """TimerMessageStore.isMagicOK: no bit above the low four."""
    return (np.asarray(magic) | 0xF) == 0xF


@dataclass(frozen=True)
class TimerLogFile:
    """One TimerLog file as recovery walks it: its units end at ``end`` (a position in the file) because of
    ``stop``: "blank" (the file's blank unit: the next file follows), "end of file" (the units fill it
    exactly), "end of log" (zeros, a bad magic or size, a torn unit: recovery's walk, and the log, end here)."""
    name: str
    base_offset: int
    size: int
    end: int
    stop: str


@dataclass
class TimerLog:
    """Every unit of the TimerLog (``TIMERLOG_SCHEMA``, in offset order), each file's walk, and where the log
    ends (``end``: the offset after the last unit, what recovery's ``processOffset`` becomes)."""
    units: pa.Table
    files: list[TimerLogFile]
    end: int

    @property
    def file_size(self) -> int | None:
        return self.files[-1].size if self.files else None


def _read(path) -> bytes:
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            return b""
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m[:]


def walk_timerlog_file(data: bytes) -> tuple[np.ndarray, int, str]:
    """(the units of one TimerLog file's bytes, the position they end at, why: ``STOPS``) as recoverAndRevise
    walks it: unit by unit from 0 while a position is inside the file; a blank ends the file, anything else
    that is not a whole unit of size 52 with a good magic (zeros after the last unit, a torn tail) ends the
    log."""
    n = len(data) // UNIT_SIZE
    units = np.frombuffer(data, UNIT_DTYPE, count=n)
    bad = (units["magic"] == BLANK_MAGIC) | ~magic_ok(units["magic"]) | (units["size"] != UNIT_SIZE)
    stops = np.flatnonzero(bad)
    if stops.size:
        k = int(stops[0])
        return units[:k], k * UNIT_SIZE, "blank" if units["magic"][k] == BLANK_MAGIC else "end of log"
    tail = len(data) - n * UNIT_SIZE
    if tail == 0:
        return units, n * UNIT_SIZE, "end of file"
    blank = tail >= MIN_BLANK_LEN and np.frombuffer(data, ">i4", count=1, offset=n * UNIT_SIZE + 12)[0] == BLANK_MAGIC
    return units, n * UNIT_SIZE, "blank" if blank else "end of log"


def read_timerlog(files: StoreMap) -> TimerLog:
    """The store's TimerLog (empty when it has none), every file walked as recovery walks it; the units of a
    file after the one where the log ended ("end of log") are still listed (recovery truncates them away:
    ``rocketmq.timers.recover``)."""
    tables, walked = [], []
    end = 0
    ended = False
    for base, path in files.timerlog_files():
        data = _read(path)
        units, stop_at, why = walk_timerlog_file(data)
        walked.append(TimerLogFile(path.name, base, len(data), stop_at, why))
        if not ended:
            end = base + stop_at
            ended = why == "end of log"
        pos = np.arange(len(units), dtype=np.int32) * UNIT_SIZE
        tables.append(pa.table({
            "file": pa.array([path.name] * len(units), _STR), "position": pos, "offset": pos.astype(np.int64) + base,
            **{c: units[c].astype(units.dtype[c].newbyteorder("=")) for c in ("size", "prev_pos", "magic",
                                                                                  "write_time_ms", "delay_ms")},
            "delayed_time_ms": units["write_time_ms"].astype(np.int64) + units["delay_ms"].astype(np.int64),
            **{c: units[c].astype(units.dtype[c].newbyteorder("=")) for c in ("offset_py", "size_py", "topic_hash",
                                                                                  "reserved")}},
            schema=TIMERLOG_SCHEMA))
    units = pa.concat_tables(tables) if tables else TIMERLOG_SCHEMA.empty_table()
    return TimerLog(units, walked, end)


def read_wheel_slots(path) -> np.ndarray | None:
    """The wheel file as a structured array of ``WHEEL_SLOTS`` slots (native byte order; None without one).
    A file of another size is what RocketMQ refuses to start with ("Timer wheel length ... != expected"):
    ValueError."""
    if path is None or not path.is_file():
        return None
    data = _read(path)
    if len(data) != WHEEL_SIZE:
        raise ValueError(f"{path}: timer wheel of {len(data):,} bytes, RocketMQ expects {WHEEL_SIZE:,}")
    return np.frombuffer(data, SLOT_DTYPE).astype(SLOT_DTYPE.newbyteorder("="))


def wheel_table(slots: np.ndarray | None, precision_ms: int = 1000) -> pa.Table:
    """The wheel's non-zero slots (``TIMERWHEEL_SCHEMA``; time_ms = stored time x precision, as getRawSlot)."""
    if slots is None:
        return TIMERWHEEL_SCHEMA.empty_table()
    nz = np.flatnonzero((slots["time"] != 0) | (slots["first_pos"] != 0) | (slots["last_pos"] != 0)
                        | (slots["num"] != 0) | (slots["magic"] != 0))
    s = slots[nz]
    return pa.table({"index": nz.astype(np.int32), "time_ms": s["time"] * precision_ms, "first_pos": s["first_pos"],
                     "last_pos": s["last_pos"], "num": s["num"], "magic": s["magic"]}, schema=TIMERWHEEL_SCHEMA)


@dataclass(frozen=True)
class TimerCheck:
    """config/timercheck (TimerCheckpoint)."""
    last_read_time_ms: int
    last_timerlog_flush_pos: int
    last_timer_queue_offset: int
    master_timer_queue_offset: int
    data_version_state_version: int
    data_version_timestamp: int
    data_version_counter: int


def read_timercheck(files: StoreMap) -> TimerCheck | None:
    """config/timercheck, or None when the store has none (RocketMQ then starts from zeros)."""
    path = files.timercheck_path
    if path is None or not path.is_file():
        return None
    data = _read(path)[:56].ljust(56, b"\0")
    return TimerCheck(*(int(v) for v in np.frombuffer(data, ">i8", count=7)))


def read_timer_metrics(files: StoreMap) -> dict[str, int] | None:
    """config/timermetrics (else its .bak, as ConfigManager.load): real topic -> timers counted pending; None
    when neither parses."""
    for path in files.timermetrics_paths():
        try:
            doc = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        return {topic: int(m.get("count", 0)) for topic, m in (doc.get("timingCount") or {}).items()}
    return None
