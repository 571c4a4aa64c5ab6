"""BatchConsumeQueue files (5.0+, topics with attribute ``queue.type=BatchCQ``; docs/format/batchconsumequeue.md):
fixed 46-byte units, big-endian, packed (RocketMQ 5.5.1 ``BatchConsumeQueue.CQ_STORE_UNIT_SIZE``):

     0  physical_offset   int64   CommitLog offset of the record (one record: a single message or an inner batch)
     8  size              int32   its TOTALSIZE
    12  tags_code         int64   TAGS hash of the record (an inner batch's outer record has none: 0)
    20  store_timestamp   int64   the record's STORETIMESTAMP (ms)
    28  base_offset       int64   queue offset of its first message (INNER_BASE; a single message's QUEUEOFFSET)
    36  batch_size        int16   messages in it (INNER_NUM; 1 for a single message)
    38  compacted_offset  int32   -1 as the dispatch writes it (compaction's field)
    42  reserved          int32   0

File ``batchconsumequeue/{topic}/{queue_id}/{20-digit byte offset of its first unit in the queue}``, each
``mapperFileSizeBatchConsumeQueue`` bytes (default 300,000 units = 13,800,000). Unlike a ConsumeQueue, a unit is
not found by its index: queue offsets [base_offset, base_offset + batch_size) all live in one unit, and the
queue's max offset is the last unit's base_offset + batch_size. RocketMQ's recovery keeps the units before the
first with physical_offset < 0, size <= 0, base_offset < 0 or batch_size <= 0 (``BatchConsumeQueue.recover``);
the dispatch writes a record's unit only when its physical offset is past the last unit's
(``putBatchMessagePositionInfo``). Pure; numpy only.
"""
from __future__ import annotations

import numpy as np

UNIT_SIZE = 46
UNIT_DTYPE = np.dtype([("physical_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                       ("store_timestamp", ">i8"), ("base_offset", ">i8"), ("batch_size", ">i2"),
                       ("compacted_offset", ">i4"), ("reserved", ">i4")])
DEFAULT_FILE_SIZE = 300000 * UNIT_SIZE          # MessageStoreConfig.mapperFileSizeBatchConsumeQueue
INVALID_POS = -1                                # compacted_offset as the dispatch writes it
assert UNIT_DTYPE.itemsize == UNIT_SIZE


def decode_units(buf) -> np.ndarray:
    """All whole units in ``buf`` (bytes-like), as a structured array (big-endian fields)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    n = len(data) // UNIT_SIZE
    return data[: n * UNIT_SIZE].view(UNIT_DTYPE)


def valid_mask(units: np.ndarray) -> np.ndarray:
    """RocketMQ's test in ``BatchConsumeQueue.recover``."""
    return ((units["physical_offset"] >= 0) & (units["size"] > 0) & (units["base_offset"] >= 0)
            & (units["batch_size"] > 0))


def written_count(units: np.ndarray) -> int:
    """Units before the first one failing the recovery test."""
    bad = np.flatnonzero(~valid_mask(units))
    return int(bad[0]) if len(bad) else len(units)


def encode_units(physical_offset, size, tags_code, store_timestamp, base_offset, batch_size) -> bytes:
    """Units as ``putBatchMessagePositionInfo`` writes them (compacted offset -1, reserved 0)."""
    out = np.zeros(len(physical_offset), dtype=UNIT_DTYPE)
    out["physical_offset"], out["size"], out["tags_code"] = physical_offset, size, tags_code
    out["store_timestamp"], out["base_offset"], out["batch_size"] = store_timestamp, base_offset, batch_size
    out["compacted_offset"] = INVALID_POS
    return out.tobytes()
