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
batches; writing is the caller's (``rebuild.output``). Compiled per-entry loop (numba).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from rocketstore_spark.codec.consumequeue import ENTRY_DTYPE, ENTRY_SIZE, FILLER_SIZE

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
    if file_size % ENTRY_SIZE:
        raise ValueError(f"ConsumeQueue file size {file_size} is not a multiple of {ENTRY_SIZE}")
    out = _place(np.asarray(queue_offset, np.int64), np.asarray(physical_offset, np.int64),
                 np.asarray(size, np.int64), file_size, state.end, state.max_physical, state.first, state.file_start)
    slots, state.end, state.max_physical, state.first, state.file_start, written, skipped, moved = out
    state.written += written
    state.skipped += skipped
    state.moved += moved
    return slots


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
    files = [(f"{state.file_start + k:020d}", data[k:k + file_size].ljust(file_size, b"\0"))
             for k in range(0, len(data), file_size)]
    return state, files


@numba.njit(cache=True, nogil=True)
def _place(queue_offset, physical_offset, size, file_size, end, max_physical, first, file_start):
    """putMessagePositionInfo's decisions for a run of entries (see ``place``)."""
    n = len(queue_offset)
    slots = np.full(n, -1, dtype=np.int64)
    written = skipped = moved = 0
    for i in range(n):
        if physical_offset[i] + size[i] <= max_physical:         # already dispatched
            skipped += 1
            continue
        q = queue_offset[i]
        if end < 0:                                              # the queue's first file, filled up to q
            file_start = (q * ENTRY_SIZE // file_size) * file_size
            first = q
            end = q
        # the logical checks are skipped for QUEUEOFFSET 0 (a topic re-created under its old name): such an
        # entry is appended at the current end
        if q != 0 and q < end:                                   # "Build consume queue repeatedly"
            skipped += 1
            continue
        if q != end:                                             # "[BUG] logic queue order maybe wrong"
            moved += 1
        slots[i] = end
        end += 1
        written += 1
        max_physical = physical_offset[i] + size[i]
    return slots, end, max_physical, first, file_start, written, skipped, moved
