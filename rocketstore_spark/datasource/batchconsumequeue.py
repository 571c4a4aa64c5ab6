"""``spark.read.format("rocketmq_batchconsumequeue")``: one row per written BatchConsumeQueue unit (topics with
``queue.type=BatchCQ``, 5.0+; format in codec.batchconsumequeue and docs/format/batchconsumequeue.md).

Units before the first one that fails RocketMQ's recovery test, per file. ``unit_index`` is the unit's place in
its queue (file byte offset / 46 + position); the queue offsets it holds are [base_offset, base_offset +
batch_size). ``store_time`` is the unit's store timestamp (clamped to what a timestamp holds; the raw value in
``store_timestamp_ms``). Up to 64 queues per partition. Planning lists the queue directories (driver); reading
opens the files read-only (Spark's Python workers).
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import EMPTY, FilesPartition, TableReader, TableSource
from rocketstore_spark.datasource.schemas import BATCHCONSUMEQUEUE_SCHEMA

QUEUES_PER_PARTITION = 64


class BatchConsumeQueueReader(TableReader):
    def partitions(self):
        parts = []
        for layout in self.layouts():
            queues = [(topic, queue_id, str(qdir)) for topic, queue_id, qdir in layout.files.batch_queue_dirs()]
            for i in range(0, len(queues), QUEUES_PER_PARTITION):
                parts.append(FilesPartition(layout.name, layout.files, tuple(queues[i:i + QUEUES_PER_PARTITION])))
        return parts or [EMPTY]

    def read(self, partition: FilesPartition):
        import numpy as np
        import pyarrow as pa

        from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS, TIMESTAMP_TYPE, fixed_array
        from rocketstore_spark.store.layout import display_name
        from rocketstore_spark.store.queues import read_batch_queue
        for topic, queue_id, qdir in partition.items:
            for chunk in read_batch_queue(qdir):
                n, u = len(chunk.units), chunk.units
                stamp = u["store_timestamp"].astype(np.int64)
                yield self.to_batch({
                    "store": pa.repeat(pa.scalar(partition.store, pa.string()), n),
                    "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
                    "queue_id": fixed_array(np.full(n, queue_id, dtype=np.int32)),
                    "unit_index": fixed_array(chunk.unit_indexes),
                    "physical_offset": fixed_array(u["physical_offset"].astype(np.int64)),
                    "size": fixed_array(u["size"].astype(np.int32)),
                    "tags_code": fixed_array(u["tags_code"].astype(np.int64)),
                    "store_time": fixed_array(np.clip(stamp, MIN_TIMESTAMP_MS, MAX_TIMESTAMP_MS) * 1000,
                                              TIMESTAMP_TYPE),
                    "store_timestamp_ms": fixed_array(stamp),
                    "base_offset": fixed_array(u["base_offset"].astype(np.int64)),
                    "batch_size": fixed_array(u["batch_size"].astype(np.int32)),
                    "compacted_offset": fixed_array(u["compacted_offset"].astype(np.int32)),
                    "reserved": fixed_array(u["reserved"].astype(np.int32)),
                    "file": pa.repeat(pa.scalar(display_name(chunk.file), pa.string()), n),
                    "file_position": fixed_array(chunk.file_positions),
                })


class BatchConsumeQueueDataSource(TableSource):
    """One row per written BatchConsumeQueue unit (see module docstring)."""
    NAME = "rocketmq_batchconsumequeue"
    SCHEMA = BATCHCONSUMEQUEUE_SCHEMA
    READER = BatchConsumeQueueReader
