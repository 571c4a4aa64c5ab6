"""A decoder's batch written by one compiled call: every requested column of the walked records, straight into
one Arrow IPC record batch message (``ipc_batch``), which pyarrow then reads without a copy.

The message lives in an *arena*: [metadata | body]. The walk (``tiles.walk_tiles``) may have copied the bodies to
the start of the body (``BODY_AT``). Behind them ``write_batch`` lays out one *region* per Arrow buffer of the
batch, each sized for the worst case of n records by the rule ``plan`` derives from the column's entry in
``record_schema`` (its type, ``items`` and ``data``), and grows the arena once to hold them all. What several
columns derive from is then written first, in place: the property kernel's outputs
(``properties.property_columns_into``), the host kernel's (``hosts.host_columns_into``), the bodies when the
walk has not copied them; then each column, in the batch's order, by the helper of its family
(``record_schema.Family``), which writes its values and fills in the metadata's nodes and buffers (a buffer
names its region's start and the bytes written there). Why: a batch assembled in Python from many small arrays
cost ~60 Arrow calls and as many allocations per batch.

What a column holds is defined where the columns are (``record_schema``, ``decoder``); this module only lays
them out: int32/int64 values, timestamps as UTC microseconds with nulls outside years 1-9999, booleans and
validity as little-endian bitmaps, strings and binaries as int32 offsets + bytes, ``properties`` as
map<string, string>, ``keys`` as list<string>. Every data region has ``native.SPARE`` bytes after its worst
case (the 8-byte stores of ``copy_at`` and the host kernel). In the bounds-checked mode (``checked``) every
write into a region is checked against it.

Strings built from bytes that are not all ASCII are not known to be UTF-8: their columns are flagged in the
returned ``unchecked`` (the caller validates them). A batch with compressed bodies has ``body_uncompressed``
written as nulls and ``compressed`` set (the caller decompresses). Runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
from numba import literal_unroll

from rocketstore_spark.codec import hosts, ipc_batch, native, properties
from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS, gather_into, is_ascii, spans_size
from rocketstore_spark.codec.checked import CHECKED
from rocketstore_spark.codec.commitlog import (H_BODY_CRC, H_BODY_LEN, H_BODY_POS, H_BORN_HOST_POS, H_MAGIC_CODE,
                                               H_PROPS_LEN, H_PROPS_POS, H_STORE_HOST_POS, H_STORE_TIMESTAMP,
                                               H_SYS_FLAG, H_TOPIC_LEN, H_TOPIC_POS, H_TOTAL_SIZE, HEADER_FIELDS,
                                               MAGIC_V2, TRANSACTION_MASK, TRANSACTION_TYPES)
from rocketstore_spark.codec.compression import COMPRESSED_FLAG
from rocketstore_spark.codec.crc32 import bodies_end, copy_checked, crc_ok, prop_crc_ok
from rocketstore_spark.codec.record_schema import BY_NAME, COLUMNS, Family, Kind, Measure

BODY_AT = 0             # where the walk's bodies lie in the message body

# a plan: one row per column of the batch, in its order
P_KIND, P_FAMILY, P_NODE, P_BUFFER, P_SOURCE, P_LAYOUT, P_WANT = range(7)
# how a column's values are laid out (its Arrow type)
L_INT32, L_INT64, L_TIMESTAMP, L_BOOL, L_BYTES, L_LIST, L_MAP = range(7)
# a plan's rules: one row per buffer of the message, its role and its worst case (a record_schema.Size)
R_ROLE, R_PER_ROW, R_MEASURE, R_DIVISOR = range(4)
ROLE_NONE = 0           # never written: the validity of a column that is never null, of a struct or list item
ROLE_BITS = 1           # a bitmap of the rows
ROLE_VALUES = 2         # PER_ROW bytes a row
ROLE_OFFSETS = 3        # int32 offsets of the rows
ROLE_ITEM_OFFSETS = 4   # int32 offsets of the entries of a list or map (their Size)
ROLE_DATA = 5           # bytes of strings (their Size) and SPARE bytes
MEASURES = len(Measure)
PROPERTY_WANTS = sum(c.family == Family.PROPERTY for c in COLUMNS)
HOST_WANTS = sum(c.family == Family.HOST for c in COLUMNS)


def _layout(arrow_type: pa.DataType) -> int:
    if pa.types.is_map(arrow_type):
        return L_MAP
    if pa.types.is_list(arrow_type):
        return L_LIST
    if pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type):
        return L_BYTES
    if pa.types.is_boolean(arrow_type):
        return L_BOOL
    if pa.types.is_timestamp(arrow_type):
        return L_TIMESTAMP
    return L_INT64 if arrow_type.bit_width == 64 else L_INT32


def _rules(column) -> list[tuple[int, int, int, int]]:
    """The rule of each of the column's buffers, in the message's order (``ipc_batch``)."""
    def sized(role, size):
        return role, size.per_row, int(size.measure), size.divisor
    none = (ROLE_NONE, 0, 0, 1)
    validity = (ROLE_BITS, 0, 0, 1) if column.nullable else none
    layout = _layout(column.arrow_type)
    if layout == L_MAP:
        strings = [none, sized(ROLE_ITEM_OFFSETS, column.items), sized(ROLE_DATA, column.data)]
        return [validity, (ROLE_OFFSETS, 0, 0, 1), none, *strings, *strings]
    if layout == L_LIST:
        return [validity, (ROLE_OFFSETS, 0, 0, 1), none, sized(ROLE_ITEM_OFFSETS, column.items),
                sized(ROLE_DATA, column.data)]
    if layout == L_BYTES:
        return [validity, (ROLE_OFFSETS, 0, 0, 1), sized(ROLE_DATA, column.data)]
    if layout == L_BOOL:
        return [validity, (ROLE_BITS, 0, 0, 1)]
    return [validity, (ROLE_VALUES, column.arrow_type.bit_width // 8, 0, 1)]


def plan(names) -> tuple[np.ndarray, np.ndarray]:
    """``write_batch``'s plan of the columns ``names`` (in that order), from ``record_schema``: (one row per
    column: P_* fields; one row per buffer of the message: R_* fields). Context columns are the reader's."""
    columns, rules = [], []
    nodes = 0
    for name in names:
        column = BY_NAME[name]
        if column.family == Family.CONTEXT:
            raise ValueError(f"{name!r} is filled by the reader, not written by the batch writer")
        source = HEADER_FIELDS.index(column.source) if column.source else -1
        columns.append((column.kind_id, column.family, nodes, len(rules), source, _layout(column.arrow_type),
                        column.want))
        nodes += ipc_batch.buffer_count(column.arrow_type)[0]
        rules += _rules(column)
    out = (np.array(columns, dtype=np.int64).reshape(-1, P_WANT + 1),
           np.array(rules, dtype=np.int64).reshape(-1, R_DIVISOR + 1))
    for array in out:
        array.flags.writeable = False
    return out


# ------------------------------------------------------------------------------------------------ layout

@numba.njit(cache=True, nogil=True, inline="always")
def _align8(x):
    return (x + 7) & ~7


@numba.njit(cache=True, nogil=True)
def _grown(out, used, size):
    """An arena of at least ``size`` bytes holding ``out``'s first ``used`` bytes (``out`` when it is enough)."""
    if size <= out.shape[0]:
        return out
    size = max(size, out.shape[0] + out.shape[0] // 2)
    raw = np.empty(size + ipc_batch.ALIGN, dtype=np.uint8)
    skip = (ipc_batch.ALIGN - raw.ctypes.data % ipc_batch.ALIGN) % ipc_batch.ALIGN
    bigger = raw[skip:skip + size]
    keep = min(used, out.shape[0])
    native.check_write(0, keep, bigger.shape[0])
    native.memcpy(np.intp(bigger.ctypes.data), np.intp(out.ctypes.data), keep)
    return bigger


@numba.njit(cache=True, nogil=True)
def _measures(rules, h, n, body_end):
    """What the batch's worst cases are counted in (``Measure``), for the measures its rules use: the bytes of
    its records' topics, bodies (none where the walk has copied them) and properties."""
    uses = np.zeros(MEASURES, dtype=np.bool_)
    for b in range(rules.shape[0]):
        uses[rules[b, R_MEASURE]] = True
    measures = np.zeros(MEASURES, dtype=np.int64)
    if uses[Measure.TOPICS]:
        measures[Measure.TOPICS] = spans_size(h[H_TOPIC_LEN], n)
    if uses[Measure.BODIES] and body_end < 0:
        measures[Measure.BODIES] = bodies_end(h[H_BODY_LEN], 0, n, 0)      # Arrow's int32 offsets: at most 2 GiB
    if uses[Measure.PROPERTIES]:
        measures[Measure.PROPERTIES] = spans_size(h[H_PROPS_LEN], n)
    return measures


@numba.njit(cache=True, nogil=True)
def _regions(rules, n, measures, at):
    """The region of every buffer of the message, 8-aligned from ``at``: (start, end) rows, and where they end."""
    regions = np.empty((rules.shape[0], 2), dtype=np.int64)
    for b in range(rules.shape[0]):
        role = rules[b, R_ROLE]
        count = rules[b, R_PER_ROW] * n + measures[rules[b, R_MEASURE]] // rules[b, R_DIVISOR]
        if role == ROLE_BITS:
            size = (n + 7) // 8
        elif role == ROLE_VALUES:
            size = count
        elif role == ROLE_OFFSETS:
            size = 4 * (n + 1)
        elif role == ROLE_ITEM_OFFSETS:
            size = 4 * (count + 1)
        elif role == ROLE_DATA:
            size = count + native.SPARE
        else:
            size = 0
        regions[b, 0] = at
        regions[b, 1] = at + size
        at = _align8(at + size)
    return regions, at


@numba.njit(cache=True, nogil=True, inline="always")
def _bytes(out, regions, b, nbytes):
    """The first ``nbytes`` of region ``b`` (checked against it in the bounds-checked mode)."""
    start = regions[b, 0]
    native.check_write(start, nbytes, regions[b, 1])
    return out[start:start + nbytes]


@numba.njit(cache=True, nogil=True, inline="always")
def _data(out, regions, b):
    """All of region ``b``: the data of strings, whose writers check their own writes."""
    return out[regions[b, 0]:regions[b, 1]]


@numba.njit(cache=True, nogil=True, inline="always")
def _int32s(out, regions, b, count):
    return _bytes(out, regions, b, 4 * count).view(np.int32)


@numba.njit(cache=True, nogil=True, inline="always")
def _int64s(out, regions, b, count):
    return _bytes(out, regions, b, 8 * count).view(np.int64)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _bits(dst, flags, n):
    """n booleans as a bitmap in ``dst``; returns how many are False."""
    false = 0
    for i in range((n + 7) // 8):
        byte = 0
        for b in range(min(8, n - 8 * i)):
            if flags[8 * i + b]:
                byte |= 1 << b
            else:
                false += 1
        dst[i] = byte
    return false


@numba.njit(cache=True, nogil=True, inline="always")
def _fixed_meta(out, m, positions, regions, ni, bi, n, nulls, nbytes):
    """Node ``ni`` and buffers bi (validity, named only with nulls), bi + 1 (``nbytes`` of values)."""
    ipc_batch.node(out, positions, ni, n, nulls)
    ipc_batch.buffer(out, positions, bi, regions[bi, 0] - m, (n + 7) // 8 if nulls else 0)
    ipc_batch.buffer(out, positions, bi + 1, regions[bi + 1, 0] - m, nbytes)


@numba.njit(cache=True, nogil=True, inline="always")
def _strings_meta(out, m, positions, regions, ni, bi, count, nulls, data_at, data_len):
    """Node ``ni`` and buffers bi (validity, named only with nulls), bi + 1 (offsets), bi + 2 (``data_len``
    bytes at arena position ``data_at``) of a string or binary column of ``count`` values."""
    ipc_batch.node(out, positions, ni, count, nulls)
    ipc_batch.buffer(out, positions, bi, regions[bi, 0] - m, (count + 7) // 8 if nulls else 0)
    ipc_batch.buffer(out, positions, bi + 1, regions[bi + 1, 0] - m, 4 * (count + 1))
    ipc_batch.buffer(out, positions, bi + 2, data_at - m, data_len)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _timestamps(out, regions, bi, ms, present, check_present, n):
    """Epoch milliseconds ``ms`` as microseconds in region bi + 1 and their validity in region bi: null outside
    years 1-9999, or where ``check_present`` and not ``present``. Returns the nulls."""
    bits = _bytes(out, regions, bi, (n + 7) // 8)
    us = _int64s(out, regions, bi + 1, n)
    nulls = 0
    for i in range((n + 7) // 8):
        byte = 0
        for b in range(min(8, n - 8 * i)):
            r = 8 * i + b
            v = ms[r]
            if MIN_TIMESTAMP_MS <= v <= MAX_TIMESTAMP_MS and (not check_present or present[r]):
                us[r] = v * 1000
                byte |= 1 << b
            else:
                us[r] = 0
                nulls += 1
        bits[i] = byte
    return nulls


# -------------------------------------------------------------------- what several columns derive from

@numba.njit(cache=True, nogil=True)
def _first_buffers(plan_, family, wants):
    """Per want flag of ``family``'s kernel: the first buffer of the planned column it makes, else -1."""
    first = np.full(wants, -1, dtype=np.int64)
    for c in range(plan_.shape[0]):
        if plan_[c, P_FAMILY] == family:
            first[plan_[c, P_WANT]] = plan_[c, P_BUFFER]
    return first


@numba.njit(cache=True, nogil=True, inline="always")
def _next(first, j):
    """Buffer ``j`` of the column whose first buffer is ``first`` (-1: no such column)."""
    return first + j if first >= 0 else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _out32(out, regions, b, count, scratch):
    """Region ``b`` as ``count`` int32s, or (b < 0: an output nobody asked for) a scratch int32."""
    if b < 0:
        return scratch[0:4].view(np.int32)
    return _int32s(out, regions, b, count)


@numba.njit(cache=True, nogil=True, inline="always")
def _out8(out, regions, b, scratch):
    """All of region ``b``, or (b < 0) nothing."""
    if b < 0:
        return scratch[0:0]
    return _data(out, regions, b)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _property_pass(out, regions, plan_, measures, buf, h, n, delay_ms):
    """The property kernel's outputs of the planned PROPERTY columns, written in place into their regions
    (the map's offsets and strings, TAGS', UNIQ_KEY's and KEYS' offsets and bytes, tagsCode's values) or into
    arrays of their own (TAGS' and UNIQ_KEY's presence, the delivery times and theirs). Returns (what
    ``properties.property_columns_into`` returns — its counts of entries and bytes, ascii —, tags_valid,
    uniq_valid, deliver_time, deliver_valid)."""
    first = _first_buffers(plan_, Family.PROPERTY, PROPERTY_WANTS)
    want = first >= 0
    if not want.any():                      # no PROPERTY column: nothing to derive
        flags = np.zeros(0, dtype=np.bool_)
        return (0, 0, 0, 0, 0, 0, 0, True), flags, flags, np.zeros(0, dtype=np.int64), flags
    pairs_cap = n + measures[Measure.PROPERTIES] // 3
    pieces_cap = n + measures[Measure.PROPERTIES] // 2
    scratch = np.zeros(8, dtype=np.uint8)
    bm, bt, bk = first[properties.WANT_MAP], first[properties.WANT_TAGS], first[properties.WANT_KEYS]
    bu, bc = first[properties.WANT_UNIQ_KEY], first[properties.WANT_TAGS_CODE]
    w_tags, w_uniq, w_deliver = want[properties.WANT_TAGS], want[properties.WANT_UNIQ_KEY], \
        want[properties.WANT_DELIVER_TIME]
    tags_valid = np.empty(n if w_tags else 0, dtype=np.bool_)
    uniq_valid = np.empty(n if w_uniq else 0, dtype=np.bool_)
    deliver_time = np.empty(n if w_deliver else 0, dtype=np.int64)
    deliver_valid = np.empty(n if w_deliver else 0, dtype=np.bool_)
    with_topic = want[properties.WANT_TAGS_CODE] or w_deliver
    none = np.zeros(0, dtype=np.int64)
    record = (h[H_PROPS_POS], h[H_PROPS_LEN], h[H_TOPIC_POS] if with_topic else none,
              h[H_TOPIC_LEN] if with_topic else none, h[H_STORE_TIMESTAMP] if with_topic else none)
    map_out = (_out32(out, regions, _next(bm, 1), n + 1, scratch),
               _out32(out, regions, _next(bm, 4), pairs_cap + 1, scratch), _out8(out, regions, _next(bm, 5), scratch),
               _out32(out, regions, _next(bm, 7), pairs_cap + 1, scratch), _out8(out, regions, _next(bm, 8), scratch))
    tags_out = (_out32(out, regions, _next(bt, 1), n + 1, scratch), _out8(out, regions, _next(bt, 2), scratch),
                tags_valid)
    uniq_out = (_out32(out, regions, _next(bu, 1), n + 1, scratch), _out8(out, regions, _next(bu, 2), scratch),
                uniq_valid)
    keys_out = (_out32(out, regions, _next(bk, 1), n + 1, scratch),
                _out32(out, regions, _next(bk, 3), pieces_cap + 1, scratch), _out8(out, regions, _next(bk, 4), scratch))
    tags_code = _int64s(out, regions, bc + 1, n) if bc >= 0 else none
    _, _, record_cap = properties.property_capacity(h[H_PROPS_LEN], n)
    counts = properties.property_columns_into(buf, record, delay_ms, n, want, record_cap, map_out, tags_out,
                                              uniq_out, keys_out, (tags_code, deliver_time, deliver_valid))
    return counts, tags_valid, uniq_valid, deliver_time, deliver_valid


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _host_pass(out, regions, plan_, buf, h, physical, n):
    """The host kernel's renderings of the planned HOST columns, written in place into their regions."""
    first = _first_buffers(plan_, Family.HOST, HOST_WANTS)
    want = first >= 0
    if not want.any():                      # no HOST column: nothing to render
        return
    scratch = np.zeros(8, dtype=np.uint8)
    none = np.zeros(0, dtype=np.int64)
    bb, bs, bid = first[hosts.WANT_BORN_HOST], first[hosts.WANT_STORE_HOST], first[hosts.WANT_MSG_ID]
    hosts.host_columns_into(
        buf, h[H_BORN_HOST_POS] if bb >= 0 else none, h[H_STORE_HOST_POS] if bs >= 0 or bid >= 0 else none,
        h[H_SYS_FLAG], physical, n, want,
        _out32(out, regions, _next(bb, 1), n + 1, scratch), _out8(out, regions, _next(bb, 2), scratch),
        _out32(out, regions, _next(bs, 1), n + 1, scratch), _out8(out, regions, _next(bs, 2), scratch),
        _out32(out, regions, _next(bid, 1), n + 1, scratch), _out8(out, regions, _next(bid, 2), scratch))


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _body_pass(out, regions, plan_, buf, h, n, body_end, verdicts):
    """The bodies copied into the planned ``body`` column's regions (unless the walk has copied them: body_end
    >= 0), checked on the copy when ``body_crc_ok`` is planned and its verdicts are not known yet, as the walk
    does; the verdicts then, or computed here where ``body_crc_ok`` needs them. Returns the verdicts."""
    body = crc = -1
    for c in range(plan_.shape[0]):
        if plan_[c, P_KIND] == Kind.BODY:
            body = plan_[c, P_BUFFER]
        elif plan_[c, P_KIND] == Kind.BODY_CRC_OK:
            crc = c
    if body >= 0 and body_end < 0:
        offsets, data = _int32s(out, regions, body + 1, n + 1), _data(out, regions, body + 2)
        if crc >= 0 and verdicts.shape[0] != n:
            offsets[0] = 0
            verdicts = np.empty(n, dtype=np.bool_)
            copy_checked(buf, h[H_BODY_POS], h[H_BODY_LEN], h[H_BODY_CRC], 0, n, data, offsets, verdicts, 0)
        else:
            gather_into(buf, h[H_BODY_POS], h[H_BODY_LEN], n, data, offsets)
    if crc >= 0 and verdicts.shape[0] != n:
        verdicts = crc_ok(buf, h[H_BODY_POS], h[H_BODY_LEN], h[H_BODY_CRC], n)
    return verdicts


# ------------------------------------------------------------------------------ the columns, by family

@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _position_column(out, m, positions, regions, ni, bi, k, base_offset, record_positions, physical, n):
    """segment_base_offset, file_position or physical_offset."""
    values = _int64s(out, regions, bi + 1, n)
    if k == Kind.SEGMENT_BASE_OFFSET:
        values[:] = base_offset
    elif k == Kind.FILE_POSITION:
        values[:] = record_positions[:n]
    else:
        values[:] = physical
    _fixed_meta(out, m, positions, regions, ni, bi, n, 0, 8 * n)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _header_values(out, regions, bi, layout, field, n):
    """A header field's values (int32 or int64 as decoded) in the column's layout; returns the nulls."""
    if layout == L_TIMESTAMP:
        return _timestamps(out, regions, bi, field, field, False, n)
    if layout == L_INT32:
        values32 = _int32s(out, regions, bi + 1, n)
        for r in range(n):
            values32[r] = np.int32(field[r])
    else:
        values = _int64s(out, regions, bi + 1, n)
        for r in range(n):
            values[r] = field[r]
    return 0


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _header_column(out, m, positions, regions, ni, bi, k, source, layout, h, n):
    """A HEADER column: header field ``source``'s value (record_version: 1 or 2 from the magic code)."""
    nulls = 0
    if k == Kind.RECORD_VERSION:
        values32 = _int32s(out, regions, bi + 1, n)
        magic = h[H_MAGIC_CODE]
        for r in range(n):
            values32[r] = 2 if magic[r] == MAGIC_V2 else 1
    else:
        f = 0
        for field in literal_unroll(h):     # h[source]: a tuple of int32 and int64 arrays takes constant indices
            if f == source:
                nulls = _header_values(out, regions, bi, layout, field, n)
            f += 1
    _fixed_meta(out, m, positions, regions, ni, bi, n, nulls, (4 if layout == L_INT32 else 8) * n)


# the transaction type names back to back (zero-padded: each is written as one 8-byte store), where each starts,
# and their lengths (index = (sys_flag & TRANSACTION_MASK) >> 2)
_TRANSACTION_NAMES = np.frombuffer("".join(TRANSACTION_TYPES).encode() + bytes(8), dtype=np.uint8).copy()
_TRANSACTION_LEN = np.array([len(t) for t in TRANSACTION_TYPES], dtype=np.int64)
_TRANSACTION_AT = np.cumsum(_TRANSACTION_LEN) - _TRANSACTION_LEN


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _record_column(out, m, positions, regions, ni, bi, k, buf, h, n, measures, body_end, body_offsets):
    """body, topic, transaction_type or body_uncompressed. Returns (unchecked, compressed)."""
    unchecked = compressed = False
    if k == Kind.BODY:
        if body_end >= 0:                   # the walk's bodies, at the start of the body
            offsets = _int32s(out, regions, bi + 1, n + 1)
            for r in range(n + 1):
                offsets[r] = body_offsets[r]
            _strings_meta(out, m, positions, regions, ni, bi, n, 0, m + BODY_AT, body_offsets[n])
        else:                               # copied by the body pass
            _strings_meta(out, m, positions, regions, ni, bi, n, 0, regions[bi + 2, 0], measures[Measure.BODIES])
    elif k == Kind.TOPIC:
        data = _data(out, regions, bi + 2)
        size = gather_into(buf, h[H_TOPIC_POS], h[H_TOPIC_LEN], n, data, _int32s(out, regions, bi + 1, n + 1))
        unchecked = not is_ascii(data[:size])
        _strings_meta(out, m, positions, regions, ni, bi, n, 0, regions[bi + 2, 0], size)
    elif k == Kind.TRANSACTION_TYPE:
        offsets, data = _int32s(out, regions, bi + 1, n + 1), _data(out, regions, bi + 2)
        sys_flag = h[H_SYS_FLAG]
        offsets[0] = 0
        o = 0
        for r in range(n):
            kind = (sys_flag[r] & TRANSACTION_MASK) >> 2
            native.store_le64(data, o, native.load_le64(_TRANSACTION_NAMES, _TRANSACTION_AT[kind]))
            o += _TRANSACTION_LEN[kind]
            offsets[r + 1] = o
        _strings_meta(out, m, positions, regions, ni, bi, n, 0, regions[bi + 2, 0], o)
    else:
        # body_uncompressed, all null here; the caller decompresses a batch with compressed bodies
        sys_flag = h[H_SYS_FLAG]
        for r in range(n):
            compressed |= (sys_flag[r] & COMPRESSED_FLAG) != 0
        _bytes(out, regions, bi, (n + 7) // 8)[:] = 0
        _bytes(out, regions, bi + 1, 4 * (n + 1))[:] = 0
        _strings_meta(out, m, positions, regions, ni, bi, n, n, regions[bi + 2, 0], 0)
    return unchecked, compressed


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _property_column(out, m, positions, regions, ni, bi, k, n, derived):
    """properties, tags, keys, uniq_key, tags_code or deliver_time, from the property pass (``derived``: what
    ``_property_pass`` returned). Returns unchecked."""
    (pairs, ko, vo, to, uo, pieces, kdo, ascii), tags_valid, uniq_valid, deliver_time, deliver_valid = derived
    if k == Kind.TAGS_CODE:                 # written in place by the pass
        _fixed_meta(out, m, positions, regions, ni, bi, n, 0, 8 * n)
        return False
    if k == Kind.DELIVER_TIME:
        nulls = _timestamps(out, regions, bi, deliver_time, deliver_valid, True, n)
        _fixed_meta(out, m, positions, regions, ni, bi, n, nulls, 8 * n)
        return False
    if k == Kind.PROPERTIES:
        ipc_batch.node(out, positions, ni, n, 0)
        ipc_batch.buffer(out, positions, bi, regions[bi, 0] - m, 0)
        ipc_batch.buffer(out, positions, bi + 1, regions[bi + 1, 0] - m, 4 * (n + 1))
        ipc_batch.node(out, positions, ni + 1, pairs, 0)               # the entries struct
        ipc_batch.buffer(out, positions, bi + 2, regions[bi + 2, 0] - m, 0)
        _strings_meta(out, m, positions, regions, ni + 2, bi + 3, pairs, 0, regions[bi + 5, 0], ko)
        _strings_meta(out, m, positions, regions, ni + 3, bi + 6, pairs, 0, regions[bi + 8, 0], vo)
    elif k == Kind.KEYS:
        ipc_batch.node(out, positions, ni, n, 0)
        ipc_batch.buffer(out, positions, bi, regions[bi, 0] - m, 0)
        ipc_batch.buffer(out, positions, bi + 1, regions[bi + 1, 0] - m, 4 * (n + 1))
        _strings_meta(out, m, positions, regions, ni + 1, bi + 2, pieces, 0, regions[bi + 4, 0], kdo)
    else:                                   # tags, uniq_key: null where absent
        tags = k == Kind.TAGS
        nulls = _bits(_bytes(out, regions, bi, (n + 7) // 8), tags_valid if tags else uniq_valid, n)
        _strings_meta(out, m, positions, regions, ni, bi, n, nulls, regions[bi + 2, 0], to if tags else uo)
    return not ascii


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _host_column(out, m, positions, regions, ni, bi, n):
    """born_host, store_host or msg_id, rendered by the host pass."""
    end = _int32s(out, regions, bi + 1, n + 1)[n]
    _strings_meta(out, m, positions, regions, ni, bi, n, 0, regions[bi + 2, 0], end)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def _verdict_column(out, m, positions, regions, ni, bi, k, buf, buf_file_pos, record_positions, h, n, verdicts):
    """body_crc_ok (``verdicts``, from the body pass) or properties_crc_ok (null without the property)."""
    nbytes = (n + 7) // 8
    nulls = 0
    if k == Kind.BODY_CRC_OK:
        _bits(_bytes(out, regions, bi + 1, nbytes), verdicts, n)
    else:
        ok, present = prop_crc_ok(buf, record_positions - buf_file_pos, h[H_TOTAL_SIZE], h[H_PROPS_LEN], n)
        nulls = _bits(_bytes(out, regions, bi, nbytes), present, n)
        _bits(_bytes(out, regions, bi + 1, nbytes), ok, n)
    _fixed_meta(out, m, positions, regions, ni, bi, n, nulls, nbytes)


# -------------------------------------------------------------------------------------------- the batch

@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def write_batch(out, message, plan_, buf, buf_file_pos, base_offset, record_positions, h, n, bodies, delay_ms):
    """Write the message of the n records at file positions ``record_positions`` of a segment at ``base_offset``
    (``buf`` holds its bytes from file position ``buf_file_pos``; ``h``: their header fields, positions as
    indices into ``buf``) into the arena ``out``: ``message`` = (metadata, positions) of an
    ``ipc_batch.Template``, ``plan_`` = ``plan`` of its columns. ``bodies`` = (body_end, body_offsets,
    verdicts): with body_end >= 0 the bodies are in the arena's body from BODY_AT to body_end, indexed by
    body_offsets, else they are copied here; verdicts: the records' BODYCRC verdicts when already known (else
    empty). ``delay_ms``: the broker's delay levels (``properties``).

    Returns (arena — ``out`` or a grown copy —, message size, unchecked — per planned column: strings not
    known to be UTF-8 —, compressed: is any body compressed (body_uncompressed then is all null here))."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    metadata, positions = message
    columns, rules = plan_
    body_end, body_offsets, verdicts = bodies
    m = positions[ipc_batch.POS_METADATA_SIZE]
    at = m + BODY_AT + (_align8(body_end) if body_end >= 0 else 0)
    measures = _measures(rules, h, n, body_end)
    regions, end = _regions(rules, n, measures, at)
    out = _grown(out, at, end)
    physical = np.empty(n, dtype=np.int64)
    for r in range(n):
        physical[r] = base_offset + record_positions[r]

    # what several columns derive from, written first, in place
    derived = _property_pass(out, regions, columns, measures, buf, h, n, delay_ms)
    _host_pass(out, regions, columns, buf, h, physical, n)
    verdicts = _body_pass(out, regions, columns, buf, h, n, body_end, verdicts)

    # each column's values, nodes and buffers, in the batch's order
    ipc_batch.begin(out, metadata, positions, n)
    unchecked = np.zeros(columns.shape[0], dtype=np.bool_)
    compressed = False
    for c in range(columns.shape[0]):
        k, family, ni, bi = columns[c, P_KIND], columns[c, P_FAMILY], columns[c, P_NODE], columns[c, P_BUFFER]
        if family == Family.POSITION:
            _position_column(out, m, positions, regions, ni, bi, k, base_offset, record_positions, physical, n)
        elif family == Family.HEADER:
            _header_column(out, m, positions, regions, ni, bi, k, columns[c, P_SOURCE], columns[c, P_LAYOUT], h, n)
        elif family == Family.RECORD:
            unchecked[c], any_compressed = _record_column(out, m, positions, regions, ni, bi, k, buf, h, n, measures,
                                                          body_end, body_offsets)
            compressed |= any_compressed
        elif family == Family.PROPERTY:
            unchecked[c] = _property_column(out, m, positions, regions, ni, bi, k, n, derived)
        elif family == Family.HOST:
            _host_column(out, m, positions, regions, ni, bi, n)
        elif family == Family.VERDICT:
            _verdict_column(out, m, positions, regions, ni, bi, k, buf, buf_file_pos, record_positions, h, n, verdicts)
        else:
            raise ValueError("a column family write_batch does not write (context columns are the reader's)")
    ipc_batch.finish(out, positions, end - m)
    return out, end, unchecked, compressed
