"""Reading IndexFiles read-only (wherever called: Spark worker, CLI, tests).

The header is data, not truth: the number of entries read is bounded by what the file can hold, and
entries are read in chunks, so a corrupt ``index_count`` or a huge sparse file cannot exhaust memory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from rocketstore_spark.codec import indexfile

CHUNK_ENTRIES = 1 << 20            # 20 MiB per read


@dataclass
class IndexFileView:
    path: str
    file_size: int
    header: dict
    geometry: indexfile.Geometry | None     # None: the size does not fit the configured slot count

    @property
    def entry_count(self) -> int:
        """Entries 1 .. index_count-1 that the file really holds (entry 0 is never used)."""
        if self.geometry is None:
            return 0
        return max(0, min(self.header["index_count"], self.geometry.index_num) - 1)


def read_index_file(path: str, hash_slot_num: int) -> IndexFileView:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(indexfile.HEADER_SIZE)
    header = {k: int(v) for k, v in zip(indexfile.HEADER_DTYPE.names,
                                         indexfile.decode_header(head.ljust(indexfile.HEADER_SIZE, b"\0")).item())}
    return IndexFileView(path, size, header, indexfile.geometry_from_size(size, hash_slot_num))


def iter_entries(view: IndexFileView, chunk_entries: int = CHUNK_ENTRIES) -> Iterator[tuple[int, np.ndarray]]:
    """(index of the first entry, entries) chunks of entries 1 .. entry_count, in file order."""
    if not view.entry_count:
        return
    with open(view.path, "rb") as f:
        first = 1
        last = view.entry_count + 1
        f.seek(view.geometry.entries_start + indexfile.ENTRY_SIZE)
        while first < last:
            want = min(chunk_entries, last - first)
            data = f.read(want * indexfile.ENTRY_SIZE)
            got = len(data) // indexfile.ENTRY_SIZE
            if not got:
                return
            yield first, np.frombuffer(data[:got * indexfile.ENTRY_SIZE], dtype=indexfile.ENTRY_DTYPE)
            first += got
