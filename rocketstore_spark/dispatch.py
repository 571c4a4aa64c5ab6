"""RocketMQ's dispatch rules: which CommitLog records get a ConsumeQueue entry and which IndexFile keys, as
the broker's dispatchers derive them (``CommitLogDispatcherBuildConsumeQueue``, ``IndexService.buildIndex``;
docs/format/consumequeue.md "What gets an entry", docs/format/indexfile.md "Which keys are indexed").

The one implementation of these rules: the rebuild writes what they select, verify compares the store's
files with it. Input is a table of decoded records (the columns of ``DISPATCH_COLUMNS``, any order of rows);
output is Arrow/numpy in dispatch order (ascending physical offset). Vectorised (pyarrow compute, numba for
the key hashes); runs wherever called (driver, executor, CLI).

Release families differ in the keys (``Release.index_tags``): from 5.4.0 on, ``IndexService.buildIndex`` also
puts ``topic#T#TAGS`` (the whole TAGS value, a multi-tag ``a||b`` as one key; not for an empty TAGS).
Record types: NOT_TYPE and COMMIT get a ConsumeQueue entry; every type but ROLLBACK is indexed (PREPARED
records are indexed though not queued). docs/format/rocketmq-dispatch.md has the source citations.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.javahash import index_hash_from_java, java_hash_span

DISPATCH_COLUMNS = ("physical_offset", "total_size", "topic", "queue_id", "queue_offset", "transaction_type",
                    "tags_code", "store_timestamp", "uniq_key", "keys", "tags")
QUEUED_TYPES = ("NOT_TYPE", "COMMIT")           # PREPARED and ROLLBACK records get no ConsumeQueue entry
UNINDEXED_TYPES = ("ROLLBACK",)                 # buildIndex returns early for ROLLBACK only
KEY_SEPARATOR = "#"
TAGS_KEY_SEPARATOR = "#T#"


@dataclass(frozen=True)
class Release:
    """What differs between RocketMQ release families for dispatch."""
    version: tuple[int, int, int]

    @classmethod
    def parse(cls, text: str) -> "Release":
        m = re.fullmatch(r"(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
        if not m:
            raise ValueError(f"RocketMQ version {text!r}: expected X.Y.Z, e.g. 4.9.8 or 5.5.1")
        return cls((int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)))

    NEWEST_READ = (5, 5, 1)             # the newest release whose source these rules were checked against

    @property
    def checked(self) -> bool:
        """Whether this release lies within the releases whose source the rules were read from (4.x to
        5.5.1); a newer one is dispatched by the newest rules known."""
        return (4, 0, 0) <= self.version <= self.NEWEST_READ

    @property
    def index_tags(self) -> bool:
        """5.4.0 and later index the whole TAGS value as ``topic#T#TAGS`` (absent from 5.3.4)."""
        return self.version >= (5, 4, 0)

    def __str__(self) -> str:
        return ".".join(map(str, self.version))


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
    queued = records.filter(pc.is_in(records["transaction_type"], pa.array(QUEUED_TYPES)))
    queued = sort_for_dispatch(queued)
    columns = {"topic": queued["topic"], "queue_id": queued["queue_id"], "queue_offset": queued["queue_offset"],
               "physical_offset": queued["physical_offset"], "size": queued["total_size"]}
    if "tags_code" in queued.column_names:
        columns["tags_code"] = queued["tags_code"]
    return pa.table(columns)


def index_keys(records: pa.Table, release: Release) -> pa.Table:
    """Every IndexFile key in put order (dispatch order; per record UNIQ_KEY, then the KEYS pieces, then from
    5.4.0 the TAGS key): key, key_hash (the non-negative index hash), physical_offset, store_timestamp (ms)."""
    indexed = sort_for_dispatch(records.filter(pc.invert(pc.is_in(records["transaction_type"],
                                                                   pa.array(UNINDEXED_TYPES)))))
    n = indexed.num_rows
    topic = indexed["topic"].combine_chunks()
    rank = np.arange(n, dtype=np.int64)
    parts = []          # (record row, order within the record, key)

    def add(rows: np.ndarray, order, values: pa.Array, prefix: pa.Array, separator: str):
        if len(rows):
            keys = pc.binary_join_element_wise(prefix, values, pa.scalar(separator))     # the last is the separator
            parts.append((rows, np.broadcast_to(np.asarray(order, dtype=np.int64), rows.shape), keys))

    uniq = indexed["uniq_key"].combine_chunks()
    rows = np.flatnonzero(pc.is_valid(uniq).to_numpy(zero_copy_only=False))
    add(rows, 0, uniq.take(rows), topic.take(rows), KEY_SEPARATOR)
    keys = indexed["keys"].combine_chunks()
    lengths = pc.list_value_length(keys).fill_null(0).to_numpy()
    rows = np.repeat(rank, lengths)
    order = 1 + np.arange(len(rows)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    add(rows, order, pc.list_flatten(keys), topic.take(rows), KEY_SEPARATOR)
    if release.index_tags:
        tags = indexed["tags"].combine_chunks()
        present = pc.and_(pc.is_valid(tags), pc.greater(pc.utf8_length(tags), 0)).fill_null(False)
        rows = np.flatnonzero(present.to_numpy(zero_copy_only=False))
        add(rows, 1 << 40, tags.take(rows), topic.take(rows), TAGS_KEY_SEPARATOR)
    if not parts:
        return pa.table({"key": pa.array([], pa.string()), "key_hash": pa.array([], pa.int32()),
                         "physical_offset": pa.array([], pa.int64()), "store_timestamp": pa.array([], pa.int64())})
    rows = np.concatenate([p[0] for p in parts])
    order = np.concatenate([p[1] for p in parts])
    key = pa.concat_arrays([p[2] for p in parts])
    put = np.lexsort((order, rows))
    rows, key = rows[put], key.take(pa.array(put))
    physical = indexed["physical_offset"].to_numpy()[rows]
    stamp = pc.cast(indexed["store_timestamp"], pa.int64()).to_numpy()[rows] // 1000       # us -> ms
    return pa.table({"key": key, "key_hash": pa.array(string_index_hashes(key)),
                     "physical_offset": pa.array(physical), "store_timestamp": pa.array(stamp)})


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
