"""Planning the partitions of a CommitLog scan (driver side: file listing and sizes only, nothing opened).

The selected segments of every store are laid end to end and cut into partitions of ``split_size`` bytes
each, so every partition carries the same amount of CommitLog whatever the segment size: a large segment
is cut at arbitrary byte positions (the reader re-synchronises on the next record start and reads the
last record past its range end), small segments are packed together. A partition is a short list of
byte ranges, each inside one segment.

Spark costs about 80 ms of core time per Python-source task whatever it reads (bench/README.md), so by
default a scan gets one partition per core of the session: ``split_size`` = store bytes / parallelism,
kept between 64 MiB (small stores on big clusters still spread) and 2 GiB (retries stay cheap). Memory
does not grow with the partition size: the reader maps one window at a time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

PARALLELISM_ENV = "ROCKETSTORE_PARALLELISM"     # set by datasource.register from the session's parallelism
MIN_AUTO_SPLIT = 64 << 20
MAX_AUTO_SPLIT = 2 << 30


@dataclass(frozen=True)
class SegmentRange:
    """Bytes [start, end) of one segment; records that start there belong to this range."""
    store: str
    path: str
    base_offset: int
    start: int
    end: int
    followed: bool = False        # a later segment of the store exists (see SegmentReader)


@dataclass(frozen=True)
class ScanPartition(InputPartition):
    ranges: tuple[SegmentRange, ...]

    @property
    def size(self) -> int:
        return sum(r.end - r.start for r in self.ranges)


def session_parallelism() -> int:
    """Cores of the session that planned this scan (passed through the worker environment), else this
    machine's CPU count."""
    try:
        return max(1, int(os.environ[PARALLELISM_ENV]))
    except (KeyError, ValueError):
        return os.cpu_count() or 1


def auto_split_size(total_bytes: int, parallelism: int) -> int:
    per_core = -(-total_bytes // max(parallelism, 1))
    return min(MAX_AUTO_SPLIT, max(MIN_AUTO_SPLIT, per_core))


def plan_partitions(segments, split_size: int | None, parallelism: int,
                    start_offset: int = 0) -> list[ScanPartition]:
    """``segments``: (store name, Segment, followed by a later segment) in scan order. Partitions of
    ``split_size`` bytes (auto when None), each a list of ranges. Only a segment's data is planned: the
    trailing hole of a sparse file (a broker's preallocated last segment) holds no record. ``start_offset``
    (a physical offset where a record starts, e.g. an incremental ingest's watermark): bytes before it are
    not planned; the range of the segment holding it starts there, where the reader finds that record."""
    def first(seg) -> int:                 # file position the segment's planned data starts at
        return min(seg.data_end, max(0, start_offset - seg.base_offset))
    return plan_ranges([SegmentRange(store, seg.path, seg.base_offset, first(seg), seg.data_end, followed)
                        for store, seg, followed in segments], split_size, parallelism)


def plan_ranges(wanted: list[SegmentRange], split_size: int | None, parallelism: int) -> list[ScanPartition]:
    """``wanted`` byte ranges (each inside one segment, in scan order; each begins where a record starts)
    cut into partitions of ``split_size`` bytes (auto when None); a range is cut at arbitrary positions."""
    wanted = [r for r in wanted if r.end > r.start]
    if split_size is None:
        split_size = auto_split_size(sum(r.end - r.start for r in wanted), parallelism)
    partitions, ranges, room = [], [], split_size
    for r in wanted:
        start = r.start
        while start < r.end:
            end = min(r.end, start + room)
            ranges.append(SegmentRange(r.store, r.path, r.base_offset, start, end, r.followed))
            room -= end - start
            start = end
            if room == 0:
                partitions.append(ScanPartition(tuple(ranges)))
                ranges, room = [], split_size
    if ranges:
        partitions.append(ScanPartition(tuple(ranges)))
    return partitions
