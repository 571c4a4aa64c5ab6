"""``spark.read.format("rocketmq_checkpoint")``: one row per store — the checkpoint's fields with the minimum
timestamps RocketMQ derives from them, and whether ``abort`` and ``lock`` exist (an ``abort`` file means
the broker did not shut down cleanly). Reading runs in Spark's Python workers.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import FilesPartition, StoreTableReader, TableSource, timestamp
from rocketstore_spark.datasource.schemas import CHECKPOINT_SCHEMA


class CheckpointReader(StoreTableReader):
    def read(self, partition: FilesPartition):
        from rocketstore_spark.store.files import read_checkpoint
        if partition.files is None or partition.files.root is None:      # a bare CommitLog directory
            return
        state = read_checkpoint(partition.files)
        cp = state.checkpoint or {}
        row = {"store": partition.store, "checkpoint_present": state.checkpoint is not None,
               "abort_present": state.abort_present, "lock_present": state.lock_present}
        for k in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp", "min_timestamp",
                  "min_timestamp_index"):
            row[k] = timestamp(cp.get(k))
        for k in ("master_flushed_offset", "confirm_phy_offset", "logics_physical_offset"):
            row[k] = cp.get(k)
        yield self.project(row)


class CheckpointDataSource(TableSource):
    """Checkpoint fields and abort/lock presence, one row per store."""
    NAME = "rocketmq_checkpoint"
    SCHEMA = CHECKPOINT_SCHEMA
    READER = CheckpointReader
