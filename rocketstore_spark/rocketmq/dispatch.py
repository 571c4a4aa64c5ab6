"""RocketMQ's dispatch rules over Arrow tables: which CommitLog records get a ConsumeQueue entry and which
IndexFile keys, as the broker's dispatchers derive them (``CommitLogDispatcherBuildConsumeQueue``,
``IndexService.buildIndex``; docs/format/consumequeue.md "What gets an entry", docs/format/indexfile.md "Which
keys are indexed").

The rules themselves are compiled once in ``codec.dispatch_kernel`` (the rebuild runs them on CommitLog windows
through its ``DispatchDecoder``); this module applies the same kernel to a table of decoded records (the
columns of ``DISPATCH_COLUMNS``, any order of rows) for verify, settings detection and tests. Output is
Arrow/numpy in dispatch order (ascending physical offset). Vectorised; runs wherever called (driver,
executor, CLI).

Release families differ in the keys (``releases.Family.index_tags``): from 5.4.0 on, ``IndexService.buildIndex`` also
puts ``topic#T#TAGS`` (the whole TAGS value, a multi-tag ``a||b`` as one key; not for an empty TAGS).
Record types: NOT_TYPE and COMMIT get a ConsumeQueue entry; every type but ROLLBACK is indexed (PREPARED
records are indexed though not queued). docs/format/rocketmq-dispatch.md has the source citations.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec import dispatch_kernel as kernel
from rocketstore_spark.codec.commitlog import TRANSACTION_TYPES
from rocketstore_spark.codec.javahash import index_hash_from_java, java_hash_span
from rocketstore_spark.rocketmq.releases import Release

DISPATCH_COLUMNS = ("physical_offset", "total_size", "topic", "queue_id", "queue_offset", "transaction_type",
                    "tags_code", "store_timestamp", "uniq_key", "keys", "tags")
QUEUED_TYPES = kernel.QUEUED_TYPES
UNINDEXED_TYPES = kernel.UNINDEXED_TYPES
KEY_SEPARATOR = kernel.KEY_SEPARATOR
TAGS_KEY_SEPARATOR = kernel.TAGS_KEY_SEPARATOR
KIND_UNIQ_KEY, KIND_KEY, KIND_TAGS = kernel.KIND_UNIQ_KEY, kernel.KIND_KEY, kernel.KIND_TAGS


def queue_keys(topic_indices, queue_ids) -> np.ndarray:
    """One int64 per record naming its queue: the topic's dictionary index in the high 32 bits, the queue id
    (any int32, negative ones included: damage) in the low 32 bits (``queue_of`` decodes it)."""
    return (np.asarray(topic_indices, dtype=np.int64) << 32) | (np.asarray(queue_ids, dtype=np.int64) & 0xFFFFFFFF)


def queue_of(key: int) -> tuple[int, int]:
    """(topic dictionary index, queue id) of a ``queue_keys`` value."""
    return int(key) >> 32, int(np.int32(np.uint32(int(key) & 0xFFFFFFFF)))


def sort_for_dispatch(records: pa.Table) -> pa.Table:
    """Records in CommitLog order: the order the broker dispatches them in (a batch read in order, the usual
    case, is returned as it is)."""
    if records.num_rows > 1 and (np.diff(records["physical_offset"].to_numpy()) > 0).all():
        return records
    return records.sort_by("physical_offset")


def queue_entries(records: pa.Table) -> pa.Table:
    """The records that get a ConsumeQueue entry, in dispatch order: topic, queue_id, queue_offset,
    physical_offset, size, and tags_code where ``records`` has it (placing entries needs no tagsCode)."""
    queued = sort_for_dispatch(records.filter(kernel.QUEUED[_type_index(records["transaction_type"])]))
    columns = {"topic": queued["topic"], "queue_id": queued["queue_id"], "queue_offset": queued["queue_offset"],
               "physical_offset": queued["physical_offset"], "size": queued["total_size"]}
    if "tags_code" in queued.column_names:
        columns["tags_code"] = queued["tags_code"]
    return pa.table(columns)


def split_queues(records: pa.Table):
    """(topic, queue id, numpy columns) of each queue's records in a table that get an entry, in CommitLog
    order (a window of records already in memory; ``verify.store.Dispatched`` does a whole store through spill files)."""
    queued = queue_entries(records)
    if not queued.num_rows:
        return
    topics = pc.dictionary_encode(queued["topic"]).combine_chunks()
    key = queue_keys(topics.indices.to_numpy(), queued["queue_id"].to_numpy())
    order = np.argsort(key, kind="stable")
    key = key[order]
    cols = {c: queued[c].to_numpy()[order] for c in ("queue_offset", "physical_offset", "size", "tags_code")
            if c in queued.column_names}
    names = topics.dictionary.to_pylist()
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    for start, stop in zip(starts, np.r_[starts[1:], len(key)]):
        topic, queue_id = queue_of(key[start])
        yield names[topic], queue_id, {c: v[start:stop] for c, v in cols.items()}


def index_keys(records: pa.Table, release: Release) -> pa.Table:
    """Every IndexFile key in put order (dispatch order; per record UNIQ_KEY, then the KEYS pieces, then from
    5.4.0 the TAGS key): key_hash (the non-negative index hash), physical_offset, store_timestamp (ms), kind
    (``KIND_*``: what the key is made of). Hashed by ``codec.dispatch_kernel.index_keys``; no key string is
    built."""
    records = sort_for_dispatch(records)
    kind = _type_index(records["transaction_type"])
    topic_data, topic_offsets, _ = _strings(records["topic"])
    uniq_data, uniq_offsets, uniq_valid = _strings(records["uniq_key"])
    tags_data, tags_offsets, tags_valid = _strings(records["tags"])
    keys = records["keys"].combine_chunks() if records.num_rows else pa.array([], pa.list_(pa.string()))
    keys_list_offsets = np.r_[0, np.cumsum(pc.list_value_length(keys).fill_null(0).to_numpy())].astype(np.int64)
    keys_data, keys_offsets, _ = _strings(pc.list_flatten(keys))
    ascii = all(not len(d) or d.max() < 0x80 for d in (uniq_data, tags_data, keys_data))
    local, _, topic_hashes = kernel.local_topics(topic_data, topic_offsets[:-1], np.diff(topic_offsets))
    rows, kinds, hashes = kernel.index_keys(kernel.INDEXED[kind], topic_hashes[local], uniq_data, uniq_offsets,
                                            uniq_valid, keys_data, keys_offsets, keys_list_offsets, tags_data,
                                            tags_offsets, tags_valid, release.index_tags, ascii)
    physical = records["physical_offset"].to_numpy()[rows]
    # us -> ms; a store time no TIMESTAMP holds (damage) is null in ``records``: 0 here (the raw value is gone;
    # codec.dispatch_kernel.DispatchDecoder keeps it)
    stamp = pc.cast(records["store_timestamp"], pa.int64()).fill_null(0).to_numpy()[rows] // 1000
    return pa.table({"key_hash": pa.array(hashes), "physical_offset": pa.array(physical, pa.int64()),
                     "store_timestamp": pa.array(stamp, pa.int64()), "kind": pa.array(kinds)})


def _type_index(types) -> np.ndarray:
    """Each record's index in ``TRANSACTION_TYPES`` from its transaction_type name."""
    return pc.index_in(types, pa.array(TRANSACTION_TYPES)).to_numpy(zero_copy_only=False).astype(np.int64)


def _strings(values) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(bytes, int64 offsets, valid) of a string column (any chunking, slicing or string width)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    values = pc.cast(values, pa.large_string()) if values.type != pa.large_string() else values
    _, offsets, data = values.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[values.offset:values.offset + len(values) + 1] \
        if offsets is not None else np.zeros(1, np.int64)
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return data, offsets, values.is_valid().to_numpy(zero_copy_only=False)


def string_index_hashes(strings: pa.Array) -> np.ndarray:
    """IndexFile hashes of a string array: abs(Java hashCode) with Integer.MIN_VALUE -> 0."""
    strings = pc.cast(strings, pa.large_string()) if strings.type != pa.large_string() else strings
    _, offsets, data = strings.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64)[strings.offset:strings.offset + len(strings) + 1]
    data = np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)
    return _index_hashes(data, offsets)


@numba.njit(cache=True, nogil=True)
def _index_hashes(data, offsets):
    n = len(offsets) - 1
    out = np.empty(n, dtype=np.int32)
    for i in range(n):
        out[i] = index_hash_from_java(java_hash_span(data, offsets[i], offsets[i + 1] - offsets[i]))
    return out
