"""IndexFiles as RocketMQ's ``IndexService`` writes them (``IndexFile.putKey`` and the roll-over in
``retryGetAndCreateIndexFile``; docs/format/indexfile.md "Writing an entry").

Keys come in put order (``dispatch.index_keys``). A file takes ``index_num - 1`` entries; the next file's
header is pre-set from the previous file's end (begin = end = its end_phy_offset and end_timestamp), which is
why each file can be built alone once its slice of keys and its predecessor's last key are known. The first
file starts from an all-zero header (its first entry's time difference is 0).

File names are the one thing not reproducible: RocketMQ names a file by the wall-clock time it created it.
``rebuild.output.index_name`` gives a deterministic rule instead: the store time of the file's first entry,
``yyyyMMddHHmmssSSS`` in UTC, moved forward by a millisecond where needed so names strictly increase (the
broker loads IndexFiles in name order). Compare contents, not names, with what a broker wrote.

Pure and compiled (numba): ``put_keys`` writes into a caller-provided buffer (a memory map of the output
file, so a 420 MB file is never held twice) and resumes from the state its header holds, so keys can be
fed in batches; runs wherever called.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec.indexfile import ENTRY_SIZE, HEADER_SIZE, SLOT_SIZE, Geometry
from rocketstore_spark.codec.native import prefetch

INT32_MAX = 2**31 - 1
SLOT_AHEAD = 16                 # keys: how far ahead a key's hash slot is prefetched


def preset(buf: np.ndarray, end_phy: int, end_timestamp: int) -> None:
    """The header of a file rolled over from one that ended at (``end_phy``, ``end_timestamp``): begin and
    end both set to them, no entries yet. A first file keeps its all-zero header."""
    _store_be(buf, 0, np.int64(end_timestamp), 8)
    _store_be(buf, 8, np.int64(end_timestamp), 8)
    _store_be(buf, 16, np.int64(end_phy), 8)
    _store_be(buf, 24, np.int64(end_phy), 8)


def put_keys(buf: np.ndarray, geometry: Geometry, key_hash, physical_offset, store_timestamp) -> int:
    """Put keys into the IndexFile in ``buf`` (uint8, ``geometry.file_size`` bytes) as IndexFile.putKey
    does, continuing from the state in its header, until the file is full. Returns how many were put (the
    rest go to the next file)."""
    if len(buf) != geometry.file_size:
        raise ValueError(f"buffer of {len(buf)} bytes for an IndexFile of {geometry.file_size}")
    return int(_put_keys(buf, geometry.hash_slot_num, geometry.index_num, np.asarray(key_hash, np.int64),
                         np.asarray(physical_offset, np.int64), np.asarray(store_timestamp, np.int64)))


@numba.njit(cache=True, nogil=True, inline="always")
def _store_be(buf, pos, value, width):
    for k in range(width):
        buf[pos + k] = (value >> (8 * (width - 1 - k))) & 0xFF


@numba.njit(cache=True, nogil=True, inline="always")
def _load_be32(buf, pos):
    v = np.int64(0)
    for k in range(4):
        v = (v << 8) | buf[pos + k]
    return v - (1 << 32) if v >= (1 << 31) else v


@numba.njit(cache=True, nogil=True, inline="always")
def _load_be64(buf, pos):
    return (_load_be32(buf, pos) << 32) | (_load_be32(buf, pos + 4) & 0xFFFFFFFF)


@numba.njit(cache=True, nogil=True)
def _put_keys(buf, slots, index_num, key_hash, physical_offset, store_timestamp):
    begin_ts, end_ts = _load_be64(buf, 0), _load_be64(buf, 8)
    begin_phy, end_phy = _load_be64(buf, 16), _load_be64(buf, 24)
    hash_slot_count = _load_be32(buf, 32)
    index_count = max(_load_be32(buf, 36), 1)          # 0 in a new file, read as 1
    entries_start = HEADER_SIZE + SLOT_SIZE * slots
    put = 0
    n = len(key_hash)
    for i in range(n):
        if index_count >= index_num:                     # full: putKey fails, the caller rolls over
            break
        if i + SLOT_AHEAD < n:
            # the slots are read in random order: start loading a later key's slot so its miss overlaps this one's
            prefetch(buf, HEADER_SIZE + SLOT_SIZE * (key_hash[i + SLOT_AHEAD] % slots))
        h = key_hash[i]
        slot_pos = HEADER_SIZE + SLOT_SIZE * (h % slots)
        prev = _load_be32(buf, slot_pos)
        if prev <= 0 or prev > index_count:
            prev = 0
        diff = np.int64(0)
        if begin_ts > 0:
            diff = store_timestamp[i] - begin_ts
            diff = diff // 1000 if diff >= 0 else -((-diff) // 1000)       # Java's long division
            diff = min(max(diff, 0), INT32_MAX)
        entry = entries_start + ENTRY_SIZE * index_count
        _store_be(buf, entry, h, 4)
        _store_be(buf, entry + 4, physical_offset[i], 8)
        _store_be(buf, entry + 12, diff, 4)
        _store_be(buf, entry + 16, prev, 4)
        _store_be(buf, slot_pos, index_count, 4)
        if index_count <= 1:
            begin_phy = physical_offset[i]
            begin_ts = store_timestamp[i]
        if prev == 0:
            hash_slot_count += 1
        index_count += 1
        end_phy = physical_offset[i]
        end_ts = store_timestamp[i]
        put += 1
    _store_be(buf, 0, begin_ts, 8)
    _store_be(buf, 8, end_ts, 8)
    _store_be(buf, 16, begin_phy, 8)
    _store_be(buf, 24, end_phy, 8)
    _store_be(buf, 32, hash_slot_count, 4)
    _store_be(buf, 36, index_count, 4)
    return put
