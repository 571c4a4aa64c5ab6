"""The columns of a decoded CommitLog record: the one table every reader derives its schema from.

Each column has a name (a contract with jobs, notebooks and users), its Arrow type, whether it can be null,
and the header fields (``commitlog.HEADER_FIELDS``) the decoder needs to compute it. The Spark source's
schema (``datasource.schemas``), ``store.records.read_table``'s columns and the decoder's field selection
(``header_fields_for``) all come from here. Pure; imported on the driver and in executors.

Arrow types are the ones Spark's own ``to_arrow_schema`` produces for the Spark schema (e.g. list items are
named ``element``), so batches go to Spark without a cast.
"""
from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from rocketstore_spark.codec.arrow import TIMESTAMP_TYPE
from rocketstore_spark.codec.commitlog import HEADER_FIELDS

STRING_LIST = pa.list_(pa.field("element", pa.string()))
STRING_MAP = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True)
class Column:
    name: str
    arrow_type: pa.DataType
    nullable: bool
    needs: tuple[str, ...]        # header fields the decoder computes this column from
    kind: str                     # "record" (decoded), "position" (where the record lies), "context" (reader)
    doc: str

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)


def _c(name, arrow_type, needs=(), doc="", nullable=False, kind="record") -> Column:
    return Column(name, arrow_type, nullable, tuple(needs), kind, doc)


_I32, _I64, _STR = pa.int32(), pa.int64(), pa.string()
_PROPS = ("props_pos", "props_len")

COLUMNS: tuple[Column, ...] = (
    _c("store", _STR, kind="context", doc="the store path as given (several stores can be read at once)"),
    _c("segment_base_offset", _I64, kind="position", doc="base offset of the segment file (its name)"),
    _c("file_position", _I64, kind="position", doc="byte position of the record inside its segment file"),
    _c("physical_offset", _I64, kind="position", doc="segment_base_offset + file_position"),
    _c("total_size", _I32, ("total_size",), "TOTALSIZE: bytes of the whole record"),
    _c("magic_code", _I32, ("magic_code",), "MAGICCODE (0xDAA320A7 v1, 0xDAA320AB v2)"),
    _c("record_version", _I32, ("magic_code",), "1 or 2 (v2: 2-byte topic length, 5.x)"),
    _c("body_crc", _I32, ("body_crc",), "stored BODYCRC"),
    _c("queue_id", _I32, ("queue_id",), "QUEUEID"),
    _c("flag", _I32, ("flag",), "FLAG (set by the producer)"),
    _c("queue_offset", _I64, ("queue_offset",), "QUEUEOFFSET: the record's logical offset in its queue"),
    _c("sys_flag", _I32, ("sys_flag",), "SYSFLAG bits"),
    _c("born_timestamp", TIMESTAMP_TYPE, ("born_timestamp",),
       "when the producer created the message; null if the stored value is outside years 1-9999", nullable=True),
    _c("store_timestamp", TIMESTAMP_TYPE, ("store_timestamp",),
       "when the broker stored it; null if the stored value is outside years 1-9999", nullable=True),
    _c("born_host", _STR, ("born_host_pos", "sys_flag"), "producer address, ip:port"),
    _c("store_host", _STR, ("store_host_pos", "sys_flag"), "broker address, ip:port"),
    _c("reconsume_times", _I32, ("reconsume_times",), "RECONSUMETIMES"),
    _c("prepared_transaction_offset", _I64, ("prepared_transaction_offset",), "PREPAREDTRANSACTIONOFFSET"),
    _c("body_length", _I32, ("body_len",), "BODYLENGTH"),
    _c("body", pa.binary(), ("body_pos", "body_len"), "the body as stored (compressed if sys_flag says so)"),
    _c("topic", _STR, ("topic_pos", "topic_len"), "TOPIC"),
    _c("properties", STRING_MAP, _PROPS, "every property, parsed as RocketMQ parses them"),
    _c("tags", _STR, _PROPS, "the TAGS property", nullable=True),
    _c("keys", STRING_LIST, _PROPS, "the KEYS property split on spaces, empty pieces dropped"),
    _c("uniq_key", _STR, _PROPS, "the UNIQ_KEY property (client message id)", nullable=True),
    _c("msg_id", _STR, ("store_host_pos", "sys_flag"), "broker message id: store host + physical offset, hex"),
    _c("transaction_type", _STR, ("sys_flag",), "NOT_TYPE, PREPARED, COMMIT or ROLLBACK"),
    _c("body_crc_ok", pa.bool_(), ("body_pos", "body_len", "body_crc"), "our check of BODYCRC"),
    _c("properties_crc_ok", pa.bool_(), ("total_size", "props_len"),
       "our check of the 5.x __CRC32# property; null without it", nullable=True),
    _c("tags_code", _I64, (*_PROPS, "topic_pos", "topic_len", "store_timestamp"),
       "the ConsumeQueue tagsCode RocketMQ derives (TAGS hash, or delivery time of a delayed message)"),
    _c("stored_physical_offset", _I64, ("stored_physical_offset",), "PHYSICALOFFSET as stored in the record"),
    _c("deliver_time", TIMESTAMP_TYPE, (*_PROPS, "topic_pos", "topic_len", "store_timestamp"),
       "when a delayed message is due: SCHEDULE_TOPIC_XXXX records (store time + delay level) and 5.x timer "
       "records (TIMER_OUT_MS); null for other records", nullable=True),
    _c("body_uncompressed", pa.binary(), ("body_pos", "body_len", "sys_flag"),
       "the body decompressed (ZLIB, LZ4, ZSTD) when sys_flag says it is compressed; null otherwise, or when "
       "it cannot be decompressed", nullable=True),
)

BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
DECODED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.kind != "context")
assert all(set(c.needs) <= set(HEADER_FIELDS) for c in COLUMNS)


def check_names(names) -> None:
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown CommitLog column(s) {', '.join(map(repr, unknown))}; "
                         f"the columns are: {', '.join(NAMES)}")


def arrow_schema(names=NAMES) -> pa.Schema:
    """The Arrow schema of ``names`` (in that order)."""
    check_names(names)
    return pa.schema([BY_NAME[n].field for n in names])


def header_fields_for(names) -> frozenset[str]:
    """The header fields the decoder must decode to compute ``names``."""
    check_names(names)
    return frozenset(f for n in names for f in BY_NAME[n].needs)
