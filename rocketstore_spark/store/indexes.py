"""Reading IndexFiles read-only (wherever called: Spark worker, CLI, tests)."""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from rocketstore_spark.codec import indexfile


@dataclass
class IndexFileView:
    path: str
    file_size: int
    header: dict
    geometry: indexfile.Geometry | None     # None: the size does not fit the configured slot count
    entries: np.ndarray                     # entries 1 .. index_count-1 (entry 0 is never used)


def read_index_file(path: str, hash_slot_num: int, entries: bool = True) -> IndexFileView:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(indexfile.HEADER_SIZE)
        header = {k: int(v) for k, v in zip(indexfile.HEADER_DTYPE.names,
                                             indexfile.decode_header(head.ljust(indexfile.HEADER_SIZE, b"\0")).item())}
        geometry = indexfile.geometry_from_size(size, hash_slot_num)
        found = np.zeros(0, dtype=indexfile.ENTRY_DTYPE)
        if entries and geometry is not None and header["index_count"] > 1:
            count = header["index_count"]
            f.seek(geometry.entries_start)
            data = f.read(count * indexfile.ENTRY_SIZE)
            found = np.frombuffer(data[: len(data) // indexfile.ENTRY_SIZE * indexfile.ENTRY_SIZE],
                                  dtype=indexfile.ENTRY_DTYPE)[1:count]
    return IndexFileView(path, size, header, geometry, found)
