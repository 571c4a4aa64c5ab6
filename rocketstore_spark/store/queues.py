"""Reading ConsumeQueue and BatchConsumeQueue directories read-only (wherever called: Spark worker, CLI, tests)."""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from rocketstore_spark.codec import batchconsumequeue, consumequeue
from rocketstore_spark.store.layout import StoreMap


@dataclass
class QueueChunk:
    """The written entries of one ConsumeQueue file."""
    file: str
    entries: np.ndarray           # consumequeue.ENTRY_DTYPE
    queue_offsets: np.ndarray     # int64, = (file CQ byte offset + position) / 20
    file_positions: np.ndarray    # int64
    fillers: np.ndarray           # bool


CHUNK_ENTRIES = 1 << 20            # 20 MiB per read: memory stays bounded whatever a file's size says


def read_queue(queue_dir: str, chunk_entries: int = CHUNK_ENTRIES) -> Iterator[QueueChunk]:
    """Each file's entries before the first one failing RocketMQ's test (offset >= 0 and size > 0), in
    chunks of at most ``chunk_entries``."""
    for path, cq_offset in StoreMap.queue_files(queue_dir):
        with open(path, "rb") as f:
            position = 0
            while True:
                data = f.read(chunk_entries * consumequeue.ENTRY_SIZE)
                entries = consumequeue.decode_entries(data)
                n = consumequeue.written_count(entries)
                if n:
                    entries = entries[:n]
                    positions = position + np.arange(n, dtype=np.int64) * consumequeue.ENTRY_SIZE
                    yield QueueChunk(path, entries, (cq_offset + positions) // consumequeue.ENTRY_SIZE, positions,
                                     consumequeue.is_filler(entries))
                if n < chunk_entries:          # the end of the written entries, or of the file
                    break
                position += len(data)


@dataclass
class BatchQueueChunk:
    """The written units of one BatchConsumeQueue file."""
    file: str
    units: np.ndarray             # batchconsumequeue.UNIT_DTYPE
    unit_indexes: np.ndarray      # int64, = (file byte offset + position) / 46: the unit's place in its queue
    file_positions: np.ndarray    # int64


def read_batch_queue(queue_dir: str, chunk_units: int = CHUNK_ENTRIES) -> Iterator[BatchQueueChunk]:
    """Each file's units before the first one failing RocketMQ's recovery test, in chunks of at most
    ``chunk_units``."""
    size = batchconsumequeue.UNIT_SIZE
    for path, file_offset in StoreMap.queue_files(queue_dir):
        with open(path, "rb") as f:
            position = 0
            while True:
                data = f.read(chunk_units * size)
                units = batchconsumequeue.decode_units(data)
                n = batchconsumequeue.written_count(units)
                if n:
                    positions = position + np.arange(n, dtype=np.int64) * size
                    yield BatchQueueChunk(path, units[:n], (file_offset + positions) // size, positions)
                if n < chunk_units:
                    break
                position += len(data)


def data_end(fd: int, size: int) -> int:
    """Where the last data of the file open at ``fd`` (``size`` bytes) ends: past it the file is a hole, zeros
    the filesystem does not store (a broker's preallocated ConsumeQueue file, mapped at its full size, and our
    rebuild's are sparse: a 6 MB file holding a few thousand entries stores those). ``size`` where the
    filesystem does not say (SEEK_DATA unsupported: every byte then counts as data) or the file is fragmented
    beyond a few hundred regions."""
    end = position = 0
    for _ in range(512):
        try:
            start = os.lseek(fd, position, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:         # only a hole from here on
                return end
            return size
        position = end = os.lseek(fd, start, os.SEEK_HOLE)
        if position >= size:
            return size
    return size


def held_file_count(path: str) -> int:
    """``consumequeue.held_count`` of the ConsumeQueue file at ``path``, reading back from the end of its data
    (``data_end``) rather than through the zeros of its preallocated tail."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        count = size // consumequeue.ENTRY_SIZE
        return consumequeue.held_count(
            count, lambda start, end: consumequeue.decode_entries(
                os.pread(fd, (end - start) * consumequeue.ENTRY_SIZE, start * consumequeue.ENTRY_SIZE)),
            scan_from=-(-data_end(fd, size) // consumequeue.ENTRY_SIZE))
    finally:
        os.close(fd)


def read_held(path: str) -> np.ndarray:
    """The entries of the ConsumeQueue file at ``path`` that ``consumequeue.held`` keeps (writable, over a buffer
    of their own), as ``held_file_count`` counts them, in one read: the entries up to the end of its data and the
    one after it (all that count looks at, and all it can keep)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        count = size // consumequeue.ENTRY_SIZE
        scan_from = -(-data_end(fd, size) // consumequeue.ENTRY_SIZE)
        want = min(count, scan_from + 1) * consumequeue.ENTRY_SIZE
        # read into a buffer the entries are then a view of: a copy of a packed 20-byte structured array is
        # an item at a time (1.8 GB/s here), twice the read itself
        buf = np.empty(want, dtype=np.uint8)
        got = 0
        while got < want:                   # a short read (a file cut meanwhile reads as far as it goes)
            more = os.preadv(fd, [buf[got:]], got)
            if not more:
                break
            got += more
        entries = consumequeue.decode_entries(buf[:got])
        n = consumequeue.held_count(len(entries), lambda start, end: entries[start:end],
                                    scan_from=min(scan_from, len(entries)))
        return entries[:n]
    finally:
        os.close(fd)


def unreadable_queue_file(path: str, cq_offset: int, size: int | None = None) -> tuple[str, str] | None:
    """(check id, why) for a ConsumeQueue file no reader should read (its name or size is beyond anything RocketMQ
    writes: reading it has no bound), else None; ``size``: its size, when known already."""
    size = os.path.getsize(path) if size is None else size
    if cq_offset + size >= 2**63:                          # queue offsets there would overflow int64
        return "consumequeue.file_gap", f"name {cq_offset} is beyond any queue byte offset (int64): the file is not read"
    if size > consumequeue.MAX_FILE_SIZE:                  # a sparse or foreign file: reading it has no bound
        return "consumequeue.file_size", (f"{size} bytes: larger than any ConsumeQueue file RocketMQ writes (its "
                                          f"size is a Java int): the file is not read")
    return None
