"""``spark.read.format("rocketmq_consumequeue")``: one row per written ConsumeQueue entry.

Entries before the first one that fails RocketMQ's validity test, per file; fillers (below the first real
entry of a queue that did not start at 0) are flagged. Up to 64 queues per partition. Planning lists the
queue directories (driver); reading opens the files read-only (Spark's Python workers).

A RocksDB ConsumeQueue (``storeType=defaultRocksDB``, ``store.rocksdb``): one row per unit of each queue its
``offset`` column family lists, from queue offset 0 up to the queue's "max" (units past it are stale: RocketMQ
never serves them); ``file`` is the database directory, ``file_position`` null, ``is_filler`` false. Planning
reads the offset column family (driver); reading opens the database read-only (workers). A database that
cannot be read fails the planning with a one-line ``RocksDBUnreadable`` naming it.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import EMPTY, FilesPartition, TableReader, TableSource
from rocketstore_spark.datasource.schemas import CONSUMEQUEUE_SCHEMA
from rocketstore_spark.store.engines import Work

QUEUES_PER_PARTITION = 64


class ConsumeQueueReader(TableReader):
    def partitions(self):
        from rocketstore_spark.store import rocksdb
        parts = []
        for layout in self.layouts():
            db = rocksdb.queue_db(layout.root)
            if db is not None:
                with rocksdb.open_readonly(db) as rd:
                    table = rocksdb.read_queue_table(rd, str(db))
                queues = [(topic, queue_id, (str(db), q.max[1] + 1))
                          for (topic, queue_id), q in sorted(table.queues.items()) if q.max is not None]
            else:
                queues = [(topic, queue_id, str(qdir)) for topic, queue_id, qdir in layout.files.queue_dirs()]
            for i in range(0, len(queues), QUEUES_PER_PARTITION):
                parts.append(FilesPartition(layout.name, layout.files, tuple(queues[i:i + QUEUES_PER_PARTITION])))
        return parts or [EMPTY]

    def read(self, partition: FilesPartition):
        if partition.items and isinstance(partition.items[0][2], tuple):
            yield from self._rocksdb_batches(partition.store, partition.items)
            return
        for topic, queue_id, qdir in partition.items:
            yield from self._queue_batches(partition.store, topic, queue_id, qdir)

    def _rocksdb_batches(self, store, items):
        import numpy as np
        import pyarrow as pa

        from rocketstore_spark.codec.arrow import bool_array, fixed_array
        from rocketstore_spark.store import rocksdb
        from rocketstore_spark.store.layout import display_name
        with rocksdb.open_readonly(items[0][2][0]) as rd:
            for topic, queue_id, (db, end) in items:
                for offsets, units in rocksdb.read_units(rd, topic, queue_id, 0, end, path=db):
                    n = len(offsets)
                    yield self.to_batch({
                        "store": pa.repeat(pa.scalar(store, pa.string()), n),
                        "topic": pa.repeat(pa.scalar(topic, pa.string()), n),
                        "queue_id": fixed_array(np.full(n, queue_id, dtype=np.int32)),
                        "queue_offset": fixed_array(offsets),
                        "physical_offset": fixed_array(units["physical_offset"].astype(np.int64)),
                        "size": fixed_array(units["size"].astype(np.int32)),
                        "tags_code": fixed_array(units["tags_code"].astype(np.int64)),
                        "is_filler": bool_array(np.zeros(n, dtype=bool)),
                        "file": pa.repeat(pa.scalar(display_name(db), pa.string()), n),
                        "file_position": pa.nulls(n, pa.int64()),
                    })

    def _queue_batches(self, store, topic, queue_id, qdir):
        import numpy as np
        import pyarrow as pa

        from rocketstore_spark.codec.arrow import bool_array, fixed_array
        from rocketstore_spark.store.layout import display_name
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
                "is_filler": bool_array(chunk.fillers),
                "file": pa.repeat(pa.scalar(display_name(chunk.file), pa.string()), n),
                "file_position": fixed_array(chunk.file_positions),
            }
            yield self.to_batch(cols)


class ConsumeQueueDataSource(TableSource):
    """One row per written ConsumeQueue entry (see module docstring)."""
    NAME = "rocketmq_consumequeue"
    WORK = Work.READ_QUEUE_UNITS
    SCHEMA = CONSUMEQUEUE_SCHEMA
    READER = ConsumeQueueReader
