"""What RocketMQ 5.x's dispatch writes into ``batchconsumequeue/`` for a CommitLog (docs/format/batchconsumequeue.md):
the BatchConsumeQueue units of the topics whose config says ``queue.type=BatchCQ`` (``ConsumeQueueStore.
findOrCreateConsumeQueue`` chooses the queue type from the topic config, ``config/topics.json``).

A record of such a topic that gets a queue entry (NOT_TYPE and COMMIT, as for a ConsumeQueue) gets one unit
(``BatchConsumeQueue.putBatchMessagePositionInfo``): physical offset, TOTALSIZE, tagsCode (``tags_code``: the
TAGS hash), STORETIMESTAMP, base offset and batch size — ``INNER_BASE`` and ``INNER_NUM`` (Long.parseLong /
Short.parseShort) where the record has both properties (``CommitLog.setBatchSizeIfNeeded``), else its
QUEUEOFFSET and 1 —, compacted offset -1, 4 zero bytes. A request with a negative base or batch size is dropped
(``putMessagePositionInfoWrapper``); a record at or below the queue's last physical offset is skipped. Files
are ``mapperFileSizeBatchConsumeQueue`` bytes, named by their first unit's queue byte offset, created as the
units reach them and preallocated (zeros) to their full size. Vectorized over Arrow tables of decoded records
(``UNIT_COLUMNS``); runs wherever called (driver, CLI, tests).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec import batchconsumequeue
from rocketstore_spark.codec import dispatch_kernel as kernel
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.record_schema import DECODED, arrow_schema
from rocketstore_spark.rocketmq.dispatch import _type_index, queue_keys, queue_of, sort_for_dispatch
from rocketstore_spark.store.files import read_topics
from rocketstore_spark.store.layout import StoreMap, offset_name
from rocketstore_spark.store.records import iter_decoded
from rocketstore_spark.store.segment_reader import SegmentReader

UNIT_COLUMNS = ("physical_offset", "total_size", "topic", "queue_id", "queue_offset", "transaction_type",
                "tags_code", "store_timestamp", "properties")
BATCH_CQ = "BatchCQ"


class BatchQueueError(ValueError):
    """A record whose INNER_NUM or INNER_BASE RocketMQ cannot parse (its dispatch throws): named by offset.
    ``rank``: (property, kind, physical offset), the smallest being the error ``expected_queues`` of the whole
    log raises (INNER_NUM before INNER_BASE, not a number before out of range, then the first record): so the
    errors of a log's parts (the Spark jobs' tasks) give the whole log's."""

    def __init__(self, message: str, rank: tuple[int, int, int] = (0, 0, 0)):
        super().__init__(message)
        self.rank = rank


def batch_topics(files: StoreMap) -> frozenset[str]:
    """The topics ``config/topics.json`` (or its .bak) gives ``queue.type=BatchCQ``."""
    return frozenset(row["topic"] for row in read_topics(files).rows
                     if (row.get("attributes") or {}).get("queue.type") == BATCH_CQ)


@dataclass
class BatchQueue:
    """The units RocketMQ's dispatch writes for one queue, in order (``batchconsumequeue.UNIT_DTYPE``)."""
    topic: str
    queue_id: int
    units: np.ndarray

    def files(self, file_size: int) -> dict[str, bytes]:
        """{file name: its bytes} as RocketMQ leaves them: full ``file_size`` files, the last one zero-filled."""
        if file_size <= 0 or file_size % batchconsumequeue.UNIT_SIZE:
            raise ValueError(f"a BatchConsumeQueue file size must be a positive multiple of "
                             f"{batchconsumequeue.UNIT_SIZE}, not {file_size}")
        data = self.units.tobytes()
        out = {}
        for start in range(0, len(data), file_size):
            chunk = data[start:start + file_size]
            out[offset_name(start)] = chunk + bytes(file_size - len(chunk))
        return out


def _parsed(values: pa.Array, what: str, offsets: np.ndarray, bits: int) -> np.ndarray:
    """Java's parseLong / parseShort of the present values (absent: 0); a value Java would not parse raises."""
    digits = pc.fill_null(values, "0")
    try:
        parsed = pc.cast(digits, pa.int64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        bad = np.flatnonzero(~pc.fill_null(pc.match_substring_regex(digits, r"^[+-]?[0-9]+$"), False)
                             .to_numpy(zero_copy_only=False))
        raise BatchQueueError(f"{what} of the record at physical offset {int(offsets[bad[0]]) if len(bad) else '?'} "
                              f"is not a number: RocketMQ's dispatch cannot parse it",
                              (int(bits == 64), 0, int(offsets[bad[0]]) if len(bad) else 1 << 62)) from None
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    out = np.flatnonzero((parsed < lo) | (parsed > hi))
    if len(out):
        raise BatchQueueError(f"{what} of the record at physical offset {int(offsets[out[0]])} is out of range",
                              (int(bits == 64), 1, int(offsets[out[0]])))
    return parsed


def base_and_size(records: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """Each record's unit base offset and batch size as the dispatch writes them (``physical_offset``,
    ``queue_offset`` and ``properties`` of records of BatchCQ topics): ``INNER_BASE`` and ``INNER_NUM`` where it has
    both, else its QUEUEOFFSET and 1; ``BatchQueueError`` naming a record whose value Java cannot parse."""
    physical = records["physical_offset"].to_numpy()
    props = records["properties"].combine_chunks()
    num = pc.map_lookup(props, "INNER_NUM", "first")
    base = pc.map_lookup(props, "INNER_BASE", "first")
    both = pc.and_(pc.is_valid(num), pc.is_valid(base)).to_numpy(zero_copy_only=False)
    inner_num = _parsed(pc.if_else(pa.array(both), num, None), "INNER_NUM", physical, 16)
    inner_base = _parsed(pc.if_else(pa.array(both), base, None), "INNER_BASE", physical, 64)
    return np.where(both, inner_base, records["queue_offset"].to_numpy()), np.where(both, inner_num, 1)


def dispatched_units(records: pa.Table, topics: frozenset[str]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """The units RocketMQ's dispatch of ``records`` (UNIT_COLUMNS, any row order) requests for ``topics``, in
    dispatch order, the requests it drops left out but not yet the records at or below their queue's last
    physical offset (``redispatched``): (topic names, per unit its topic as an index into them, its queue id,
    the units as ``batchconsumequeue.UNIT_DTYPE``). Raises ``BatchQueueError``."""
    empty = ([], np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, batchconsumequeue.UNIT_DTYPE))
    if not topics or not records.num_rows:
        return empty
    queued = records.filter(pc.and_(pa.array(kernel.QUEUED[_type_index(records["transaction_type"])]),
                                    pc.is_in(records["topic"], value_set=pa.array(sorted(topics)))))
    queued = sort_for_dispatch(queued)
    if not queued.num_rows:
        return empty
    physical = queued["physical_offset"].to_numpy()
    base_offset, batch_size = base_and_size(queued)
    keep = np.flatnonzero((base_offset >= 0) & (batch_size >= 0))
    stamps = pc.cast(queued["store_timestamp"], pa.int64()).to_numpy(zero_copy_only=False) // 1000
    units = np.frombuffer(batchconsumequeue.encode_units(
        physical[keep], queued["total_size"].to_numpy()[keep], queued["tags_code"].to_numpy()[keep], stamps[keep],
        base_offset[keep], batch_size[keep]), dtype=batchconsumequeue.UNIT_DTYPE)
    topic_codes = pc.dictionary_encode(queued["topic"]).combine_chunks()
    return (topic_codes.dictionary.to_pylist(), topic_codes.indices.to_numpy()[keep].astype(np.int64),
            queued["queue_id"].to_numpy()[keep], units)


def redispatched(physical: np.ndarray, last: int = -1) -> np.ndarray:
    """Which units of one queue (their physical offsets in dispatch order) RocketMQ skips: at or below the last
    physical offset the queue holds (``last`` before these: -1 for none)."""
    if not len(physical):
        return np.zeros(0, bool)
    return physical <= np.maximum.accumulate(np.r_[last, physical[:-1]])


def expected_queues(records: pa.Table, topics: frozenset[str]) -> list[BatchQueue]:
    """The BatchConsumeQueues RocketMQ's dispatch of ``records`` (UNIT_COLUMNS, any row order) writes for
    ``topics``, in (topic, queue id) order."""
    names, topic, queue_id, units = dispatched_units(records, topics)
    key = queue_keys(topic, queue_id)
    order = np.argsort(key, kind="stable")
    key = key[order]
    out = []
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, dtype=np.int64)
    for start, stop in zip(starts, np.r_[starts[1:], len(key)]):
        at = order[start:stop]
        # a record at or below the last unit's physical offset is skipped (already dispatched)
        at = at[~redispatched(units["physical_offset"][at].astype(np.int64))]
        t, q = queue_of(key[start])
        out.append(BatchQueue(names[t], q, units[at]))
    return sorted(out, key=lambda q: (q.topic, q.queue_id))


def dispatched_records(layout, topics: frozenset[str], physical: np.ndarray | None = None,
                       message_delay_level: str | None = None, lo: int = 0, hi: int | None = None,
                       columns: tuple[str, ...] = UNIT_COLUMNS) -> pa.Table:
    """The ``UNIT_COLUMNS`` of the records of ``topics`` in ``layout``'s CommitLog at physical offsets [lo, hi)
    — only those at the physical offsets ``physical`` (sorted) where given: what a restart dispatches —, read
    window by window (memory holds these topics' records only; the reading's findings are the caller's other
    pass's); ``columns``: those instead (``topic`` and ``physical_offset`` among them)."""
    decoder = _decoder(columns, message_delay_level)
    windows = _windows(layout, decoder, lo, hi) if topics else iter(())
    return pa.Table.from_batches(list(_selected(windows, topics, physical, columns, lo, hi)),
                                 schema=arrow_schema(columns))


def range_records(ranges, topics: frozenset[str], physical: np.ndarray, message_delay_level: str | None = None,
                  columns: tuple[str, ...] = UNIT_COLUMNS):
    """``dispatched_records`` of CommitLog byte ranges ((path, base offset, start, end, followed[, where the next
    segment lies]), in CommitLog order: a Spark scan task's), a batch per window read (executor: memory holds
    one window)."""
    decoder = _decoder(columns, message_delay_level)
    windows = (decoded for path, base, start, end, followed, *next_path in ranges
               for decoded in SegmentReader(path, base, decoder, start, end, followed=followed,
                                            next_path=next_path[0] if next_path else None))
    return _selected(windows if topics else iter(()), topics, physical, columns)


def _decoder(columns, message_delay_level: str | None) -> RecordDecoder:
    return RecordDecoder([n for n in columns if n in DECODED],
                         **({"message_delay_level": message_delay_level} if message_delay_level else {}))


def _selected(windows, topics: frozenset[str], physical: np.ndarray | None, columns, lo: int = 0,
              hi: int | None = None):
    """The rows of ``topics`` (at ``physical`` where given, in [lo, hi)) of each decoded window, as batches of
    ``columns``."""
    schema = arrow_schema(columns)
    wanted = pa.array(sorted(topics), pa.string())
    for decoded in windows:
        batch = decoded.select(schema)
        keep = pc.is_in(batch["topic"], value_set=wanted)
        if lo or hi is not None:
            keep = pc.and_(keep, pc.and_(pc.greater_equal(batch["physical_offset"], lo),
                                         pc.less(batch["physical_offset"], hi if hi is not None else 1 << 62)))
        if physical is not None:
            phy = batch["physical_offset"].to_numpy(zero_copy_only=False)
            k = np.minimum(np.searchsorted(physical, phy), max(len(physical) - 1, 0))
            at = (physical[k] == phy) if len(physical) else np.zeros(len(phy), bool)
            keep = pc.and_(keep, pa.array(at))
        if pc.any(keep).as_py():
            yield batch.filter(keep)


def _windows(layout, decoder: RecordDecoder, lo: int, hi: int | None):
    """The decoded windows of the segments holding [lo, hi) (the whole log: ``iter_decoded``)."""
    if not lo and hi is None:
        yield from iter_decoded(layout, decoder, [])
        return
    for k, seg in enumerate(layout.segments):
        if seg.base_offset + seg.size <= lo or (hi is not None and seg.base_offset >= hi):
            continue
        yield from SegmentReader(seg.path, seg.base_offset, decoder, start=max(0, lo - seg.base_offset),
                                 end=seg.size if hi is None else min(seg.size, hi - seg.base_offset),
                                 followed=layout.followed(k), next_path=layout.next_path(k))


def file_size_of(files: StoreMap, default: int = batchconsumequeue.DEFAULT_FILE_SIZE) -> int:
    """The store's mapperFileSizeBatchConsumeQueue as its files show it (the size every file has), else
    ``default``."""
    import os
    sizes = {os.path.getsize(path) for _, _, qdir in files.batch_queue_dirs()
             for path, _ in StoreMap.queue_files(qdir)}
    return sizes.pop() if len(sizes) == 1 else default


def batch_file_size(files: StoreMap, settings) -> int:
    """mapperFileSizeBatchConsumeQueue: as given (broker.conf, options: ``settings``, a ``BrokerSettings``), else
    as the store's files show it (``file_size_of``)."""
    given = settings.values.get("mapperFileSizeBatchConsumeQueue")
    return int(given) if given else file_size_of(files)
