"""One column table: the Spark schema, read_table's columns and the decoder's fields all come from it."""
from __future__ import annotations

from pyspark.sql.pandas.types import to_arrow_schema

from rocketstore_spark.codec.commitlog import HEADER_FIELDS
from rocketstore_spark.codec.record_schema import COLUMNS, NAMES, arrow_schema, header_fields_for
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
