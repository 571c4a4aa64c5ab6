"""The floor ``store_summary`` is held to (bench/bench_commands.py): Spark's start-up through spark-submit.sh
and one read of every record's header columns (topic, sizes, store time) of a store, aggregated to one row.

    ./spark-submit.sh bench/spark_header_read.py STORE
"""
from __future__ import annotations

import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

if __name__ == "__main__":
    spark = SparkSession.builder.getOrCreate()
    rows = spark.read.format("rocketmq").schema("topic STRING, total_size INT, store_timestamp TIMESTAMP") \
        .load(sys.argv[1]).agg(F.count("*"), F.sum("total_size"), F.max("store_timestamp")).collect()
    print(rows[0])
    spark.stop()
