"""Worker-side production of Arrow record batches for the rocketmq sources (runs in Spark's Python worker)."""
from __future__ import annotations

import logging

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from rocketstore_spark.codec.columns import fields_for, parse_delay_levels
from rocketstore_spark.codec.commitlog import LANES
from rocketstore_spark.datasource.filters import row_mask
from rocketstore_spark.store.records import decode_raw_batch
from rocketstore_spark.store.segment_reader import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_ROWS, SegmentReader

log = logging.getLogger("rocketstore_spark.rocketmq")
FIXED_WIDTH_BATCH_ROWS = 65536


def _fixed_width(arrow_type: pa.DataType) -> bool:
    try:
        return arrow_type.bit_width > 0
    except ValueError:                      # strings, binary, maps, lists
        return False


def batch_limits(arrow_schema: pa.Schema, batch_rows: int | None) -> tuple[int, int, int]:
    """(rows, record bytes, walk lanes) per Arrow batch. Rows with bodies or strings: 4 K rows or 16 MiB of
    records, so a batch stays a few MiB on both sides of the Python-to-JVM hop. Fixed-width rows (tens of
    bytes): 64 K rows, since then the per-batch cost in Python and Spark is what counts, and the walk —
    then most of the work — runs as interleaved lanes (commitlog.walk_lanes). ``batchRows`` overrides."""
    fixed = all(_fixed_width(f.type) for f in arrow_schema)
    if batch_rows is None:
        batch_rows = FIXED_WIDTH_BATCH_ROWS if fixed else DEFAULT_BATCH_ROWS
    return batch_rows, (1 << 62) if fixed else DEFAULT_BATCH_BYTES, LANES if fixed else 1


def commitlog_batches(segment_range, schema: StructType, filters, options):
    """Arrow batches of one SegmentRange with exactly the columns of ``schema``, filtered by ``filters``."""
    arrow_schema = to_arrow_schema(schema, timezone="UTC")
    wanted = set(schema.names) | {f.attribute[0] for f in filters}
    delay_ms = parse_delay_levels(options.message_delay_level)
    batch_rows, batch_bytes, lanes = batch_limits(arrow_schema, options.batch_rows)
    reader = SegmentReader(segment_range.path, segment_range.base_offset, segment_range.start, segment_range.end,
                           strict=options.strict, max_record_size=options.max_record_size,
                           batch_rows=batch_rows, batch_bytes=batch_bytes, fields=fields_for(wanted),
                           lanes=lanes,
                           on_finding=lambda f: log.warning(f.render()))
    for raw in reader:
        cols = decode_raw_batch(raw, segment_range.base_offset, wanted, delay_ms)
        if "store" in wanted:
            cols["store"] = pa.repeat(pa.scalar(segment_range.store, pa.string()), raw.header.n)
        batch = pa.RecordBatch.from_arrays([cols[name].cast(field.type) if cols[name].type != field.type
                                            else cols[name] for name, field in zip(schema.names, arrow_schema)],
                                           schema=arrow_schema)
        if filters:
            mask = row_mask(filters, cols)
            batch = batch.filter(mask)
        if batch.num_rows:
            yield batch
