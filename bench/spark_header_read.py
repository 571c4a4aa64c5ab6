"""The floor ``store_summary`` is held to (bench/bench_commands.py): Spark's start-up through spark-submit.sh
and the job entry point every job uses, and one read of every record's header columns (topic, size, store
time) of a store, aggregated to one row.

    ./spark-submit.sh bench/spark_header_read.py STORE
"""
from __future__ import annotations

import sys

from pyspark.sql import functions as F


def main(spark, argv) -> int:
    rows = spark.read.format("rocketmq").schema("topic STRING, total_size INT, store_timestamp TIMESTAMP") \
        .load(argv[0]).agg(F.count("*"), F.sum("total_size"), F.max("store_timestamp")).collect()
    print(rows[0])
    return 0


if __name__ == "__main__":
    from rocketstore_spark.spark.entrypoint import run
    run("spark_header_read", main, lambda argv: None, sys.argv[1:])
