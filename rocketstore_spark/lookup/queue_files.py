"""Point lookups in a store, read-only: one ConsumeQueue entry by queue offset, one record's store time by
physical offset, and the first queue offset at or after a time (what the broker's
``getOffsetInQueueByTime`` answers). A few small ``pread``s each; for the driver and the CLI, not for scans.
"""
from __future__ import annotations

import bisect
import os

from rocketstore_spark.codec import commitlog, consumequeue
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.layout import StoreMap

_HEAD = commitlog.POS_STORE_TIMESTAMP_BH + 20 + 8          # enough for the header up to STORETIMESTAMP with IPv6


class QueueFiles:
    """The files of one queue, for lookups by queue offset."""

    def __init__(self, queue_dir):
        self.files = [(cq_offset, path) for path, cq_offset in StoreMap.queue_files(queue_dir)]
        self._starts = [f[0] for f in self.files]

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(physical offset, size, tagsCode) at ``queue_offset``; None where no valid entry is."""
        position = queue_offset * consumequeue.ENTRY_SIZE
        k = bisect.bisect_right(self._starts, position) - 1
        if k < 0:
            return None
        start, path = self.files[k]
        with open(path, "rb") as f:
            f.seek(position - start)
            raw = f.read(consumequeue.ENTRY_SIZE)
        if len(raw) < consumequeue.ENTRY_SIZE:
            return None
        e = consumequeue.decode_entries(raw)
        if not consumequeue.valid_mask(e)[0] or consumequeue.is_filler(e)[0]:
            return None
        return int(e["commit_log_offset"][0]), int(e["size"][0]), int(e["tags_code"][0])


def store_timestamp_at(layout: StoreLayout, physical_offset: int) -> int | None:
    """The store time (ms) of the record at ``physical_offset``; None when no record with that stored
    PHYSICALOFFSET starts there (expired, damaged, beyond the log)."""
    bases = [s.base_offset for s in layout.segments]
    k = bisect.bisect_right(bases, physical_offset) - 1
    if k < 0:
        return None
    seg = layout.segments[k]
    position = physical_offset - seg.base_offset
    if position >= seg.size:
        return None
    fd = os.open(seg.path, os.O_RDONLY)
    try:
        head = os.pread(fd, _HEAD, position)
    finally:
        os.close(fd)
    if len(head) < _HEAD:
        return None
    be = lambda at, n: int.from_bytes(head[at:at + n], "big", signed=True)       # noqa: E731
    if be(commitlog.POS_MAGIC, 4) not in (commitlog.MAGIC_V1, commitlog.MAGIC_V2) or \
            be(commitlog.POS_PHYSICAL_OFFSET, 8) != physical_offset:
        return None
    born_host = 20 if be(commitlog.POS_SYS_FLAG, 4) & commitlog.SysFlag.BORNHOST_V6 else 8
    return be(commitlog.POS_STORE_TIMESTAMP_BH + born_host, 8)


def offset_by_time(queue: QueueFiles, layout: StoreLayout, min_offset: int, max_offset: int,
                   timestamp_ms: int) -> int:
    """The first queue offset in [min_offset, max_offset) whose record was stored at or after
    ``timestamp_ms`` (``max_offset`` if none): a binary search over the queue by store time. Entries whose
    record cannot be read count as earlier."""
    lo, hi = min_offset, max_offset
    while lo < hi:
        mid = (lo + hi) // 2
        e = queue.entry(mid)
        ts = store_timestamp_at(layout, e[0]) if e is not None else None
        if ts is not None and ts >= timestamp_ms:
            hi = mid
        else:
            lo = mid + 1
    return lo
