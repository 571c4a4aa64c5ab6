"""Inner batches (RocketMQ 5.x, docs/format/batchconsumequeue.md): one CommitLog record, SYSFLAG INNER_BATCH (0x80)
| NEED_UNWRAP (0x40), whose BODY is the producer's encoded messages, each

     0  TOTALSIZE   int32   bytes of this inner message
     4  MAGICCODE   int32   0
     8  BODYCRC     int32   0
    12  FLAG        int32
    16  BODYLENGTH  int32, then BODY
     .  PROPERTIESLENGTH int16, then PROPERTIES (the inner message's own)

``unwrap`` turns decoded records (an Arrow batch of the ``rocketmq`` columns) into what a consumer receives
(``MessageDecoder.decodeMessage(ext, list)``, as the client's pull does for a record with both flags): one row per
inner message with queue offset = the record's QUEUEOFFSET + its index, its own flag, body and properties (and the
tags, keys and UNIQ_KEY derived from them) — plus ``WAIT``, which decodeMessage sets from the record
(``setWaitStoreMsgOK(isWaitStoreMsgOK())``: "false" only where the record's WAIT is "false"); every other column (topic, queue, hosts, times, SYSFLAG, physical
offset, msg_id, the record's verdicts and tagsCode) is the record's. ``body_uncompressed`` of an inner row is null
(inner bodies are not compressed). Other records pass through as they are, and so does an inner batch whose body
does not parse exactly (an inner TOTALSIZE too small or past the body's end, lengths that do not add up): the
outer row, never a partial unwrapping. Vectorized: a numba kernel walks the bodies, Arrow takes assemble the
columns; a batch without inner batches is returned as it is after one look at its SYSFLAGs. Executor or driver.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec import properties
from rocketstore_spark.codec.arrow import binary_array, valid_utf8
from rocketstore_spark.codec.record_schema import STRING_LIST, STRING_MAP, Family, wanted

NEED_UNWRAP, INNER_BATCH = 0x40, 0x80
UNWRAP_FLAGS = NEED_UNWRAP | INNER_BATCH
INNER_HEADER = 22                  # TOTALSIZE .. BODYLENGTH (20) + PROPERTIESLENGTH (2), an empty body
NEEDED = ("sys_flag", "body", "queue_offset")
# the columns an inner message has of its own
OWN = ("flag", "queue_offset", "body", "body_length", "properties", "tags", "keys", "uniq_key", "body_uncompressed")


@numba.njit(cache=True, nogil=True)
def _be32(data, p):
    v = (np.int64(data[p]) << 24) | (np.int64(data[p + 1]) << 16) | (np.int64(data[p + 2]) << 8) | np.int64(data[p + 3])
    return v - (np.int64(1) << 32) if v >= (np.int64(1) << 31) else v


@numba.njit(cache=True, nogil=True)
def _walk(data, offsets, candidate, fill, counts, flag, body_pos, body_len, props_pos, props_len):
    """Count (fill False) or fill the inner messages of each candidate record's body data[offsets[r]:offsets[r+1]].
    counts[r]: its inner messages, 0 when not a candidate or the body does not parse exactly."""
    k = 0
    for r in range(len(candidate)):
        if not candidate[r]:
            continue
        if fill and counts[r] == 0:
            continue
        p, end, n = offsets[r], offsets[r + 1], 0
        ok = p < end
        while ok and p < end:
            if end - p < INNER_HEADER:
                ok = False
                break
            total = _be32(data, p)
            blen = _be32(data, p + 16)
            if total < INNER_HEADER or total > end - p or blen < 0 or blen > total - INNER_HEADER:
                ok = False
                break
            q = p + 20 + blen
            plen = (np.int64(data[q]) << 8) | np.int64(data[q + 1])
            if plen >= 32768:
                plen -= 65536
            if plen < 0 or 22 + blen + plen != total:
                ok = False
                break
            if fill:
                flag[k] = _be32(data, p + 12)
                body_pos[k], body_len[k] = p + 20, blen
                props_pos[k], props_len[k] = q + 2, plen
                k += 1
            n += 1
            p += total
        if not fill:
            counts[r] = n if ok else 0
    return k


def _property_arrays(data, props_pos, props_len, names) -> dict:
    """The property columns among ``names`` of the inner messages whose properties lie at data[props_pos..]."""
    n = len(props_pos)
    want = wanted(Family.PROPERTY, names)
    zeros = np.zeros(n, dtype=np.int64)
    (pair_offsets, key_offsets, key_data, value_offsets, value_data, tags_offsets, tags_data, tags_valid,
     uniq_offsets, uniq_data, uniq_valid, keys_list_offsets, keys_offsets, keys_data, _, _, _,
     ascii) = properties.property_columns(data, props_pos, props_len, zeros, zeros, zeros,
                                          np.zeros(1, dtype=np.int64), n, want)

    def string(offsets, values, count, valid=None):
        mask = None if valid is None else pa.py_buffer(np.packbits(valid, bitorder="little"))
        arr = pa.Array.from_buffers(pa.string(), count, [mask, pa.py_buffer(offsets), pa.py_buffer(values)])
        return arr if ascii else valid_utf8(arr)

    out = {}
    if "properties" in names:
        pairs = int(pair_offsets[-1])
        keys = string(key_offsets, key_data, pairs)
        values = string(value_offsets, value_data, pairs)
        out["properties"] = pa.MapArray.from_arrays(pa.array(pair_offsets, pa.int32()), keys, values,
                                                    type=STRING_MAP)
    if "tags" in names:
        out["tags"] = string(tags_offsets, tags_data, n, tags_valid)
    if "uniq_key" in names:
        out["uniq_key"] = string(uniq_offsets, uniq_data, n, uniq_valid)
    if "keys" in names:
        pieces = string(keys_offsets, keys_data, int(keys_list_offsets[-1]))
        out["keys"] = pa.ListArray.from_arrays(pa.array(keys_list_offsets, pa.int32()), pieces, type=STRING_LIST)
    return out


def _with_wait(props: pa.MapArray, wait_false: pa.BooleanArray) -> pa.MapArray:
    """``props`` with each map's WAIT pair replaced by (or added as) the one decodeMessage puts."""
    n = len(props)
    offsets = props.offsets.to_numpy().astype(np.int64)
    keys, items = props.keys, props.items
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(offsets))
    keep = np.flatnonzero(pc.fill_null(pc.not_equal(keys, "WAIT"), True).to_numpy(zero_copy_only=False))
    rows = np.concatenate([row[keep], np.arange(n, dtype=np.int64)])
    order = pa.array(np.argsort(rows, kind="stable"))
    wait = pc.if_else(wait_false, "false", "true")
    new_keys = pa.concat_arrays([keys.take(pa.array(keep)), pa.array(["WAIT"] * n, pa.string())]).take(order)
    new_items = pa.concat_arrays([items.take(pa.array(keep)), wait.cast(pa.string())]).take(order)
    counts = np.bincount(rows, minlength=n)
    new_offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=new_offsets[1:])
    return pa.MapArray.from_arrays(pa.array(new_offsets), new_keys, new_items, type=STRING_MAP)


def has_inner_batches(sys_flag: pa.Array) -> bool:
    flags = np.asarray(sys_flag.to_numpy(zero_copy_only=False))
    return bool(np.count_nonzero((flags & UNWRAP_FLAGS) == UNWRAP_FLAGS))


def unwrap(batch: pa.RecordBatch) -> pa.RecordBatch:
    """``batch`` (holding at least NEEDED) with each inner batch replaced by its inner messages (module
    docstring), in order."""
    sys_flag = batch.column("sys_flag")
    if not has_inner_batches(sys_flag):
        return batch
    flags = sys_flag.to_numpy(zero_copy_only=False)
    body = batch.column("body")
    if body.offset or body.null_count:
        body = pa.concat_arrays([body])            # own buffers from 0 (nulls: none from the decoder)
    offsets = np.frombuffer(body.buffers()[1], dtype=np.int32)[: len(body) + 1].astype(np.int64)
    data = np.frombuffer(body.buffers()[2], dtype=np.uint8) if body.buffers()[2] is not None \
        else np.zeros(0, dtype=np.uint8)
    candidate = (flags & UNWRAP_FLAGS) == UNWRAP_FLAGS
    counts = np.zeros(len(flags), dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    _walk(data, offsets, candidate, False, counts, none, none, none, none, none)
    unwrapped = counts > 0
    if not np.count_nonzero(unwrapped):
        return batch
    total = int(counts.sum())
    flag, body_pos, body_len, props_pos, props_len = (np.empty(total, dtype=np.int64) for _ in range(5))
    _walk(data, offsets, candidate, True, counts, flag, body_pos, body_len, props_pos, props_len)

    per_row = np.where(unwrapped, counts, 1)
    take = np.repeat(np.arange(len(flags), dtype=np.int64), per_row)     # the record of each output row
    inner = np.repeat(unwrapped, per_row)                                # an inner message's row
    starts = np.cumsum(per_row) - per_row
    index = np.arange(len(take), dtype=np.int64) - np.repeat(starts, per_row)   # its place in its record
    whole_rows = np.flatnonzero(~unwrapped)
    # an output row's place in concat(whole rows' values, inner messages' values)
    order = np.empty(len(take), dtype=np.int64)
    order[~inner] = np.arange(len(whole_rows))
    order[inner] = len(whole_rows) + np.arange(total)
    order_arr = pa.array(order)

    names = batch.schema.names
    own = {}          # an inner message's own values, for its rows only (concatenated after the whole rows')
    ready = {}        # whole columns made at once for every output row (no concatenation, no second copy)

    def every_row(whole: np.ndarray, mine: np.ndarray) -> np.ndarray:
        out = np.empty(len(take), dtype=np.result_type(whole, mine))
        out[~inner], out[inner] = whole, mine
        return out
    if "flag" in names:
        whole = batch.column("flag").to_numpy(zero_copy_only=False)[whole_rows]
        ready["flag"] = pa.array(every_row(whole, flag.astype(np.int32)))
    if "queue_offset" in names:
        offsets_in = batch.column("queue_offset").to_numpy(zero_copy_only=False)
        ready["queue_offset"] = pa.array(offsets_in[take] + np.where(inner, index, 0))
    if "body" in names or "body_length" in names:
        lens = every_row(offsets[whole_rows + 1] - offsets[whole_rows], body_len)
        if "body" in names:
            ready["body"] = binary_array(data, every_row(offsets[whole_rows], body_pos), lens, len(take))
        if "body_length" in names:
            ready["body_length"] = pa.array(lens.astype(np.int32))
    if "body_uncompressed" in names:
        own["body_uncompressed"] = pa.nulls(total, pa.binary())
    own.update(_property_arrays(data, props_pos, props_len, [c for c in OWN if c in names]))
    if "properties" in names:
        outer_wait = pc.map_lookup(batch.column("properties"), "WAIT", "first").take(pa.array(take[inner]))
        own["properties"] = _with_wait(own["properties"], pc.fill_null(pc.equal(outer_wait, "false"), False))
    take_arr = pa.array(take)
    columns = []
    for i, name in enumerate(names):
        column = batch.column(i)
        if name in ready:
            column = ready[name]
        elif name in own:
            mine = own[name].cast(column.type) if own[name].type != column.type else own[name]
            column = pa.concat_arrays([column.take(pa.array(whole_rows)), mine]).take(order_arr)
        else:
            column = column.take(take_arr)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=batch.schema)

