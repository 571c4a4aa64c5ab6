"""An incremental ingest's watermark, checked against the store: is the CommitLog below it still the log that
was read, and what lies at it now (driver side; reads a record or 8 bytes, read-only).

The watermark of a store is the physical offset just past the last complete record an ingest committed (the
ingest keeps it as that record's row: see ``spark.ingest``). Before reading on from it, the record the table
ends with is decoded again from the store and compared field by field (``IDENTITY_COLUMNS``): every byte of the
record but the body, which its stored BODYCRC stands for. A repair that cut the log below the watermark, a
broker that rewrote it since, or another broker's store at the same path gives another record there (or none)
and is refused by the caller; segments deleted by retention below that record change nothing here.
"""
from __future__ import annotations

import bisect
import struct
from enum import Enum

import pyarrow as pa

from rocketstore_spark.codec.commitlog import BLANK_MAGIC, MAGIC_V1, MAGIC_V2
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.store.discovery import Segment, StoreLayout
from rocketstore_spark.store.segment_reader import SegmentReader, record_start

# every header field, the topic and the properties as stored, and the BODYCRC for the body: two different
# records agree on all of them only by copying one another (store times are in ms, hosts, queue offsets...)
IDENTITY_COLUMNS = ("total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset", "sys_flag",
                    "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
                    "prepared_transaction_offset", "body_length", "topic", "properties", "stored_physical_offset")
TIMESTAMP_COLUMNS = ("born_timestamp", "store_timestamp")      # compared as epoch microseconds


class Tail(Enum):
    """What the store holds at a watermark after a run (a complete record there is read by the next run)."""
    NOTHING = "nothing yet"                          # zeros, the end of the file, or no segment
    BLANK = "the BLANK that closes its segment"
    INCOMPLETE = "an incomplete record (still being written, or torn by a crash)"
    RECORD = "a complete record (written since the read)"


def segment_at(layout: StoreLayout, physical_offset: int) -> Segment | None:
    """The segment whose file holds ``physical_offset``, or None (deleted by retention, not yet created)."""
    k = bisect.bisect_right([s.base_offset for s in layout.segments], physical_offset) - 1
    if k < 0 or physical_offset - layout.segments[k].base_offset >= layout.segments[k].size:
        return None
    return layout.segments[k]


def record_identity(layout: StoreLayout, physical_offset: int) -> dict | None:
    """The IDENTITY_COLUMNS of the complete, valid record starting at ``physical_offset`` (timestamps in epoch
    microseconds, properties a dict), or None where no such record starts (its segment is gone, zeros, a
    BLANK, damage, another record's middle)."""
    seg = segment_at(layout, physical_offset)
    if seg is None:
        return None
    position = physical_offset - seg.base_offset
    decoder = RecordDecoder(IDENTITY_COLUMNS, batch_rows=1)
    start = record_start(seg.path, position)
    for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=start, end=start + 1):
        if not decoded.n or int(decoded.positions[0]) != position:
            return None
        batch = decoded.batch
        row = {}
        for name in IDENTITY_COLUMNS:
            column = batch.column(batch.schema.get_field_index(name))
            if name in TIMESTAMP_COLUMNS:
                column = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64())
            row[name] = column.to_pylist()[0]
        row["properties"] = dict(row["properties"] or [])
        return row
    return None


def mismatches(ingested: dict, found: dict | None) -> list[str]:
    """The IDENTITY_COLUMNS on which the ingested record (``ingested``, as the table holds it) and the store's
    record now (``found``, ``record_identity``) differ; every column when the store has no record there."""
    if found is None:
        return list(IDENTITY_COLUMNS)
    return [c for c in IDENTITY_COLUMNS if _canonical(c, ingested.get(c)) != _canonical(c, found.get(c))]


def _canonical(column: str, value):
    if column == "properties":
        return dict(value or {})
    return value


def tail_at(layout: StoreLayout, physical_offset: int) -> Tail:
    """What the store holds at ``physical_offset`` now (the watermark a run ended at)."""
    seg = segment_at(layout, physical_offset)
    position = None if seg is None else physical_offset - seg.base_offset
    if seg is None or position >= seg.data_end:
        return Tail.NOTHING
    with open(seg.path, "rb") as f:
        f.seek(position)
        head = f.read(8)
    if len(head) < 8 or not any(head):
        return Tail.NOTHING
    magic = struct.unpack(">i", head[4:])[0]
    if magic == BLANK_MAGIC:
        return Tail.BLANK
    if magic in (MAGIC_V1, MAGIC_V2) and record_identity(layout, physical_offset) is not None:
        return Tail.RECORD
    return Tail.INCOMPLETE
