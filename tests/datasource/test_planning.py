"""Scan planning: every byte of every selected segment in exactly one range; partitions of equal size."""
from __future__ import annotations

from hypothesis import given, strategies as st

from rocketstore_spark.datasource.planning import (MAX_AUTO_SPLIT, MIN_AUTO_SPLIT, auto_split_size,
                                                   plan_partitions)
from rocketstore_spark.store.discovery import Segment


def _segments(sizes, holes=None):
    out, base = [], 0
    for i, size in enumerate(sizes):
        data_end = size - (holes[i] % (size + 1) if holes and i < len(holes) else 0)
        out.append((f"s{i % 2}", Segment(f"/x/{i}/{base:020d}", base, size, data_end), i + 1 < len(sizes)))
        base += size
    return out


@given(st.lists(st.integers(0, 5000), max_size=12), st.integers(1, 3000), st.lists(st.integers(0, 5000)))
def test_ranges_cover_the_data_of_each_segment_exactly_once(sizes, split_size, holes):
    segments = _segments(sizes, holes)
    parts = plan_partitions(segments, split_size, parallelism=2)
    ranges = [r for p in parts for r in p.ranges]
    for store, seg, followed in segments:
        mine = [r for r in ranges if r.path == seg.path]
        assert all(r.store == store and r.base_offset == seg.base_offset and r.followed == followed for r in mine)
        covered = [(r.start, r.end) for r in mine]
        expected_start = 0
        for start, end in covered:                 # contiguous, in order, non-empty
            assert start == expected_start and end > start
            expected_start = end
        assert expected_start == seg.data_end      # an empty segment or a trailing hole has no range
    assert all(p.size == split_size for p in parts[:-1])
    assert not parts or 0 < parts[-1].size <= split_size


def test_auto_split_gives_one_partition_per_core_within_bounds():
    gib = 1 << 30
    segments = _segments([gib // 4] * 16)                     # 4 GiB of 256 MiB segments
    parts = plan_partitions(segments, None, parallelism=2)
    assert [p.size for p in parts] == [2 * gib, 2 * gib]
    assert [len(p.ranges) for p in parts] == [8, 8]
    assert auto_split_size(100 << 20, 64) == MIN_AUTO_SPLIT
    assert auto_split_size(1 << 40, 8) == MAX_AUTO_SPLIT
    assert auto_split_size(3 * gib, 3) == gib


@given(st.lists(st.integers(1, 5000), min_size=1, max_size=8), st.integers(1, 3000), st.integers(0, 40000))
def test_a_start_offset_plans_exactly_the_bytes_from_it_on(sizes, split_size, start_offset):
    """An incremental read from a watermark: nothing below it is planned, every data byte from it on once."""
    segments = _segments(sizes)
    ranges = [r for p in plan_partitions(segments, split_size, 2, start_offset) for r in p.ranges]
    planned = [(r.base_offset + r.start, r.base_offset + r.end) for r in ranges]
    assert all(lo >= start_offset for lo, _ in planned)
    want = sum(max(0, seg.base_offset + seg.data_end - max(start_offset, seg.base_offset))
               for _, seg, _ in segments)
    assert sum(hi - lo for lo, hi in planned) == want
    assert planned == sorted(planned) and all(a[1] <= b[0] for a, b in zip(planned, planned[1:]))
