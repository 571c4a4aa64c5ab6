"""Rendering hosts and message ids from a record's stored host bytes (docs/format/commitlog.md, "Hosts").

Hosts render as ``ip:port`` the way Java prints an ``InetSocketAddress`` (IPv6 in brackets, every group
printed, no ``::`` shortening); ``msg_id`` = hex(store address, store port, physical offset), RocketMQ's
``MessageDecoder.createMessageId``. Pure and compiled: ``host_columns`` renders all three in one pass per record,
writing Arrow-layout buffers (int32 offsets + ASCII bytes) through unsigned indices (numba's negative-index
handling on every byte would double the cost); runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec.commitlog import FLAG_BORNHOST_V6, FLAG_STOREHOST_V6, be32
from rocketstore_spark.codec.native import PREFETCH_AHEAD, byte_at, prefetch

MSG_ID_V4 = 32          # hex digits: 4-byte address, port, offset
MSG_ID_V6 = 56          # 16-byte address, port, offset
HOST_MAX = 48           # "[" + 8 groups of <= 4 hex digits + 7 ":" + "]:" + 10 port digits
WANT_BORN_HOST = 0
WANT_STORE_HOST = 1
WANT_MSG_ID = 2


@numba.njit(cache=True, nogil=True, inline="always")
def _hex_digit(v, upper):
    return np.uint8(v + (48 if v < 10 else (55 if upper else 87)))


@numba.njit(cache=True, nogil=True, inline="always")
def _write_uint(out, o, v):
    """Decimal digits of v >= 0 at out[o:], returns the new end (no allocation: runs per record)."""
    d = np.uint64(1)
    t = v
    while t >= 10:
        t //= 10
        d += np.uint64(1)
    for i in range(d):
        out[o + d - np.uint64(1) - np.uint64(i)] = np.uint8(48 + v % 10)
        v //= 10
    return o + d


@numba.njit(cache=True, nogil=True, inline="always")
def _write_host(out, o, buf, p, v6):
    """ip:port of the host stored at buf[p:] at out[o:] (unsigned o); returns the new end."""
    one = np.uint64(1)
    if v6:
        out[o] = 91                                     # [
        o += one
        for g in range(8):
            v = (np.int64(byte_at(buf, p + 2 * g)) << 8) | byte_at(buf, p + 2 * g + 1)
            started = False
            for shift in (12, 8, 4, 0):
                nib = (v >> shift) & 15
                if nib != 0 or started or shift == 0:
                    out[o] = _hex_digit(nib, False)
                    o += one
                    started = True
            if g < 7:
                out[o] = 58                             # :
                o += one
        out[o] = 93                                     # ]
        out[o + one] = 58                               # :
        o += np.uint64(2)
        port = be32(buf, p + 16)
    else:
        for i in range(4):
            o = _write_uint(out, o, np.int64(byte_at(buf, p + i)))
            out[o] = 46 if i < 3 else 58                # . or :
            o += one
        port = be32(buf, p + 4)
    return _write_uint(out, o, port & 0xFFFFFFFF)


@numba.njit(cache=True, nogil=True)
def host_columns(buf, born_host_pos, store_host_pos, sys_flag, physical_offset, n, want):
    """born_host, store_host and msg_id of n records (``want``: WANT_* flags; unwanted outputs come back
    empty) as (born_offsets, born_data, store_offsets, store_data, id_offsets, id_data)."""
    w_born, w_store, w_id = want[WANT_BORN_HOST], want[WANT_STORE_HOST], want[WANT_MSG_ID]
    born_offsets = np.zeros(n + 1 if w_born else 1, dtype=np.int32)
    born = np.empty(n * HOST_MAX if w_born else 0, dtype=np.uint8)
    store_offsets = np.zeros(n + 1 if w_store else 1, dtype=np.int32)
    store = np.empty(n * HOST_MAX if w_store else 0, dtype=np.uint8)
    id_offsets = np.zeros(n + 1 if w_id else 1, dtype=np.int32)
    ids = np.empty(n * MSG_ID_V6 if w_id else 0, dtype=np.uint8)
    bo = so = io = np.uint64(0)
    one = np.uint64(1)
    for r in range(n):
        if r + PREFETCH_AHEAD < n:
            prefetch(buf, (born_host_pos if w_born else store_host_pos)[r + PREFETCH_AHEAD])
        flags = sys_flag[r]
        if w_born:
            bo = _write_host(born, bo, buf, born_host_pos[r], flags & FLAG_BORNHOST_V6)
            born_offsets[r + 1] = bo
        if w_store:
            so = _write_host(store, so, buf, store_host_pos[r], flags & FLAG_STOREHOST_V6)
            store_offsets[r + 1] = so
        if w_id:
            p = store_host_pos[r]
            for i in range(20 if flags & FLAG_STOREHOST_V6 else 8):     # address then port, as stored
                b = byte_at(buf, p + i)
                ids[io] = _hex_digit(b >> 4, True)
                ids[io + one] = _hex_digit(b & 15, True)
                io += np.uint64(2)
            v = physical_offset[r]
            for i in range(16):
                ids[io + np.uint64(15 - i)] = _hex_digit(v & 15, True)
                v >>= 4
            io += np.uint64(16)
            id_offsets[r + 1] = io
    return born_offsets, born[:bo], store_offsets, store[:so], id_offsets, ids[:io]
