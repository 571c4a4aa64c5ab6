"""One column table: the Spark schema, read_table's columns, the decoder's fields and the batch writer's plan all
come from it."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema

from rocketstore_spark.codec.commitlog import HEADER_FIELDS
from rocketstore_spark.codec.record_schema import BY_NAME, COLUMNS, NAMES, arrow_schema, header_fields_for
from rocketstore_spark.datasource.schemas import COMMITLOG_SCHEMA


def test_spark_schema_is_the_table():
    assert COMMITLOG_SCHEMA.names == list(NAMES)
    assert [f.nullable for f in COMMITLOG_SCHEMA.fields] == [c.nullable for c in COLUMNS]


def test_arrow_types_are_what_spark_expects_so_batches_need_no_cast():
    assert to_arrow_schema(COMMITLOG_SCHEMA, timezone="UTC") == arrow_schema()


def test_only_absent_values_and_impossible_timestamps_can_be_null():
    assert {c.name for c in COLUMNS if c.nullable} == {"tags", "uniq_key", "properties_crc_ok", "born_timestamp",
                                                      "store_timestamp", "deliver_time", "body_uncompressed"}


def test_header_fields_for():
    assert header_fields_for(["queue_id"]) == {"queue_id"}
    assert header_fields_for(["physical_offset", "file_position", "store"]) == set()
    assert header_fields_for(NAMES) <= set(HEADER_FIELDS)


def test_the_table_holds_what_the_batch_writer_needs():
    from rocketstore_spark.codec import batch_writer, ipc_batch
    from rocketstore_spark.codec.record_schema import Family, Kind
    assert [c.kind_id for c in COLUMNS] == list(range(len(COLUMNS))) == [Kind[c.name.upper()] for c in COLUMNS]
    for family in (Family.PROPERTY, Family.HOST):
        assert [c.want for c in COLUMNS if c.family == family] == list(range(sum(c.family == family
                                                                                    for c in COLUMNS)))
    for c in COLUMNS:
        assert set(c.needs) <= set(HEADER_FIELDS), c.name
        assert (c.source is not None) == (c.family == Family.HEADER) and (c.source is None or c.source in c.needs)
        nested = pa.types.is_map(c.arrow_type) or pa.types.is_list(c.arrow_type)
        variable = nested or pa.types.is_string(c.arrow_type) or pa.types.is_binary(c.arrow_type)
        assert (c.data is not None) == (variable and c.family != Family.CONTEXT), c.name
        assert (c.items is not None) == nested, c.name
    names = [c.name for c in COLUMNS if c.family != Family.CONTEXT]
    columns, rules = batch_writer.plan(names)
    nodes, buffers = map(sum, zip(*(ipc_batch.buffer_count(BY_NAME[n].arrow_type) for n in names)))
    assert len(rules) == buffers and columns[-1, batch_writer.P_NODE] < nodes
    assert list(columns[:, batch_writer.P_KIND]) == [BY_NAME[n].kind_id for n in names]


def test_context_columns_are_not_planned():
    from rocketstore_spark.codec import batch_writer
    with pytest.raises(ValueError, match="store"):
        batch_writer.plan(["topic", "store"])
