"""The system topics' state as tables (``lookup.system_topics`` over ``rocketmq.system_topics``' rules; one
partition per store, read in Spark's Python workers):

* ``spark.read.format("rocketmq_delayed_pending")``: one row per delayed message not yet delivered — its
  delay level, queue offset and the level's delivery offset (delayOffset.json as the broker corrects it
  against the SCHEDULE_TOPIC_XXXX queue), when it is due, its real topic and queue.
* ``spark.read.format("rocketmq_transactions")``: one row per transaction (a half message and its put-back
  copies): COMMITTED, ROLLED_BACK, DISCARDED or PENDING, the producer group, real topic, check times, the op
  and commit records that ended it, and how long a pending one had waited when the broker last wrote.
* ``spark.read.format("rocketmq_retries")``: one row per message of a ``%RETRY%`` or ``%DLQ%`` topic: the
  consumer group, its original topic, reconsume times, and whether the group has consumed it.

Options: ``messageDelayLevel`` and ``rocketmqVersion`` — the broker's delay table and release, which
``rocketmq_delayed_pending`` reads (default: detected from the store, else RocketMQ's defaults); the other two
accept and ignore them.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import EMPTY, FilesPartition, TableReader, TableSource
from rocketstore_spark.datasource.options import SystemTopicsOptions
from rocketstore_spark.datasource.schemas import DELAYED_PENDING_SCHEMA, RETRIES_SCHEMA, TRANSACTIONS_SCHEMA
from rocketstore_spark.store.engines import Work


class SystemTopicsReader(TableReader):
    """One partition per store (its layout travels with it); ``tables`` gives the store's Arrow tables."""

    def partitions(self):
        return [FilesPartition(layout.name, layout.files, (layout,)) for layout in self.layouts()] or [EMPTY]

    def read(self, partition: FilesPartition):
        import pyarrow as pa
        if not partition.items:
            return
        layout = partition.items[0]
        for t in self.tables(layout):
            for batch in t.to_batches():
                store = pa.repeat(pa.scalar(partition.store, pa.string()), batch.num_rows)
                yield self.to_batch({"store": store, **{c: batch.column(c) for c in batch.schema.names}})

    def tables(self, layout):
        raise NotImplementedError


class DelayedPendingReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.lookup.system_topics import delayed
        yield delayed(layout, self.options.settings).pending


class TransactionsReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.lookup.system_topics import transactions
        yield transactions(layout)[0]


class RetriesReader(SystemTopicsReader):
    def tables(self, layout):
        from rocketstore_spark.lookup.system_topics import retries
        yield from retries(layout)


class DelayedPendingDataSource(TableSource):
    """Delayed messages not yet delivered (ScheduleMessageService's view after a restart)."""
    NAME = "rocketmq_delayed_pending"
    WORK = Work.READ_COMMITLOG
    SCHEMA = DELAYED_PENDING_SCHEMA
    OPTIONS = SystemTopicsOptions
    READER = DelayedPendingReader


class TransactionsDataSource(TableSource):
    """Transactions from the half and op topics: committed, rolled back, discarded or pending."""
    NAME = "rocketmq_transactions"
    WORK = Work.READ_COMMITLOG
    SCHEMA = TRANSACTIONS_SCHEMA
    OPTIONS = SystemTopicsOptions
    READER = TransactionsReader


class RetriesDataSource(TableSource):
    """Messages of the retry and dead-letter topics, per consumer group."""
    NAME = "rocketmq_retries"
    WORK = Work.READ_COMMITLOG
    SCHEMA = RETRIES_SCHEMA
    OPTIONS = SystemTopicsOptions
    READER = RetriesReader
