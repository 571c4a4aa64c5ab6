"""Snapshots of a store's side tables, appended with the run's id and time at every ingest, so that lag, backlog
and the CommitLog's growth can be charted over days (driver: the rows come from small files — segment listing,
the first and last ConsumeQueue files of each queue, config JSON —, never from a CommitLog scan).

Delta tables under ``TABLE/_snapshots/`` (Delta ignores a table directory's entries that start with ``_``):
``ingest_runs`` (one row per store and run: status, offsets read, messages, damage), ``segments`` (the CommitLog
segment files), ``queues`` (each ConsumeQueue's min and max offset as RocketMQ computes them), ``consumer_lag``
(the verify job's lag rows: committed offset, lag in messages and in time), ``topics`` and
``subscription_groups`` (the broker's config files, as the ``rocketmq_topics`` and
``rocketmq_subscription_groups`` sources read them).
"""
from __future__ import annotations

import datetime as dt

from pyspark.sql import functions as F

from rocketstore_spark.spark.verify import LAG_SCHEMA, lag_records
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import Work

RUN = "run_id STRING, run_time TIMESTAMP, "
INGEST_RUNS_SCHEMA = RUN + ("store STRING, status STRING, start_offset BIGINT, end_offset BIGINT, messages BIGINT, "
                            "skipped_bytes BIGINT, crc_failures BIGINT, tail STRING, seconds DOUBLE, message STRING")
SEGMENTS_SCHEMA = RUN + "store STRING, segment STRING, base_offset BIGINT, file_size BIGINT, data_end BIGINT"
QUEUES_SCHEMA = RUN + "store STRING, topic STRING, queue_id INT, min_offset BIGINT, max_offset BIGINT"


def snapshot_frames(spark, layouts: list[StoreLayout], runs, run_id: str, run_time: dt.datetime) -> dict:
    """The DataFrames to append, by table name under ``_snapshots/``. A store whose engine keeps queues or
    config elsewhere (RocksDB) has no rows in those tables: its files would not be what the broker uses."""
    run = {"run_id": run_id, "run_time": run_time}
    frames = {
        "ingest_runs": spark.createDataFrame(
            [{**run, "store": r.store, "status": r.status, "start_offset": r.start_offset, "end_offset": r.end_offset,
              "messages": r.messages, "skipped_bytes": r.skipped_bytes, "crc_failures": r.crc_failures,
              "tail": r.tail, "seconds": r.seconds, "message": r.message} for r in runs], INGEST_RUNS_SCHEMA),
        "segments": spark.createDataFrame(
            [{**run, "store": layout.name, "segment": seg.path.rsplit("/", 1)[-1], "base_offset": seg.base_offset,
              "file_size": seg.size, "data_end": seg.data_end} for layout in layouts for seg in layout.segments],
            SEGMENTS_SCHEMA),
        "queues": spark.createDataFrame(_queue_rows(layouts, run), QUEUES_SCHEMA),
        "consumer_lag": spark.createDataFrame(lag_records(run_id, run_time, _lags(layouts)), LAG_SCHEMA),
    }
    with_config = [layout.name for layout in layouts if layout.root is not None and not layout.refused(Work.READ_CONFIG)]
    for name, source in (("topics", "rocketmq_topics"), ("subscription_groups", "rocketmq_subscription_groups")):
        if with_config:
            frames[name] = spark.read.format(source).load(",".join(with_config)) \
                .select(F.lit(run_id).alias("run_id"), F.lit(run_time).cast("timestamp").alias("run_time"), "*")
    return frames


def _queue_rows(layouts: list[StoreLayout], run: dict) -> list[dict]:
    from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
    from rocketstore_spark.rocketmq.settings import resolve
    rows = []
    for layout in layouts:
        if layout.root is None or layout.refused(Work.READ_QUEUES):
            continue
        rule = resolve(layout).release.expired_min_is_max
        rows += [{**run, "store": layout.name, "topic": topic, "queue_id": queue_id, "min_offset": lo,
                  "max_offset": hi} for (topic, queue_id), (lo, hi) in store_queue_bounds(layout, rule).items()]
    return rows


def _lags(layouts: list[StoreLayout]) -> list:
    from rocketstore_spark.verify.offsets import consumer_lag
    usable = [layout for layout in layouts if layout.root is not None
              and not layout.refused(Work.READ_QUEUES) and not layout.refused(Work.READ_CONFIG)]
    return consumer_lag(usable).lags if usable else []


def append_snapshots(spark, table: str, frames: dict) -> None:
    """Append each frame to ``TABLE/_snapshots/NAME`` (a new column in a later version is merged in)."""
    for name, frame in frames.items():
        frame.write.format("delta").mode("append").option("mergeSchema", "true").save(f"{table}/_snapshots/{name}")
