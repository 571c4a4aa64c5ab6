"""IndexFile (docs/format/indexfile.md): a 40-byte header, ``hash_slot_num`` int32 slots, ``index_num`` 20-byte
entries; all big-endian. The geometry comes from the broker's configuration (maxHashSlotNum, maxIndexNum),
not from the file: ``geometry_from_size`` recovers it when the slot count is known.

    header:  begin_timestamp int64 | end_timestamp int64 | begin_phy_offset int64 | end_phy_offset int64
             | hash_slot_count int32 | index_count int32            (index_count = entries + 1)
    slot s:  int32 at 40 + 4*s — the newest entry whose key hashes to s (0 = empty)
    entry i: at 40 + 4*slots + 20*i, i >= 1 (entry 0 is never used):
             key_hash int32 (abs(hashCode)) | phy_offset int64 | time_diff int32 (s) | prev_index int32

Pure; numpy only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HEADER_SIZE = 40
SLOT_SIZE = 4
ENTRY_SIZE = 20
DEFAULT_HASH_SLOT_NUM = 5_000_000
DEFAULT_INDEX_NUM = 20_000_000
HEADER_DTYPE = np.dtype([("begin_timestamp", ">i8"), ("end_timestamp", ">i8"), ("begin_phy_offset", ">i8"),
                         ("end_phy_offset", ">i8"), ("hash_slot_count", ">i4"), ("index_count", ">i4")])
ENTRY_DTYPE = np.dtype([("key_hash", ">i4"), ("phy_offset", ">i8"), ("time_diff", ">i4"), ("prev_index", ">i4")])
assert HEADER_DTYPE.itemsize == HEADER_SIZE and ENTRY_DTYPE.itemsize == ENTRY_SIZE


@dataclass(frozen=True)
class Geometry:
    hash_slot_num: int = DEFAULT_HASH_SLOT_NUM
    index_num: int = DEFAULT_INDEX_NUM

    @property
    def file_size(self) -> int:
        return HEADER_SIZE + self.hash_slot_num * SLOT_SIZE + self.index_num * ENTRY_SIZE

    @property
    def entries_start(self) -> int:
        return HEADER_SIZE + self.hash_slot_num * SLOT_SIZE


def geometry_from_size(file_size: int, hash_slot_num: int = DEFAULT_HASH_SLOT_NUM) -> Geometry | None:
    rest = file_size - HEADER_SIZE - hash_slot_num * SLOT_SIZE
    if rest <= 0 or rest % ENTRY_SIZE:
        return None
    return Geometry(hash_slot_num, rest // ENTRY_SIZE)


def decode_header(buf) -> np.ndarray:
    return np.frombuffer(buf, dtype=HEADER_DTYPE, count=1)[0]


def decode_slots(buf, geometry: Geometry) -> np.ndarray:
    return np.frombuffer(buf, dtype=">i4", count=geometry.hash_slot_num, offset=HEADER_SIZE)


def decode_entries(buf, geometry: Geometry, count: int) -> np.ndarray:
    """Entries 0 .. count-1 (clamped to what the buffer holds); entry 0 is the unused one."""
    available = max(0, (len(buf) - geometry.entries_start) // ENTRY_SIZE)
    return np.frombuffer(buf, dtype=ENTRY_DTYPE, count=min(count, available, geometry.index_num),
                         offset=geometry.entries_start)


def encode(header: dict, slots: np.ndarray, entries: np.ndarray, geometry: Geometry) -> bytes:
    out = bytearray(geometry.file_size)
    h = np.zeros(1, dtype=HEADER_DTYPE)
    for k, v in header.items():
        h[k] = v
    out[:HEADER_SIZE] = h.tobytes()
    out[HEADER_SIZE:geometry.entries_start] = np.asarray(slots, dtype=">i4").tobytes()
    e = np.asarray(entries, dtype=ENTRY_DTYPE).tobytes()
    out[geometry.entries_start:geometry.entries_start + len(e)] = e
    return bytes(out)
