"""The columns of a decoded CommitLog record: the one table every reader and the batch writer derive from.

Each column (``Column``) has a name (a contract with jobs, notebooks and users), its Arrow type, whether it can
be null, and the header fields (``commitlog.HEADER_FIELDS``) the decoder needs to compute it. The Spark source's
schema (``datasource.schemas``), ``store.records.read_table``'s columns and the decoder's field selection
(``header_fields_for``) all come from here, and so does everything the batch writer (``batch_writer``) knows of
a column:

- ``kind_id``: its place in the table, the number the writer's plan names it by (``Kind.<NAME>``);
- ``family`` (``Family``): how it is made — where the record lies (POSITION), a header field's value (HEADER,
  from ``source``), a string or binary from the record's bytes (RECORD), a value the property kernel derives
  (PROPERTY, ``properties``), a rendering of the host kernel (HOST, ``hosts``), a CRC verdict (VERDICT), or
  the reader's context (CONTEXT: never decoded);
- ``want``: for a PROPERTY or HOST column, the flag of its kernel's ``want`` array that makes it: its place
  among its family's columns (the kernels' ``WANT_*`` constants are read from here);
- ``items`` and ``data`` (``Size``): for strings, binaries, lists and maps, the most entries and the most bytes
  a batch of n records can hold: the writer sizes the column's Arrow buffers from them and from its type.

Arrow types are the ones Spark's own ``to_arrow_schema`` produces for the Spark schema (e.g. list items are
named ``element``), so batches go to Spark without a cast. Pure; imported on the driver and in executors.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec.arrow import TIMESTAMP_TYPE
from rocketstore_spark.codec.commitlog import TRANSACTION_TYPES

STRING_LIST = pa.list_(pa.field("element", pa.string()))
STRING_MAP = pa.map_(pa.string(), pa.string())

HOST_CHARS = 52         # the longest host: "[" + 8 groups of <= 4 hex digits + 7 ":" + "]:" + 10 port digits
MSG_ID_CHARS = 56       # the longest msg_id: hex digits of a 16-byte address, a 4-byte port, an 8-byte offset


class Family(IntEnum):
    """How a column is made (module docstring); the batch writer has one helper per family."""
    CONTEXT = 0
    POSITION = 1
    HEADER = 2
    RECORD = 3
    PROPERTY = 4
    HOST = 5
    VERDICT = 6


class Measure(IntEnum):
    """What a batch's worst case is counted in, besides its rows: the bytes of its records' topics, bodies or
    properties (a negative length counts as none)."""
    NONE = 0
    TOPICS = 1
    BODIES = 2
    PROPERTIES = 3


@dataclass(frozen=True)
class Size:
    """At most ``per_row`` * rows + ``measure`` // ``divisor`` (entries or bytes) in a batch."""
    per_row: int = 0
    measure: Measure = Measure.NONE
    divisor: int = 1


@dataclass(frozen=True)
class Column:
    name: str
    arrow_type: pa.DataType
    nullable: bool
    needs: tuple[str, ...]        # header fields the decoder computes this column from
    family: Family
    doc: str
    source: str | None = None     # HEADER: the header field it shows
    items: Size | None = None     # lists and maps: their entries
    data: Size | None = None      # strings, binaries, and the strings of lists and maps: their bytes
    kind_id: int = -1             # its place in COLUMNS
    want: int = -1                # PROPERTY, HOST: its kernel's want flag

    @property
    def field(self) -> pa.Field:
        return pa.field(self.name, self.arrow_type, nullable=self.nullable)

    @property
    def kind(self) -> str:
        """"context" (the reader fills it), "position" (where the record lies) or "record" (decoded)."""
        return {Family.CONTEXT: "context", Family.POSITION: "position"}.get(self.family, "record")


def _c(name, arrow_type, family, needs=(), doc="", nullable=False, **writer) -> Column:
    return Column(name, arrow_type, nullable, tuple(needs), family, doc, **writer)


def _h(name, arrow_type, doc, nullable=False, source=None) -> Column:
    """A HEADER column showing header field ``source`` (its own name by default)."""
    source = source or name
    return Column(name, arrow_type, nullable, (source,), Family.HEADER, doc, source=source)


_I32, _I64, _STR = pa.int32(), pa.int64(), pa.string()
_PROPS = ("props_pos", "props_len")
_DERIVED = (*_PROPS, "topic_pos", "topic_len", "store_timestamp")
_PROPERTY_BYTES = Size(measure=Measure.PROPERTIES)
P, H = Family.PROPERTY, Family.HOST

_TABLE: tuple[Column, ...] = (
    _c("store", _STR, Family.CONTEXT, doc="the store path as given (several stores can be read at once)"),
    _c("segment_base_offset", _I64, Family.POSITION, doc="base offset of the segment file (its name)"),
    _c("file_position", _I64, Family.POSITION, doc="byte position of the record inside its segment file"),
    _c("physical_offset", _I64, Family.POSITION, doc="segment_base_offset + file_position"),
    _h("total_size", _I32, "TOTALSIZE: bytes of the whole record"),
    _h("magic_code", _I32, "MAGICCODE (0xDAA320A7 v1, 0xDAA320AB v2)"),
    _h("record_version", _I32, "1 or 2 (v2: 2-byte topic length, 5.x)", source="magic_code"),
    _h("body_crc", _I32, "stored BODYCRC"),
    _h("queue_id", _I32, "QUEUEID"),
    _h("flag", _I32, "FLAG (set by the producer)"),
    _h("queue_offset", _I64, "QUEUEOFFSET: the record's logical offset in its queue"),
    _h("sys_flag", _I32, "SYSFLAG bits"),
    _h("born_timestamp", TIMESTAMP_TYPE,
       "when the producer created the message; null if the stored value is outside years 1-9999", nullable=True),
    _h("store_timestamp", TIMESTAMP_TYPE,
       "when the broker stored it; null if the stored value is outside years 1-9999", nullable=True),
    _c("born_host", _STR, H, ("born_host_pos", "sys_flag"), "producer address, ip:port", data=Size(HOST_CHARS)),
    _c("store_host", _STR, H, ("store_host_pos", "sys_flag"), "broker address, ip:port", data=Size(HOST_CHARS)),
    _h("reconsume_times", _I32, "RECONSUMETIMES"),
    _h("prepared_transaction_offset", _I64, "PREPAREDTRANSACTIONOFFSET"),
    _h("body_length", _I32, "BODYLENGTH", source="body_len"),
    _c("body", pa.binary(), Family.RECORD, ("body_pos", "body_len"),
       "the body as stored (compressed if sys_flag says so)", data=Size(measure=Measure.BODIES)),
    _c("topic", _STR, Family.RECORD, ("topic_pos", "topic_len"), "TOPIC", data=Size(measure=Measure.TOPICS)),
    _c("properties", STRING_MAP, P, _PROPS, "every property, parsed as RocketMQ parses them",
       items=Size(1, Measure.PROPERTIES, 3), data=_PROPERTY_BYTES),       # a pair takes 3 bytes at least
    _c("tags", _STR, P, _PROPS, "the TAGS property", nullable=True, data=_PROPERTY_BYTES),
    _c("keys", STRING_LIST, P, _PROPS, "the KEYS property split on spaces, empty pieces dropped",
       items=Size(1, Measure.PROPERTIES, 2), data=_PROPERTY_BYTES),       # a piece and its space: 2 bytes
    _c("uniq_key", _STR, P, _PROPS, "the UNIQ_KEY property (client message id)", nullable=True,
       data=_PROPERTY_BYTES),
    _c("msg_id", _STR, H, ("store_host_pos", "sys_flag"), "broker message id: store host + physical offset, hex",
       data=Size(MSG_ID_CHARS)),
    _c("transaction_type", _STR, Family.RECORD, ("sys_flag",), "NOT_TYPE, PREPARED, COMMIT or ROLLBACK",
       data=Size(max(map(len, TRANSACTION_TYPES)))),
    _c("body_crc_ok", pa.bool_(), Family.VERDICT, ("body_pos", "body_len", "body_crc"), "our check of BODYCRC"),
    _c("properties_crc_ok", pa.bool_(), Family.VERDICT, ("total_size", "props_len"),
       "our check of the 5.x __CRC32# property; null without it", nullable=True),
    _c("tags_code", _I64, P, _DERIVED,
       "the ConsumeQueue tagsCode RocketMQ derives (TAGS hash, or delivery time of a delayed message)"),
    _h("stored_physical_offset", _I64, "PHYSICALOFFSET as stored in the record"),
    _c("deliver_time", TIMESTAMP_TYPE, P, _DERIVED,
       "when a delayed message is due: SCHEDULE_TOPIC_XXXX records (store time + delay level) and 5.x timer "
       "records (TIMER_OUT_MS); null for other records", nullable=True),
    # the batch writer writes it all null (the decoder decompresses): no bytes of its own
    _c("body_uncompressed", pa.binary(), Family.RECORD, ("body_pos", "body_len", "sys_flag"),
       "the body decompressed (ZLIB, LZ4, ZSTD) when sys_flag says it is compressed; null otherwise, or when "
       "it cannot be decompressed", nullable=True, data=Size()),
)


def _numbered(table) -> tuple[Column, ...]:
    """The table with each column's kind id (its place) and want flag (its place among its family's)."""
    seen = {family: 0 for family in Family}
    out = []
    for i, column in enumerate(table):
        want = seen[column.family] if column.family in (Family.PROPERTY, Family.HOST) else -1
        seen[column.family] += 1
        out.append(dataclasses.replace(column, kind_id=i, want=want))
    return tuple(out)


COLUMNS: tuple[Column, ...] = _numbered(_TABLE)
BY_NAME: dict[str, Column] = {c.name: c for c in COLUMNS}
NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
DECODED: tuple[str, ...] = tuple(c.name for c in COLUMNS if c.family != Family.CONTEXT)
# the column kinds by name, for compiled code (numba reads an IntEnum's members as constants): Kind.TOPIC, ...
Kind = IntEnum("Kind", [(c.name.upper(), c.kind_id) for c in COLUMNS])


def wanted(family: Family, names) -> np.ndarray:
    """The want flags of ``family``'s kernel (PROPERTY or HOST) that make the columns ``names``: one per column
    of the family, True where it is among ``names``."""
    flags = np.zeros(sum(c.family == family for c in COLUMNS), dtype=np.bool_)
    for name in names:
        column = BY_NAME[name]
        if column.family == family:
            flags[column.want] = True
    return flags


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
