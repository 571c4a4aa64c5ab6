"""``store.queues.held_file_count`` / ``read_held``: a ConsumeQueue file is read back from the end of its data
(SEEK_DATA/SEEK_HOLE), not through the zeros of its preallocated tail — with the count ``consumequeue.held``
gives over every byte of the file, holes or not (a hole reads as zeros: skipping it changes nothing)."""
from __future__ import annotations

import numpy as np
import pytest

from rocketstore_spark.codec.consumequeue import (ENTRY_DTYPE, ENTRY_SIZE, FIRST_STEP, HELD_STEP, decode_entries,
                                                  encode_entries, held, held_count)
from rocketstore_spark.store.queues import held_file_count, read_held

FILE_ENTRIES = 300_000          # RocketMQ's default mappedFileSizeConsumeQueue: 6,000,000 bytes


def entries(n: int, first: int = 0) -> bytes:
    phy = np.arange(first, first + n, dtype=np.int64) * 100
    return encode_entries(phy, np.full(n, 100, np.int32), np.zeros(n, np.int64))


@pytest.mark.parametrize("layout", [
    [],                                         # every byte a hole
    [(0, 1)],                                   # one entry, then 6 MB of hole
    [(0, 40_000)],                              # a queue's first file, partly written
    [(0, 10), (150_000, 3)],                    # data after a hole in the middle (a torn preallocation)
    [(0, FILE_ENTRIES)],                        # full
    [(FILE_ENTRIES - 1, 1)],                    # only the last entry
])
@pytest.mark.parametrize("dense", [False, True])
def test_a_sparse_or_dense_file_holds_what_held_says(tmp_path, layout, dense):
    path = tmp_path / "00000000000000000000"
    with open(path, "wb") as f:
        if dense:
            f.write(bytes(FILE_ENTRIES * ENTRY_SIZE))
        f.truncate(FILE_ENTRIES * ENTRY_SIZE)
        for at, n in layout:
            f.seek(at * ENTRY_SIZE)
            f.write(entries(n, at))
    whole = held(decode_entries(path.read_bytes()))
    assert held_file_count(str(path)) == len(whole)
    got = read_held(str(path))
    assert got.tobytes() == whole.tobytes() and got.flags.writeable


def test_a_file_not_a_whole_number_of_entries(tmp_path):
    path = tmp_path / "00000000000000000000"
    path.write_bytes(entries(3) + b"\x01\x02")
    assert held_file_count(str(path)) == 3 and len(read_held(str(path))) == 3


def test_held_count_is_its_definition_whatever_the_layout():
    """``consumequeue.held_count`` against its definition, an entry at a time: the entries up to the last one with
    any byte not zero, and one more (capped at the count; one of an all-zero file) — entries zeroed in the
    middle, a last entry whose only set byte is in its tagsCode, counts across the read steps (FIRST_STEP, four
    times more, HELD_STEP), and ``scan_from`` anywhere at or past the data."""
    rng = np.random.default_rng(28)
    sizes = [0, 1, 2, FIRST_STEP - 1, FIRST_STEP, FIRST_STEP + 1, 4 * FIRST_STEP + 3, HELD_STEP + 5, 3 * HELD_STEP]
    for n in sizes + [int(x) for x in rng.integers(0, 3 * HELD_STEP, 40)]:
        for _ in range(4):
            e = np.zeros(n, ENTRY_DTYPE)
            k = int(rng.integers(0, n + 1)) if n else 0
            if k:
                e["size"][:k] = rng.integers(1, 1 << 20, k)
                e["size"][:k][rng.random(k) < 0.3] = 0
                if rng.random() < 0.5:
                    e["tags_code"][k - 1], e["size"][k - 1] = 1, 0
            nonzero = np.flatnonzero(e.view(np.uint8).reshape(n, ENTRY_SIZE).any(axis=1)).tolist()
            want = min(n, nonzero[-1] + 2) if nonzero else min(n, 1)
            scan_from = None if rng.random() < 0.5 else int(rng.integers(nonzero[-1] + 1 if nonzero else 0, n + 2))
            assert held_count(n, lambda a, b: e[a:b], scan_from=scan_from) == want, (n, k, scan_from)
