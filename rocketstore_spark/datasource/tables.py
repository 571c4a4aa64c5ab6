"""The store's other tables as Spark Python DataSources. Each reads the same paths as ``rocketmq``.

* ``rocketmq_segments``: one row per CommitLog segment scan — records, first/last store time, where the
  valid data ends and why the walk stopped (BLANK, zero fill, or damage), CRC failures, and every finding
  (file, byte position, reason). Corruption is data here. Consecutive segments of a store share a
  partition: as many partitions as the session has cores (Spark's per-task cost is ~75 ms).
* ``rocketmq_consumequeue``: one row per written ConsumeQueue entry (entries before the first one that
  fails RocketMQ's validity test, per file); fillers are flagged. One partition per queue.
* ``rocketmq_index`` (entries) and ``rocketmq_index_header`` (one row per IndexFile). Option
  ``hashSlotNum`` (the broker's maxHashSlotNum, default 5,000,000) fixes the geometry.
* ``rocketmq_checkpoint``: checkpoint fields, abort and lock presence, one row per store.
* ``rocketmq_consumer_offsets``: ``config/consumerOffset.json`` (or its ``.bak`` when the broker would
  fall back to it), one row per (topic, group, queue).

Planning lists files (driver); reading opens them read-only (Python worker).
"""
from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from rocketstore_spark.datasource.options import Options
from rocketstore_spark.datasource.schemas import (CHECKPOINT_SCHEMA, CONSUMEQUEUE_SCHEMA, CONSUMER_OFFSETS_SCHEMA,
                                                  INDEX_HEADER_SCHEMA, INDEX_SCHEMA, SEGMENTS_SCHEMA, check_schema)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
QUEUES_PER_PARTITION = 64


def _ts(ms: int | None):
    return None if ms is None else EPOCH + dt.timedelta(milliseconds=int(ms))


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    store: str
    root: str
    items: tuple          # source-specific: paths or (topic, queue_id, dir)


class _TableSource(DataSource):
    NAME = ""
    SCHEMA = ""

    @classmethod
    def name(cls):
        return cls.NAME

    def schema(self):
        return self.SCHEMA

    def reader(self, schema):
        check_schema(schema, self.SCHEMA, self.name())
        return self.READER(Options(self.options), schema)


class _TableReader(DataSourceReader):
    def __init__(self, options: Options, schema):
        self.options = options
        self.schema = schema
        self.columns = schema.names

    def project(self, row: dict) -> tuple:
        return tuple(row[c] for c in self.columns)

    def to_batch(self, cols: dict):
        """An Arrow batch with exactly the requested columns, in order (worker side)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        return pa.RecordBatch.from_arrays([cols[c] for c in self.columns],
                                          schema=to_arrow_schema(self.schema, timezone="UTC"))

    def layouts(self):
        from rocketstore_spark.store.discovery import discover
        return discover(self.options.paths)


# ------------------------------------------------------------------------------------------ segments

class SegmentsReader(_TableReader):
    def partitions(self):
        from rocketstore_spark.datasource.planning import session_parallelism
        layouts = self.layouts()
        per_partition = max(1, -(-sum(len(layout.segments) for layout in layouts) // session_parallelism()))
        parts = []
        for layout in layouts:
            # layout findings about a segment (wrong size, gap, ...) travel with it
            items = [(seg.path, seg.base_offset, seg.size, tuple(f for f in layout.findings if f.file == seg.path))
                     for seg in layout.segments]
            for i in range(0, len(items), per_partition):
                parts.append(FilesPartition(layout.name, str(layout.commitlog_dir), tuple(items[i:i + per_partition])))
        return parts or [FilesPartition("", "", ())]

    def read(self, partition: FilesPartition):
        for item in partition.items:
            yield self._scan(partition.store, *item)

    def _scan(self, store: str, path: str, base_offset: int, size: int, layout_findings: tuple) -> tuple:
        from rocketstore_spark.verify.segments import scan_segment
        summary = scan_segment(path, base_offset, check_crc=self.options.check_crc,
                               max_record_size=self.options.max_record_size)
        findings = list(layout_findings) + summary.findings
        return self.project({
            "store": store, "segment": os.path.basename(path), "base_offset": base_offset,
            "file_size": size, "records": summary.records,
            "first_store_timestamp": _ts(summary.first_store_timestamp),
            "last_store_timestamp": _ts(summary.last_store_timestamp),
            "valid_end": summary.valid_end, "stop_reason": summary.stop_reason,
            "stop_position": summary.stop_position, "crc_failures": summary.crc_failures,
            "first_crc_failure": summary.first_crc_failure,
            "findings": [(f.check, f.severity, f.file_position, f.message) for f in findings],
        })


class SegmentsDataSource(_TableSource):
    """One row per CommitLog segment scan (see module docstring)."""
    SCHEMA = SEGMENTS_SCHEMA
    READER = SegmentsReader

    NAME = "rocketmq_segments"


# -------------------------------------------------------------------------------------- consumequeue

class ConsumeQueueReader(_TableReader):
    def partitions(self):
        parts = []
        for layout in self.layouts():
            queues = [(topic, queue_id, str(qdir)) for topic, queue_id, qdir in layout.queue_dirs()]
            for i in range(0, len(queues), QUEUES_PER_PARTITION):
                parts.append(FilesPartition(layout.name, str(layout.root), tuple(queues[i:i + QUEUES_PER_PARTITION])))
        return parts or [FilesPartition("", "", ())]

    def read(self, partition: FilesPartition):
        if not partition.items:
            return
        for topic, queue_id, qdir in partition.items:
            yield from self._queue_batches(partition.store, topic, queue_id, qdir)

    def _queue_batches(self, store, topic, queue_id, qdir):
        import numpy as np
        import pyarrow as pa

        from rocketstore_spark.codec.columns import fixed_array
        from rocketstore_spark.store.queues import read_queue
        for chunk in read_queue(qdir):
            n = len(chunk.entries)
            cols = {
                "store": pa.repeat(pa.scalar(store, pa.string()), n),
                "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
                "queue_id": fixed_array(np.full(n, queue_id, dtype=np.int32)),
                "queue_offset": fixed_array(chunk.queue_offsets),
                "physical_offset": fixed_array(chunk.entries["commit_log_offset"].astype(np.int64)),
                "size": fixed_array(chunk.entries["size"].astype(np.int32)),
                "tags_code": fixed_array(chunk.entries["tags_code"].astype(np.int64)),
                "is_filler": pa.array(chunk.fillers),
                "file": pa.repeat(pa.scalar(chunk.file, pa.string()), n),
                "file_position": fixed_array(chunk.file_positions),
            }
            yield self.to_batch(cols)


class ConsumeQueueDataSource(_TableSource):
    """One row per written ConsumeQueue entry (see module docstring)."""
    SCHEMA = CONSUMEQUEUE_SCHEMA
    READER = ConsumeQueueReader

    NAME = "rocketmq_consumequeue"


# --------------------------------------------------------------------------------------------- index

class _IndexReader(_TableReader):
    def partitions(self):
        parts = []
        for layout in self.layouts():
            idx = layout.index_dir
            if idx is not None and idx.is_dir():
                for f in sorted(idx.iterdir()):
                    if f.is_file() and f.name.isdigit():
                        parts.append(FilesPartition(layout.name, str(layout.root), (str(f),)))
        return parts or [FilesPartition("", "", ())]


class IndexHeaderReader(_IndexReader):
    def read(self, partition: FilesPartition):
        if not partition.items:
            return
        from rocketstore_spark.store.indexes import read_index_file
        idx = read_index_file(partition.items[0], self.options.hash_slot_num, entries=False)
        h = idx.header
        yield self.project({
            "store": partition.store, "file": os.path.basename(idx.path), "file_size": idx.file_size,
            "begin_timestamp": _ts(h["begin_timestamp"]), "end_timestamp": _ts(h["end_timestamp"]),
            "begin_phy_offset": h["begin_phy_offset"], "end_phy_offset": h["end_phy_offset"],
            "hash_slot_count": h["hash_slot_count"], "index_count": h["index_count"],
            "hash_slot_num": idx.geometry.hash_slot_num if idx.geometry else None,
            "index_num": idx.geometry.index_num if idx.geometry else None,
        })


class IndexReader(_IndexReader):
    def read(self, partition: FilesPartition):
        if not partition.items:
            return
        import numpy as np
        import pyarrow as pa

        from rocketstore_spark.codec.columns import TIMESTAMP_TYPE, fixed_array
        from rocketstore_spark.store.indexes import read_index_file
        idx = read_index_file(partition.items[0], self.options.hash_slot_num, entries=True)
        e = idx.entries
        n = len(e)
        if n == 0:
            return
        begin = int(idx.header["begin_timestamp"])
        cols = {
            "store": pa.repeat(pa.scalar(partition.store, pa.string()), n),
            "file": pa.repeat(pa.scalar(os.path.basename(idx.path), pa.string()), n),
            "entry_index": fixed_array(np.arange(1, n + 1, dtype=np.int32)),
            "slot": fixed_array((e["key_hash"].astype(np.int64) % idx.geometry.hash_slot_num).astype(np.int32)),
            "key_hash": fixed_array(e["key_hash"].astype(np.int32)),
            "physical_offset": fixed_array(e["phy_offset"].astype(np.int64)),
            "time_diff": fixed_array(e["time_diff"].astype(np.int32)),
            "prev_index": fixed_array(e["prev_index"].astype(np.int32)),
            "store_time": fixed_array((begin + e["time_diff"].astype(np.int64) * 1000) * 1000, TIMESTAMP_TYPE),
        }
        yield self.to_batch(cols)


class IndexHeaderDataSource(_TableSource):
    """One row per IndexFile: its header and geometry (see module docstring)."""
    SCHEMA = INDEX_HEADER_SCHEMA
    READER = IndexHeaderReader

    NAME = "rocketmq_index_header"


class IndexDataSource(_TableSource):
    """One row per IndexFile entry (see module docstring)."""
    SCHEMA = INDEX_SCHEMA
    READER = IndexReader

    NAME = "rocketmq_index"


# ------------------------------------------------------------------------------- checkpoint, offsets

class _StoreReader(_TableReader):
    def partitions(self):
        return [FilesPartition(layout.name, str(layout.root or ""), ()) for layout in self.layouts()] \
            or [FilesPartition("", "", ())]


class CheckpointReader(_StoreReader):
    def read(self, partition: FilesPartition):
        from rocketstore_spark.store.files import read_checkpoint
        if not partition.root:
            return
        state = read_checkpoint(partition.root)
        cp = state.checkpoint or {}
        row = {"store": partition.store, "checkpoint_present": state.checkpoint is not None,
               "abort_present": state.abort_present, "lock_present": state.lock_present}
        for k in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "min_timestamp",
                  "min_timestamp_index"):
            row[k] = _ts(cp.get(k))
        for k in ("master_flushed_offset", "confirm_phy_offset", "logics_physical_offset"):
            row[k] = cp.get(k)
        yield self.project(row)


class ConsumerOffsetsReader(_StoreReader):
    def read(self, partition: FilesPartition):
        from rocketstore_spark.store.files import read_consumer_offsets
        if not partition.root:
            return
        offsets = read_consumer_offsets(partition.root)
        for topic, group, queue_id, offset in offsets.rows:
            yield self.project({"store": partition.store, "topic": topic, "consumer_group": group,
                                "queue_id": queue_id, "consumer_offset": offset, "source_file": offsets.source})


class CheckpointDataSource(_TableSource):
    """Checkpoint fields and abort/lock presence, one row per store."""
    SCHEMA = CHECKPOINT_SCHEMA
    READER = CheckpointReader

    NAME = "rocketmq_checkpoint"


class ConsumerOffsetsDataSource(_TableSource):
    """Committed consumer offsets from config/consumerOffset.json (.bak fallback as the broker does)."""
    SCHEMA = CONSUMER_OFFSETS_SCHEMA
    READER = ConsumerOffsetsReader

    NAME = "rocketmq_consumer_offsets"


ALL = (SegmentsDataSource, ConsumeQueueDataSource, IndexDataSource, IndexHeaderDataSource, CheckpointDataSource,
       ConsumerOffsetsDataSource)
