"""Reading the records of one CommitLog byte range (a segment or a split of one), read-only, bounded memory.

Runs wherever records are read: in Spark's Python workers (the byte ranges of a partition), the CLI and
tests.

The file is opened ``O_RDONLY`` and read through one window at a time (a read-only ``mmap`` of 64 MiB,
or a ``pread`` copy where mapping fails; grown only up to ``max_record_size`` for a single large record),
so memory per split is bounded whatever the segment size. Records belong to the split in which they
*start*; the last one is read past the split end. A split that does not start at position 0 begins at the
first plausible record start (commitlog.resync), unless the caller knows it starts at a record or at where
the segment's data ends (``at_record``).

This module only supplies windows of bytes: the walk and the columns are ``codec.decoder.RecordDecoder``'s,
and the reader acts on where and why each walk stopped (refill the window for a record that continues past
it, report damage and resynchronise, or end the segment).

Damage (bad magic, impossible length, lengths that do not add up) is a Finding naming file and byte
position; the reader then re-synchronises on the next record start and reads on. BLANK, zero fill and end
of file end the segment normally — but valid records found after a BLANK or zero fill are read and
reported (RocketMQ would not see them). Records whose stored PHYSICALOFFSET names another place are not
returned (the decoder leaves them out) and are reported per run; with a decoder that checks CRCs, every
failure is a finding. In strict mode the first error finding raises StoreError instead.

A segment of a DLedger data directory (``layout.entry_frame``) is read through its entries: the decoder walks
entry by entry (``commitlog.check_record`` with the 48-byte frame), positions and physical offsets are the
records' (entry pos + 48, as RocketMQ reports them), a split resyncs on the next entry start, and a bad entry
header is damage like a bad record (``commitlog.bad_entry``).
"""
from __future__ import annotations

import errno
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from rocketstore_spark import progress
from rocketstore_spark.codec import commitlog
from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.codec.decoder import Decoded, RecordDecoder
from rocketstore_spark.findings import Finding, FindingCap, Severity, StoreError, finding
from rocketstore_spark.store.layout import entry_frame, offset_name

DEFAULT_WINDOW = 64 << 20
DEFAULT_MAX_RECORD = 64 << 20       # RocketMQ writes at most maxMessageSize (4 MiB default) + 64 KiB
_MAP_POPULATE = getattr(mmap, "MAP_POPULATE", 0)      # Linux only


@dataclass
class ScanResult:
    """How a range scan ended (filled in as the scan runs)."""
    records: int = 0
    first_position: int | None = None
    end_position: int = 0                 # position after the last record read
    stop: Stop = Stop.LIMIT
    stop_position: int | None = None      # where the segment ended (BLANK, zero fill) or None
    findings: list[Finding] = field(default_factory=list)


def map_window(fd: int, position: int, length: int, populate: bool = False) -> np.ndarray:
    """The bytes [position, position + length) of the file open read-only at ``fd``: a read-only shared mapping
    (no copy; unmapped when the last array viewing it goes), or a ``pread`` copy where mmap fails.
    ``populate``: map every page at once (for a window read whole)."""
    if length <= 0:
        return np.zeros(0, dtype=np.uint8)
    aligned = position - position % mmap.ALLOCATIONGRANULARITY
    try:
        mm = mmap.mmap(fd, length + position - aligned, flags=mmap.MAP_SHARED | (_MAP_POPULATE if populate else 0),
                       prot=mmap.PROT_READ, offset=aligned)
        return np.frombuffer(mm, dtype=np.uint8)[position - aligned:]
    except (OSError, ValueError):
        buf = bytearray(length)
        got = os.preadv(fd, [buf], position)
        return np.frombuffer(buf, dtype=np.uint8, count=got)


def crc_findings(path: str, base_offset: int, positions: np.ndarray) -> list[Finding]:
    """A ``commitlog.body_crc`` finding per record of the segment at ``path`` (file ``positions``) whose body
    fails BODYCRC."""
    return [finding("commitlog.body_crc", path, int(p), "BODYCRC does not match the body (RocketMQ's recovery stops "
                    "here)", physical_offset=base_offset + int(p)) for p in positions]


def record_start(path: str, position: int) -> int:
    """Where a range must start for the record at file ``position`` (or the first one after it) to be read:
    on a DLedger data file its entry's start, 48 bytes before (``layout.entry_frame``); else ``position``."""
    return max(0, position - entry_frame(path))


class SegmentReader:
    """Iterates the decoded batches (``codec.decoder.Decoded``) of [start, end) of one segment file. Fixed-width
    columns of a batch are views of decoder arrays, strings and bodies are copies: holding on to a batch
    does not hold on to its window."""

    def __init__(self, path: str, base_offset: int, decoder: RecordDecoder, start: int = 0, end: int | None = None,
                 *, strict: bool = False, window: int = DEFAULT_WINDOW, max_record_size: int = DEFAULT_MAX_RECORD,
                 followed: bool = False, on_finding: Callable[[Finding], None] | None = None,
                 next_path: str | None = None, at_record: bool = False,
                 on_window: Callable[[int], None] | None = None, cap: FindingCap | None = None):
        self.path = path
        self.on_window = on_window      # called with the file position of each window walked, before it is read
        self.next_path = next_path      # where the next segment lies (a multi-path log); None: beside this one
        # ``start`` is where a record (or the segment's end: a BLANK, zero fill) lies, as a walk from 0 would
        # reach it: read from there as that walk would, without looking for the next plausible record start
        self.at_record = at_record
        self.base_offset = base_offset
        self.decoder = decoder
        self.start = start
        self.end = end
        self.strict = strict
        self.window = window
        self.max_record_size = max_record_size
        # a later segment exists: RocketMQ closed this one with a BLANK record, so ending any other way means
        # its tail was lost
        self.followed = followed
        self.on_finding = on_finding
        self.frame = entry_frame(path)
        self.result = ScanResult()
        # at most findings.CAP of a check in full, then one finding for the rest: a segment of a million bad
        # records costs a few findings, not a million (``result.findings`` is the list of those kept)
        # (``cap``: holding already the findings of the segment's bytes before ``start``, a resumed scan's)
        self._cap = cap or FindingCap()
        self.result.findings = self._cap.kept

    # ------------------------------------------------------------------------------------ findings

    def _report(self, check: str, position: int | None, message: str, **evidence) -> None:
        if position is not None:
            evidence.setdefault("physical_offset", self.base_offset + position)
        f = finding(check, self.path, position, message, **evidence)
        if self.strict and f.severity == Severity.ERROR:
            raise StoreError(f)
        if self._cap.add(f) and self.on_finding:
            self.on_finding(f)

    # ----------------------------------------------------------------------------------- reading

    def __iter__(self) -> Iterator[Decoded]:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError as e:               # deleted or unreadable since planning: a finding, not a crash
            self._report("commitlog.unreadable", None, f"cannot open: {e.strerror}", errno=e.errno)
            return
        self.decoder.reset()
        self.decoder.frame = self.frame
        self._misplaced: list | None = None        # the open run of misplaced records: [first, last, count, stored...]
        self._after_end: list | None = None        # records found after the end: [end, reason, first, last, count]
        try:
            yield from self._scan(fd)
            self._close_misplaced_run()
            self._close_after_end()
        finally:
            os.close(fd)
            self.result.findings.extend(self._cap.summaries())

    def _read(self, fd: int, window: int, position: int, file_size: int, walk: bool = False) -> np.ndarray:
        """The window [position, position + window) of the file: a read-only shared mapping (no copy; it is
        unmapped when the last array viewing it goes — decoded batches copy what they keep), or a pread copy
        where mmap fails. ``walk``: the window is read record by record (not searched by a resync)."""
        length = min(window, file_size - position)
        # a window walked by a decoder that reads every byte, lying within the range, is mapped at once (one
        # call instead of a page fault per 64 KiB: a few ms less per 256 MiB); a header-only decoder may skip
        # most pages, a window past the range's end may be read only in part, and a resync reads only until
        # it finds a record start
        within = self.end is None or position + length <= self.end
        populate = walk and within and getattr(self.decoder, "reads_every_byte", False)
        if walk and self.on_window is not None:
            self.on_window(position)
        return map_window(fd, position, length, populate)

    def _scan(self, fd: int) -> Iterator[Decoded]:
        file_size = self._file_size = os.fstat(fd).st_size
        end = file_size if self.end is None else min(self.end, file_size)
        res = self.result
        window = self.window           # bytes per mapping; grows only for one oversized record
        pos = self.start
        if pos > 0 and not self.at_record:
            pos = self._resync(fd, window, pos, end, file_size)
            if pos < 0:
                res.end_position = self.start
                return
        res.first_position = pos
        buf = self._read(fd, window, pos, file_size, walk=True)
        buf_file_pos = pos
        while True:
            decoded = self.decoder.decode(buf, buf_file_pos, file_size, self.base_offset, pos, end)
            self._account(decoded)
            if decoded.n:
                res.records += decoded.n
                yield decoded
            pos, stop = decoded.next_position, decoded.stop
            res.end_position = pos
            progress.advance(self.path, pos if stop in (Stop.LIMIT, Stop.NEED_MORE) else end, file_size)
            if stop == Stop.LIMIT:
                if pos >= end:
                    self._stopped(stop, None)
                    return
                continue
            if stop == Stop.NEED_MORE:
                needed = self._record_extent(buf, buf_file_pos, pos, self.frame)
                if needed > window:
                    if needed > self.max_record_size:
                        self._report("commitlog.record_too_large", pos,
                                     f"TOTALSIZE {needed} exceeds max_record_size {self.max_record_size}",
                                     total_size=needed)
                        self._stopped(Stop.BAD_LENGTH, pos)
                        buf = None
                        pos = self._after_damage(fd, window, pos, end, file_size)
                        if pos < 0:
                            return
                    else:
                        window = needed
                buf = None                 # unmapped before the next window is mapped: one window at a time
                buf = self._read(fd, window, pos, file_size, walk=True)
                buf_file_pos = pos
                continue
            if stop == Stop.END_OF_FILE:
                self._stopped(stop, pos)
                self._unclosed(stop, pos)
                return
            if not stop.is_damage:
                # BLANK or zero fill: RocketMQ's log ends here. Valid records further on would be lost by it
                # without a word: look for them (in this range) and report them.
                self._stopped(stop, pos)
                buf = None                 # the resync maps its own windows
                found = self._resync(fd, window, pos + 1, end, file_size)
                if found < 0:
                    self._unclosed(stop, pos)
                    return
                self._found_after_end(pos, stop, found)
                pos = found
            else:
                self._report_damage(stop, buf, buf_file_pos, pos)
                self._stopped(stop, pos)
                buf = None
                pos = self._after_damage(fd, window, pos, end, file_size)
                if pos < 0:
                    return
            buf = None
            buf = self._read(fd, window, pos, file_size, walk=True)
            buf_file_pos = pos

    def _report_damage(self, stop: Stop, buf: np.ndarray, buf_file_pos: int, pos: int) -> None:
        """The finding of damage at ``pos`` with what lies there: a record's TOTALSIZE and magic, or a DLedger
        entry's magic, size, index, term and pos."""
        p = pos - buf_file_pos
        have = len(buf) - p
        if not self.frame:
            self._report(stop.check, pos, stop.describe,
                         total_size=int(commitlog.be32(buf, p)) if have >= 4 else None,
                         magic=f"0x{int(commitlog.be32(buf, p + 4)) & 0xFFFFFFFF:08X}" if have >= 8 else None)
            return
        head = bytes(buf[p:p + commitlog.DLEDGER_HEADER])
        fields = dict(zip(("entry_magic", "entry_size", "entry_index", "entry_term", "entry_pos"),
                          struct.unpack(">iiqqq", head[:32]))) if len(head) >= 32 else {}
        what = stop.describe if stop == Stop.BAD_ENTRY else f"DLedger entry: {stop.describe}"
        self._report(stop.check, pos, what, **fields)

    def _stopped(self, stop: Stop, position: int | None) -> None:
        """The first end or damage of the range is where RocketMQ's walk would stop: it stays the result's."""
        if self.result.stop_position is None:
            self.result.stop, self.result.stop_position = stop, position

    # ------------------------------------------------------------------------- what a batch reveals

    def _account(self, decoded: Decoded) -> None:
        """What a decoded call reveals, reported in file position order whatever the calls' bounds (a decoder's
        batches end where its own limits say): runs of misplaced records (consecutive in walk order, ended by a
        record that is where it says) and the BODYCRC failures of placed records."""
        if self._after_end is not None:
            self._after_end[4] += decoded.n
            if decoded.n:
                self._after_end[3] = int(decoded.positions[-1])
        if len(decoded.misplaced) == 0:
            if decoded.n:
                self._close_misplaced_run()         # by the call's first record: before any of its failures
            self._report_crc(decoded.crc_failures)
            return
        # placed records (a decoder may give only those that end runs), misplaced ones, failing bodies (placed)
        events = sorted([(p, 0, None) for p in decoded.positions.tolist()]
                        + [(p, 1, stored) for p, stored in zip(decoded.misplaced.tolist(),
                                                                decoded.misplaced_stored.tolist())]
                        + [(p, 2, None) for p in decoded.crc_failures.tolist()])
        for position, kind, stored in events:
            if kind != 1:
                self._close_misplaced_run()
                if kind == 2:
                    self._report_crc([position])
            elif self._misplaced is None:
                self._misplaced = [position, position, 1, stored, stored]
            else:
                run = self._misplaced
                run[1], run[2], run[4] = position, run[2] + 1, stored

    def _report_crc(self, positions) -> None:
        for f in crc_findings(self.path, self.base_offset, positions):
            self._report(f.check, f.file_position, f.message)

    def _close_misplaced_run(self) -> None:
        run, self._misplaced = self._misplaced, None
        if run is None:
            return
        first, last, count, stored_first, stored_last = run
        self._report("commitlog.misplaced_records", first,
                     f"{count} record(s) up to byte {last} say they lie at physical offsets {stored_first}.."
                     f"{stored_last}, not here (a copied or misnamed segment?): not returned",
                     count=count, last_position=last, stored_first=stored_first, stored_last=stored_last)

    def _unclosed(self, stop: Stop, position: int) -> None:
        """The segment ends at ``position`` with nothing valid after it: is that where RocketMQ ended it?"""
        if not self.followed:
            # a BLANK says RocketMQ rolled over to the next segment: an empty one is a normal end, none at all
            # is a missing file (or a rollover that failed)
            if stop == Stop.BLANK and not os.path.exists(self._next_segment_path()):
                name = os.path.basename(self._next_segment_path())
                self._report("commitlog.missing_next_segment", position,
                             f"the last segment ends with a BLANK record, written as RocketMQ rolled over to segment "
                             f"{name}, which is not here: messages written to it are missing (or creating it failed)",
                             next_segment=name)
            return
        if stop != Stop.BLANK:
            self._report("commitlog.unclosed_segment", position,
                         f"the segment ends here ({stop.describe}) without a BLANK record although a later segment "
                         "exists: its tail was zeroed or cut off")
            return
        # RocketMQ writes a BLANK only when the next message does not fit: the next segment's first record
        # must be larger than the room the BLANK leaves (less its 8 bytes)
        room = self._file_size - position
        first = self._next_segment_first_record()
        if first is not None and first + 8 <= room:
            self._report("commitlog.early_blank", position,
                         f"a BLANK record leaves {room} bytes here, yet the next segment's first record "
                         f"({first} bytes) would have fitted: the bytes after it may have been overwritten "
                         "(a batch of messages can also do this)", room=room, next_first_record=first)

    def _next_segment_path(self) -> str:
        """Where the segment that follows this one lies (named by the offset after this one's end)."""
        if self.next_path is not None:
            return self.next_path
        return os.path.join(os.path.dirname(self.path), offset_name(self.base_offset + self._file_size))

    def _next_segment_first_record(self) -> int | None:
        """TOTALSIZE of the first record (DLedger: size of the first entry) of the segment that follows this one
        (None if unreadable)."""
        try:
            with open(self._next_segment_path(), "rb") as f:
                head = f.read(8)
        except OSError:
            return None
        if len(head) < 8:
            return None
        total, magic = struct.unpack(">ii", head)
        if self.frame:                 # an entry: magic, then size (DLedger blanks when size + 8 > room, too)
            return magic if total == commitlog.DLEDGER_MAGIC and magic > 0 else None
        return total if magic in (commitlog.MAGIC_V1, commitlog.MAGIC_V2) and total > 0 else None

    def _found_after_end(self, end_position: int, stop: Stop, found: int) -> None:
        if self.strict:
            self._report("commitlog.records_after_end", end_position,
                         f"valid records from byte {found} on, after the end of the log here ({stop.describe})",
                         first_position=found)
        if self._after_end is None:
            self._after_end = [end_position, stop, found, found, 0]

    def _close_after_end(self) -> None:
        info, self._after_end = self._after_end, None
        if info is None:
            return
        end_position, stop, first, last, count = info
        self._report("commitlog.records_after_end", end_position,
                     f"the log ends here ({stop.describe}) but {count} valid record(s) follow, from byte {first} to "
                     f"{last}: RocketMQ would not see them",
                     first_position=first, last_position=last, count=count)

    @staticmethod
    def _record_extent(buf: np.ndarray, buf_file_pos: int, pos: int, frame: int = 0) -> int:
        """Bytes the record (DLedger: the entry, whose size follows its magic) at ``pos`` needs."""
        p = pos - buf_file_pos + (4 if frame else 0)
        return max(int(commitlog.be32(buf, p)), frame + 8) if p + 4 <= len(buf) else frame + 8

    def _after_damage(self, fd, window, pos: int, end: int, file_size: int) -> int:
        """Next record start after damage at ``pos``, recording how many bytes were skipped; -1 if none."""
        found = self._resync(fd, window, pos + 1, end, file_size)
        if found >= 0:
            self._report("commitlog.resynchronised", found, f"reading resumed after skipping {found - pos} bytes",
                         skipped_from=pos)
        return found

    def _resync(self, fd, window: int, start: int, end: int, file_size: int) -> int:
        """The first record start in [start, end), -1 if none. Holes of a sparse file are skipped unread."""
        pos = start
        while pos < end:
            try:
                data = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                if e.errno == errno.ENXIO:    # nothing but a hole up to the end of the file
                    return -1
                data = pos                    # a file system without SEEK_DATA: read everything
            # a record start lies at most 8 bytes before its first non-zero byte (TOTALSIZE is big-endian)
            pos = max(pos, data - 8)
            if pos >= end:
                return -1
            buf = self._read(fd, window, pos, file_size)
            if len(buf) < 36 + self.frame:
                return -1
            found = commitlog.resync(buf, pos, self.base_offset, pos, end, self.frame)
            if found >= 0:
                return int(found)
            pos += len(buf) - 35 - self.frame   # windows overlap by a header so no start is missed
        return -1
