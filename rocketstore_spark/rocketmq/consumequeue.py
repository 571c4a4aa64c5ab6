"""ConsumeQueue files of one queue, as RocketMQ's dispatch writes them (``ConsumeQueue.putMessagePositionInfo``;
docs/format/consumequeue.md "How an entry is appended").

Entries come in dispatch order (``dispatch.queue_entries``). For each: skipped if the record ends at or before
the end of the last record written (already dispatched); the queue's first file starts at the file boundary
at or below 20 x its QUEUEOFFSET, filled with fillers up to it; an entry whose position is below the current
end is a duplicate and skipped; one above it is appended at the current end anyway (RocketMQ's "[BUG] logic
queue order maybe wrong"), so positions stay dense. QUEUEOFFSET 0 skips both logical checks (RocketMQ tests
them only for a non-zero offset): a record of a topic deleted and re-created under the same name, whose
offsets restart at 0, is appended at the end (docs/format/rocketmq-dispatch.md §4). Files are ``file_size`` bytes (mappedFileSizeConsumeQueue
rounded up to 20), named by their first byte's queue byte offset, zero after the last entry.

Pure: ``place`` decides where each entry goes, resuming from a ``QueueState``, so a queue can be fed in
batches (``place_many``: many queues at once, from a table of their states); writing is the caller's
(``rebuild.output``). Compiled per-entry loop (numba).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numba
import numpy as np

from rocketstore_spark.codec import consumequeue as cq_codec
from rocketstore_spark.codec.consumequeue import ENTRY_DTYPE, ENTRY_SIZE, FILLER_SIZE
from rocketstore_spark.store import rocksdb
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.layout import StoreMap, offset_name
from rocketstore_spark.store.queues import read_held, unreadable_queue_file

DEFAULT_FILE_SIZE = 300_000 * ENTRY_SIZE


def file_size_setting(mapped_file_size: int) -> int:
    """The ConsumeQueue file size the broker uses for ``mappedFileSizeConsumeQueue``: rounded up to whole
    entries (``MessageStoreConfig.getMappedFileSizeConsumeQueue``)."""
    return -(-int(mapped_file_size) // ENTRY_SIZE) * ENTRY_SIZE


@dataclass
class QueueState:
    """Where one queue's dispatch stands: ``end`` is the next queue offset RocketMQ would write (-1: the queue
    has no file yet), ``max_physical`` the end of the last record written; ``first``/``file_start`` the
    first real entry and the queue byte offset of the first file (fillers lie between them)."""
    end: int = -1
    max_physical: int = -1
    first: int = 0
    file_start: int = 0
    written: int = 0
    skipped: int = 0            # dispatched but not written: duplicates, already dispatched
    moved: int = 0              # written at another position than 20 x QUEUEOFFSET

    @property
    def fillers(self) -> int:
        return (self.first * ENTRY_SIZE - self.file_start) // ENTRY_SIZE

    @property
    def max_offset(self) -> int:
        """getMaxOffsetInQueue: the queue offset the next entry would get (0 for a queue never written)."""
        return max(self.end, 0)


def place(state: QueueState, queue_offset, physical_offset, size, file_size: int = DEFAULT_FILE_SIZE) -> np.ndarray:
    """The queue offset (entry position / 20) at which RocketMQ writes each of these entries of one queue,
    given in dispatch order after everything ``state`` has seen; -1 where it writes nothing. Updates
    ``state``."""
    states = np.array([[state.end, state.max_physical, state.first, state.file_start, 0, 0, 0]], dtype=np.int64)
    n = len(queue_offset)
    slots = place_many(states, np.zeros(n, np.int64), queue_offset, physical_offset, size, file_size)
    state.end, state.max_physical, state.first, state.file_start = (int(v) for v in states[0, :WRITTEN])
    state.written += int(states[0, WRITTEN])
    state.skipped += int(states[0, SKIPPED])
    state.moved += int(states[0, MOVED])
    return slots


# the columns of a ``place_many`` state table: one row per queue, QueueState's fields
END, MAX_PHYSICAL, FIRST, FILE_START, WRITTEN, SKIPPED, MOVED = range(7)
STATE_COLUMNS = 7


def new_states(count: int) -> np.ndarray:
    """``count`` rows of a ``place_many`` state table for queues never written (QueueState())."""
    states = np.zeros((count, STATE_COLUMNS), dtype=np.int64)
    states[:, END] = -1
    states[:, MAX_PHYSICAL] = -1
    return states


def queue_state(row: np.ndarray) -> QueueState:
    """The QueueState of one row of a ``place_many`` state table."""
    return QueueState(*(int(v) for v in row))


def place_many(states: np.ndarray, queue, queue_offset, physical_offset, size, file_size: int) -> np.ndarray:
    """``place`` for entries of many queues at once: entry i belongs to the queue of row ``queue[i]`` of the
    state table ``states`` (``new_states``; updated), and each queue's entries come in dispatch order (how
    the queues interleave does not matter). Returns the slots (-1: not written)."""
    if file_size % ENTRY_SIZE:
        raise ValueError(f"ConsumeQueue file size {file_size} is not a multiple of {ENTRY_SIZE}")
    return _place(states, np.asarray(queue, np.int64), np.asarray(queue_offset, np.int64),
                  np.asarray(physical_offset, np.int64), np.asarray(size, np.int64), file_size)


def entries(physical_offset, size, tags_code) -> np.ndarray:
    out = np.empty(len(physical_offset), dtype=ENTRY_DTYPE)
    out["commit_log_offset"], out["size"], out["tags_code"] = physical_offset, size, tags_code
    return out


def fillers(count: int) -> np.ndarray:
    out = np.zeros(count, dtype=ENTRY_DTYPE)
    out["size"] = FILLER_SIZE
    return out


def build_queue(queue_offset, physical_offset, size, tags_code, file_size: int = DEFAULT_FILE_SIZE
                ) -> tuple[QueueState, list[tuple[str, bytes]]]:
    """One whole queue in memory: its final state and (file name, file bytes) of every file (tests, small
    queues; ``rebuild.output`` streams instead)."""
    state = QueueState()
    slots = place(state, queue_offset, physical_offset, size, file_size)
    if state.end < 0:
        return state, []
    image = np.zeros(state.fillers + state.end - state.first, dtype=ENTRY_DTYPE)
    image[:state.fillers] = fillers(state.fillers)
    keep = slots >= 0
    image[slots[keep] - state.first + state.fillers] = entries(np.asarray(physical_offset)[keep],
                                                               np.asarray(size)[keep], np.asarray(tags_code)[keep])
    data = image.tobytes()
    files = [(offset_name(state.file_start + k), data[k:k + file_size].ljust(file_size, b"\0"))
             for k in range(0, len(data), file_size)]
    return state, files


@numba.njit(cache=True, nogil=True)
def _place(states, queue, queue_offset, physical_offset, size, file_size):
    """putMessagePositionInfo's decisions for a run of entries (see ``place``), each against its queue's row."""
    n = len(queue_offset)
    slots = np.full(n, -1, dtype=np.int64)
    for i in range(n):
        state = states[queue[i]]
        if physical_offset[i] + size[i] <= state[MAX_PHYSICAL]:          # already dispatched
            state[SKIPPED] += 1
            continue
        q = queue_offset[i]
        end = state[END]
        if end < 0:                                              # the queue's first file, filled up to q
            state[FILE_START] = (q * ENTRY_SIZE // file_size) * file_size
            state[FIRST] = q
            end = q
        # the logical checks are skipped for QUEUEOFFSET 0 (a topic re-created under its old name): such an
        # entry is appended at the current end
        if q != 0 and q < end:                                   # "Build consume queue repeatedly"
            state[END] = end
            state[SKIPPED] += 1
            continue
        if q != end:                                             # "[BUG] logic queue order maybe wrong"
            state[MOVED] += 1
        slots[i] = end
        state[END] = end + 1
        state[WRITTEN] += 1
        state[MAX_PHYSICAL] = physical_offset[i] + size[i]
    return slots


# ------------------------------------------------------------------------- a queue's bounds after load

def file_summary(raw: np.ndarray) -> list:
    """What a queue's recovery and bounds take from one file's held entries ``raw``: [entries held, valid entries
    before the first invalid one (``written_count``), offset + size of the last of those (-1: none), the first
    entry's physical offset (None: no entry), the largest physical offset among the valid ones (-1: none)]."""
    n = cq_codec.written_count(raw)
    offsets = raw["commit_log_offset"]
    return [len(raw), n, int(offsets[n - 1]) + int(raw["size"][n - 1]) if n else -1,
            int(offsets[0]) if len(raw) else None, int(offsets[:n].max()) if n else -1]


def rocketmq_bounds(files: list, read: Callable[[int], np.ndarray], log_min: int,
                    expired_min_is_max: bool = True, summary: Callable[[int], list] | None = None) -> tuple[int, int]:
    """(min offset, max offset) of a queue as RocketMQ computes them when it loads it: ``recover`` walks from
    the third-last file and ends the queue at the first invalid entry (a full valid file moves on to the
    next); ``correctMinOffset`` takes the first entry pointing at or above the CommitLog's minimum, looking
    from the first file on. When every entry points below it (all expired), 5.x puts the min at the max
    (golden 5.5.1 ``consumer-offsets``), 4.9.x leaves it at 0 (``expired_min_is_max=False``). ``files``: the
    queue's files in order, each with its queue byte offset second; ``read(k)``: the entries of file k (only
    the files needed are read); ``summary(k)``: file k's ``file_summary`` (default: of ``read(k)``) — a file
    whose summary settles it is not read."""
    if not files:
        return 0, 0
    summary = summary or (lambda k: file_summary(read(k)))
    max_offset = 0
    for k in range(max(0, len(files) - 3), len(files)):
        held, n = summary(k)[:2]
        max_offset = (files[k][1] + n * ENTRY_SIZE) // ENTRY_SIZE
        if n < held or not held:
            break
    for k, f in enumerate(files):
        _, n, _, first, largest = summary(k)
        if not n or largest < log_min:
            continue                                # no valid entry at or above log_min
        if first >= log_min:
            return f[1] // ENTRY_SIZE, max_offset
        raw = read(k)
        hit = np.flatnonzero(raw["commit_log_offset"][:cq_codec.written_count(raw)] >= log_min)
        if len(hit):
            return f[1] // ENTRY_SIZE + int(hit[0]), max_offset
    return (max_offset if expired_min_is_max else 0), max_offset


def queue_bounds(queue_dir: str, log_min: int, expired_min_is_max: bool = True) -> tuple[int, int]:
    """``rocketmq_bounds`` of the queue in ``queue_dir``, reading only the files it needs."""
    files = [(p, o) for p, o in StoreMap.queue_files(queue_dir)]

    def read(k: int) -> np.ndarray:
        if unreadable_queue_file(*files[k]):                   # no entries in a file RocketMQ could not have written
            return cq_codec.decode_entries(b"")
        return read_held(files[k][0])
    return rocketmq_bounds(files, read, log_min, expired_min_is_max)


def store_queue_bounds(layout: StoreLayout, expired_min_is_max: bool = True) -> dict[tuple[str, int], tuple[int, int]]:
    """``queue_bounds`` of every queue directory of the store, (topic, queue id) -> (min, max), in the order
    the store lists them; the log's min offset is its first segment's base (0 without segments), as the
    broker's ``CommitLog.getMinOffset``. ``expired_min_is_max``: the release's rule
    (``rocketmq.releases``)."""
    log_min = layout.segments[0].base_offset if layout.segments else 0
    db = rocksdb.queue_db(layout.root)
    if db is not None:                 # a RocksDB ConsumeQueue: consumequeue/ holds no queue directories
        return rocksdb_queue_bounds(db, log_min)
    return {(topic, queue_id): queue_bounds(str(d), log_min, expired_min_is_max)
            for topic, queue_id, d in layout.files.queue_dirs()}


def rocksdb_queue_bounds(db, log_min: int) -> dict[tuple[str, int], tuple[int, int]]:
    """(min, max) of every queue of a RocksDB ConsumeQueue, as RocketMQ 5.5.1's ``RocksDBConsumeQueueStore``
    answers ``getMinOffsetInQueue`` / ``getMaxOffsetInQueue`` on the database as it is (``log_min``: the
    CommitLog's min offset); raises ``store.rocksdb.RocksDBUnreadable``. Read-only."""
    with rocksdb.open_readonly(db) as rd:
        table = rocksdb.read_queue_table(rd, str(db))
        return {key: (rocksdb_min_offset(rd, q, log_min), q.max[1] + 1)
                for key, q in sorted(table.queues.items()) if q.max is not None}


def rocksdb_min_offset(rd, q, log_min: int) -> int:
    """``RocksDBConsumeQueueOffsetTable.getMinCqOffset`` of queue ``q`` (a ``store.rocksdb.QueueOffsets``) on the
    opened database ``rd``, without its writes (``min_offset_by_search``)."""
    def get(queue_offset: int) -> int | None:
        unit = rocksdb.get_unit(rd, q.topic, q.queue_id, queue_offset)
        return None if unit is None else int(unit["physical_offset"])
    return min_offset_by_search(get, q.min, q.max, log_min)


def min_offset_by_search(get, stored_min: tuple[int, int] | None, stored_max: tuple[int, int] | None,
                         log_min: int) -> int:
    """``getMinCqOffset`` as RocketMQ 5.5.1 answers it: the stored "min" (physical offset, queue offset) when its
    record is still in the log (>= ``log_min``), else ``correctMinCqOffset``'s answer — 0 without a "max"; max + 1
    when the max's record is below the log; else the first unit at or after ``log_min`` by ``binarySearchInCQ``
    (min mode, over [stored min or 0, max]; ``get``: queue offset -> physical offset or None), or, when it finds
    none, the stored min (0 without one), returned as RocketMQ returns it."""
    if stored_min is not None and stored_min[0] >= log_min:
        return stored_min[1]
    cq_offset = stored_min[1] if stored_min is not None else 0
    if stored_max is None:
        return 0
    max_phy, max_cq = stored_max
    if max_phy < log_min:
        return max_cq + 1
    low, high, found = cq_offset, max_cq, -1
    while high >= low:
        mid = low + ((high - low) >> 1)
        phy = get(mid)
        if phy is None:
            low = mid + 1
            continue
        if phy == log_min:
            found = mid
            break
        if phy > log_min:
            high, found = mid - 1, mid
        else:
            low = mid + 1
    return found if found != -1 else cq_offset
