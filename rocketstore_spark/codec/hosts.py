"""Rendering hosts and message ids from a record's stored host bytes (docs/format/commitlog.md, "Hosts").

Hosts render as ``ip:port`` the way Java prints an ``InetSocketAddress`` (IPv6 in brackets, every group
printed, no ``::`` shortening); ``msg_id`` = hex(store address, store port, physical offset), RocketMQ's
``MessageDecoder.createMessageId``. Pure and compiled: ``host_columns_into`` renders all three in one pass per record,
writing Arrow-layout buffers (int32 offsets + ASCII bytes); runs wherever records are decoded.

Why it is shaped this way (it runs per record on every full-schema read): digits come from tables (an octet's
decimal form and a byte's two hex digits, stored 8 or 2 bytes at a time), byte indices are unsigned (numba's
negative-index handling on every byte would double the cost), and a host whose stored bytes equal the
previous record's — the store host always, born hosts from the same producer — is copied from the previous
rendering instead of rendered again. Output buffers carry ``native.SPARE`` spare bytes for the 8-byte stores.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec import native
from rocketstore_spark.codec.checked import CHECKED
from rocketstore_spark.codec.commitlog import FLAG_BORNHOST_V6, FLAG_STOREHOST_V6, be32
from rocketstore_spark.codec.native import PREFETCH_AHEAD, byte_at, copy_at, load_le64, prefetch, store_le64
from rocketstore_spark.codec.record_schema import BY_NAME

# what host_columns_into renders: its ``want`` flags, one per HOST column of record_schema (its ``want``)
WANT_BORN_HOST, WANT_STORE_HOST, WANT_MSG_ID = (BY_NAME[name].want for name in ("born_host", "store_host", "msg_id"))

# octet v -> its decimal digits, little-endian in a uint64 (the rest zero), and their count
_OCTET = np.array([int.from_bytes(str(v).encode(), "little") for v in range(256)], dtype=np.uint64)
_OCTET_LEN = np.array([len(str(v)) for v in range(256)], dtype=np.uint64)
# byte v -> its two hex digits as stored (first digit first), upper case (msg_id), lower case (IPv6 groups)
_HEX_UPPER = np.array([int.from_bytes(f"{v:02X}".encode(), "little") for v in range(256)], dtype=np.uint64)


@numba.njit(cache=True, nogil=True, inline="always")
def _hex_digit(v):
    return np.uint8(v + (48 if v < 10 else 87))


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
                    out[o] = _hex_digit(nib)
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
            v = byte_at(buf, p + i)
            # the octet's digits, then '.' (or ':' after the last) right behind them, in one store
            sep = np.uint64(46 if i < 3 else 58)
            store_le64(out, o, _OCTET[v] | (sep << (np.uint64(8) * _OCTET_LEN[v])))
            o += _OCTET_LEN[v] + one
        port = be32(buf, p + 4)
    return _write_uint(out, o, port & 0xFFFFFFFF)


@numba.njit(cache=True, nogil=True, inline="always")
def _repeat(at, room, o, start, length):
    """Copy the previous record's rendering, ``length`` bytes at index ``start`` of the buffer at address
    ``at`` (``room`` bytes long), to index ``o`` (the source ends before it: start + length <= o); returns
    ``length``. By address (native.copy_at): integers cost no reference counting in the record loop."""
    return np.uint64(copy_at(at + np.intp(o), at + start, length, room - start, room - np.intp(o)))


@numba.njit(cache=True, nogil=True, inline="always")
def _same_host(buf, p, q, v6):
    """Do the hosts stored at buf[p:] and buf[q:] (address and port) hold the same bytes?"""
    if load_le64(buf, p) != load_le64(buf, q):
        return False
    if v6:
        return load_le64(buf, p + 8) == load_le64(buf, q + 8) and be32(buf, p + 16) == be32(buf, q + 16)
    return True


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def host_columns_into(buf, born_host_pos, store_host_pos, sys_flag, physical_offset, n, want, born_offsets, born,
                      store_offsets, store, id_offsets, ids):
    """born_host, store_host and msg_id of n records into the caller's buffers, for the outputs ``want`` (WANT_*
    flags) asks for: offsets n + 1, data n * record_schema.HOST_CHARS + native.SPARE (msg_id: n * MSG_ID_CHARS +
    native.SPARE). Returns the bytes written to each (born, store, ids)."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    w_born, w_store, w_id = want[WANT_BORN_HOST], want[WANT_STORE_HOST], want[WANT_MSG_ID]
    born_offsets[0] = store_offsets[0] = id_offsets[0] = 0
    # written through views without an owner (the arrays returned keep the memory alive), and by address where a
    # rendering repeats the previous record's (_repeat)
    born_w, store_w, ids_w = native.unowned(born), native.unowned(store), native.unowned(ids)
    born_at, store_at, ids_at = np.intp(born.ctypes.data), np.intp(store.ctypes.data), np.intp(ids.ctypes.data)
    born_room, store_room, ids_room = np.intp(born.shape[0]), np.intp(store.shape[0]), np.intp(ids.shape[0])
    bo = so = io = np.uint64(0)
    for r in range(n):
        if r + PREFETCH_AHEAD < n:
            prefetch(buf, (born_host_pos if w_born else store_host_pos)[r + PREFETCH_AHEAD])
        flags = sys_flag[r]
        if w_born:
            v6 = (flags & FLAG_BORNHOST_V6) != 0
            if r > 0 and v6 == ((sys_flag[r - 1] & FLAG_BORNHOST_V6) != 0) and \
                    _same_host(buf, born_host_pos[r], born_host_pos[r - 1], v6):
                prev = np.intp(born_offsets[r - 1])
                bo += _repeat(born_at, born_room, bo, prev, np.intp(born_offsets[r]) - prev)
            else:
                bo = _write_host(born_w, bo, buf, born_host_pos[r], v6)
            born_offsets[r + 1] = bo
        same_store = False
        if w_store or w_id:
            v6 = (flags & FLAG_STOREHOST_V6) != 0
            same_store = r > 0 and v6 == ((sys_flag[r - 1] & FLAG_STOREHOST_V6) != 0) and \
                _same_host(buf, store_host_pos[r], store_host_pos[r - 1], v6)
        if w_store:
            if same_store:
                prev = np.intp(store_offsets[r - 1])
                so += _repeat(store_at, store_room, so, prev, np.intp(store_offsets[r]) - prev)
            else:
                so = _write_host(store_w, so, buf, store_host_pos[r], flags & FLAG_STOREHOST_V6)
            store_offsets[r + 1] = so
        if w_id:
            head = np.uint64(40 if flags & FLAG_STOREHOST_V6 else 16)     # hex digits of address and port
            if same_store:
                _repeat(ids_at, ids_room, io, np.intp(id_offsets[r - 1]), np.intp(head))
            else:
                p = store_host_pos[r]
                for i in range(head // np.uint64(2)):                       # address then port, as stored
                    store_le64(ids_w, io + np.uint64(2 * i), _HEX_UPPER[byte_at(buf, p + i)])
            io += head
            v = np.uint64(physical_offset[r])
            for i in range(8):              # the offset, big-endian; ascending, each store's spare bytes overwritten
                store_le64(ids_w, io + np.uint64(2 * i), _HEX_UPPER[(v >> np.uint64(56 - 8 * i)) & np.uint64(0xFF)])
            io += np.uint64(16)
            id_offsets[r + 1] = io
    return np.int64(bo), np.int64(so), np.int64(io)
