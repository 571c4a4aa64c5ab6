"""Test builders: stores written to disk from our encoder, and synthetic segments of any size.

The encoder (rocketstore_spark/codec/encode.py) stays pure; writing files and generating large data lives
here, for tests and for bench/.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from rocketstore_spark.codec.encode import Message, SegmentWriter, encode_blank
from rocketstore_spark.store.layout import offset_name


def write_segments(writer: SegmentWriter, commitlog_dir) -> list[Path]:
    """Writes every segment of ``writer`` as a 20-digit-named file; returns the paths."""
    d = Path(commitlog_dir)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for base, data in writer.segments.items():
        p = d / offset_name(base)
        p.write_bytes(bytes(data))
        paths.append(p)
    return paths


def write_store(commitlog_dir, messages, segment_size: int = 1 << 16) -> list[tuple[int, int]]:
    """Appends ``messages`` to a new CommitLog in ``commitlog_dir``: (physical offset, size) per message."""
    w = SegmentWriter(segment_size)
    placed = [w.append(m) for m in messages]
    write_segments(w, commitlog_dir)
    return placed


def synthetic_segment(segment_size: int, seed: int = 7, topics: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """One full CommitLog segment of realistic messages (bodies 64 B - 4 KiB, TAGS/KEYS/UNIQ_KEY/WAIT),
    closed with a BLANK: (bytes as uint8 array, record positions). For benchmarks and size tests."""
    import random
    rnd = random.Random(seed)
    w = SegmentWriter(segment_size)
    names = [f"bench_topic_{i}" for i in range(topics)]
    positions = []
    while w.current == 0:
        body = rnd.getrandbits(128).to_bytes(16, "big") * rnd.choice([4, 16, 40, 64, 100, 250])
        m = Message(topic=rnd.choice(names), body=body, queue_id=rnd.randrange(8),
                    properties={"TAGS": rnd.choice(["TagA", "TagB", "TagC"]), "KEYS": f"order-{rnd.randrange(10**9)}",
                                "UNIQ_KEY": f"{rnd.getrandbits(128):032X}", "WAIT": "true"})
        offset, _ = w.append(m)
        if offset < segment_size:
            positions.append(offset)
    return np.frombuffer(bytes(w.segments[0]), dtype=np.uint8).copy(), np.array(positions, dtype=np.int64)


def rebase_segment(segment: np.ndarray, positions: np.ndarray, base_offset: int, file_position: int = 0) -> np.ndarray:
    """A copy of ``segment`` whose records' PHYSICALOFFSET fields say it lies at ``file_position`` of the
    segment starting at ``base_offset``."""
    out = segment.copy()
    value = base_offset + file_position + positions
    for b in range(8):                              # big-endian int64 at record + 28
        out[positions + 28 + b] = (value >> (56 - 8 * b)) & 0xFF
    return out


def tiled_segment_chunks(segment: np.ndarray, positions: np.ndarray, segment_size: int, base_offset: int = 0):
    """Yields the bytes of one ``segment_size`` segment made of back-to-back copies of ``segment``'s records
    (its BLANK dropped), PHYSICALOFFSET rebased per copy, closed with a BLANK: a segment of any size (1 GiB
    for size tests) in bounded memory. Queue offsets repeat across copies."""
    last = int(positions[-1])
    end = last + int(struct.unpack_from(">i", segment[last:last + 4].tobytes())[0])
    copies = (segment_size - 8) // end
    for k in range(copies):
        yield rebase_segment(segment[:end], positions, base_offset, k * end)
    tail = np.zeros(segment_size - copies * end, dtype=np.uint8)
    tail[:8] = np.frombuffer(encode_blank(len(tail)), dtype=np.uint8)
    yield tail

