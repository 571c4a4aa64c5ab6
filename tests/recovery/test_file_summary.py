"""``rocketmq.consumequeue.file_summary`` (numpy over a ConsumeQueue file's held entries) against its
definition written entry by entry from RocketMQ's ``ConsumeQueue.recover`` walk: an entry is valid when its
offset is >= 0 and its size > 0; the walk stops at the first invalid one. On random entries (offsets and sizes
of every sign, fillers, runs of zeros) and on every ConsumeQueue file of the golden stores RocketMQ wrote."""
from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec.consumequeue import FILLER_SIZE, decode_entries
from rocketstore_spark.rocketmq.consumequeue import file_summary
from rocketstore_spark.store.queues import read_held
from tests.golden.goldens import GOLDENS
from tests.strategies import INT32, INT64


def by_definition(data: bytes) -> list:
    """[entries, valid before the first invalid, end of the last valid, first offset, largest valid offset]."""
    entries = [struct.unpack_from(">qiq", data, at) for at in range(0, len(data) // 20 * 20, 20)]
    n = next((i for i, (offset, size, _) in enumerate(entries) if offset < 0 or size <= 0), len(entries))
    valid = entries[:n]
    return [len(entries), n, valid[-1][0] + valid[-1][1] if valid else -1, entries[0][0] if entries else None,
            max(offset for offset, _, _ in valid) if valid else -1]


ENTRY = st.one_of(
    st.tuples(st.integers(0, 1 << 40), st.integers(1, 1 << 22), INT64),                  # a message's entry
    st.tuples(INT64, INT32, INT64),                                                      # anything
    st.just((0, FILLER_SIZE, 0)),                                                        # a filler
    st.just((0, 0, 0)))                                                                  # preallocated zeros


@settings(max_examples=300, deadline=None)
@given(st.lists(ENTRY, max_size=60), st.integers(0, 19))
def test_the_compiled_summary_is_the_walk_entry_by_entry(entries, torn):
    data = b"".join(struct.pack(">qiq", *e) for e in entries) + bytes(torn)       # a torn last entry is not one
    assert file_summary(decode_entries(data)) == by_definition(data)


def test_every_golden_queue_file_summarizes_as_the_walk():
    files = sorted({p for g in GOLDENS for p in (g.store / "consumequeue").glob("*/*/*")})
    assert len(files) > 100
    for path in files:
        held = read_held(str(path))
        assert file_summary(held) == by_definition(held.tobytes()), path
        # a view into a larger array, its fields made native (np.concatenate does): the same
        assert file_summary(np.concatenate([held, held])[:len(held)]) == by_definition(held.tobytes()), path
        assert file_summary(held[::-1][::-1]) == by_definition(held.tobytes()), path
