"""Scanning a whole CommitLog segment: what it holds, where its valid data ends, which bodies fail CRC.

Runs where called (a Spark worker for rocketmq_segments, the CLI, tests). Header-only walk plus the
compiled CRC check of every body; past the first CRC failure (RocketMQ's recovery stops there, we count).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rocketstore_spark.codec.columns import crc_ok
from rocketstore_spark.store.findings import Finding
from rocketstore_spark.store.segment_reader import SegmentReader


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


def scan_segment(path: str, base_offset: int, check_crc: bool = True, max_record_size: int = 64 << 20) -> SegmentSummary:
    s = SegmentSummary()
    reader = SegmentReader(path, base_offset, max_record_size=max_record_size)
    for raw in reader:
        h = raw.header
        ts = h.store_timestamp
        s.first_store_timestamp = int(ts[0]) if s.first_store_timestamp is None else s.first_store_timestamp
        s.last_store_timestamp = int(ts[-1])
        if check_crc:
            bad = np.flatnonzero(~crc_ok(raw.buf, h.body_pos, h.body_len, h.body_crc, h.n))
            if len(bad):
                if s.first_crc_failure is None:
                    s.first_crc_failure = base_offset + int(raw.positions[bad[0]])
                s.crc_failures += len(bad)
                for i in bad:
                    s.findings.append(Finding("commitlog.body_crc", "error", path, int(raw.positions[i]),
                                              "BODYCRC does not match the body (RocketMQ's recovery stops here)",
                                              {"physical_offset": base_offset + int(raw.positions[i])}))
    res = reader.result
    s.records = res.records
    s.valid_end = res.end_position if res.stop_position is None else res.stop_position
    s.stop_reason = res.stop.describe
    s.stop_position = res.stop_position
    s.findings = res.findings + s.findings
    return s
