"""IndexFile (docs/format/indexfile.md): a 40-byte header, ``hash_slot_num`` int32 slots, ``index_num`` 20-byte
entries; all big-endian. The geometry comes from the broker's configuration (maxHashSlotNum, maxIndexNum)
and is not stored in the file: ``geometry_from_size`` recovers it when the slot count is known, and
``infer_slot_counts`` finds the slot counts the file's own entries are consistent with when it is not.

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
MAX_FILE_SIZE = 2**31 - 1          # IndexFile's fileTotalSize is a Java int: no larger file is RocketMQ's
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


def slot_count_candidates(file_size: int, min_entries: int = 1) -> np.ndarray:
    """Every slot count ``s >= 1`` for which ``file_size = 40 + 4s + 20n`` with ``n >= min_entries``."""
    rest = file_size - HEADER_SIZE
    if rest <= 0 or rest % SLOT_SIZE:
        return np.zeros(0, dtype=np.int64)
    first = (rest // SLOT_SIZE) % 5 or 5            # 4s = rest (mod 20)  <=>  s = rest / 4 (mod 5)
    last = (rest - ENTRY_SIZE * min_entries) // SLOT_SIZE
    return np.arange(first, last + 1, 5, dtype=np.int64)


def _int32_at(data: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Big-endian int32 values of ``data`` (uint8) at ``positions`` (gathered, so ``data`` may be a mmap)."""
    raw = data[positions[:, None] + np.arange(4)]
    return np.ascontiguousarray(raw).view(">i4").ravel().astype(np.int64)


def infer_slot_counts(data: np.ndarray, index_count: int, verify_entries: int = 256,
                      chunk: int = 1 << 20) -> list[int]:
    """The slot counts an IndexFile's contents are consistent with (``data``: the whole file as uint8).

    Every slot count the size allows is tried; the newest entry (``index_count - 1``) must be the head of
    its own slot, then the newest ``verify_entries`` entries must each have a non-negative hash and time
    difference, a previous entry in the same slot and older than themselves, and a slot head at least as
    new. Entry 0 is never written and must be zero. Empty when ``index_count < 2`` (no entry to go by).
    """
    newest = int(index_count) - 1
    if newest < 1:
        return []
    candidates = slot_count_candidates(len(data), newest + 1)
    survivors = []
    for i in range(0, len(candidates), chunk):
        s = candidates[i:i + chunk]
        entry = HEADER_SIZE + SLOT_SIZE * s + ENTRY_SIZE * newest
        key_hash = _int32_at(data, entry)
        prev = _int32_at(data, entry + 16)
        ok = (key_hash >= 0) & (prev >= 0) & (prev < newest)
        s, key_hash = s[ok], key_hash[ok]
        heads = _int32_at(data, HEADER_SIZE + SLOT_SIZE * (key_hash % s))
        survivors.extend(int(x) for x in s[heads == newest])
    return [s for s in survivors if entries_consistent(data, s, newest, verify_entries)]


def entries_consistent(data: np.ndarray, slots: int, newest: int, count: int = 256) -> bool:
    """Whether entries ``newest - count + 1 .. newest`` of ``data`` (uint8) read with ``slots`` slots form
    well-made slot chains (see ``infer_slot_counts``), and entry 0 is unused."""
    start = HEADER_SIZE + SLOT_SIZE * slots
    if data[start:start + ENTRY_SIZE].any():
        return False
    first = max(1, newest - count + 1)
    raw = np.asarray(data[start + ENTRY_SIZE * first:start + ENTRY_SIZE * (newest + 1)])
    entries = np.frombuffer(raw.tobytes(), dtype=ENTRY_DTYPE)
    idx = np.arange(first, newest + 1)
    key_hash = entries["key_hash"].astype(np.int64)
    prev = entries["prev_index"].astype(np.int64)
    if (key_hash < 0).any() or (entries["time_diff"] < 0).any() or (prev < 0).any() or (prev >= idx).any():
        return False
    slot = key_hash % slots
    if (_int32_at(data, HEADER_SIZE + SLOT_SIZE * slot) < idx).any():
        return False
    chained = prev > 0
    prev_hash = _int32_at(data, start + ENTRY_SIZE * prev[chained])
    return bool(((prev_hash >= 0) & (prev_hash % slots == slot[chained])).all())


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
