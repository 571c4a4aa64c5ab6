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


def rebase_segment(segment: np.ndarray, positions: np.ndarray, base_offset: int, file_position: int = 0,
                   queue_offset_delta=0) -> np.ndarray:
    """A copy of ``segment`` whose records' PHYSICALOFFSET fields say it lies at ``file_position`` of the
    segment starting at ``base_offset``; ``queue_offset_delta`` (one for every record, or one each) is added to
    their QUEUEOFFSETs."""
    out = segment.copy()
    _put_int64(out, positions + 28, base_offset + file_position + positions)
    if np.any(queue_offset_delta):
        _put_int64(out, positions + 20, int64_at(segment, positions + 20) + queue_offset_delta)
    return out


def int64_at(segment: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The big-endian int64 fields at byte positions ``at`` of ``segment`` (e.g. records' QUEUEOFFSET: + 20)."""
    return np.frombuffer(segment[(at[:, None] + np.arange(8)).ravel()].tobytes(), ">i8").astype(np.int64)


def _put_int64(segment: np.ndarray, at: np.ndarray, value) -> None:
    value = np.asarray(value, np.int64)
    for b in range(8):                              # big-endian
        segment[at + b] = (value >> (56 - 8 * b)) & 0xFF


def tiled_segment_chunks(segment: np.ndarray, positions: np.ndarray, segment_size: int, base_offset: int = 0,
                         queue_offset_base: int | None = None):
    """Yields the bytes of one ``segment_size`` segment made of back-to-back copies of ``segment``'s records
    (its BLANK dropped), PHYSICALOFFSET rebased per copy, closed with a BLANK: a segment of any size (1 GiB
    for size tests) in bounded memory. Queue offsets repeat across copies — or, with ``queue_offset_base``, copy
    k's are its template's plus ``queue_offset_base + k * len(positions)`` (a template whose records are one
    queue's 0, 1, ... makes the segment hold that queue's next ``tile_copies * len(positions)`` offsets)."""
    end = template_end(segment, positions)
    copies = tile_copies(segment, positions, segment_size)
    for k in range(copies):
        delta = 0 if queue_offset_base is None else queue_offset_base + k * len(positions)
        yield rebase_segment(segment[:end], positions, base_offset, k * end, delta)
    tail = np.zeros(segment_size - copies * end, dtype=np.uint8)
    tail[:8] = np.frombuffer(encode_blank(len(tail)), dtype=np.uint8)
    yield tail


def template_end(segment: np.ndarray, positions: np.ndarray) -> int:
    """Where the last record of a template segment ends (its BLANK after that)."""
    last = int(positions[-1])
    return last + int(struct.unpack_from(">i", segment[last:last + 4].tobytes())[0])


def tile_copies(segment: np.ndarray, positions: np.ndarray, segment_size: int) -> int:
    """How many copies of the template's records ``tiled_segment_chunks`` puts in a segment of that size."""
    return (segment_size - 8) // template_end(segment, positions)


DLEDGER_HEADER = 48


def dledger_segment(segment: np.ndarray, positions: np.ndarray, segment_size: int, base_offset: int = 0,
                    first_index: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
    """A DLedger data file (docs/format/dledger.md) of ``segment_size`` bytes holding the records of a classic
    template segment, each framed in a 48-byte entry (magic 1, size, index from ``first_index``, term 0, pos,
    channel and CRCs 0, body length) with its PHYSICALOFFSET rewritten to pos + 48, as many as fit before the
    8 bytes DLedger keeps for its blank (magic -1, bytes left), which closes the file: (bytes, record positions,
    entries written)."""
    end = template_end(segment, positions)
    sizes = np.diff(np.append(positions, end))
    entry_ends = np.cumsum(sizes + DLEDGER_HEADER)
    n = int(np.searchsorted(entry_ends, segment_size - 8, side="right"))
    starts = np.concatenate([[0], entry_ends[:n - 1]]).astype(np.int64)
    headers = np.zeros((n, DLEDGER_HEADER), dtype=np.uint8)
    fields = np.zeros(n, dtype=[("magic", ">i4"), ("size", ">i4"), ("index", ">i8"), ("term", ">i8"), ("pos", ">i8"),
                                ("channel", ">i4"), ("chain_crc", ">i4"), ("body_crc", ">i4"), ("length", ">i4")])
    fields["magic"], fields["size"], fields["length"] = 1, sizes[:n] + DLEDGER_HEADER, sizes[:n]
    fields["index"], fields["pos"] = first_index + np.arange(n), base_offset + starts
    headers[:] = np.frombuffer(fields.tobytes(), dtype=np.uint8).reshape(n, DLEDGER_HEADER)
    records = starts + DLEDGER_HEADER
    bodies = np.split(segment[:int(positions[n - 1] + sizes[n - 1])], positions[1:n])
    out = np.zeros(segment_size, dtype=np.uint8)
    framed = np.concatenate([part for pair in zip(headers, bodies) for part in pair])
    out[:len(framed)] = framed
    rebased = rebase_segment(out, records, base_offset)
    tail = int(entry_ends[n - 1])
    rebased[tail:tail + 8] = np.frombuffer(struct.pack(">ii", -1, segment_size - tail), dtype=np.uint8)
    return rebased, records, n
