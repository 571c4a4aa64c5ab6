"""Messages and bytes per topic over time: a store's CommitLog grouped by topic and store-time bucket (driver
or CLI, in-process; what the HTML report's timeline chart draws).

Only ``topic``, ``store_timestamp`` and ``total_size`` are decoded, one window at a time, and each decoded
batch is grouped by Arrow (``Table.group_by``): no Python loop over messages. Bytes are record bytes on disk
(TOTALSIZE: header, topic, properties and body). Every record the reader returns counts, damaged or not.
A store time outside the range given (a clock that stepped) lands in the first or last bucket; a record
without a valid store time (outside years 1-9999) counts in the topic's totals only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.records import iter_decoded

# bucket widths (ms) a timeline picks from: the narrowest that gives at most MAX_BUCKETS buckets
WIDTHS_MS = (100, 250, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000,
             900_000, 1_800_000, 3_600_000, 7_200_000, 10_800_000, 21_600_000, 43_200_000, 86_400_000,
             7 * 86_400_000)
MAX_BUCKETS = 120
COLUMNS = ("topic", "store_timestamp", "total_size")


@dataclass
class Timeline:
    """``series``: topic, bucket (start, ms since the epoch), messages, bytes — one row per topic and bucket
    that holds records; ``totals``: topic, messages, bytes, first_ms, last_ms (store times) per topic, most
    messages first."""
    start_ms: int
    width_ms: int
    series: pa.Table
    totals: pa.Table

    def top_series(self, n: int) -> pa.Table:
        """``series`` with the topics beyond the ``n`` with the most messages summed per bucket under a null
        topic (at most n + 1 rows a bucket, whatever the number of topics)."""
        top = self.totals["topic"].slice(0, n)
        folded = pc.if_else(pc.is_in(self.series["topic"], value_set=top), self.series["topic"],
                            pa.scalar(None, pa.string()))
        t = self.series.set_column(0, "topic", folded)
        return t.group_by(["topic", "bucket"]).aggregate([("messages", "sum"), ("bytes", "sum")]).rename_columns(
            ["topic", "bucket", "messages", "bytes"]).sort_by([("bucket", "ascending")])


def bucket_width(start_ms: int, end_ms: int) -> int:
    """The narrowest of WIDTHS_MS that cuts [start_ms, end_ms] into at most MAX_BUCKETS buckets."""
    span = max(0, end_ms - start_ms) + 1
    day = 86_400_000
    return next((w for w in WIDTHS_MS if span <= w * MAX_BUCKETS), -(-span // (MAX_BUCKETS * day)) * day)


def _aggregate(t: pa.Table) -> pa.Table:
    return t.group_by(["topic", "bucket"]).aggregate([("messages", "sum"), ("bytes", "sum"), ("first_ms", "min"),
                                                      ("last_ms", "max")]).rename_columns(
        ["topic", "bucket", "messages", "bytes", "first_ms", "last_ms"])


def topic_timeline(layout: StoreLayout, start_ms: int, end_ms: int) -> Timeline:
    """The timeline of ``layout``'s CommitLog over [start_ms, end_ms] (the store's first and last store time,
    e.g. from the segment scans)."""
    width = bucket_width(start_ms, end_ms)
    last_bucket = (max(end_ms, start_ms) - start_ms) // width
    decoder = RecordDecoder(COLUMNS)
    parts = []
    for d in iter_decoded(layout, decoder, []):
        if d.batch is None or not d.n:
            continue
        ms = pc.divide(pc.cast(d.batch.column("store_timestamp"), pa.int64()), 1000)
        known = pc.fill_null(ms, start_ms).to_numpy()
        bucket = np.clip((known - start_ms) // width, 0, last_bucket)
        bucket = pa.array(start_ms + bucket * width, pa.int64(), mask=pc.is_null(ms).to_numpy(zero_copy_only=False))
        parts.append(_aggregate(pa.table({"topic": d.batch.column("topic"), "bucket": bucket,
                                          "messages": pa.repeat(pa.scalar(1, pa.int64()), d.n),
                                          "bytes": pc.cast(d.batch.column("total_size"), pa.int64()),
                                          "first_ms": ms, "last_ms": ms})))
    empty = pa.table({"topic": pa.array([], pa.string()), "bucket": pa.array([], pa.int64()),
                      "messages": pa.array([], pa.int64()), "bytes": pa.array([], pa.int64()),
                      "first_ms": pa.array([], pa.int64()), "last_ms": pa.array([], pa.int64())})
    grouped = _aggregate(pa.concat_tables(parts)) if parts else empty
    totals = grouped.group_by("topic").aggregate([("messages", "sum"), ("bytes", "sum"), ("first_ms", "min"),
                                                  ("last_ms", "max")]).rename_columns(
        ["topic", "messages", "bytes", "first_ms", "last_ms"])
    totals = totals.sort_by([("messages", "descending"), ("topic", "ascending")])
    series = grouped.filter(pc.is_valid(grouped["bucket"])).select(["topic", "bucket", "messages", "bytes"])
    return Timeline(start_ms, width, series.sort_by([("topic", "ascending"), ("bucket", "ascending")]), totals)
