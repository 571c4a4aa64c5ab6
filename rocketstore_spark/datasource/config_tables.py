"""The broker's other config files as small tables, read as the broker loads them — the file, or its ``.bak``
when the file is missing, empty or unparsable (``source_file`` says which; neither: no rows); topics and groups
from the v1 RocksDB config where the broker keeps them there (``store.files.read_topics``: ``source_file`` the
database, or the database and the newer JSON file merged over it):

* ``spark.read.format("rocketmq_topics")``: one row per topic of ``config/topics.json`` — queue counts,
  ``perm`` and its ``perm_string`` (``RWX``, as ``PermName.perm2String``), filter type, sysflag, ``order``,
  ``attributes`` (5.x).
* ``spark.read.format("rocketmq_subscription_groups")``: one row per consumer group of
  ``config/subscriptionGroup.json`` — the SubscriptionGroupConfig fields, and ``forbidden`` (5.x
  ``forbiddenTable``: topic -> forbidden bits; a group only named there has a row with the rest null).
* ``spark.read.format("rocketmq_delay_offsets")``: one row per delay level of ``config/delayOffset.json`` —
  the ScheduleMessageService's next offset to deliver in queue ``delay_level - 1`` of SCHEDULE_TOPIC_XXXX
  (4.x stores write it; 5.x brokers, also with a ``dataVersion``).

Values are what the file holds; null where it has no such field (a 4.x file has no ``attributes``,
``consume_message_orderly``...; the broker then uses its default). One module for the three because they
share everything but a name, a schema and the store reader: each row is the store, the parsed fields
(codec.config_json) and the source file, so one reader class serves them all. Reading runs in Spark's
Python workers.
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import FilesPartition, StoreTableReader, TableSource
from rocketstore_spark.datasource.schemas import DELAY_OFFSETS_SCHEMA, SUBSCRIPTION_GROUPS_SCHEMA, TOPICS_SCHEMA
from rocketstore_spark.store import files as store_files
from rocketstore_spark.store.engines import Work


class ConfigTableReader(StoreTableReader):
    """Rows of one config file per store."""
    read_file = None        # each subclass: staticmethod(a store.files reader: StoreMap -> ConfigFile)

    def read(self, partition: FilesPartition):
        if partition.files is None or partition.files.root is None:      # a bare CommitLog directory
            return
        config = self.read_file(partition.files)
        for row in config.rows:
            yield self.project({"store": partition.store, **row, "source_file": config.source})


class TopicsReader(ConfigTableReader):
    read_file = staticmethod(store_files.read_topics)


class SubscriptionGroupsReader(ConfigTableReader):
    read_file = staticmethod(store_files.read_subscription_groups)


class DelayOffsetsReader(ConfigTableReader):
    read_file = staticmethod(store_files.read_delay_offsets)


class TopicsDataSource(TableSource):
    """Topic configurations from config/topics.json (.bak fallback as the broker does), or the v1 RocksDB config."""
    NAME = "rocketmq_topics"
    WORK = Work.READ_CONFIG
    SCHEMA = TOPICS_SCHEMA
    READER = TopicsReader


class SubscriptionGroupsDataSource(TableSource):
    """Consumer group configurations from config/subscriptionGroup.json (.bak fallback as the broker does), or the
    v1 RocksDB config."""
    NAME = "rocketmq_subscription_groups"
    WORK = Work.READ_CONFIG
    SCHEMA = SUBSCRIPTION_GROUPS_SCHEMA
    READER = SubscriptionGroupsReader


class DelayOffsetsDataSource(TableSource):
    """Delay-level delivery progress from config/delayOffset.json (.bak fallback as the broker does)."""
    NAME = "rocketmq_delay_offsets"
    WORK = Work.READ_CONFIG
    SCHEMA = DELAY_OFFSETS_SCHEMA
    READER = DelayOffsetsReader
