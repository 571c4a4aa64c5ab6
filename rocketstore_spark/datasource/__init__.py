"""Spark Python DataSources over store/ and codec/ (see each module's docstring for its manual)."""
from __future__ import annotations


def register(spark) -> None:
    """Register every rocketmq* data source with ``spark`` (driver). The session's parallelism goes into the
    environment Spark gives the sources' Python workers, for planning.auto_split_size."""
    from rocketstore_spark.datasource.planning import PARALLELISM_ENV
    spark.sparkContext.environment[PARALLELISM_ENV] = str(spark.sparkContext.defaultParallelism)
    for source in sources():
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
