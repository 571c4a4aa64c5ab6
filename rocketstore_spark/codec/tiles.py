"""The walk of a batch of CommitLog records with the per-record work that reads what the walk just loaded, done
a tile of records at a time behind it: header fields (``commitlog.decode_header``) and, where bodies are read,
each body copied into its Arrow buffer and checked against its BODYCRC (``crc32``).

Why tiles: a batch (4 K records, ~6 MiB) does not fit in a core's L2; a pass over the whole batch after the walk
reads every line back from the shared cache or memory. A tile ends after TILE_BYTES of records or TILE_RECORDS
records, whichever comes first: its records are still in L1/L2 when their headers and bodies are taken (header
pass ≈ 3x, body copy ≈ 1.4x faster than whole-batch passes). Bounded by bytes, not records: on 1.3 KiB records
a 64 KiB tile took a 256 MiB segment's walk, headers and bodies in 35 ms against 41-43 ms for 512 records
(~0.7 MiB, whose copies and sources no longer fit L2 together) and 36 ms for 128 KiB. Pure and compiled; runs
wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec import native
from rocketstore_spark.codec.commitlog import (H_BODY_CRC, H_BODY_LEN, H_BODY_POS, STOP_LIMIT, TILE_FULL,
                                               decode_header, walk_span)
from rocketstore_spark.codec.crc32 import bodies_end, copy_checked

TILE_RECORDS = 512
TILE_BYTES = 64 << 10


@numba.njit(cache=True, nogil=True, inline="always")
def walk_tile(buf, buf_file_pos, buf_end, file_end, pos, limit, count, max_records, used, max_bytes, out_pos, stream,
              fetched, frame, want, out):
    """One tile of ``walk_tiles``' walk (``commitlog.walk_span`` of at most TILE_RECORDS records or TILE_BYTES
    bytes, with ``count`` records and ``used`` bytes walked before it) and the header fields ``want`` of its
    records decoded into ``out``. Returns walk_span's (count, next_position, stop, used, fetched)."""
    first = count
    count, pos, stop, used, fetched = walk_span(buf, buf_file_pos, buf_end, file_end, pos, limit, count,
                                                 min(count + TILE_RECORDS, max_records), used, max_bytes,
                                                 used + TILE_BYTES, out_pos, stream, fetched, frame)
    if count > first:
        decode_header(buf, buf_file_pos, out_pos, first, count, want, out)
    return count, pos, stop, used, fetched


@numba.njit(cache=True, nogil=True)
def walk_tiles(buf, buf_file_pos, file_end, start, limit, max_records, max_bytes, out_pos, stream, want, out,
               bodies, body_offsets, body_data, body_ok, frame=0):
    """``commitlog.walk`` from ``start``, and for each tile of records walked: their header fields into ``out``
    (``decode_header``; arrays at least ``max_records`` long) and, with ``bodies`` (``want`` then includes
    body_pos, body_len and body_crc), their bodies appended to ``body_data`` at ``body_offsets`` (int32, length
    max_records + 1) with ``body_ok[r]``: does the copy's CRC match BODYCRC (an empty body passes, as in
    RocketMQ). ``body_data`` grows (doubling) when a batch's bodies outgrow it. ``frame``: a DLedger segment's
    entry header (``commitlog.walk_span``). Returns (count,
    next_position, Stop, body_data)."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    buf_end = buf_file_pos + buf.shape[0]
    pos = start
    count = 0
    used = 0
    fetched = start - buf_file_pos
    if bodies:
        body_offsets[0] = 0
    o = 0
    while True:
        first = count
        count, pos, stop, used, fetched = walk_tile(buf, buf_file_pos, buf_end, file_end, pos, limit, count,
                                                     max_records, used, max_bytes, out_pos, stream, fetched, frame,
                                                     want, out)
        if count > first:
            if bodies:
                body_pos, body_len, body_crc = out[H_BODY_POS], out[H_BODY_LEN], out[H_BODY_CRC]
                need = bodies_end(body_len, first, count, o)
                if need > body_data.shape[0]:
                    grown = np.empty(max(need, 2 * body_data.shape[0]), dtype=np.uint8)
                    native.check_write(0, o, grown.shape[0])
                    native.memcpy(grown.ctypes.data, body_data.ctypes.data, o)
                    body_data = grown
                o = copy_checked(buf, body_pos, body_len, body_crc, first, count, body_data, body_offsets, body_ok, o)
        if stop != TILE_FULL:
            return count, pos, stop, body_data
        if count >= max_records:
            return count, pos, STOP_LIMIT, body_data
