"""Spark Python DataSources over store/ and codec/ (see each module's docstring for its manual)."""
from __future__ import annotations

# what the sources cannot work without (the session helper applies them too)
REQUIRED_SETTINGS = {"spark.sql.python.filterPushdown.enabled": "true"}


def register(spark) -> None:
    """Register every rocketmq* data source with ``spark`` (driver), and turn on what they need: Python
    filter pushdown (without it Spark refuses a source that accepts filters). Works on a classic session
    and on Spark Connect: on a classic one the session's parallelism goes into the environment of the
    sources' Python workers (planning.auto_split_size); a Connect client has no SparkContext (nor JVM), so
    there planning uses the CPU count of the server's worker and ``rocketmq`` takes no filters. On a local
    master whose configured worker Python lacks the package, the sources run on the driver's Python
    (datasource.workers)."""
    from rocketstore_spark.datasource.planning import PARALLELISM_ENV
    for key, value in REQUIRED_SETTINGS.items():
        spark.conf.set(key, value)
    from contextlib import nullcontext

    from rocketstore_spark.datasource.commitlog import RocketMQPushdownDataSource, pushdown_is_scan_scoped
    from rocketstore_spark.datasource.workers import worker_python
    workers = nullcontext()
    if not is_connect(spark):
        sc = spark.sparkContext
        sc.environment[PARALLELISM_ENV] = str(session_cores(spark))
        workers = worker_python(sc)
    with workers:
        for source in sources():
            if source.name() == "rocketmq" and pushdown_is_scan_scoped(spark):
                source = RocketMQPushdownDataSource
            spark.dataSource.register(source)


def session_cores(spark) -> int:
    """How many tasks the session runs at once (driver): its default parallelism; for a Spark Connect client,
    which cannot ask the server's SparkContext, ``spark.default.parallelism`` where set, else this machine's
    cores (right for a local Connect server)."""
    if not is_connect(spark):
        return max(1, spark.sparkContext.defaultParallelism)
    import os
    try:
        return max(1, int(spark.conf.get("spark.default.parallelism")))
    except Exception:                       # noqa: BLE001 -- not set (Connect raises its own error type)
        return os.cpu_count() or 1


def is_connect(spark) -> bool:
    """Is ``spark`` a Spark Connect session? Its client has no SparkContext and no py4j JVM: ``sparkContext``
    and ``_jvm`` raise. Told by its class, so that a classic-only install need not import the Connect client."""
    return type(spark).__module__.startswith("pyspark.sql.connect.")


def sources() -> tuple:
    """Every data source class, ``rocketmq`` first."""
    from rocketstore_spark.datasource.batchconsumequeue import BatchConsumeQueueDataSource
    from rocketstore_spark.datasource.checkpoint import CheckpointDataSource
    from rocketstore_spark.datasource.commitlog import RocketMQDataSource
    from rocketstore_spark.datasource.config_tables import (DelayOffsetsDataSource, SubscriptionGroupsDataSource,
                                                            TopicsDataSource)
    from rocketstore_spark.datasource.consumequeue import ConsumeQueueDataSource
    from rocketstore_spark.datasource.consumer_offsets import ConsumerOffsetsDataSource
    from rocketstore_spark.datasource.dledger import DLedgerCheckpointDataSource, DLedgerIndexDataSource
    from rocketstore_spark.datasource.index import IndexDataSource, IndexHeaderDataSource
    from rocketstore_spark.datasource.segments import SegmentsDataSource
    from rocketstore_spark.datasource.system_topics import (DelayedPendingDataSource, RetriesDataSource,
                                                            TransactionsDataSource)
    from rocketstore_spark.datasource.timers import (PendingTimersDataSource, TimerLogDataSource,
                                                     TimerWheelDataSource)
    return (RocketMQDataSource, SegmentsDataSource, ConsumeQueueDataSource, IndexDataSource, IndexHeaderDataSource,
            CheckpointDataSource, ConsumerOffsetsDataSource, TopicsDataSource, SubscriptionGroupsDataSource,
            DelayOffsetsDataSource, DelayedPendingDataSource, TransactionsDataSource, RetriesDataSource,
            DLedgerIndexDataSource, DLedgerCheckpointDataSource, BatchConsumeQueueDataSource,
            TimerLogDataSource, TimerWheelDataSource,
            PendingTimersDataSource)
