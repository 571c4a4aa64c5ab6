"""Scanning a whole CommitLog segment: what it holds, where its valid data ends, which bodies fail CRC.

Runs where called (a Spark executor for rocketmq_segments, the CLI, tests). The segment is read through
``store.segment_reader.SegmentReader`` (read-only windows, bounded memory) with ``codec.audit.AuditDecoder``:
one compiled pass per window walks the records and gives the verdict of every body, past the first CRC failure
(RocketMQ's recovery stops there; we count), building no per-record columns. The reader's findings (damage,
CRC failures, records after the end, misplaced records) come along. ``summarize`` makes the same summary from
the dispatch's walk where it made the same checks (``store.spill.scan_range`` with ``scans``).

A scan can resume (``Carried``): from where an earlier scan of the same segment ended cleanly (its valid end, a
record boundary; the bytes before it unchanged), with what that scan had gathered over the bytes before it —
the audit's state (counts, the first failures, the last store time for the next record's step), its findings
kept in full and past the cap — so that its summary is exactly the whole scan's (``verify.scrub`` decides when
it may, and keeps what it carries).
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

from rocketstore_spark.codec import audit
from rocketstore_spark.codec.audit import AuditDecoder
from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.findings import CAP, Finding, FindingCap, finding
from rocketstore_spark.store.layout import entry_frame
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
    # how the scan was made and what a later one may take (scan_segment's), not what it found: two scans of the
    # same bytes compare equal whichever walk made them (the audit's dispatch walk keeps no carry)
    resumed_from: int | None = field(default=None, compare=False)   # where it started reading, when it resumed
    carry: "Carried | None" = field(default=None, compare=False)    # what a scan resuming at valid_end takes


# the ends a broker leaves while it appends (zero fill after the last record), or when it rolls (a BLANK, or the
# file full): a scan that stopped there cleanly can resume there when the segment grows
CLEAN_ENDS = (Stop.ZERO, Stop.BLANK, Stop.END_OF_FILE)
# what the reader finds at the end itself: made again by the scan that resumes there (whether a segment follows
# may have changed meanwhile)
END_CHECKS = ("commitlog.missing_next_segment", "commitlog.unclosed_segment", "commitlog.early_blank")


@dataclass(frozen=True)
class Carried:
    """What a scan of a segment's bytes [0, ``position``) gathered, for a scan that resumes there (module
    docstring): small and picklable (it travels to a Spark task with the segment)."""
    position: int                     # where the scan resumes: the earlier scan's valid end, a record boundary
    records: int
    first_position: int | None
    state: tuple[int, ...]            # ``AuditDecoder.state`` there (its clock, S_NOW, is this scan's)
    prop_failures: tuple[int, ...]    # the first positions failing ``__CRC32#`` (``AuditDecoder.prop_failures``)
    findings: tuple[Finding, ...]     # the reader's findings of the bytes before ``position`` kept in full
    over: tuple = ()                  # (check, first, last, count) of each check past the cap (``FindingCap``)

    @property
    def now_ms(self) -> int:
        """The clock of the scan that gathered it (``AuditDecoder.state[S_NOW]``)."""
        return int(self.state[audit.S_NOW])


class _ResumedAudit(AuditDecoder):
    """``segment_audit``'s decoder starting from a ``Carried`` state rather than from zero."""

    def __init__(self, carried: Carried, **kwargs):
        self.carried = carried
        super().__init__(**kwargs)

    def reset(self) -> None:
        super().reset()
        now = self.state[audit.S_NOW]
        self.state[:] = self.carried.state
        self.state[audit.S_NOW] = now
        self._prop_failures[:len(self.carried.prop_failures)] = self.carried.prop_failures


def scan_segment(path: str, base_offset: int, check_crc: bool = True,
                 max_record_size: int = DEFAULT_MAX_RECORD, followed: bool = False,
                 check_properties_crc: bool = False, check_times: bool = False,
                 next_path: str | None = None, carried: Carried | None = None) -> SegmentSummary:
    """Scan one whole segment; ``followed``: a later segment of the store exists; ``next_path``: where the next
    segment lies when not beside it (``StoreLayout.next_path``). ``check_properties_crc``:
    also the 5.x ``__CRC32#`` property of every record that has one (``commitlog.properties_crc``);
    ``check_times``: store times going back or implausible (``commitlog.time_*``, one finding each).
    ``carried``: read only from ``carried.position`` on, the summary the whole scan's (module docstring) — unless
    the file is now shorter than that, or this scan's clock is behind the carried one's (then whole); the
    summary's ``resumed_from`` says which. Its ``carry`` is set when a scan may resume at its valid end."""
    decoder = segment_audit(check_crc, check_properties_crc, check_times, carried)
    if carried is not None and (decoder.now_ms < carried.now_ms or os.stat(path).st_size < carried.position
                                or entry_frame(path)):
        carried = None
        decoder = segment_audit(check_crc, check_properties_crc, check_times)
    cap = FindingCap()
    if carried is not None:
        cap.extend(carried.findings)
        for check, first, last, count in carried.over:
            cap.carry(check, first, last, count)
    reader = SegmentReader(path, base_offset, decoder, max_record_size=max_record_size, followed=followed,
                           next_path=next_path, start=carried.position if carried else 0,
                           at_record=carried is not None, cap=cap)
    for _ in reader:
        pass
    if carried is not None:
        reader.result.records += carried.records
        reader.result.first_position = carried.first_position
    kept = len(reader.result.findings) - len(cap.summaries())
    s = summarize(path, base_offset, reader.result, decoder)
    s.resumed_from = carried.position if carried is not None else None
    s.carry = _carry(s, s.findings[:kept], cap.over(), decoder, entry_frame(path))
    return s


def _carry(s: SegmentSummary, kept: list[Finding], over: list, decoder: AuditDecoder, frame: int) -> Carried | None:
    """What a scan resuming at the valid end of the scan ``s`` takes (``kept``: its reader's findings kept in full,
    ``over``: past the cap), or None where it may not: the scan stopped other than at a clean end (damage, records
    after the end), or the reader found anything before the end but BODYCRC failures (misplaced records: a run
    could go on across the end), or a store time implausible (judged against the clock, which moves), or a DLedger
    segment."""
    if s.stop not in CLEAN_ENDS or not (s.stop_position == s.valid_end == s.data_end) or frame \
            or decoder.state[audit.S_ODD]:
        return None
    before = [f for f in kept if f.check not in END_CHECKS or f.file_position != s.valid_end]
    if any(f.check != "commitlog.body_crc" for f in before) or any(c != "commitlog.body_crc" for c, *_ in over):
        return None
    return Carried(s.valid_end, s.records, s.first_position, tuple(int(x) for x in decoder.state),
                   tuple(int(x) for x in decoder.prop_failures), tuple(before), tuple(over))


def segment_audit(check_crc: bool = True, check_properties_crc: bool = False,
                  check_times: bool = False, carried: Carried | None = None) -> AuditDecoder:
    """The audit of a segment scan (``scan_segment``'s decoder; a dispatch given it makes the same checks in its
    own walk: ``codec.dispatch_kernel.DispatchDecoder``'s ``audit``); ``carried``: starting from that state."""
    kwargs = dict(check_crc=check_crc, check_properties_crc=check_properties_crc, check_times=check_times,
                  prop_failure_limit=CAP, now_ms=int(time.time() * 1000))
    return AuditDecoder(**kwargs) if carried is None else _ResumedAudit(carried, **kwargs)


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
