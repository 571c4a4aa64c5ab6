"""A whole store's CommitLog as one Arrow table, without Spark (CLI, notebooks, tests; runs in-process).

The same walk and decoder the Spark source uses; ``columns`` picks what to decode (default: all).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec.columns import (DEFAULT_DELAY_LEVELS, decode_columns, fields_for, fixed_array,
                                             parse_delay_levels)
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.findings import Finding
from rocketstore_spark.store.segment_reader import SegmentReader

RECORD_COLUMNS = ("total_size", "magic_code", "record_version", "body_crc", "queue_id", "flag", "queue_offset",
                  "sys_flag", "born_timestamp", "store_timestamp", "born_host", "store_host", "reconsume_times",
                  "prepared_transaction_offset", "body_length", "body", "topic", "properties", "tags", "keys",
                  "uniq_key", "msg_id", "transaction_type", "body_crc_ok", "properties_crc_ok", "tags_code",
                  "stored_physical_offset")


POSITION_COLUMNS = ("segment_base_offset", "file_position", "physical_offset")


def decode_raw_batch(raw, base_offset: int, wanted: set[str], delay_ms) -> dict[str, pa.Array]:
    """The ``wanted`` columns of one walked batch: record fields (codec) plus where each record lies."""
    physical = base_offset + raw.positions
    cols = decode_columns(raw.buf, raw.header, physical, wanted, delay_ms)
    if "segment_base_offset" in wanted:
        cols["segment_base_offset"] = fixed_array(np.full(raw.header.n, base_offset, dtype=np.int64))
    if "file_position" in wanted:
        cols["file_position"] = fixed_array(raw.positions)
    if "physical_offset" in wanted:
        cols["physical_offset"] = fixed_array(physical)
    return cols


def read_table(path, columns=RECORD_COLUMNS, message_delay_level: str = DEFAULT_DELAY_LEVELS,
               strict: bool = False) -> tuple[pa.Table, list[Finding]]:
    """(table with segment_base_offset, file_position, physical_offset + ``columns``, findings)."""
    delay_ms = parse_delay_levels(message_delay_level)
    names = (*POSITION_COLUMNS, *columns)
    wanted = set(names)
    fields = fields_for(wanted)
    batches, findings = [], []
    for layout in discover(path):
        findings.extend(layout.findings)
        for seg in layout.segments:
            reader = SegmentReader(seg.path, seg.base_offset, strict=strict, fields=fields)
            for raw in reader:
                cols = decode_raw_batch(raw, seg.base_offset, wanted, delay_ms)
                batches.append(pa.RecordBatch.from_pydict({c: cols[c] for c in names}))
            findings.extend(reader.result.findings)
    if not batches:
        return pa.table({"physical_offset": pa.array([], pa.int64())}), findings
    return pa.Table.from_batches(batches), findings
