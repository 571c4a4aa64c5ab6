"""Spark Python DataSources over store/ and codec/ (see each module's docstring for its manual)."""
from __future__ import annotations


def register(spark) -> None:
    """Register every rocketmq* data source with ``spark`` (driver)."""
    from rocketstore_spark.datasource import tables
    from rocketstore_spark.datasource.commitlog import RocketMQDataSource
    for source in (RocketMQDataSource, *tables.ALL):
        spark.dataSource.register(source)
