"""Scanning a whole CommitLog segment: what it holds, where its valid data ends, which bodies fail CRC.

Runs where called (a Spark executor for rocketmq_segments, the CLI, tests). A header-only decode plus the
compiled CRC verdict of every body, past the first CRC failure (RocketMQ's recovery stops there; we count);
the reader's findings (damage, CRC failures, records after the end, misplaced records) come along.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.segment_reader import DEFAULT_MAX_RECORD, SegmentReader
from rocketstore_spark.verify.capped import LIMIT

EARLIEST_PLAUSIBLE_MS = 1_325_376_000_000      # 2012-01-01: before RocketMQ (MetaQ 3) existed
FUTURE_SLACK_MS = 86_400_000                   # a day after the scan: clocks of copies and hosts differ


@dataclass
class SegmentSummary:
    records: int = 0
    first_position: int | None = None          # where the first record read starts (0 unless damage is at 0)
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    valid_end: int = 0
    data_end: int = 0                          # position after the last record read (records after damage too)
    properties_crc_failures: int = 0
    stop: Stop = Stop.LIMIT
    stop_reason: str = ""
    stop_position: int | None = None
    crc_failures: int = 0
    first_crc_failure: int | None = None      # physical offset
    findings: list[Finding] = field(default_factory=list)


def scan_segment(path: str, base_offset: int, check_crc: bool = True,
                 max_record_size: int = DEFAULT_MAX_RECORD, followed: bool = False,
                 check_properties_crc: bool = False, check_times: bool = False) -> SegmentSummary:
    """Scan one whole segment; ``followed``: a later segment of the store exists. ``check_properties_crc``:
    also the 5.x ``__CRC32#`` property of every record that has one (``commitlog.properties_crc``);
    ``check_times``: store times going back or implausible (``commitlog.time_*``, one finding each)."""
    s = SegmentSummary()
    decoder = RecordDecoder(("properties_crc_ok",) if check_properties_crc else (), extra_fields=("store_timestamp",),
                            check_crc=check_crc, batch_rows=65536)
    reader = SegmentReader(path, base_offset, decoder, max_record_size=max_record_size, followed=followed)
    times = _TimeCheck(path, base_offset) if check_times else None
    prop_failures = []
    for decoded in reader:
        ts = decoded.header.store_timestamp
        s.first_store_timestamp = int(ts[0]) if s.first_store_timestamp is None else s.first_store_timestamp
        s.last_store_timestamp = int(ts[-1])
        if len(decoded.crc_failures):
            if s.first_crc_failure is None:
                s.first_crc_failure = base_offset + int(decoded.crc_failures[0])
            s.crc_failures += len(decoded.crc_failures)
        if check_properties_crc:
            ok = decoded.batch.column("properties_crc_ok")
            bad = np.flatnonzero(~ok.fill_null(True).to_numpy(zero_copy_only=False))
            s.properties_crc_failures += len(bad)
            prop_failures.extend(int(decoded.positions[i]) for i in bad[:LIMIT - len(prop_failures)])
        if times is not None:
            times.add(decoded.positions, np.asarray(ts, np.int64))
    res = reader.result
    s.records = res.records
    s.first_position = res.first_position
    s.valid_end = res.end_position if res.stop_position is None else res.stop_position
    s.data_end = res.end_position
    s.stop = res.stop
    s.stop_reason = res.stop.describe
    s.stop_position = res.stop_position
    s.findings = res.findings
    for k, position in enumerate(prop_failures):
        more = s.properties_crc_failures - LIMIT if k == LIMIT - 1 and s.properties_crc_failures > LIMIT else 0
        s.findings.append(finding("commitlog.properties_crc", path, position,
                                  "the __CRC32# property does not match the record" +
                                  (f" ({more} more records of this segment fail it, not listed)" if more else ""),
                                  physical_offset=base_offset + position, **({"omitted": more} if more else {})))
    if times is not None:
        s.findings += times.findings()
    return s


class _TimeCheck:
    """Store times within one segment: steps back (``commitlog.time_backwards``) and values before 2012 or
    after tomorrow (``commitlog.time_implausible``), one finding each with counts."""

    def __init__(self, path: str, base_offset: int):
        self.path, self.base_offset = path, base_offset
        self.now = int(time.time() * 1000)
        self.previous: int | None = None
        self.back = 0
        self.first_back: tuple[int, int] | None = None    # (position, step ms)
        self.largest_step = 0
        self.odd = 0
        self.first_odd: tuple[int, int] | None = None     # (position, timestamp)

    def add(self, positions: np.ndarray, ts: np.ndarray) -> None:
        if not len(ts):
            return
        prev = np.concatenate([[ts[0] if self.previous is None else self.previous], ts[:-1]])
        step = prev - ts
        back = np.flatnonzero(step > 0)
        if len(back):
            self.back += len(back)
            self.largest_step = max(self.largest_step, int(step[back].max()))
            if self.first_back is None:
                self.first_back = (int(positions[back[0]]), int(step[back[0]]))
        odd = np.flatnonzero((ts < EARLIEST_PLAUSIBLE_MS) | (ts > self.now + FUTURE_SLACK_MS))
        if len(odd):
            self.odd += len(odd)
            if self.first_odd is None:
                self.first_odd = (int(positions[odd[0]]), int(ts[odd[0]]))
        self.previous = int(ts[-1])

    def findings(self) -> list[Finding]:
        out = []
        if self.first_back is not None:
            position, step = self.first_back
            out.append(finding("commitlog.time_backwards", self.path, position,
                               f"{self.back} record(s) stored earlier than the record before them (the first "
                               f"{step} ms earlier; the largest step {self.largest_step} ms)",
                               physical_offset=self.base_offset + position, records=self.back,
                               largest_step_ms=self.largest_step))
        if self.first_odd is not None:
            position, ts = self.first_odd
            out.append(finding("commitlog.time_implausible", self.path, position,
                               f"{self.odd} record(s) with a store time before 2012 or after tomorrow (the first: "
                               f"{ts})", physical_offset=self.base_offset + position, records=self.odd))
        return out
