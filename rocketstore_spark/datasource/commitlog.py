"""``spark.read.format("rocketmq")``: one row per CommitLog message.

    spark.read.format("rocketmq").load("/data/broker-a/store")                   # a store root
    spark.read.format("rocketmq").load("/data/*/store")                         # several stores (glob)
    spark.read.format("rocketmq").schema("topic STRING, body_length INT").load(p)  # decode only these

Options: ``splitSize`` (bytes of CommitLog per Spark partition; default: the store divided by the session's
cores, between 64 MiB and 2 GiB — see planning.py; segments are cut at arbitrary positions, small ones packed
together), ``strict`` (fail on the first error finding — layout, damage, BODYCRC, records after
the end, misplaced records — instead of reporting it and reading on), ``messageDelayLevel`` (the broker's delay table, for SCHEDULE_TOPIC_XXXX tagsCode), ``maxRecordSize``,
``batchRows`` (rows per Arrow batch; default 4096 and at most 16 MiB of records, or 65536 when every
requested column is fixed-width), ``startOffset`` (a physical offset where a record starts — the end of
one read before, as an incremental ingest keeps it: segments that end before it are not planned and the read
of the segment holding it starts there, so what lies below is never decoded; on any Spark, unlike pushdown),
``unwrapBatches`` (default false: one row per CommitLog record, an inner batch of a 5.x BatchCQ topic one row
whose body holds its messages; true: one row per inner message, what a consumer receives — its own queue offset,
flag, properties, tags, keys, UNIQ_KEY and body, the record's other columns — codec.inner_batch; a pushed-down
filter then applies to those rows).

Planning (driver) lists files and sizes only. Reading (Python worker) decodes with codec.decoder over
store.segment_reader and ships Arrow batches holding only the columns of the schema Spark asks for — Spark 4.2 does not prune columns of Python
sources, so a narrow user schema is how to avoid decoding and shipping bodies. Filter pushdown is used only
where Spark keeps a pushed-down plan with its own scan (``pushdown_is_scan_scoped``: not Spark 4.2.0, which
would reuse it for later unfiltered scans of the same DataFrame); there, pushed filters are applied exactly,
row by row, in the worker: ``store``/``topic``/``queue_id``/``transaction_type`` =, IN; ranges and = on ``physical_offset``
(whole segments outside the range are never read), ``queue_offset``, ``store_timestamp``,
``born_timestamp``. Damaged records become log lines and ``rocketmq_segments`` rows, not failed jobs.
"""
from __future__ import annotations

import logging

from pyspark.sql.datasource import (DataSource, DataSourceReader, EqualTo, GreaterThan, GreaterThanOrEqual, In,
                                    LessThan, LessThanOrEqual)
from pyspark.sql.types import StructType

from rocketstore_spark.datasource import is_connect
from rocketstore_spark.datasource.base import validate_paths
from rocketstore_spark.datasource.options import CommitLogOptions
from rocketstore_spark.datasource.planning import ScanPartition, SegmentRange, plan_partitions, session_parallelism
from rocketstore_spark.datasource.schemas import COMMITLOG_SCHEMA, check_schema
from rocketstore_spark.store.engines import Work

log = logging.getLogger(__name__)

RANGE_COLUMNS = {"physical_offset", "queue_offset", "store_timestamp", "born_timestamp"}
SET_COLUMNS = {"store", "topic", "queue_id", "transaction_type"}


class RocketMQDataSource(DataSource):
    """Apache RocketMQ CommitLog messages (see module docstring for the manual). Without filter pushdown:
    registered where Spark would leak a pushed-down scan into later scans (``pushdown_is_scan_scoped``)."""
    PUSHDOWN = False

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self):
        validate_paths(CommitLogOptions(self.options), work=Work.READ_COMMITLOG)
        return COMMITLOG_SCHEMA

    def reader(self, schema: StructType) -> "RocketMQReader":
        check_schema(schema, COMMITLOG_SCHEMA, "rocketmq")
        options = CommitLogOptions(self.options)
        validate_paths(options, work=Work.READ_COMMITLOG)
        return (PushdownRocketMQReader if self.PUSHDOWN else RocketMQReader)(options, schema)


class RocketMQPushdownDataSource(RocketMQDataSource):
    """``rocketmq`` with filter pushdown, for Sparks that keep a pushed-down plan with its own scan."""
    PUSHDOWN = True


def pushdown_is_scan_scoped(spark) -> bool:
    """Does this Spark keep the reader planned by filter pushdown with the one scan it was planned for?

    Spark 4.2.0 stores it on the DataFrame's relation and reuses it for every later scan of that DataFrame
    that pushes no filter: ``df.where("topic = 'A'").count()`` followed by ``df.count()`` would return the
    filtered count. Later Sparks keep it in the scan builder (a ``readInfo`` field there); only then is our
    pushdown safe. Checked on the driver through the JVM; False where that cannot be seen: a Spark Connect
    client has no JVM (and its server may be any Spark), another Spark may lack the class."""
    if is_connect(spark):
        return False
    try:
        builder = spark._jvm.java.lang.Class.forName(
            "org.apache.spark.sql.execution.datasources.v2.python.PythonScanBuilder")
        return any(f.getName() == "readInfo" for f in builder.getDeclaredFields())
    except Exception:                       # noqa: BLE001 — no JVM gateway or another Spark
        return False


class RocketMQReader(DataSourceReader):
    def __init__(self, options: CommitLogOptions, schema: StructType):
        self.options = options
        self.schema = schema
        self.filters: list = []       # pushed filters (PushdownRocketMQReader only)

    def partitions(self):
        from rocketstore_spark.datasource.filters import physical_offset_bounds, store_allowed
        from rocketstore_spark.findings import raise_first_error
        from rocketstore_spark.store.discovery import discover

        lo, hi = physical_offset_bounds(self.filters)
        lo = max(lo, self.options.start_offset)
        selected = []
        for layout in discover(self.options.paths, self.options.commitlog_dirs):
            if not store_allowed(self.filters, layout.name):
                continue
            for finding in layout.findings:
                log.warning(finding.render())
            if self.options.strict:
                raise_first_error(layout.findings)
            # a segment wholly outside the physical offset range is never read
            selected += [(layout.name, seg, layout.followed(k)) for k, seg in enumerate(layout.segments)
                         if seg.base_offset + seg.size > lo and seg.base_offset <= hi]
        return plan_partitions(selected, self.options.split_size, session_parallelism(),
                               self.options.start_offset) or [ScanPartition(())]

    # ----------------------------------------------------------------------------- worker side

    def read(self, partition: ScanPartition):
        for segment_range in partition.ranges:
            yield from commitlog_batches(segment_range, self.schema, self.filters, self.options)


class PushdownRocketMQReader(RocketMQReader):
    """Accepts filters on store, topic, queue_id, transaction_type (=, IN) and ranges on the offset and
    timestamp columns; applies them exactly in the executor, and skips segments outside a physical_offset
    range on the driver."""

    def pushFilters(self, filters):
        self.filters = []
        for f in filters:
            column = f.attribute[0] if len(f.attribute) == 1 else None
            if isinstance(f, (EqualTo, In)) and column in SET_COLUMNS | RANGE_COLUMNS:
                self.filters.append(f)
            elif isinstance(f, (GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)) and column in RANGE_COLUMNS:
                self.filters.append(f)
            else:
                yield f


def _report(f) -> None:
    """Findings of a scan go to the executor's log (rocketmq_segments shows them as data). A segment the
    driver listed but this executor cannot open would silently shorten the result: that one fails the task,
    with its file named."""
    from rocketstore_spark.findings import StoreError
    if f.check == "commitlog.unreadable":
        raise StoreError(f)
    log.warning(f.render())


def commitlog_batches(segment_range: SegmentRange, schema: StructType, filters, options: CommitLogOptions):
    """Arrow batches of one SegmentRange with exactly the columns of ``schema``, filtered by ``filters``
    (executor). Filter columns the schema lacks are decoded too, for the row mask."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    from rocketstore_spark.codec import inner_batch, record_schema
    from rocketstore_spark.codec.arrow import RepeatedColumn
    from rocketstore_spark.codec.decoder import RecordDecoder, is_fixed_width
    from rocketstore_spark.codec.native import keep_freed_memory
    from rocketstore_spark.datasource.filters import row_mask
    from rocketstore_spark.store.segment_reader import SegmentReader

    keep_freed_memory()
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    unwrap = options.unwrap_batches
    wanted = list(dict.fromkeys([*schema.names, *(f.attribute[0] for f in filters),
                                 *(inner_batch.NEEDED if unwrap else ())]))
    wide = record_schema.arrow_schema(wanted) if unwrap else None
    decoder = RecordDecoder([c for c in wanted if c != "store"], message_delay_level=options.message_delay_level,
                            batch_rows=options.batch_rows, check_crc=options.strict,
                            fixed_width=all(is_fixed_width(f.type) for f in arrow_schema), schema=arrow_schema)
    reader = SegmentReader(segment_range.path, segment_range.base_offset, decoder, segment_range.start,
                           segment_range.end, strict=options.strict, max_record_size=options.max_record_size,
                           followed=segment_range.followed, on_finding=_report)
    store = RepeatedColumn(segment_range.store, pa.string()) if "store" in wanted else None
    for decoded in reader:
        context = {"store": store(decoded.n)} if store else {}
        if unwrap:
            rows = inner_batch.unwrap(decoded.select(wide, context))
            columns = dict(zip(rows.schema.names, rows.columns))
            batch = pa.RecordBatch.from_arrays([columns[name] for name in schema.names], schema=arrow_schema)
        else:
            batch = decoded.select(arrow_schema, context)
            columns = {**decoded.columns, **context}
        if filters:
            batch = batch.filter(row_mask(filters, columns))
        if batch.num_rows:
            yield batch
