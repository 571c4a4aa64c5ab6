"""ConsumeQueue files (docs/format/consumequeue.md): fixed 20-byte entries, big-endian.

     0  commit_log_offset  int64   physical offset of the record
     8  size               int32   its TOTALSIZE
    12  tags_code          int64   TAGS hash, delivery time (SCHEDULE_TOPIC_XXXX) or ConsumeQueueExt address

File ``consumequeue/{topic}/{queue_id}/{20-digit CQ byte offset}``; entry L (queue offset) lives at CQ byte
offset L*20. An all-zero entry marks the end of data; ``(0, 0x7FFFFFFF, 0)`` is a filler below the first
real entry of a queue created at a non-zero offset. Pure; numpy only.
"""
from __future__ import annotations

import numpy as np

ENTRY_SIZE = 20
ENTRY_DTYPE = np.dtype([("commit_log_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])
FILLER_SIZE = 0x7FFFFFFF
EXT_ADDRESS_MAX = -2147483649     # tagsCode <= this is a ConsumeQueueExt address (docs/format/consumequeue.md)
MAX_FILE_SIZE = 2**31 - 1         # mappedFileSizeConsumeQueue is a Java int: no larger file is RocketMQ's
assert ENTRY_DTYPE.itemsize == ENTRY_SIZE


def decode_entries(buf) -> np.ndarray:
    """All whole entries in ``buf`` (bytes-like), as a structured array (big-endian fields)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    n = len(data) // ENTRY_SIZE
    return data[: n * ENTRY_SIZE].view(ENTRY_DTYPE)


def valid_mask(entries: np.ndarray) -> np.ndarray:
    """RocketMQ's own validity test during recovery: offset >= 0 and size > 0 (fillers pass)."""
    return (entries["commit_log_offset"] >= 0) & (entries["size"] > 0)


def held(entries: np.ndarray) -> np.ndarray:
    """A file's entries without the zeros a broker preallocated past its last written entry — but one of them
    kept, so a file that is not full still reads as not full (a 6 MB ConsumeQueue file holding a few thousand
    entries is decoded as those, not as 300,000)."""
    return entries[:held_count(len(entries), lambda start, end: entries[start:end])]


HELD_STEP = 1 << 14
FIRST_STEP = 1 << 8


def held_count(count: int, read, scan_from: int | None = None) -> int:
    """How many of a file's ``count`` entries ``held`` keeps; ``read(start, end)``: its entries [start, end) (a
    file on disk is read back from its end, FIRST_STEP entries first and four times more each read after, up to
    HELD_STEP: a file whose last entry is written costs one small read, one of 300,000 zeros after a few
    entries a handful); ``scan_from``: the entries from there on are known to be zeros (a sparse file's hole:
    ``store.queues.held_file_count``), so the backward read starts there."""
    end = count if scan_from is None else max(0, min(count, scan_from))
    step = FIRST_STEP
    while end > 0:
        start = max(0, end - step)
        chunk = read(start, end)
        if np.count_nonzero(chunk.view(np.uint8)):      # one pass over contiguous bytes: zeros are skipped fast
            used = np.flatnonzero((chunk["commit_log_offset"] != 0) | (chunk["size"] != 0) | (chunk["tags_code"] != 0))
            return min(count, start + int(used[-1]) + 2)
        end = start
        step = min(4 * step, HELD_STEP)
    return min(count, 1)


def written_count(entries: np.ndarray) -> int:
    """Entries before the first one failing the validity test (ConsumeQueue.recover's walk)."""
    bad = np.flatnonzero(~valid_mask(entries))
    return int(bad[0]) if len(bad) else len(entries)


def is_filler(entries: np.ndarray) -> np.ndarray:
    return (entries["commit_log_offset"] == 0) & (entries["size"] == FILLER_SIZE) & (entries["tags_code"] == 0)


def encode_entries(commit_log_offset, size, tags_code) -> bytes:
    out = np.empty(len(commit_log_offset), dtype=ENTRY_DTYPE)
    out["commit_log_offset"], out["size"], out["tags_code"] = commit_log_offset, size, tags_code
    return out.tobytes()
