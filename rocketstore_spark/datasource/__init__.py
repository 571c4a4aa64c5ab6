"""Spark Python DataSources over store/ and codec/ (see each module's docstring for its manual)."""
from __future__ import annotations


def register(spark) -> None:
    """Register every rocketmq* data source with ``spark`` (driver). The session's parallelism goes into the
    environment Spark gives the sources' Python workers, for planning.auto_split_size."""
    from rocketstore_spark.datasource import tables
    from rocketstore_spark.datasource.commitlog import RocketMQDataSource
    from rocketstore_spark.datasource.planning import PARALLELISM_ENV
    spark.sparkContext.environment[PARALLELISM_ENV] = str(spark.sparkContext.defaultParallelism)
    for source in (RocketMQDataSource, *tables.ALL):
        spark.dataSource.register(source)
