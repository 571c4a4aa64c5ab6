"""Spark schemas of the rocketmq data sources: the column names are a contract for jobs, notebooks and users.

The CommitLog schema comes from ``codec.record_schema``; the small tables are DDL strings parsed here
without a SparkContext. Imported on the driver and in workers.
"""
from __future__ import annotations

from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, BooleanType, DataType, IntegerType, LongType, MapType, StringType,
                               StructField, StructType, TimestampType)

from rocketstore_spark.codec import record_schema
from rocketstore_spark.lookup import timers as lookup_timers
from rocketstore_spark.rocketmq import system_topics
from rocketstore_spark.store import timers as store_timers

_SCALARS = {"STRING": StringType(), "INT": IntegerType(), "BIGINT": LongType(), "BOOLEAN": BooleanType(),
            "BINARY": BinaryType(), "TIMESTAMP": TimestampType()}

# derived from the one column table (codec.record_schema): NOT NULL where a record always has the value, so
# Spark skips a null check per row and field when it ingests the batches
COMMITLOG_SCHEMA = from_arrow_schema(record_schema.arrow_schema())

SEGMENTS_SCHEMA = ", ".join([
    "store STRING", "segment STRING", "base_offset BIGINT", "file_size BIGINT", "records BIGINT",
    "first_store_timestamp TIMESTAMP", "last_store_timestamp TIMESTAMP", "valid_end BIGINT",
    "stop_reason STRING", "stop_position BIGINT", "crc_failures BIGINT", "first_crc_failure BIGINT",
    "findings ARRAY<STRUCT<check: STRING, severity: STRING, file: STRING, file_position: BIGINT, message: STRING, "
    "physical_offset: BIGINT, evidence: MAP<STRING, STRING>>>",
    "data_end BIGINT", "properties_crc_failures BIGINT",
])

CONSUMEQUEUE_SCHEMA = ", ".join([
    "store STRING", "topic STRING", "queue_id INT", "queue_offset BIGINT", "physical_offset BIGINT",
    "size INT", "tags_code BIGINT", "is_filler BOOLEAN", "file STRING", "file_position BIGINT",
])

BATCHCONSUMEQUEUE_SCHEMA = ", ".join([
    "store STRING", "topic STRING", "queue_id INT", "unit_index BIGINT", "physical_offset BIGINT", "size INT",
    "tags_code BIGINT", "store_time TIMESTAMP", "store_timestamp_ms BIGINT", "base_offset BIGINT", "batch_size INT",
    "compacted_offset INT", "reserved INT", "file STRING", "file_position BIGINT",
])

INDEX_SCHEMA = ", ".join([
    "store STRING", "file STRING", "entry_index INT", "slot INT", "key_hash INT", "physical_offset BIGINT",
    "time_diff INT", "prev_index INT", "store_time TIMESTAMP",
])

INDEX_HEADER_SCHEMA = ", ".join([
    "store STRING", "file STRING", "file_size BIGINT", "begin_timestamp TIMESTAMP", "end_timestamp TIMESTAMP",
    "begin_phy_offset BIGINT", "end_phy_offset BIGINT", "hash_slot_count INT", "index_count INT",
    "hash_slot_num INT", "index_num INT", "geometry_source STRING", "geometry_problem STRING",
])

CHECKPOINT_SCHEMA = ", ".join([
    "store STRING", "checkpoint_present BOOLEAN", "abort_present BOOLEAN", "lock_present BOOLEAN",
    "physic_msg_timestamp TIMESTAMP", "logics_msg_timestamp TIMESTAMP", "index_msg_timestamp TIMESTAMP",
    "master_flushed_offset BIGINT", "confirm_phy_offset BIGINT", "logics_physical_offset BIGINT",
    "min_timestamp TIMESTAMP", "min_timestamp_index TIMESTAMP",
])

# DLedger's own files (docs/format/dledger.md): an index unit per row; the checkpoint and currterm per directory
DLEDGER_INDEX_SCHEMA = ", ".join([
    "store STRING", "self_id STRING", "file STRING", "file_position BIGINT", "unit BIGINT", "magic INT", "pos BIGINT",
    "size INT", "entry_index BIGINT", "term BIGINT",
])
DLEDGER_CHECKPOINT_SCHEMA = ", ".join([
    "store STRING", "self_id STRING", "end_index BIGINT", "committed_index BIGINT", "current_term BIGINT",
    "vote_leader STRING", "checkpoint_present BOOLEAN",
])

CONSUMER_OFFSETS_SCHEMA = ", ".join([
    "store STRING", "topic STRING", "consumer_group STRING", "queue_id INT", "consumer_offset BIGINT",
    "source_file STRING",
])

# config/topics.json, subscriptionGroup.json, delayOffset.json: null where the file has no such field
TOPICS_SCHEMA = ", ".join([
    "store STRING", "topic STRING", "read_queue_nums INT", "write_queue_nums INT", "perm INT", "perm_string STRING",
    "topic_filter_type STRING", "topic_sys_flag INT", "order BOOLEAN", "attributes MAP<STRING, STRING>",
    "source_file STRING",
])

SUBSCRIPTION_GROUPS_SCHEMA = ", ".join([
    "store STRING", "consumer_group STRING", "consume_enable BOOLEAN", "consume_from_min_enable BOOLEAN",
    "consume_broadcast_enable BOOLEAN", "consume_message_orderly BOOLEAN", "retry_queue_nums INT",
    "retry_max_times INT", "broker_id BIGINT", "which_broker_when_consume_slowly BIGINT",
    "notify_consumer_ids_changed_enable BOOLEAN", "group_sys_flag INT", "consume_timeout_minute INT",
    "attributes MAP<STRING, STRING>", "forbidden MAP<STRING, INT>", "source_file STRING",
])

DELAY_OFFSETS_SCHEMA = "store STRING, delay_level INT, offset BIGINT, source_file STRING"


def _with_store(arrow_schema) -> StructType:
    """A Spark schema of ``store`` and the columns of one of ``rocketmq.system_topics``' Arrow schemas."""
    import pyarrow as pa
    return from_arrow_schema(pa.schema([pa.field("store", pa.string()), *arrow_schema]))


# the system topics' state (rocketmq.system_topics): the columns its rules produce, and the store
DELAYED_PENDING_SCHEMA = _with_store(system_topics.PENDING_DELAYED_SCHEMA)
TRANSACTIONS_SCHEMA = _with_store(system_topics.TRANSACTIONS_SCHEMA)
RETRIES_SCHEMA = _with_store(system_topics.RETRIES_SCHEMA)

# the timer store (store.timers, lookup.timers)
TIMERLOG_SCHEMA = _with_store(store_timers.TIMERLOG_SCHEMA)
TIMERWHEEL_SCHEMA = _with_store(store_timers.TIMERWHEEL_SCHEMA)
PENDING_TIMERS_SCHEMA = _with_store(lookup_timers.PENDING_TIMERS_SCHEMA)


def _split_top(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "<"
        depth -= ch == ">"
        if ch == sep and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return parts + [cur.strip()] if cur.strip() else parts


def _type(text: str) -> DataType:
    text = text.strip()
    upper = text.upper()
    if upper in _SCALARS:
        return _SCALARS[upper]
    if upper.startswith("ARRAY<"):
        return ArrayType(_type(text[6:-1]))
    if upper.startswith("MAP<"):
        key, value = _split_top(text[4:-1], ",")
        return MapType(_type(key), _type(value))
    if upper.startswith("STRUCT<"):
        return StructType([StructField(n.strip(), _type(t)) for n, t in
                           (f.split(":", 1) for f in _split_top(text[7:-1], ","))])
    raise ValueError(f"unsupported type {text!r}")


def _field(text: str) -> StructField:
    name, type_text = text.split(" ", 1)
    not_null = type_text.upper().endswith(" NOT NULL")
    return StructField(name, _type(type_text[:-9] if not_null else type_text), nullable=not not_null)


def struct(ddl: str) -> StructType:
    """Our schema strings as a StructType, without a SparkContext (workers have none)."""
    return StructType([_field(f) for f in _split_top(ddl, ",")])


def check_schema(schema: StructType, full: str | StructType, source: str) -> None:
    """A user schema may pick any subset of the source's columns, with their types."""
    known = {f.name: f.dataType for f in (struct(full) if isinstance(full, str) else full).fields}
    for f in schema.fields:
        if f.name not in known:
            raise ValueError(f"{source}: unknown column {f.name!r}; the columns are: {', '.join(known)}")
        if f.dataType != known[f.name]:
            raise ValueError(f"{source}: column {f.name!r} has type {known[f.name].simpleString()}, "
                             f"not {f.dataType.simpleString()}")
