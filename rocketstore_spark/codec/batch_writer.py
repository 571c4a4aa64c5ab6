"""A decoder's batch written by one compiled call: every requested column of the walked records, straight into
one Arrow IPC record batch message (``ipc_batch``), which pyarrow then reads without a copy.

The message lives in an *arena*: [metadata | body]. The walk (``tiles.walk_tiles``) has already copied the
bodies to the start of the body (``BODY_AT``). ``write_batch`` puts everything else after them: first the
buffers that several columns derive from (``properties.property_columns_into`` and ``hosts.host_columns_into``
write theirs in place, into regions sized for the worst case), then each requested column's own buffers in the
batch's order; it fills in the metadata's nodes and buffers as it goes (a buffer may lie anywhere in the body).
Why: a batch assembled in Python from many small arrays cost ~60 Arrow calls and as many allocations per batch.
A column is named by its kind (K_*, one per ``record_schema`` column; ``plan`` lists them in batch order). What a column holds is defined where the
columns are (``record_schema``, ``decoder``); this module only lays them out: int32/int64 values, timestamps as
UTC microseconds with nulls outside years 1-9999, booleans and validity as little-endian bitmaps, strings and
binaries as int32 offsets + bytes, ``properties`` as map<string, string>, ``keys`` as list<string>.

Strings built from bytes that are not all ASCII are not known to be UTF-8: their columns are flagged in the
returned ``unchecked`` (the caller validates them). A batch with compressed bodies has ``body_uncompressed``
written as nulls and ``compressed`` set (the caller decompresses). Runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec import hosts, ipc_batch, native, properties
from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS, gather_into, is_ascii, spans_size
from rocketstore_spark.codec.commitlog import (H_BODY_CRC, H_BODY_LEN, H_BODY_POS, H_BORN_HOST_POS,
                                               H_BORN_TIMESTAMP, H_FLAG, H_MAGIC_CODE,
                                               H_PREPARED_TRANSACTION_OFFSET, H_PROPS_LEN, H_PROPS_POS, H_QUEUE_ID,
                                               H_QUEUE_OFFSET, H_RECONSUME_TIMES, H_STORE_HOST_POS,
                                               H_STORE_TIMESTAMP, H_STORED_PHYSICAL_OFFSET, H_SYS_FLAG,
                                               H_TOPIC_LEN, H_TOPIC_POS, H_TOTAL_SIZE, MAGIC_V2, TRANSACTION_MASK,
                                               TRANSACTION_TYPES)
from rocketstore_spark.codec.compression import COMPRESSED_FLAG
from rocketstore_spark.codec.crc32 import bodies_end, copy_checked, crc_ok, prop_crc_ok
from rocketstore_spark.codec.record_schema import NAMES

# the column kinds, in record_schema's order
(K_STORE, K_SEGMENT_BASE_OFFSET, K_FILE_POSITION, K_PHYSICAL_OFFSET, K_TOTAL_SIZE, K_MAGIC_CODE, K_RECORD_VERSION,
 K_BODY_CRC, K_QUEUE_ID, K_FLAG, K_QUEUE_OFFSET, K_SYS_FLAG, K_BORN_TIMESTAMP, K_STORE_TIMESTAMP, K_BORN_HOST,
 K_STORE_HOST, K_RECONSUME_TIMES, K_PREPARED_TRANSACTION_OFFSET, K_BODY_LENGTH, K_BODY, K_TOPIC, K_PROPERTIES,
 K_TAGS, K_KEYS, K_UNIQ_KEY, K_MSG_ID, K_TRANSACTION_TYPE, K_BODY_CRC_OK, K_PROPERTIES_CRC_OK, K_TAGS_CODE,
 K_STORED_PHYSICAL_OFFSET, K_DELIVER_TIME, K_BODY_UNCOMPRESSED) = range(33)
KINDS = {name: k for k, name in enumerate(NAMES)}
assert len(KINDS) == 33 and KINDS["body_uncompressed"] == K_BODY_UNCOMPRESSED and KINDS["store"] == K_STORE

BODY_AT = 0             # where the walk's bodies lie in the message body


def plan(names) -> np.ndarray:
    """The kinds of the columns ``names``, in order (``write_batch``'s plan)."""
    out = np.array([KINDS[name] for name in names], dtype=np.int64)
    out.flags.writeable = False
    return out


def wants(names) -> tuple[np.ndarray, np.ndarray]:
    """(property_columns' want flags, host_columns' want flags) of the columns ``names``."""
    names = set(names)
    props = ((properties.WANT_MAP, "properties"), (properties.WANT_TAGS, "tags"), (properties.WANT_KEYS, "keys"),
             (properties.WANT_UNIQ_KEY, "uniq_key"), (properties.WANT_TAGS_CODE, "tags_code"),
             (properties.WANT_DELIVER_TIME, "deliver_time"))
    host = ((hosts.WANT_BORN_HOST, "born_host"), (hosts.WANT_STORE_HOST, "store_host"), (hosts.WANT_MSG_ID, "msg_id"))
    flags = []
    for table in (props, host):
        out = np.zeros(len(table), dtype=np.bool_)
        for flag, name in table:
            out[flag] = name in names
        flags.append(out)
    return flags[0], flags[1]


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
    native.memcpy(np.intp(bigger.ctypes.data), np.intp(out.ctypes.data), min(used, out.shape[0]))
    return bigger


@numba.njit(cache=True, nogil=True, inline="always")
def _copy_in(out, at, src, nbytes):
    """``nbytes`` bytes of array ``src`` (any dtype) to out[at:]; returns the next 8-aligned position."""
    if nbytes > 0:
        native.memcpy(np.intp(out.ctypes.data) + at, np.intp(src.ctypes.data), nbytes)
    return _align8(at + nbytes)


@numba.njit(cache=True, nogil=True, inline="always")
def _bits_in(out, at, flags, n):
    """n booleans as a bitmap at out[at:]; returns (next position, how many are False)."""
    nbytes = (n + 7) // 8
    false = 0
    for i in range(nbytes):
        byte = 0
        for b in range(min(8, n - 8 * i)):
            if flags[8 * i + b]:
                byte |= 1 << b
            else:
                false += 1
        out[at + i] = byte
    return _align8(at + nbytes), false


@numba.njit(cache=True, nogil=True)
def _strings(out, at, m, positions, ni, bi, offsets_at, data_at, data_len, count, valid, nullable):
    """A string or binary column of ``count`` values whose int32 offsets (from 0) lie at out[offsets_at:] and
    bytes at out[data_at:][:data_len]: node ``ni``, buffers bi..bi+2, and, when ``nullable``, its validity
    (False in ``valid``: null) written at out[at:]. Returns (arena, next position)."""
    nulls = 0
    validity_at = at
    nbytes = (count + 7) // 8
    if nullable:
        out = _grown(out, at, at + nbytes + 8)
        at, nulls = _bits_in(out, at, valid, count)
    ipc_batch.buffer(out, positions, bi, validity_at - m, nbytes if nulls else 0)
    ipc_batch.buffer(out, positions, bi + 1, offsets_at - m, 4 * (count + 1))
    ipc_batch.buffer(out, positions, bi + 2, data_at - m, data_len)
    ipc_batch.node(out, positions, ni, count, nulls)
    return out, at


@numba.njit(cache=True, nogil=True)
def _string_region(out, at, n, data_bytes):
    """Room at out[at:] for a string column's n + 1 offsets and ``data_bytes`` of data (plus the spare bytes
    ``native.copy_at`` writes past its end): (arena, offsets at, data at)."""
    data_at = _align8(at + 4 * (n + 1))
    return _grown(out, at, data_at + data_bytes + native.SHORT_COPY + 8), at, data_at


@numba.njit(cache=True, nogil=True, inline="always")
def _region(at, nbytes):
    """(start, next start) of a region of ``nbytes`` (at least 8) at ``at``."""
    return at, _align8(at + max(nbytes, 8))


@numba.njit(cache=True, nogil=True)
def _fixed(out, at, m, positions, ni, bi, width, n):
    """Node and buffers of a never-null fixed-width column of n values of ``width`` bytes at out[at:] (the caller
    writes the values); returns the next position."""
    ipc_batch.node(out, positions, ni, n, 0)
    ipc_batch.buffer(out, positions, bi, at - m, 0)
    ipc_batch.buffer(out, positions, bi + 1, at - m, width * n)
    return _align8(at + width * n)


# the transaction type names back to back (zero-padded: each is written as one 8-byte store), where each starts,
# and their lengths (index = (sys_flag & TRANSACTION_MASK) >> 2)
_TRANSACTION_NAMES = np.frombuffer("".join(TRANSACTION_TYPES).encode() + bytes(8), dtype=np.uint8).copy()
_TRANSACTION_LEN = np.array([len(t) for t in TRANSACTION_TYPES], dtype=np.int64)
_TRANSACTION_AT = np.cumsum(_TRANSACTION_LEN) - _TRANSACTION_LEN


# -------------------------------------------------------------------------------------------- the batch

@numba.njit(cache=True, nogil=True)
def write_batch(out, metadata, positions, plan_, buf, buf_file_pos, base_offset, record_positions, h, n, body_end,
                body_offsets, verdicts, delay_ms, want_properties, want_hosts):
    """Write the message of the n records at file positions ``record_positions`` of a segment at ``base_offset``
    (``buf`` holds its bytes from file position ``buf_file_pos``; ``h``: their header fields, positions as
    indices into ``buf``) into the arena ``out`` (metadata ``metadata``/``positions`` of ``ipc_batch.Template``).
    With ``body_end`` >= 0 the bodies are in the arena's body from BODY_AT to body_end, indexed by
    ``body_offsets``; else they are copied here. ``verdicts``: the records' BODYCRC verdicts when already known
    (else empty).

    Returns (arena — ``out`` or a grown copy —, message size, unchecked — per planned column: strings not
    known to be UTF-8 —, compressed: is any body compressed (body_uncompressed then is all null here))."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    m = positions[ipc_batch.POS_METADATA_SIZE]
    columns = plan_.shape[0]
    unchecked = np.zeros(columns, dtype=np.bool_)
    body_len, body_pos, sys_flag = h[H_BODY_LEN], h[H_BODY_POS], h[H_SYS_FLAG]
    any_props = any_hosts = wants_crc = wants_uncompressed = False
    for c in range(columns):
        k = plan_[c]
        wants_uncompressed |= k == K_BODY_UNCOMPRESSED
        any_props |= (k == K_PROPERTIES or k == K_TAGS or k == K_KEYS or k == K_UNIQ_KEY or k == K_TAGS_CODE
                      or k == K_DELIVER_TIME)
        any_hosts |= k == K_BORN_HOST or k == K_STORE_HOST or k == K_MSG_ID
        wants_crc |= k == K_BODY_CRC_OK
    physical = np.empty(n, dtype=np.int64)
    for r in range(n):
        physical[r] = base_offset + record_positions[r]
    compressed = False
    if wants_uncompressed:
        for r in range(n):
            compressed |= (sys_flag[r] & COMPRESSED_FLAG) != 0
    at = m + BODY_AT + (_align8(body_end) if body_end >= 0 else 0)

    # what several columns derive from is written first, in place: the property and host columns' buffers, in
    # regions reserved after the bodies (sized for the worst case; their buffers are named in plan order below)
    wp = want_properties
    w_map, w_tags, w_keys, w_uniq = (any_props and wp[properties.WANT_MAP], any_props and wp[properties.WANT_TAGS],
                                     any_props and wp[properties.WANT_KEYS], any_props and wp[properties.WANT_UNIQ_KEY])
    w_code = any_props and wp[properties.WANT_TAGS_CODE]
    w_deliver = any_props and wp[properties.WANT_DELIVER_TIME]
    props_len = h[H_PROPS_LEN]
    data_cap, pairs_cap, record_cap = properties.property_capacity(props_len, n if any_props else 0)
    slack = properties.COPY_SLACK
    regions = at
    pair_at, regions = _region(regions, 4 * (n + 1) if w_map else 4)
    key_offsets_at, regions = _region(regions, 4 * (pairs_cap + 1) if w_map else 4)
    value_offsets_at, regions = _region(regions, 4 * (pairs_cap + 1) if w_map else 4)
    key_data_at, regions = _region(regions, data_cap + slack if w_map else 0)
    value_data_at, regions = _region(regions, data_cap + slack if w_map else 0)
    tags_offsets_at, regions = _region(regions, 4 * (n + 1) if w_tags else 4)
    tags_data_at, regions = _region(regions, data_cap + slack if w_tags else 0)
    uniq_offsets_at, regions = _region(regions, 4 * (n + 1) if w_uniq else 4)
    uniq_data_at, regions = _region(regions, data_cap + slack if w_uniq else 0)
    keys_list_at, regions = _region(regions, 4 * (n + 1) if w_keys else 4)
    keys_offsets_at, regions = _region(regions, 4 * (data_cap // 2 + n + 1) if w_keys else 4)
    keys_data_at, regions = _region(regions, data_cap + slack if w_keys else 0)
    tags_code_at, regions = _region(regions, 8 * n if w_code else 0)
    w_born, w_store, w_id = (any_hosts and want_hosts[hosts.WANT_BORN_HOST],
                             any_hosts and want_hosts[hosts.WANT_STORE_HOST], any_hosts and want_hosts[hosts.WANT_MSG_ID])
    born_offsets_at, regions = _region(regions, 4 * (n + 1) if w_born else 4)
    born_at, regions = _region(regions, n * hosts.HOST_MAX + hosts.SLACK if w_born else 0)
    store_offsets_at, regions = _region(regions, 4 * (n + 1) if w_store else 4)
    store_at, regions = _region(regions, n * hosts.HOST_MAX + hosts.SLACK if w_store else 0)
    id_offsets_at, regions = _region(regions, 4 * (n + 1) if w_id else 4)
    ids_at, regions = _region(regions, n * hosts.MSG_ID_V6 + hosts.SLACK if w_id else 0)
    out = _grown(out, at, regions)
    tags_valid = np.empty(n if w_tags else 0, dtype=np.bool_)
    uniq_valid = np.empty(n if w_uniq else 0, dtype=np.bool_)
    deliver_time = np.empty(n if w_deliver else 0, dtype=np.int64)
    deliver_valid = np.empty(n if w_deliver else 0, dtype=np.bool_)
    pairs = ko = vo = to = uo = pieces = kdo = 0
    props_ascii = True
    if any_props:
        with_topic = w_code or w_deliver
        no64 = np.zeros(0, dtype=np.int64)
        pairs, ko, vo, to, uo, pieces, kdo, props_ascii = properties.property_columns_into(
            buf, h[H_PROPS_POS], props_len, h[H_TOPIC_POS] if with_topic else no64,
            h[H_TOPIC_LEN] if with_topic else no64, h[H_STORE_TIMESTAMP] if with_topic else no64, delay_ms, n, wp,
            record_cap, _int32s(out, pair_at, key_offsets_at), _int32s(out, key_offsets_at, value_offsets_at),
            out[key_data_at:value_data_at], _int32s(out, value_offsets_at, key_data_at),
            out[value_data_at:tags_offsets_at], _int32s(out, tags_offsets_at, tags_data_at),
            out[tags_data_at:uniq_offsets_at], tags_valid, _int32s(out, uniq_offsets_at, uniq_data_at),
            out[uniq_data_at:keys_list_at], uniq_valid, _int32s(out, keys_list_at, keys_offsets_at),
            _int32s(out, keys_offsets_at, keys_data_at), out[keys_data_at:tags_code_at],
            out[tags_code_at:tags_code_at + 8 * n].view(np.int64) if w_code else no64, deliver_time, deliver_valid)
    if any_hosts:
        none = np.zeros(0, dtype=np.int64)
        hosts.host_columns_into(
            buf, h[H_BORN_HOST_POS] if w_born else none, h[H_STORE_HOST_POS] if w_store or w_id else none, sys_flag,
            physical, n, want_hosts, _int32s(out, born_offsets_at, born_at), out[born_at:store_offsets_at],
            _int32s(out, store_offsets_at, store_at), out[store_at:id_offsets_at], _int32s(out, id_offsets_at, ids_at),
            out[ids_at:regions])
    born_end = _int32s(out, born_offsets_at, born_at)[n] if w_born else 0
    store_end = _int32s(out, store_offsets_at, store_at)[n] if w_store else 0
    ids_end = _int32s(out, id_offsets_at, ids_at)[n] if w_id else 0
    at = regions

    ipc_batch.begin(out, metadata, positions, n)
    no_flags = np.zeros(0, dtype=np.bool_)      # the validity of a column without nulls
    ni = bi = 0
    for c in range(columns):
        k = plan_[c]
        if k == K_TAGS_CODE:                    # written in place by the property pass
            _fixed(out, tags_code_at, m, positions, ni, bi, 8, n)
            ni, bi = ni + 1, bi + 2
        elif k == K_SEGMENT_BASE_OFFSET or k == K_FILE_POSITION or k == K_PHYSICAL_OFFSET or k == K_QUEUE_OFFSET \
                or k == K_STORED_PHYSICAL_OFFSET or k == K_PREPARED_TRANSACTION_OFFSET:
            out = _grown(out, at, at + 8 * n + 8)
            values = out[at:at + 8 * n].view(np.int64)
            if k == K_SEGMENT_BASE_OFFSET:
                values[:] = base_offset
            elif k == K_FILE_POSITION:
                values[:] = record_positions[:n]
            elif k == K_PHYSICAL_OFFSET:
                values[:] = physical
            elif k == K_QUEUE_OFFSET:
                values[:] = h[H_QUEUE_OFFSET][:n]
            elif k == K_STORED_PHYSICAL_OFFSET:
                values[:] = h[H_STORED_PHYSICAL_OFFSET][:n]
            else:
                values[:] = h[H_PREPARED_TRANSACTION_OFFSET][:n]
            at = _fixed(out, at, m, positions, ni, bi, 8, n)
            ni, bi = ni + 1, bi + 2
        elif k == K_TOTAL_SIZE or k == K_MAGIC_CODE or k == K_RECORD_VERSION or k == K_BODY_CRC \
                or k == K_QUEUE_ID or k == K_FLAG or k == K_SYS_FLAG or k == K_RECONSUME_TIMES or k == K_BODY_LENGTH:
            out = _grown(out, at, at + 4 * n + 8)
            values32 = out[at:at + 4 * n].view(np.int32)
            if k == K_TOTAL_SIZE:
                values32[:] = h[H_TOTAL_SIZE][:n]
            elif k == K_MAGIC_CODE:
                values32[:] = h[H_MAGIC_CODE][:n]
            elif k == K_RECORD_VERSION:
                magic = h[H_MAGIC_CODE]
                for r in range(n):
                    values32[r] = 2 if magic[r] == MAGIC_V2 else 1
            elif k == K_BODY_CRC:
                values32[:] = h[H_BODY_CRC][:n]
            elif k == K_QUEUE_ID:
                values32[:] = h[H_QUEUE_ID][:n]
            elif k == K_FLAG:
                values32[:] = h[H_FLAG][:n]
            elif k == K_SYS_FLAG:
                values32[:] = sys_flag[:n]
            elif k == K_RECONSUME_TIMES:
                values32[:] = h[H_RECONSUME_TIMES][:n]
            else:
                for r in range(n):
                    values32[r] = np.int32(body_len[r])
            at = _fixed(out, at, m, positions, ni, bi, 4, n)
            ni, bi = ni + 1, bi + 2
        elif k == K_BORN_TIMESTAMP or k == K_STORE_TIMESTAMP or k == K_DELIVER_TIME:
            nbytes = (n + 7) // 8
            out = _grown(out, at, at + nbytes + 8 * n + 16)
            ms = h[H_BORN_TIMESTAMP] if k == K_BORN_TIMESTAMP else (
                h[H_STORE_TIMESTAMP] if k == K_STORE_TIMESTAMP else deliver_time)
            check_present = k == K_DELIVER_TIME
            bits_at = at
            values_at = _align8(bits_at + nbytes)
            us = out[values_at:values_at + 8 * n].view(np.int64)
            nulls = 0
            for i in range(nbytes):
                byte = 0
                for b in range(min(8, n - 8 * i)):
                    r = 8 * i + b
                    v = ms[r]
                    if MIN_TIMESTAMP_MS <= v <= MAX_TIMESTAMP_MS and (not check_present or deliver_valid[r]):
                        us[r] = v * 1000
                        byte |= 1 << b
                    else:
                        us[r] = 0
                        nulls += 1
                out[bits_at + i] = byte
            ipc_batch.node(out, positions, ni, n, nulls)
            ipc_batch.buffer(out, positions, bi, bits_at - m, nbytes if nulls else 0)
            ipc_batch.buffer(out, positions, bi + 1, values_at - m, 8 * n)
            at = _align8(values_at + 8 * n)
            ni, bi = ni + 1, bi + 2
        elif k == K_BODY_CRC_OK or k == K_PROPERTIES_CRC_OK:
            nbytes = (n + 7) // 8
            out = _grown(out, at, at + 2 * nbytes + 16)
            if k == K_BODY_CRC_OK:
                if verdicts.shape[0] != n:          # bodies copied here: checked as they are (K_BODY below)
                    verdicts = crc_ok(buf, body_pos, body_len, h[H_BODY_CRC], n)
                ipc_batch.buffer(out, positions, bi, at - m, 0)
                values_at = at
                at, _ = _bits_in(out, at, verdicts, n)
                nulls = 0
            else:
                ok, present = prop_crc_ok(buf, record_positions - buf_file_pos, h[H_TOTAL_SIZE], h[H_PROPS_LEN], n)
                validity_at = at
                at, nulls = _bits_in(out, at, present, n)
                ipc_batch.buffer(out, positions, bi, validity_at - m, nbytes if nulls else 0)
                values_at = at
                at, _ = _bits_in(out, at, ok, n)
            ipc_batch.buffer(out, positions, bi + 1, values_at - m, nbytes)
            ipc_batch.node(out, positions, ni, n, nulls)
            ni, bi = ni + 1, bi + 2
        elif k == K_BODY:
            if body_end >= 0:                   # the walk's bodies, at the start of the body
                out = _grown(out, at, at + 4 * (n + 1) + 8)
                offsets_at = at
                at = _copy_in(out, at, body_offsets, 4 * (n + 1))
                out, at = _strings(out, at, m, positions, ni, bi, offsets_at, m + BODY_AT, body_offsets[n], n,
                                   no_flags, False)
            else:
                size = bodies_end(body_len, 0, n, 0)         # Arrow's int32 offsets: at most 2 GiB
                out, offsets_at, data_at = _string_region(out, at, n, size)
                offsets = _int32s(out, offsets_at, data_at)
                if wants_crc and verdicts.shape[0] != n:        # checked on the copy, as the walk does
                    offsets[0] = 0
                    verdicts = np.empty(n, dtype=np.bool_)
                    copy_checked(buf, body_pos, body_len, h[H_BODY_CRC], 0, n, out[data_at:data_at + size],
                                 offsets, verdicts, 0)
                else:
                    gather_into(buf, body_pos, body_len, n, out[data_at:], offsets)
                out, at = _strings(out, _align8(data_at + size), m, positions, ni, bi, offsets_at, data_at, size, n,
                                   no_flags, False)
            ni, bi = ni + 1, bi + 3
        elif k == K_BODY_UNCOMPRESSED:
            # all null here; the caller decompresses a batch with compressed bodies (``compressed``)
            nbytes = (n + 7) // 8
            out = _grown(out, at, at + nbytes + 4 * (n + 1) + 16)
            ipc_batch.node(out, positions, ni, n, n)
            ipc_batch.buffer(out, positions, bi, at - m, nbytes)
            out[at:at + _align8(nbytes)] = 0
            at = _align8(at + nbytes)
            ipc_batch.buffer(out, positions, bi + 1, at - m, 4 * (n + 1))
            out[at:at + _align8(4 * (n + 1))] = 0
            at = _align8(at + 4 * (n + 1))
            ipc_batch.buffer(out, positions, bi + 2, at - m, 0)
            ni, bi = ni + 1, bi + 3
        elif k == K_TOPIC:
            topic_pos, topic_len = h[H_TOPIC_POS], h[H_TOPIC_LEN]
            out, offsets_at, data_at = _string_region(out, at, n, spans_size(topic_len, n))
            size = gather_into(buf, topic_pos, topic_len, n, out[data_at:], _int32s(out, offsets_at, data_at))
            unchecked[c] = not is_ascii(out[data_at:data_at + size])
            out, at = _strings(out, _align8(data_at + size), m, positions, ni, bi, offsets_at, data_at, size, n,
                               no_flags, False)
            ni, bi = ni + 1, bi + 3
        elif k == K_TRANSACTION_TYPE:
            out, offsets_at, data_at = _string_region(out, at, n, 8 * n)
            offsets = _int32s(out, offsets_at, data_at)
            offsets[0] = 0
            o = 0
            for r in range(n):
                kind = (sys_flag[r] & TRANSACTION_MASK) >> 2
                native.store_le64(out, data_at + o, native.load_le64(_TRANSACTION_NAMES, _TRANSACTION_AT[kind]))
                o += _TRANSACTION_LEN[kind]
                offsets[r + 1] = o
            out, at = _strings(out, _align8(data_at + o), m, positions, ni, bi, offsets_at, data_at, o, n, no_flags,
                               False)
            ni, bi = ni + 1, bi + 3
        elif k == K_TAGS:
            out, at = _strings(out, at, m, positions, ni, bi, tags_offsets_at, tags_data_at, to, n, tags_valid, True)
            unchecked[c] = not props_ascii
            ni, bi = ni + 1, bi + 3
        elif k == K_UNIQ_KEY:
            out, at = _strings(out, at, m, positions, ni, bi, uniq_offsets_at, uniq_data_at, uo, n, uniq_valid, True)
            unchecked[c] = not props_ascii
            ni, bi = ni + 1, bi + 3
        elif k == K_BORN_HOST:
            out, at = _strings(out, at, m, positions, ni, bi, born_offsets_at, born_at, born_end, n, no_flags, False)
            ni, bi = ni + 1, bi + 3
        elif k == K_STORE_HOST:
            out, at = _strings(out, at, m, positions, ni, bi, store_offsets_at, store_at, store_end, n, no_flags,
                               False)
            ni, bi = ni + 1, bi + 3
        elif k == K_MSG_ID:
            out, at = _strings(out, at, m, positions, ni, bi, id_offsets_at, ids_at, ids_end, n, no_flags, False)
            ni, bi = ni + 1, bi + 3
        elif k == K_PROPERTIES:
            ipc_batch.node(out, positions, ni, n, 0)
            ipc_batch.buffer(out, positions, bi, pair_at - m, 0)
            ipc_batch.buffer(out, positions, bi + 1, pair_at - m, 4 * (n + 1))
            ipc_batch.node(out, positions, ni + 1, pairs, 0)               # the entries struct
            ipc_batch.buffer(out, positions, bi + 2, pair_at - m, 0)
            out, at = _strings(out, at, m, positions, ni + 2, bi + 3, key_offsets_at, key_data_at, ko, pairs,
                               no_flags, False)
            out, at = _strings(out, at, m, positions, ni + 3, bi + 6, value_offsets_at, value_data_at, vo, pairs,
                               no_flags, False)
            unchecked[c] = not props_ascii
            ni, bi = ni + 4, bi + 9
        elif k == K_KEYS:
            ipc_batch.node(out, positions, ni, n, 0)
            ipc_batch.buffer(out, positions, bi, keys_list_at - m, 0)
            ipc_batch.buffer(out, positions, bi + 1, keys_list_at - m, 4 * (n + 1))
            out, at = _strings(out, at, m, positions, ni + 1, bi + 2, keys_offsets_at, keys_data_at, kdo, pieces,
                               no_flags, False)
            unchecked[c] = not props_ascii
            ni, bi = ni + 2, bi + 5
        else:
            raise ValueError("a column kind write_batch does not write (context columns are the reader's)")
    ipc_batch.finish(out, positions, at - m)
    return out, at, unchecked, compressed


@numba.njit(cache=True, nogil=True, inline="always")
def _int32s(out, start, end):
    """out[start:end] as int32s (start 8-aligned; a whole number of them)."""
    return out[start:start + (end - start) // 4 * 4].view(np.int32)
