"""Which stretch of each CommitLog segment a store's ConsumeQueues account for, record by record (read-only;
runs in the process that asks — the CLI's export — in one pass over every ConsumeQueue file, 20 bytes a
record, compiled).

RocketMQ dispatches the CommitLog in order and gives every record one entry (physical offset, size) in the
queue of its topic — every record but transactional half messages (PREPARED and ROLLBACK get none:
``codec.dispatch_kernel.QUEUED_TYPES``) — and a segment's records lie end to end from its first byte. So where
every record of a segment still has its entry, the claims [offset, offset + size) of all queues of all topics
tile the segment from byte 0 to the end of the last claimed record (the segment's ``covered`` end) with no gap
and no overlap. A record whose entry was never written (a half message, dispatch lagging a crash) or was lost
(a queue file or directory gone, an entry zeroed or rewritten) leaves a gap; a duplicated or moved entry an
overlap. Either way the segment is not covered.

The test needs no sort. Claims with positive sizes tile [base, end) exactly when the multiset of their starts
plus {end} equals the multiset of their ends plus {base} (the claims then form one chain from base to end).
The two multisets are compared by the wrapping sum of a 64-bit mix of each offset (the splitmix64 finaliser):
equal multisets always agree; different ones agree with probability about 2^-64.

Not claims: fillers and entries after a file's last written one (``store.queues.read_queue``), entries whose
offset lies in no segment (expired, or in a segment that is gone), and the entries of ``%LMQ%`` queues (light
message queues: a second entry for a record its own topic's queue already claims).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.queues import read_queue

LMQ_PREFIX = "%LMQ%"
# entries read from a queue at a time (1.25 MiB): RocketMQ preallocates 6 MB files and a queue's last one is
# mostly zeros, which a read that stops at the first unwritten entry does not read much of
QUEUE_CHUNK = 1 << 16


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(x):
    """splitmix64's finaliser: a bijection of 64-bit words that spreads every input bit over the output."""
    z = np.uint64(x)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True)
def _tally(offsets, sizes, bases, file_sizes, starts, ends, counts, last_end):
    """Add the claims (offsets[i], sizes[i]) to the sums of the segment each starts in (``starts``/``ends``:
    wrapping sums of the mixed start and end offsets; ``counts``; ``last_end``: the furthest end)."""
    for i in range(offsets.shape[0]):
        p = offsets[i]
        k = np.searchsorted(bases, p, side="right") - 1
        if k < 0 or p >= bases[k] + file_sizes[k]:
            continue
        end = p + sizes[i]
        starts[k] += _mix(p)
        ends[k] += _mix(end)
        counts[k] += 1
        if end > last_end[k]:
            last_end[k] = end


@dataclass(frozen=True)
class Coverage:
    """What a store's ConsumeQueues account for. ``covered[k]``: the file position of segment k up to which
    every record has a ConsumeQueue entry (the end of the last claimed record), -1 where the claims do not
    tile the segment from its first byte (or there are none). ``backwards``: the queue directories
    (``topic/queue``) of the topics asked about whose entries do not ascend in physical offset (a reader
    merging queues by offset cannot stream them)."""
    covered: np.ndarray
    backwards: tuple[str, ...]


def coverage(layout: StoreLayout, topic: str | frozenset | None = None) -> Coverage:
    """The ConsumeQueue coverage of ``layout``'s segments (one read of every queue file, a chunk at a time);
    the queues of ``topic`` (a name, or a set of names: one read serves several topics' reads) are also
    checked for ascending offsets."""
    asked = {topic} if isinstance(topic, str) else set(topic or ())
    segments = layout.segments
    bases = np.array([s.base_offset for s in segments], dtype=np.int64)
    file_sizes = np.array([s.size for s in segments], dtype=np.int64)
    starts = np.zeros(len(segments), dtype=np.uint64)
    ends = np.zeros(len(segments), dtype=np.uint64)
    counts = np.zeros(len(segments), dtype=np.int64)
    last_end = np.zeros(len(segments), dtype=np.int64)
    backwards = []
    for name, queue_id, queue_dir in layout.files.queue_dirs():
        if name.startswith(LMQ_PREFIX):
            continue
        previous = -1
        for chunk in read_queue(str(queue_dir), QUEUE_CHUNK):
            offsets, sizes = claims(chunk.entries, chunk.fillers)
            _tally(offsets, sizes, bases, file_sizes, starts, ends, counts, last_end)
            if name in asked and len(offsets) and (offsets[0] <= previous or np.any(np.diff(offsets) <= 0)):
                backwards.append(f"{name}/{queue_id}")
            previous = offsets[-1] if len(offsets) else previous
    mixed_bases = np.array([_mix(b) for b in bases], dtype=np.uint64)
    mixed_ends = np.array([_mix(e) for e in last_end], dtype=np.uint64)
    with np.errstate(over="ignore"):
        tiled = (counts > 0) & (starts + mixed_ends == ends + mixed_bases)
    return Coverage(np.where(tiled, last_end - bases, -1), tuple(dict.fromkeys(backwards)))


def claims(entries: np.ndarray, fillers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(physical offsets, sizes) as native int64 of the entries that claim a record (fillers left out)."""
    real = entries[~fillers] if fillers.any() else entries
    return (real["commit_log_offset"].astype(np.int64),
            real["size"].astype(np.int64))

