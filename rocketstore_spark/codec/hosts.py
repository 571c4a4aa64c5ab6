"""Rendering hosts and message ids from a record's stored host bytes (docs/format/commitlog.md, "Hosts").

Hosts render as ``ip:port`` the way Java prints an ``InetSocketAddress`` (IPv6 in brackets, every group
printed, no ``::`` shortening); ``msg_id`` = hex(store address, store port, physical offset), RocketMQ's
``MessageDecoder.createMessageId``. Pure and compiled; runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec.commitlog import FLAG_STOREHOST_V6, be32

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8).copy()
_HEX_LOWER = np.frombuffer(b"0123456789abcdef", dtype=np.uint8).copy()
MSG_ID_V4 = 32          # hex digits: 4-byte address, port, offset
MSG_ID_V6 = 56          # 16-byte address, port, offset


@numba.njit(cache=True, nogil=True)
def msg_ids(buf, store_host_pos, sys_flag, physical_offset, n):
    offsets = np.zeros(n + 1, dtype=np.int32)
    for r in range(n):
        offsets[r + 1] = offsets[r] + (MSG_ID_V6 if sys_flag[r] & FLAG_STOREHOST_V6 else MSG_ID_V4)
    out = np.empty(offsets[n], dtype=np.uint8)
    for r in range(n):
        o = offsets[r]
        addr_len = 16 if sys_flag[r] & FLAG_STOREHOST_V6 else 4
        for i in range(addr_len + 4):          # address then port, as stored
            b = buf[store_host_pos[r] + i]
            out[o] = _HEX[b >> 4]
            out[o + 1] = _HEX[b & 15]
            o += 2
        v = physical_offset[r]
        for i in range(16):
            out[o + 15 - i] = _HEX[v & 15]
            v >>= 4
    return offsets, out


@numba.njit(cache=True, nogil=True, inline="always")
def _write_uint(out, o, v):
    """Decimal digits of v >= 0 at out[o:], returns the new end (no allocation: runs per record)."""
    d = 1
    t = v
    while t >= 10:
        t //= 10
        d += 1
    for i in range(d - 1, -1, -1):
        out[o + i] = 48 + v % 10
        v //= 10
    return o + d


@numba.njit(cache=True, nogil=True)
def hosts(buf, host_pos, sys_flag, v6_bit, n):
    out = np.empty(n * 48, dtype=np.uint8)
    offsets = np.zeros(n + 1, dtype=np.int32)
    o = 0
    for r in range(n):
        p = host_pos[r]
        if sys_flag[r] & v6_bit:
            out[o] = 91                                     # [
            o += 1
            for g in range(8):
                v = (np.int64(buf[p + 2 * g]) << 8) | buf[p + 2 * g + 1]
                started = False
                for shift in (12, 8, 4, 0):
                    nib = (v >> shift) & 15
                    if nib != 0 or started or shift == 0:
                        out[o] = _HEX_LOWER[nib]
                        o += 1
                        started = True
                if g < 7:
                    out[o] = 58                             # :
                    o += 1
            out[o] = 93                                     # ]
            out[o + 1] = 58                                 # :
            o += 2
            port = be32(buf, p + 16)
        else:
            for i in range(4):
                o = _write_uint(out, o, buf[p + i])
                out[o] = 46 if i < 3 else 58                # . or :
                o += 1
            port = be32(buf, p + 4)
        o = _write_uint(out, o, port & 0xFFFFFFFF)
        offsets[r + 1] = o
    return offsets, out[:o]
