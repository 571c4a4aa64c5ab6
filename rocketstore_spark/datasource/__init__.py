"""Spark Python DataSources over store/ and codec/ (see each module's docstring for its manual)."""
from __future__ import annotations

# what the sources cannot work without (the session helper applies them too)
REQUIRED_SETTINGS = {"spark.sql.python.filterPushdown.enabled": "true"}


def register(spark) -> None:
    """Register every rocketmq* data source with ``spark`` (driver), and turn on what they need: Python
    filter pushdown (without it Spark refuses a source that accepts filters). Works on a classic session
    and on Spark Connect: where a SparkContext exists, the session's parallelism goes into the environment
    of the sources' Python workers (planning.auto_split_size); elsewhere planning uses the CPU count."""
    from rocketstore_spark.datasource.planning import PARALLELISM_ENV
    for key, value in REQUIRED_SETTINGS.items():
        spark.conf.set(key, value)
    try:
        sc = spark.sparkContext                  # absent on Spark Connect
        sc.environment[PARALLELISM_ENV] = str(sc.defaultParallelism)
    except Exception:                            # noqa: BLE001 — Connect raises its own not-supported error
        pass
    from rocketstore_spark.datasource.commitlog import RocketMQPushdownDataSource, pushdown_is_scan_scoped
    for source in sources():
        if source.name() == "rocketmq" and pushdown_is_scan_scoped(spark):
            source = RocketMQPushdownDataSource
        spark.dataSource.register(source)


def sources() -> tuple:
    """Every data source class, ``rocketmq`` first."""
    from rocketstore_spark.datasource.checkpoint import CheckpointDataSource
    from rocketstore_spark.datasource.commitlog import RocketMQDataSource
    from rocketstore_spark.datasource.consumequeue import ConsumeQueueDataSource
    from rocketstore_spark.datasource.consumer_offsets import ConsumerOffsetsDataSource
    from rocketstore_spark.datasource.index import IndexDataSource, IndexHeaderDataSource
    from rocketstore_spark.datasource.segments import SegmentsDataSource
    return (RocketMQDataSource, SegmentsDataSource, ConsumeQueueDataSource, IndexDataSource, IndexHeaderDataSource,
            CheckpointDataSource, ConsumerOffsetsDataSource)
