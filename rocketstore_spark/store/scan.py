"""Scanning a whole CommitLog segment: what it holds, where its valid data ends, which bodies fail CRC.

Runs where called (a Spark executor for rocketmq_segments, the CLI, tests). The segment is read through
``store.segment_reader.SegmentReader`` (read-only windows, bounded memory) with ``codec.audit.AuditDecoder``:
one compiled pass per window walks the records and gives the verdict of every body, past the first CRC failure
(RocketMQ's recovery stops there; we count), building no per-record columns. The reader's findings (damage,
CRC failures, records after the end, misplaced records) come along. ``summarize`` makes the same summary from
the dispatch's walk where it made the same checks (``store.spill.scan_range`` with ``scans``).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from rocketstore_spark.codec import audit
from rocketstore_spark.codec.audit import AuditDecoder
from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.findings import CAP, Finding, finding
from rocketstore_spark.store.segment_reader import DEFAULT_MAX_RECORD, ScanResult, SegmentReader


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
                 check_properties_crc: bool = False, check_times: bool = False,
                 next_path: str | None = None) -> SegmentSummary:
    """Scan one whole segment; ``followed``: a later segment of the store exists; ``next_path``: where the next
    segment lies when not beside it (``StoreLayout.next_path``). ``check_properties_crc``:
    also the 5.x ``__CRC32#`` property of every record that has one (``commitlog.properties_crc``);
    ``check_times``: store times going back or implausible (``commitlog.time_*``, one finding each)."""
    decoder = segment_audit(check_crc, check_properties_crc, check_times)
    reader = SegmentReader(path, base_offset, decoder, max_record_size=max_record_size, followed=followed,
                           next_path=next_path)
    for _ in reader:
        pass
    return summarize(path, base_offset, reader.result, decoder)


def segment_audit(check_crc: bool = True, check_properties_crc: bool = False,
                  check_times: bool = False) -> AuditDecoder:
    """The audit of a segment scan (``scan_segment``'s decoder; a dispatch given it makes the same checks in its
    own walk: ``codec.dispatch_kernel.DispatchDecoder``'s ``audit``)."""
    return AuditDecoder(check_crc=check_crc, check_properties_crc=check_properties_crc, check_times=check_times,
                        prop_failure_limit=CAP, now_ms=int(time.time() * 1000))


def summarize(path: str, base_offset: int, res: ScanResult, audited: AuditDecoder) -> SegmentSummary:
    """The scan of a whole segment from how its reader ended (``res``) and what ``audited`` (``segment_audit``,
    whichever decoder walked with it) gathered over the segment."""
    s = SegmentSummary()
    state = audited.state
    if state[audit.S_RECORDS]:
        s.first_store_timestamp = int(state[audit.S_FIRST_TS])
        s.last_store_timestamp = int(state[audit.S_LAST_TS])
    s.properties_crc_failures = int(state[audit.S_PROP_FAILURES])
    s.crc_failures = int(state[audit.S_CRC_FAILURES])
    if s.crc_failures:
        s.first_crc_failure = base_offset + int(state[audit.S_FIRST_CRC_POS])
    s.records = res.records
    s.first_position = res.first_position
    s.valid_end = res.end_position if res.stop_position is None else res.stop_position
    s.data_end = res.end_position
    s.stop = res.stop
    s.stop_reason = res.stop.describe
    s.stop_position = res.stop_position
    s.findings = res.findings
    for k, position in enumerate(audited.prop_failures.tolist()):
        more = s.properties_crc_failures - CAP if k == CAP - 1 and s.properties_crc_failures > CAP else 0
        s.findings.append(finding("commitlog.properties_crc", path, position,
                                  "the __CRC32# property does not match the record" +
                                  (f" ({more} more records of this segment fail it, not listed)" if more else ""),
                                  physical_offset=base_offset + position, **({"omitted": more} if more else {})))
    if audited.check_times:
        s.findings += time_findings(path, base_offset, state)
    return s


def time_findings(path: str, base_offset: int, state) -> list[Finding]:
    """Store times within one segment (``AuditDecoder.state``): steps back (``commitlog.time_backwards``) and
    values before 2012 or after tomorrow (``commitlog.time_implausible``), one finding each with counts."""
    out = []
    back, odd = int(state[audit.S_BACK]), int(state[audit.S_ODD])
    if back:
        position, step = int(state[audit.S_FIRST_BACK_POS]), int(state[audit.S_FIRST_BACK_STEP])
        largest = int(state[audit.S_LARGEST_STEP])
        out.append(finding("commitlog.time_backwards", path, position,
                           f"{back} record(s) stored earlier than the record before them (the first "
                           f"{step} ms earlier; the largest step {largest} ms)",
                           physical_offset=base_offset + position, records=back, largest_step_ms=largest))
    if odd:
        position, ts = int(state[audit.S_FIRST_ODD_POS]), int(state[audit.S_FIRST_ODD_TS])
        out.append(finding("commitlog.time_implausible", path, position,
                           f"{odd} record(s) with a store time before 2012 or after tomorrow (the first: "
                           f"{ts})", physical_offset=base_offset + position, records=odd))
    return out
