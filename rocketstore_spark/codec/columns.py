"""Arrow columns for walked CommitLog records: one compiled pass per requested column, no per-record Python.

Properties string (store-format.md §2.8): ``name 0x01 value 0x02`` repeated, the final 0x02 optional
(RocketMQ 4.9.8 omits it, 5.x writes it). Parsed exactly as ``MessageDecoder.string2messageProperties``:
split on 0x02; a piece shorter than 3 is ignored; the first 0x01 at or after the piece start separates
name and value and must leave both non-empty (so a value may contain 0x01); a later duplicate name
overwrites the earlier value.

Derived values, as RocketMQ derives them (§2.13, §3.4): ``tags_code`` = ``TAGS.hashCode()`` sign-extended
(0 without TAGS), or for ``SCHEDULE_TOPIC_XXXX`` records with ``DELAY`` the delivery time
``store_timestamp + delay(min(level, max_level))``; ``msg_id`` = hex(store ip, store port, physical offset);
``keys`` = non-empty pieces of ``KEYS`` split on single spaces. Hosts render as ``ip:port`` (IPv6 in
brackets, groups as Java prints them).

Pure; runs in the Spark Python worker (executor), the CLI or tests.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import native
from rocketstore_spark.codec.commitlog import MAGIC_V2, TRANSACTION_TYPES, be32
from rocketstore_spark.codec.crc32 import rmq_crc32_span
from rocketstore_spark.codec.javahash import java_hash_span

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
SCHEDULE_TOPIC = np.frombuffer(b"SCHEDULE_TOPIC_XXXX", dtype=np.uint8).copy()
KEY_TAGS = np.frombuffer(b"TAGS", dtype=np.uint8).copy()
KEY_KEYS = np.frombuffer(b"KEYS", dtype=np.uint8).copy()
KEY_UNIQ = np.frombuffer(b"UNIQ_KEY", dtype=np.uint8).copy()
KEY_DELAY = np.frombuffer(b"DELAY", dtype=np.uint8).copy()
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str = DEFAULT_DELAY_LEVELS) -> np.ndarray:
    """RocketMQ's ``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (index = level - 1)."""
    try:
        return np.array([int(t[:-1]) * _UNITS[t[-1]] for t in spec.split()], dtype=np.int64)
    except (KeyError, ValueError, IndexError) as e:
        raise ValueError(f"invalid messageDelayLevel {spec!r}: expected tokens like 1s 5m 2h") from e


# ----------------------------------------------------------------------------------- spans → bytes

@numba.njit(cache=True, nogil=True)
def _gather(buf, pos, lens, n):
    offsets = np.zeros(n + 1, dtype=np.int32)
    for r in range(n):
        offsets[r + 1] = offsets[r] + max(lens[r], 0)
    data = np.empty(offsets[n], dtype=np.uint8)
    src = buf.ctypes.data
    dst = data.ctypes.data
    for r in range(n):
        length = offsets[r + 1] - offsets[r]
        # the walk keeps every span inside its record and window; memcpy must never be the one to find out
        if length and (pos[r] < 0 or pos[r] + length > buf.shape[0]):
            raise IndexError("span outside the buffer")
        native.memcpy(dst + offsets[r], src + pos[r], length)
    return offsets, data


_ARROW_TYPES = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64()}


def fixed_array(values: np.ndarray, arrow_type: pa.DataType | None = None) -> pa.Array:
    """A numpy int32/int64 array as an Arrow array without a copy (``pa.array`` converts through pandas
    machinery: several times slower per batch). ``arrow_type`` reinterprets the values (e.g. timestamps)."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(arrow_type or _ARROW_TYPES[values.dtype], len(values),
                                 [None, pa.py_buffer(values)])


def _validity(valid: np.ndarray):
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def binary_array(buf, pos, lens, n, valid=None) -> pa.Array:
    offsets, data = _gather(buf, pos, lens, n)
    return pa.Array.from_buffers(pa.binary(), n, [None if valid is None else _validity(valid),
                                                  pa.py_buffer(offsets), pa.py_buffer(data)])


def string_array(buf, pos, lens, n, valid=None) -> pa.Array:
    """UTF-8 strings from buffer spans. Malformed UTF-8 (damaged or hostile data) is replaced with U+FFFD,
    as Java's decoder does, instead of failing the batch."""
    offsets, data = _gather(buf, pos, lens, n)
    buffers = [None if valid is None else _validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
    arr = pa.Array.from_buffers(pa.string(), n, buffers)
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:
        # rare path (invalid UTF-8 in this batch): decode per value with replacement
        raw = pa.Array.from_buffers(pa.binary(), n, buffers).to_pylist()
        return pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string())


# ------------------------------------------------------------------------------------- properties

@numba.njit(cache=True, nogil=True, inline="always")
def _span_equals(buf, pos, length, word):
    if length != word.shape[0]:
        return False
    for i in range(length):
        if buf[pos + i] != word[i]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def parse_properties(buf, props_pos, props_len, n):
    """Name/value spans of every record's properties, RocketMQ's rules (module docstring).

    Returns pair_offsets[n+1], key_pos, key_len, val_pos, val_len (per pair) and, per record, the pair index
    of TAGS, KEYS, UNIQ_KEY and DELAY (-1 when absent)."""
    cap = n
    for r in range(n):
        cap += props_len[r] // 3 + 1
    key_pos = np.empty(cap, dtype=np.int64)
    key_len = np.empty(cap, dtype=np.int64)
    val_pos = np.empty(cap, dtype=np.int64)
    val_len = np.empty(cap, dtype=np.int64)
    pair_offsets = np.zeros(n + 1, dtype=np.int32)
    special = np.full((n, 4), -1, dtype=np.int64)
    k = 0
    for r in range(n):
        start = props_pos[r]
        end_all = start + props_len[r]
        first = k
        index = start
        while index < end_all:
            end = index
            while end < end_all and buf[end] != 0x02:
                end += 1
            if end - index >= 3:
                kv = index
                while kv < end_all and buf[kv] != 0x01:
                    kv += 1
                if index < kv and kv < end - 1:
                    # a later duplicate name overwrites the earlier value
                    slot = k
                    for j in range(first, k):
                        if key_len[j] == kv - index:
                            same = True
                            for b in range(kv - index):
                                if buf[key_pos[j] + b] != buf[index + b]:
                                    same = False
                                    break
                            if same:
                                slot = j
                                break
                    key_pos[slot] = index
                    key_len[slot] = kv - index
                    val_pos[slot] = kv + 1
                    val_len[slot] = end - kv - 1
                    if slot == k:
                        k += 1
            index = end + 1
        pair_offsets[r + 1] = k
        for j in range(first, k):
            if _span_equals(buf, key_pos[j], key_len[j], KEY_TAGS):
                special[r, 0] = j
            elif _span_equals(buf, key_pos[j], key_len[j], KEY_KEYS):
                special[r, 1] = j
            elif _span_equals(buf, key_pos[j], key_len[j], KEY_UNIQ):
                special[r, 2] = j
            elif _span_equals(buf, key_pos[j], key_len[j], KEY_DELAY):
                special[r, 3] = j
    return pair_offsets, key_pos[:k], key_len[:k], val_pos[:k], val_len[:k], special


@numba.njit(cache=True, nogil=True)
def _special_spans(special, which, val_pos, val_len, n):
    pos = np.zeros(n, dtype=np.int64)
    lens = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        j = special[r, which]
        if j >= 0:
            pos[r] = val_pos[j]
            lens[r] = val_len[j]
            valid[r] = True
    return pos, lens, valid


@numba.njit(cache=True, nogil=True)
def _tags_codes(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp, delay_ms, n):
    out = np.zeros(n, dtype=np.int64)
    max_level = delay_ms.shape[0]
    for r in range(n):
        j = special[r, 0]
        if j >= 0 and val_len[j] > 0:
            out[r] = java_hash_span(buf, val_pos[j], val_len[j])      # int32, sign-extended
        d = special[r, 3]
        if d >= 0 and _span_equals(buf, topic_pos[r], topic_len[r], SCHEDULE_TOPIC):
            level = 0
            ok = val_len[d] > 0
            for i in range(val_len[d]):
                c = buf[val_pos[d] + i]
                if c < 48 or c > 57 or level > 100000000:
                    ok = False
                    break
                level = level * 10 + (c - 48)
            if ok:
                level = min(level, max_level)
                if level > 0:
                    out[r] = store_timestamp[r] + delay_ms[level - 1]
    return out


@numba.njit(cache=True, nogil=True)
def _key_pieces(buf, special, val_pos, val_len, n):
    """KEYS split on single spaces, empty pieces dropped (IndexService.buildIndex)."""
    cap = n
    for r in range(n):
        j = special[r, 1]
        if j >= 0:
            cap += val_len[j] // 2 + 1
    pos = np.empty(cap, dtype=np.int64)
    lens = np.empty(cap, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    k = 0
    for r in range(n):
        j = special[r, 1]
        if j >= 0:
            s = val_pos[j]
            e = s + val_len[j]
            i = s
            while i <= e:
                if i == e or buf[i] == 0x20:
                    if i > s:
                        pos[k] = s
                        lens[k] = i - s
                        k += 1
                    s = i + 1
                i += 1
        offsets[r + 1] = k
    return offsets, pos[:k], lens[:k]


# ------------------------------------------------------------------------------------ ids & hosts

_HEX = np.frombuffer(b"0123456789ABCDEF", dtype=np.uint8).copy()
_HEX_LOWER = np.frombuffer(b"0123456789abcdef", dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True)
def _msg_ids(buf, store_host_pos, sys_flag, physical_offset, n):
    offsets = np.zeros(n + 1, dtype=np.int32)
    for r in range(n):
        offsets[r + 1] = offsets[r] + (56 if sys_flag[r] & 0x20 else 32)
    out = np.empty(offsets[n], dtype=np.uint8)
    for r in range(n):
        o = offsets[r]
        addr_len = 16 if sys_flag[r] & 0x20 else 4
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
def _hosts(buf, host_pos, sys_flag, v6_bit, n):
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


@numba.njit(cache=True, nogil=True)
def crc_ok(buf, body_pos, body_len, body_crc, n):
    out = np.empty(n, dtype=np.bool_)
    for r in range(n):
        out[r] = rmq_crc32_span(buf, body_pos[r], body_len[r]) == body_crc[r]
    return out


_CRC32_PROPERTY = np.frombuffer(b"__CRC32#\x01", dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True)
def prop_crc_ok(buf, record_pos, total_size, props_len, n):
    """5.x ``__CRC32#`` property (§2.12): always the record's last 20 bytes, ``__CRC32#`` 0x01, ten digits
    least-significant first, 0x02; covers the record minus those 20 bytes. Returns (ok, present)."""
    ok = np.zeros(n, dtype=np.bool_)
    present = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        if props_len[r] < 20:
            continue
        start = record_pos[r] + total_size[r] - 20
        if not _span_equals(buf, start, 9, _CRC32_PROPERTY) or buf[start + 19] != 0x02:
            continue
        value = 0
        digits = True
        for i in range(9, -1, -1):
            c = buf[start + 9 + i]
            if c < 48 or c > 57:
                digits = False
                break
            value = value * 10 + (c - 48)
        present[r] = True
        ok[r] = digits and value == rmq_crc32_span(buf, record_pos[r], total_size[r] - 20)
    return ok, present


# ---------------------------------------------------------------------------------------- assembly

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
TRANSACTION_NAMES = pa.array(TRANSACTION_TYPES, pa.string())


class HeaderColumns:
    """Fixed-width fields and spans of n decoded records (numpy arrays, filled by commitlog.decode_header).

    A reader may decode only some fields (``fields``, a bit mask over FIELDS, see ``fields_for``); the
    others are None after ``head``, so code that reads a field nobody asked for fails loudly."""

    FIELDS = (
        ("total_size", np.int32), ("magic_code", np.int32), ("body_crc", np.int32), ("queue_id", np.int32),
        ("flag", np.int32), ("queue_offset", np.int64), ("stored_physical_offset", np.int64),
        ("sys_flag", np.int32), ("born_timestamp", np.int64), ("store_timestamp", np.int64),
        ("reconsume_times", np.int32), ("prepared_transaction_offset", np.int64),
        ("born_host_pos", np.int64), ("store_host_pos", np.int64), ("body_pos", np.int64),
        ("body_len", np.int64), ("topic_pos", np.int64), ("topic_len", np.int64), ("props_pos", np.int64),
        ("props_len", np.int64),
    )
    ALL = (1 << len(FIELDS)) - 1

    def __init__(self, n: int, fields: int = ALL):
        self.n = n
        self.fields = fields
        for bit, (name, dtype) in enumerate(self.FIELDS):
            # unrequested fields still get a (one-row) array: decode_header takes every array
            setattr(self, name, np.empty(n if fields >> bit & 1 else 1, dtype=dtype))

    def arrays(self):
        return [getattr(self, name) for name, _ in self.FIELDS]

    def head(self, n: int) -> "HeaderColumns":
        """The first n rows (views, no copy); fields the walk did not fill are None."""
        out = HeaderColumns.__new__(HeaderColumns)
        out.n = n
        out.fields = self.fields
        for bit, (name, _) in enumerate(self.FIELDS):
            setattr(out, name, getattr(self, name)[:n] if self.fields >> bit & 1 else None)
        return out


# header fields each output column is computed from (decode_columns below)
_NEEDS = {
    "total_size": ("total_size",), "magic_code": ("magic_code",), "record_version": ("magic_code",),
    "body_crc": ("body_crc",), "queue_id": ("queue_id",), "flag": ("flag",), "queue_offset": ("queue_offset",),
    "stored_physical_offset": ("stored_physical_offset",), "sys_flag": ("sys_flag",),
    "transaction_type": ("sys_flag",), "born_timestamp": ("born_timestamp",),
    "store_timestamp": ("store_timestamp",), "reconsume_times": ("reconsume_times",),
    "prepared_transaction_offset": ("prepared_transaction_offset",), "body_length": ("body_len",),
    "born_host": ("born_host_pos", "sys_flag"), "store_host": ("store_host_pos", "sys_flag"),
    "msg_id": ("store_host_pos", "sys_flag"), "body": ("body_pos", "body_len"),
    "body_crc_ok": ("body_pos", "body_len", "body_crc"), "topic": ("topic_pos", "topic_len"),
    "properties": ("props_pos", "props_len"), "tags": ("props_pos", "props_len"),
    "keys": ("props_pos", "props_len"), "uniq_key": ("props_pos", "props_len"),
    "tags_code": ("props_pos", "props_len", "topic_pos", "topic_len", "store_timestamp"),
    "properties_crc_ok": ("born_host_pos", "total_size", "props_len"),
}
_BIT = {name: 1 << bit for bit, (name, _) in enumerate(HeaderColumns.FIELDS)}


def fields_for(wanted) -> int:
    """The HeaderColumns fields (bit mask) that decode_columns needs for the ``wanted`` columns."""
    mask = 0
    for column in wanted:
        for name in _NEEDS.get(column, ()):
            mask |= _BIT[name]
    return mask


def decode_columns(buf: np.ndarray, h: HeaderColumns, physical_offset: np.ndarray, wanted: set[str],
                   delay_ms: np.ndarray) -> dict[str, pa.Array]:
    """The requested record-level columns (names as in datasource.schema) for n decoded records."""
    n = h.n
    out: dict[str, pa.Array] = {}
    simple = {"total_size": h.total_size, "magic_code": h.magic_code, "body_crc": h.body_crc,
              "queue_id": h.queue_id, "flag": h.flag, "queue_offset": h.queue_offset,
              "stored_physical_offset": h.stored_physical_offset, "sys_flag": h.sys_flag,
              "reconsume_times": h.reconsume_times, "prepared_transaction_offset": h.prepared_transaction_offset}
    for name, arr in simple.items():
        if name in wanted:
            out[name] = fixed_array(arr)
    if "body_length" in wanted:
        out["body_length"] = fixed_array(h.body_len.astype(np.int32))
    if "record_version" in wanted:
        out["record_version"] = fixed_array(np.where(h.magic_code == MAGIC_V2, 2, 1).astype(np.int32))
    for name in ("born_timestamp", "store_timestamp"):
        if name in wanted:
            out[name] = fixed_array(getattr(h, name) * 1000, TIMESTAMP_TYPE)       # ms -> us
    if "transaction_type" in wanted:
        out["transaction_type"] = TRANSACTION_NAMES.take(fixed_array((h.sys_flag & 0xC) >> 2))
    if "body" in wanted:
        out["body"] = binary_array(buf, h.body_pos, h.body_len, n)
    if "topic" in wanted:
        out["topic"] = string_array(buf, h.topic_pos, h.topic_len, n)
    if "body_crc_ok" in wanted:
        out["body_crc_ok"] = pa.array(crc_ok(buf, h.body_pos, h.body_len, h.body_crc, n))
    if "properties_crc_ok" in wanted:
        # record start = born host position - 48
        ok, present = prop_crc_ok(buf, h.born_host_pos - 48, h.total_size, h.props_len, n)
        out["properties_crc_ok"] = pa.Array.from_buffers(pa.bool_(), n, [_validity(present),
                                                                          pa.array(ok).buffers()[1]])
    if "msg_id" in wanted:
        offsets, data = _msg_ids(buf, h.store_host_pos, h.sys_flag, physical_offset, n)
        out["msg_id"] = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    for name, pos, bit in (("born_host", h.born_host_pos, 0x10), ("store_host", h.store_host_pos, 0x20)):
        if name in wanted:
            offsets, data = _hosts(buf, pos, h.sys_flag, bit, n)
            out[name] = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if wanted & {"properties", "tags", "keys", "uniq_key", "tags_code"}:
        pair_offsets, kpos, klen, vpos, vlen, special = parse_properties(buf, h.props_pos, h.props_len, n)
        if "properties" in wanted:
            keys = string_array(buf, kpos, klen, len(kpos))
            values = string_array(buf, vpos, vlen, len(vpos))
            out["properties"] = pa.MapArray.from_arrays(fixed_array(pair_offsets), keys, values)
        for name, which in (("tags", 0), ("uniq_key", 2)):
            if name in wanted:
                pos, lens, valid = _special_spans(special, which, vpos, vlen, n)
                out[name] = string_array(buf, pos, lens, n, valid)
        if "keys" in wanted:
            offsets, pos, lens = _key_pieces(buf, special, vpos, vlen, n)
            out["keys"] = pa.ListArray.from_arrays(fixed_array(offsets), string_array(buf, pos, lens, len(pos)))
        if "tags_code" in wanted:
            out["tags_code"] = fixed_array(_tags_codes(buf, special, vpos, vlen, h.topic_pos, h.topic_len,
                                                    h.store_timestamp, delay_ms, n))
    return out
