"""Scanning a whole CommitLog segment: what it holds, where its valid data ends, which bodies fail CRC.

Runs where called (a Spark executor for rocketmq_segments, the CLI, tests). A header-only decode plus the
compiled CRC verdict of every body, past the first CRC failure (RocketMQ's recovery stops there; we count);
the reader's findings (damage, CRC failures, records after the end, misplaced records) come along.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.findings import Finding
from rocketstore_spark.store.segment_reader import DEFAULT_MAX_RECORD, SegmentReader


@dataclass
class SegmentSummary:
    records: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    valid_end: int = 0
    stop_reason: str = ""
    stop_position: int | None = None
    crc_failures: int = 0
    first_crc_failure: int | None = None      # physical offset
    findings: list[Finding] = field(default_factory=list)


def scan_segment(path: str, base_offset: int, check_crc: bool = True,
                 max_record_size: int = DEFAULT_MAX_RECORD, followed: bool = False) -> SegmentSummary:
    """Scan one whole segment; ``followed``: a later segment of the store exists."""
    s = SegmentSummary()
    decoder = RecordDecoder((), extra_fields=("store_timestamp",), check_crc=check_crc, batch_rows=65536)
    reader = SegmentReader(path, base_offset, decoder, max_record_size=max_record_size, followed=followed)
    for decoded in reader:
        ts = decoded.header.store_timestamp
        s.first_store_timestamp = int(ts[0]) if s.first_store_timestamp is None else s.first_store_timestamp
        s.last_store_timestamp = int(ts[-1])
        if len(decoded.crc_failures):
            if s.first_crc_failure is None:
                s.first_crc_failure = base_offset + int(decoded.crc_failures[0])
            s.crc_failures += len(decoded.crc_failures)
    res = reader.result
    s.records = res.records
    s.valid_end = res.end_position if res.stop_position is None else res.stop_position
    s.stop_reason = res.stop.describe
    s.stop_position = res.stop_position
    s.findings = res.findings
    return s
