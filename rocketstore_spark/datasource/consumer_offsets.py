"""``spark.read.format("rocketmq_consumer_offsets")``: one row per (topic, consumer group, queue) committed
offset, from ``config/consumerOffset.json`` — or its ``.bak`` when the broker would fall back to it
(missing, empty or unparsable file). Reading runs in Spark's Python workers.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import FilesPartition, StoreTableReader, TableSource
from rocketstore_spark.datasource.schemas import CONSUMER_OFFSETS_SCHEMA
from rocketstore_spark.store.engines import Work


class ConsumerOffsetsReader(StoreTableReader):
    def read(self, partition: FilesPartition):
        from rocketstore_spark.store.files import read_consumer_offsets
        if partition.files is None or partition.files.root is None:      # a bare CommitLog directory
            return
        offsets = read_consumer_offsets(partition.files)
        for topic, group, queue_id, offset in offsets.rows:
            yield self.project({"store": partition.store, "topic": topic, "consumer_group": group,
                                "queue_id": queue_id, "consumer_offset": offset, "source_file": offsets.source})


class ConsumerOffsetsDataSource(TableSource):
    """Committed consumer offsets from config/consumerOffset.json (.bak fallback as the broker does)."""
    NAME = "rocketmq_consumer_offsets"
    WORK = Work.READ_OFFSETS
    SCHEMA = CONSUMER_OFFSETS_SCHEMA
    READER = ConsumerOffsetsReader
