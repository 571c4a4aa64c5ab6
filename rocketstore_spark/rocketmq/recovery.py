"""What RocketMQ would do to a store on its next start, simulated without writing anything (driver or CLI;
reads the store read-only).

The model is docs/format/recovery.md, checked against RocketMQ's real recovery of the golden stores:

1. every ConsumeQueue recovers from its last three files: it ends at the first invalid entry; ``maxCQ`` is
   the largest end (offset + size of a last valid entry) over all queues;
2. the CommitLog is walked from a start segment that depends on the shutdown (``abort`` present or not) and
   the release family; each record is checked as ``checkMessageAndReturnSize`` does (with the body CRC when
   ``checkCRCOnRecover``); a BLANK leads to the next segment; anything else ends the log there
   (``process_offset``);
3. the cut: segments after ``process_offset`` deleted, ConsumeQueues cut at the first entry at or beyond it
   (when ``maxCQ`` reaches it), and after a crash IndexFiles newer than the checkpoint deleted;
4. dispatch: after a crash (and, per family, on a normal start) records are dispatched again from the
   start segment (4.9.x normal: from ``maxCQ`` at start()), so lagging queues grow back —
   ``rocketmq.consumequeue.place``, the same placement the rebuild and verify use.

5. each queue's min offset (``_min_offset``): RocketMQ's ``correctMinOffset`` against the CommitLog's first
   segment, over the files the restart keeps; a queue the dispatch created starts where its first entry went.

What is lost: every valid, CRC-correct record at or after ``process_offset``, and consumer offsets that
then point past their queue's end. What is unreachable: records the log keeps but that the restart neither
dispatches again nor finds in a queue (``_unreachable``): a queue whose files are gone is not rebuilt from the
part of the log before the dispatch start, so no consumer can read those messages.

RocketMQ's own rebuild — a restart after ``consumequeue/`` and ``index/`` were removed — is the same restart
without queue files followed by ``start()``'s reput (``restart_dispatch``): the rebuild writes what it
dispatches, in the order it does.
"""
from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.codec.audit import AuditDecoder
from rocketstore_spark.codec.commitlog import (BLANK_MAGIC, MAGIC_V1, MAGIC_V2, POS_PHYSICAL_OFFSET,
                                               POS_STORE_TIMESTAMP_BH, POS_SYS_FLAG, Stop, SysFlag)
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec import dispatch_kernel
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.batch_queues import (BatchQueueError, base_and_size, batch_file_size, batch_topics,
                                                     dispatched_records, expected_queues)
from rocketstore_spark.rocketmq.batch_recovery import BatchQueueRecovery, load_batch_queues
from rocketstore_spark.rocketmq.releases import CrashStart, Family, NormalDispatch, NormalStart, family_named
from rocketstore_spark.rocketmq.settings import BrokerSettings, lmq_mode
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.files import read_checkpoint
from rocketstore_spark.store.indexes import read_index_file
from rocketstore_spark.store.layout import StoreMap, entry_frame, stat_once
from rocketstore_spark.store.queues import read_held
from rocketstore_spark.store.scan import SegmentSummary, scan_segment
from rocketstore_spark.store.segment_reader import SegmentReader

RECOVER_MAX_SEGMENTS = 10          # 5.5.x commitLogRecoverMaxNum: the default, and what a value <= 0 means
SCAN_THREADS = 2                   # segments scanned at once (CRC and walk release the GIL)
CHUNK_ROWS = 1 << 20               # records dispatched at once (their dispatch columns: ~50 MB)


@dataclass
class QueueRecovery:
    topic: str
    queue_id: int
    files: list[tuple[str, int]]            # (path, queue byte offset) in order
    max_offset: int = 0                     # after step 1
    max_physical: int = -1                  # offset + size of the last valid entry (-1: none)
    cut_max_offset: int | None = None       # after step 3 (None: not cut)
    files_deleted: list[str] = field(default_factory=list)
    final_max_offset: int = 0               # after dispatch: RocketMQ's getMaxOffsetInQueue
    final_min_offset: int = 0               # after the restart: RocketMQ's getMinOffsetInQueue (``_min_offset``)
    redispatched: int = 0
    first_redispatched: int = -1            # the lowest queue offset the restart's dispatch writes (-1: none)
    moved: int = 0                          # entries the restart's dispatch writes at another offset than their
                                            # QUEUEOFFSET ("[BUG] logic queue order maybe wrong")

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.queue_id

    def state(self) -> cq.QueueState:
        """The dispatch state the queue's files leave (a queue whose files are all gone starts anew)."""
        if len(self.files) <= len(self.files_deleted):
            return cq.QueueState()
        end = self.cut_max_offset if self.cut_max_offset is not None else self.max_offset
        return cq.QueueState(end=end, max_physical=self.max_physical)


def _entries(path: str) -> np.ndarray:
    """A queue file's entries; none for a file larger than RocketMQ writes (a sparse or foreign file, which
    RocketMQ's MappedFileQueue.load refuses for its size anyway: reading it has no bound)."""
    if stat_once(path).st_size > consumequeue.MAX_FILE_SIZE:
        return consumequeue.decode_entries(b"").copy()
    return read_held(path)


class QueueFileReads:
    """What one simulation takes from each ConsumeQueue file it looks at (driver): a summary
    (``rocketmq.consumequeue.file_summary``) — small, so a run keeps every file's
    (steps 1 and 3 look at the same last files: each is read once) where the entries themselves would not fit.

    ``known``: path -> [identity, summary] of closed files (not their queue's last) from an earlier run (the
    scrub's state); ``identity(path)``: what tells a file unchanged (the scrub's size, modification and change
    times and inode: no call sets the change time back, so a file rewritten in place is read again). A closed
    file whose identity is the recorded one is not read. ``found``: path -> [identity, summary] of the closed
    files this run looked at, identity taken before the read (for the caller to keep); empty without
    ``identity``.

    Each queue's last file (the one a broker appends to) is summarized once a run between this simulation and
    the scrub's queue check, which runs beside it on another thread and reads the same file whole
    (``verify.queues.check_resumed_queues``): whichever comes to it first leaves its summary here
    (``last_file``, ``share_last_file``), the other takes it. Only a file both see as their queue's last is
    shared: a closed file's summary is kept for the next run under its identity, and must be of the bytes that
    identity names (a file the broker closed between the two reads is read by each)."""

    def __init__(self, known: dict[str, list] | None = None, identity=None):
        self.known, self.identity = known or {}, identity
        self.found: dict[str, list] = {}
        self._summaries: dict[str, list[int]] = {}
        self._last_files: dict[str, list] = {}      # path -> summary of a queue's last file (either reader's)

    def last_file(self, path: str) -> list | None:
        """The summary of the queue's last file at ``path`` either reader made this run, else None."""
        return self._last_files.get(path)

    def share_last_file(self, path: str, summary: list) -> list:
        """Leave the summary of a queue's last file; the one kept (the first left: both readers answer the same
        from then on)."""
        return self._last_files.setdefault(path, summary)

    def summary(self, path: str, closed: bool = False) -> list[int]:
        s = self._summaries.get(path)
        if s is not None:
            return s
        if not closed:
            s = self._last_files.get(path)
            if s is None:
                s = self.share_last_file(path, cq.file_summary(_entries(path)))
            self._summaries[path] = s
            return s
        ident = self.identity(path) if self.identity is not None else None
        old = self.known.get(path) if ident is not None else None
        if old is not None and old[0] == ident:
            s = old[1]
        else:
            s = cq.file_summary(_entries(path))
        self._summaries[path] = s
        if ident is not None:
            self.found[path] = [ident, s]
        return s


def recover_queue(topic: str, queue_id: int, queue_dir, reads: QueueFileReads | None = None) -> QueueRecovery:
    """Step 1 for one queue (ConsumeQueue.recover): from the third-last file, a file valid to its end leads
    to the next; the queue ends at the first invalid entry. ``reads``: the simulation's (``QueueFileReads``)."""
    reads = reads or QueueFileReads()
    q = QueueRecovery(topic, queue_id, [(p, o) for p, o in StoreMap.queue_files(queue_dir)])
    for k in range(max(0, len(q.files) - 3), len(q.files)):
        path, cq_offset = q.files[k]
        held, n, max_physical, _, _ = reads.summary(path, closed=k < len(q.files) - 1)
        q.max_offset = (cq_offset + n * ENTRY_SIZE) // ENTRY_SIZE
        if n:
            q.max_physical = max_physical
        if n < held or not held:
            break
    return q


NONE_YET = np.iinfo(np.int64).max


def first_entry_at_or_above(files: list[tuple[str, int]], end: int, log_min: int) -> int | None:
    """The queue offset of the first entry below queue offset ``end`` that points at or above ``log_min``,
    looking from the first file on (``rocketmq.consumequeue.rocketmq_bounds``' rule); None when every one
    points below it. Valid or not: correctMinOffset reads what lies below the queue's end (an all-zero entry
    the recovery kept, physical offset 0, is at or above a log starting at 0). A file's first entry is read
    alone first: where nothing expired, that is all that is read."""
    for path, cq_offset in files:
        first = cq_offset // ENTRY_SIZE
        if first >= end:
            break
        size = stat_once(path).st_size
        if size > consumequeue.MAX_FILE_SIZE:
            continue                    # no entries (``_entries``)
        fd = os.open(path, os.O_RDONLY)
        try:
            head = consumequeue.decode_entries(os.pread(fd, ENTRY_SIZE, 0))
        finally:
            os.close(fd)
        if len(head) and int(head["commit_log_offset"][0]) >= log_min:
            return first
        raw = _entries(path)            # past these, the file holds zeros only
        below = min(end - first, size // ENTRY_SIZE)
        hit = np.flatnonzero(raw["commit_log_offset"][:below] >= log_min)
        if len(hit):
            return first + int(hit[0])
        if log_min <= 0 and below > len(raw):
            return first + len(raw)
    return None


def truncate_queue(q: QueueRecovery, process_offset: int, file_size: int,
                   reads: QueueFileReads | None = None) -> None:
    """Step 3 for one queue (ConsumeQueue.truncateDirtyLogicFiles): from the last file back, a file whose
    first entry points at or beyond ``process_offset`` is deleted; in the first one that does not, the queue
    ends at the first entry that does (or the first invalid one). ``reads``: the simulation's; a file whose
    summary shows every valid entry below ``process_offset`` is not read again (it ends at its first invalid
    entry)."""
    files = list(q.files)
    while files:
        path, cq_offset = files[-1]
        if reads is not None:
            held, n, max_physical, first, largest = reads.summary(path, closed=len(files) < len(q.files))
            if first is not None and first >= process_offset:
                q.files_deleted.append(path)
                files.pop()
                continue
            if n and largest < process_offset:
                q.cut_max_offset = (cq_offset + n * ENTRY_SIZE) // ENTRY_SIZE
                q.max_physical = max_physical
                return
        raw = _entries(path)
        if len(raw) and int(raw["commit_log_offset"][0]) >= process_offset:
            q.files_deleted.append(path)
            files.pop()
            continue
        # the first entry is kept without a validity test (it points below process_offset); later ones end
        # the queue when invalid or at/after process_offset
        stop = ~consumequeue.valid_mask(raw) | (raw["commit_log_offset"] >= process_offset)
        stop[:1] = False
        end = int(np.flatnonzero(stop)[0]) if stop.any() else len(raw)
        q.cut_max_offset = (cq_offset + end * ENTRY_SIZE) // ENTRY_SIZE
        q.max_physical = int(raw["commit_log_offset"][end - 1]) + int(raw["size"][end - 1]) if end else -1
        return
    q.cut_max_offset = 0
    q.max_physical = -1


@dataclass
class SegmentCheck:
    """A segment as recovery sees it: its first record's header and the walk through it."""
    file: str
    base_offset: int
    size: int
    first_magic_ok: bool = False            # the first record has a message magic and a non-zero store time
    first_valid: bool = False               # ... and is a whole valid record (CRC included when checked)
    first_store_timestamp: int = 0
    first_physical_offset: int | None = None
    scan: SegmentSummary | None = None


def _first_record(path: str, check: SegmentCheck) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        head = os.pread(fd, POS_STORE_TIMESTAMP_BH + 20 + 8, 0)
    finally:
        os.close(fd)
    if len(head) < POS_STORE_TIMESTAMP_BH + 16:
        return
    be = lambda at, n: int.from_bytes(head[at:at + n], "big", signed=True)       # noqa: E731
    bh = 20 if be(POS_SYS_FLAG, 4) & SysFlag.BORNHOST_V6 else 8
    check.first_store_timestamp = be(POS_STORE_TIMESTAMP_BH + bh, 8) if len(head) >= POS_STORE_TIMESTAMP_BH + bh + 8 \
        else 0
    check.first_physical_offset = be(POS_PHYSICAL_OFFSET, 8)
    check.first_magic_ok = be(4, 4) in (MAGIC_V1, MAGIC_V2) and check.first_store_timestamp != 0


@dataclass
class Walk:
    start_file: str | None
    start_reason: str
    process_offset: int
    stop_file: str | None
    stop_position: int | None
    stop_reason: str
    segments_walked: list[str] = field(default_factory=list)


class Simulation:
    """One store's simulated restart (``run``), for a release family and broker settings."""

    def __init__(self, layout: StoreLayout, settings: BrokerSettings, release_family: str | None = None,
                 without_derived: bool = False, reachable_below: int | None = None,
                 queue_feed: "QueueFeed | None" = None, queue_reads: QueueFileReads | None = None):
        """``reachable_below``: a physical offset below which every queued record is known to have its entry in
        its queue, below every entry that could end the queue (the scrub's resumed cross-checks show it: every
        queue without findings up to there, its files and the log there unchanged); ``unreachable`` does not
        read those records again (none of them can be beyond its queue's end: a recovery keeps every entry
        below its process offset, and dispatch only moves an end up). ``queue_feed``: the unreachable records
        counted from another pass's queue columns (the audit's verify), not by dispatching the log again.
        ``queue_reads``: the ConsumeQueue files' summaries, with what a caller knows of closed files
        (``QueueFileReads``; the scrub's); a fresh one by default."""
        self.layout, self.settings = layout, settings
        self.reachable_below = reachable_below
        self.queue_feed = queue_feed
        self.reads = queue_reads or QueueFileReads()      # the ConsumeQueue files' summaries (the scrub's known)
        # a restart after consumequeue/ and index/ were removed (the rebuild: ``restart_dispatch``)
        self.without_derived = without_derived
        self.family: Family = family_named(release_family) if release_family else settings.release.family
        self.check_crc = bool(settings.values.get("checkCRCOnRecover", True))
        # 5.5.x CommitLog.recoverNormally/recoverAbnormally: maxRecoverNum = getCommitLogRecoverMaxNum(), 10 if <= 0
        self.recover_max = int(settings.values.get("commitLogRecoverMaxNum", RECOVER_MAX_SEGMENTS))
        if self.recover_max <= 0:
            self.recover_max = RECOVER_MAX_SEGMENTS
        self.index_safe = bool(settings.values.get("messageIndexSafe", False))
        self.index_enable = settings.geometry is not None
        self.state = read_checkpoint(layout.files) if layout.files.root is not None else None
        self.checkpoint = (self.state.checkpoint if self.state else None) or {
            k: 0 for k in ("physic_msg_timestamp", "logics_msg_timestamp", "index_msg_timestamp",
                           "master_flushed_offset", "confirm_phy_offset", "logics_physical_offset", "min_timestamp",
                           "min_timestamp_index")}
        self.abnormal = bool(self.state and self.state.abort_present)
        # BatchCQ topics: their records go to batchconsumequeue/ (rocketmq.batch_recovery), not to a ConsumeQueue
        self.batch_topics = batch_topics(layout.files) if layout.files.root is not None else frozenset()
        self._checks: dict[int, SegmentCheck] = {}
        self._pending: dict[int, Future] = {}
        self._pool: ThreadPoolExecutor | None = None

    # ----------------------------------------------------------------------------------- segments

    def segment(self, k: int) -> SegmentCheck:
        """Segment ``k`` as recovery sees it (scanned once, lazily: only the window is read; a scan already
        started ahead by ``_prefetch`` is waited for)."""
        if k not in self._checks:
            pending = self._pending.pop(k, None)
            self._checks[k] = pending.result() if pending is not None else self._scan(k)
        return self._checks[k]

    def _prefetch(self, k: int) -> None:
        """Start scanning segment ``k`` in the background (the kernels release the GIL: two cores scan two
        segments at once)."""
        if 0 <= k < len(self.layout.segments) and k not in self._checks and k not in self._pending:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="recovery-scan")
            self._pending[k] = self._pool.submit(self._scan, k)

    def _scan(self, k: int) -> SegmentCheck:
        seg = self.layout.segments[k]
        c = SegmentCheck(os.path.basename(seg.path), seg.base_offset, seg.size)
        _first_record(seg.path, c)
        shared = self.queue_feed.scans(self.check_crc) if self.queue_feed is not None else None
        c.scan = shared.get(seg.base_offset) if shared is not None else None
        if c.scan is None:
            c.scan = scan_segment(seg.path, seg.base_offset, check_crc=self.check_crc,
                                  followed=self.layout.followed(k), next_path=self.layout.next_path(k))
        c.first_valid = (c.scan.records > 0 and c.scan.first_position == 0
                         and c.scan.first_crc_failure != seg.base_offset)
        return c

    def start_segment(self, max_cq: int) -> tuple[int, str]:
        """(index of the segment the walk starts at, why)."""
        n = len(self.layout.segments)
        cp = self.checkpoint
        if not self.abnormal:
            return self.normal_start(n, max_cq)
        if self.family.crash_start == CrashStart.LOGICS_PHYSICAL_OFFSET:
            if cp["logics_physical_offset"] > 0:
                bound = cp["logics_physical_offset"]
                return self._search(n, lambda c: c.first_valid and c.first_physical_offset is not None
                                    and c.first_physical_offset <= bound,
                                    f"crash: the newest segment whose first record is valid with PHYSICALOFFSET <= "
                                    f"the checkpoint's logicsPhysicalOffset {bound}")
            bound = cp["logics_msg_timestamp"]
            return self._search(n, lambda c: c.first_valid and c.first_store_timestamp <= bound,
                                f"crash: the newest segment whose first record is valid and stored at or before "
                                f"the checkpoint's logicsMsgTimestamp {bound}")
        bound = cp["min_timestamp_index"] if self.index_enable and self.index_safe else cp["min_timestamp"]
        for k in range(n - 1, -1, -1):
            c = self.segment_head(k)
            if c.first_magic_ok and c.first_store_timestamp <= bound:
                return k, (f"crash: the newest segment whose first record has a message magic and a store time "
                           f"<= the checkpoint's minimum {bound} (min(physic, logics) - 3 s)")
        return 0, "crash: no segment's first record is old enough: the first segment"

    def normal_start(self, n: int, max_cq: int, end: int | None = None) -> tuple[int, str]:
        """(index of the segment a clean start walks from, why), over the first ``n`` segments; ``end``: the
        log was cut there (a segment starting at or after it holds no first record; cuts fall on record
        boundaries)."""
        rule = self.family.normal_start
        if rule == NormalStart.THIRD_LAST:
            return max(0, n - 3), "normal start: the third-last segment (or the first)"
        if rule == NormalStart.LAST_BELOW_MAX_CQ:
            ok = [k for k in range(n) if self.layout.segments[k].base_offset <= max_cq]
            return (ok[-1] if ok else 0), f"normal start: the last segment whose base offset <= maxCQ {max_cq}"
        index_ts = self.checkpoint["index_msg_timestamp"]
        return self._search(n, lambda c: c.first_valid and c.first_physical_offset is not None
                            and c.first_physical_offset <= max_cq and (end is None or c.base_offset < end)
                            and (not self.index_safe or c.first_store_timestamp <= index_ts),
                            f"normal start: the newest segment whose first record is valid with PHYSICALOFFSET "
                            f"<= maxCQ {max_cq}")

    def segment_head(self, k: int) -> SegmentCheck:
        """Only the first record's header of segment ``k`` (no scan)."""
        if k in self._checks:
            return self._checks[k]
        seg = self.layout.segments[k]
        c = SegmentCheck(os.path.basename(seg.path), seg.base_offset, seg.size)
        _first_record(seg.path, c)
        return c

    def _search(self, n: int, ok, why: str) -> tuple[int, str]:
        oldest = max(0, n - self.recover_max)
        for k in range(n - 1, oldest - 1, -1):
            if k > oldest:
                self._prefetch(k - 1)
            if ok(self.segment(k)):
                return k, why
        return oldest, why + f": none within {self.recover_max} segments (commitLogRecoverMaxNum), the oldest examined"

    def walk(self, start: int, why: str, end: int | None = None) -> Walk:
        """Step 2 from segment ``start``; ``end``: the log as an earlier start cut it (nothing at or after it,
        segments beyond it deleted)."""
        segs = self.layout.segments
        last = len(segs) if end is None else sum(1 for s in segs if s.base_offset <= end)
        w = Walk(os.path.basename(segs[start].path), why, segs[start].base_offset, None, None, "")
        for k in range(start, last):
            if k + 1 < last:
                self._prefetch(k + 1)
            c = self.segment(k)
            w.segments_walked.append(c.file)
            s = c.scan
            crc_at = None if s.first_crc_failure is None or not self.check_crc else s.first_crc_failure - c.base_offset
            stop = s.stop_position if s.stop_position is not None else s.valid_end
            cut_here = end is not None and end - c.base_offset <= stop
            if cut_here:
                stop = end - c.base_offset
            if crc_at is not None and crc_at < stop:
                w.process_offset, w.stop_file, w.stop_position = c.base_offset + crc_at, c.file, crc_at
                w.stop_reason = "BODYCRC mismatch (checkCRCOnRecover)"
                return w
            if not cut_here and s.stop == Stop.BLANK and k + 1 < last:
                continue
            w.process_offset, w.stop_file, w.stop_position = c.base_offset + stop, c.file, stop
            w.stop_reason = "where the start before ended the log" if cut_here else \
                {Stop.BLANK: "BLANK record in the last segment: the end of the log",
                 Stop.ZERO: "zero fill: the end of the log"}.get(s.stop, s.stop_reason)
            return w
        return w

    def dispatch_end(self, k: int, start: int) -> tuple[int, str]:
        """(file position, why) where a dispatch reading segment ``k`` from record start ``start`` stops: the
        first BLANK, zero fill or damage at or after it (no CRC: ``checkMessageAndReturnSize`` without it);
        ``why`` is empty at a BLANK, zero fill or the end of the data. A segment the walk scanned is not
        read again."""
        seg = self.layout.segments[k]
        if start == 0 and k in self._checks:
            s = self._checks[k].scan
            first, stop, kind, end = s.first_position, s.stop_position, s.stop, s.valid_end
        else:
            reader = SegmentReader(seg.path, seg.base_offset, AuditDecoder(check_crc=False), start=start,
                                   followed=self.layout.followed(k), next_path=self.layout.next_path(k))
            for _ in reader:
                pass
            r = reader.result
            first, stop, kind, end = r.first_position, r.stop_position, r.stop, r.end_position
        if first != start:
            return start, no_record_reason(seg.path, start)
        if stop is None:
            return end, ""
        return stop, kind.describe if kind.is_damage else ""

    def later_starts(self, po: int, max_cq: int) -> list[Walk]:
        """The clean starts after this one, each on the store the one before left (the log ending at ``po``,
        its queues reaching ``max_cq``), as long as each cuts the log further. This start's walk may begin
        after damage that a clean start walks again (a crash: the checkpoint lets it skip older segments; a
        cut: deleted segments bring older ones into the last three), and RocketMQ then ends the log there:
        4.9.8, measured, kept a body with a bad CRC two segments back on its crash recovery and cut there on
        the clean restart after it (docs/format/recovery.md, "Later clean starts")."""
        walks = []
        while po is not None:
            n = sum(1 for s in self.layout.segments if s.base_offset <= po)
            if not n:
                break
            start, why = self.normal_start(n, max_cq, end=po)
            w = self.walk(start, why, end=po)
            if w.process_offset >= po:
                break
            walks.append(w)
            po, max_cq = w.process_offset, min(max_cq, w.process_offset)
        return walks

    # ---------------------------------------------------------------------------------------- run

    def run(self) -> "RecoveryReport":
        try:
            return self._run()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool, self._pending = None, {}

    def _run(self) -> "RecoveryReport":
        files, segs = self.layout.files, self.layout.segments
        queues = [recover_queue(t, q, d, self.reads) for t, q, d in files.queue_dirs()] \
            if files.root is not None and not self.without_derived else []
        log_min = segs[0].base_offset if segs else 0
        batch = load_batch_queues(files, batch_file_size(files, self.settings), log_min) \
            if files.root is not None and not self.without_derived else []
        # a BatchConsumeQueue's maxMsgPhyOffsetInCommitLog (its last unit's start) counts in maxCQ too
        max_cq = max([q.max_physical for q in queues] + [b.max_physical for b in batch], default=-1)
        report = RecoveryReport(self.family.name, "abnormal" if self.abnormal else "normal", self.checkpoint,
                                max_cq, queues, batch_queues=batch)
        if not segs:
            report.shutdown_reason = "no CommitLog segment: every ConsumeQueue would be destroyed"
            return report
        start, why = self.start_segment(max_cq)
        w = self.walk(start, why)
        report.walk = w
        po = w.process_offset
        report.commitlog_files_deleted = [files.relative(s.path)
                                          for s in segs if s.base_offset > po]
        if not self.without_derived:
            self.index_files_deleted(report)
        log_min = segs[0].base_offset
        file_size = self.settings.consume_queue_file_size
        dispatch_rule = self.family.normal_dispatch
        if self.abnormal or dispatch_rule == NormalDispatch.DURING_WALK:
            # the walk dispatches as it goes (a crash: from the start segment; 5.3.2+ normal: beyond maxCQ),
            # then the queues are cut at process_offset: a queue that took entries holds only offsets below it
            lo = segs[start].base_offset if self.abnormal else max(max_cq, log_min, segs[start].base_offset)
            states = self._dispatch(report, lo, po, {q.key: q.state() for q in queues})
            if max_cq >= po:
                for q in queues:
                    if not q.redispatched:
                        truncate_queue(q, po, file_size, self.reads)
                        states[q.key] = q.state()
        else:
            # 4.9.x and 5.0-5.3.1 normal: cut first; dispatch (4.9.x only) at start() from the largest queue end
            if max_cq >= po:
                for q in queues:
                    truncate_queue(q, po, file_size, self.reads)
            after_cut = max((q.max_physical for q in queues), default=-1)
            lo = max(after_cut, log_min) if dispatch_rule == NormalDispatch.FROM_QUEUE_END_AFTER_CUT else po
            # without queue files this is start()'s reput, which ``restart_dispatch`` follows itself
            states = self._dispatch(report, lo, po, {q.key: q.state() for q in queues}) \
                if not self.without_derived else {}
        if batch or (self.batch_topics and not self.without_derived):
            self._recover_batch(report, lo, po, states, log_min)
        for q in report.queues:
            q.final_max_offset = states[q.key].max_offset
            q.moved = states[q.key].moved
            q.final_min_offset = self._min_offset(q, log_min, dispatch_rule)
        report.dispatch_from, report.dispatch_to = lo, po
        max_cq_after = report.queue_end_after = max((st.max_physical for st in states.values()), default=-1)
        if self.without_derived:           # what it dispatches is all ``restart_dispatch`` asks
            return report
        ends = {key: st.max_physical for key, st in states.items()}
        start = max(log_min, self.reachable_below or log_min)
        fed = self.queue_feed.ask(start, lo, ends) if self.queue_feed is not None else None
        report.unreachable = fed if fed is not None else self._unreachable(start, lo, ends)
        report.unreachable = report.unreachable | report.batch_unreachable      # BatchCQ topics: never in ``ends``
        cut_to = po
        for w in self.later_starts(po, max_cq_after):
            report.later_starts.append(LaterStart(
                w, [files.relative(s.path)
                    for s in segs if w.process_offset < s.base_offset <= cut_to],
                self._lost(w.process_offset, cut_to)))
            cut_to = w.process_offset
        return report

    def index_files_deleted(self, report: "RecoveryReport") -> None:
        """After a crash, the IndexFiles newer than the checkpoint's indexMsgTimestamp (IndexService.load)."""
        files = self.layout.files
        if self.abnormal and self.index_enable and files.index_dir is not None:
            for p in files.index_files():
                view = read_index_file(str(p), self.settings.geometry.hash_slot_num)
                if view.header["end_timestamp"] > self.checkpoint["index_msg_timestamp"]:
                    report.index_files_deleted.append(files.relative(p))

    def _min_offset(self, q: QueueRecovery, log_min: int, dispatch_rule: NormalDispatch) -> int:
        """RocketMQ's getMinOffsetInQueue after the restart (ConsumeQueue.correctMinOffset at load, against the
        CommitLog's min offset ``log_min``): the first entry the kept files hold that points at or above it;
        else, for a queue the restart's dispatch wrote into, its first such entry (a queue the dispatch created
        starts there: putMessagePositionInfo sets its min; 4.9.x's normal start dispatches only after the
        correction, which leaves a queue with files at 0); else every entry expired: 5.x puts the min at the
        max, 4.9.x leaves it at 0 (``Family.expired_min_is_max``)."""
        kept = q.files[:len(q.files) - len(q.files_deleted)] if q.files_deleted else q.files
        end = q.state().end
        if kept and end > 0:
            hit = first_entry_at_or_above(kept, end, log_min)
            if hit is not None:
                return hit
        if q.first_redispatched >= 0:
            after_correction = not self.abnormal and dispatch_rule == NormalDispatch.FROM_QUEUE_END_AFTER_CUT
            return 0 if after_correction and kept else q.first_redispatched
        return q.final_max_offset if self.family.expired_min_is_max else 0

    def _recover_batch(self, report: "RecoveryReport", lo: int, po: int, states: dict, log_min: int) -> None:
        """The BatchConsumeQueues through the restart (``rocketmq.batch_recovery``): the units of the BatchCQ
        records of [lo, po) dispatched (a queue without files created), the cut at ``po`` when maxCQ then reaches
        it (``ConsumeQueueStore.truncateDirty``: after a crash's or 5.3.2+'s walk dispatch; before, on older clean
        starts, as the ConsumeQueues'), then each queue's bounds."""
        batch = {q.key: q for q in report.batch_queues}
        size = batch_file_size(self.layout.files, self.settings)
        # where each queue's units end before the dispatch: its records between there and the dispatch start get
        # no unit (the dispatch appends; it does not go back)
        recovered = {key: b.max_physical for key, b in batch.items()}

        def dispatch() -> None:
            if po <= lo or not self.batch_topics:
                return
            records = dispatched_records(self.layout, self.batch_topics, None, self.settings.message_delay_level,
                                         lo, po)
            for q in expected_queues(records, self.batch_topics):
                key = (q.topic, q.queue_id)
                if key not in batch:
                    batch[key] = BatchQueueRecovery(q.topic, q.queue_id, size, [])
                batch[key].dispatch(q.units)

        def cut() -> None:
            ends = [st.max_physical for st in states.values()] + [b.max_physical for b in batch.values()]
            if max(ends, default=-1) >= po:
                for b in batch.values():
                    b.truncate(po)
        if self.abnormal or self.family.normal_dispatch == NormalDispatch.DURING_WALK:
            dispatch()
            cut()
        else:
            cut()
            dispatch()
        for b in batch.values():
            b.bounds(log_min)
        report.batch_queues = sorted(batch.values(), key=lambda b: b.key)
        if self.batch_topics and lo > log_min:
            report.batch_unreachable = self._unreachable_batch(recovered, log_min, min(lo, po))

    def _unreachable_batch(self, recovered: dict, log_min: int, lo: int) -> dict:
        """The queued records of BatchCQ topics in [log_min, lo) — the log the restart keeps but does not dispatch
        again — past their queue's last unit before the dispatch (``recovered``: (topic, queue id) -> its
        maxMsgPhyOffsetInCommitLog; none: a queue without units): no unit will ever point at them. Per queue as
        ``_unreachable`` (records, their QUEUEOFFSETs: an inner batch's base)."""
        # from the log's start: a queue with no directory has no units at all
        t = dispatched_records(self.layout, self.batch_topics, None, self.settings.message_delay_level, log_min, lo,
                               columns=("physical_offset", "topic", "queue_id", "queue_offset", "transaction_type"))
        out: dict[tuple[str, int], list[int]] = {}
        if not t.num_rows:
            return out
        t = t.filter(pa.array(dispatch_kernel.QUEUED[dispatch._type_index(t["transaction_type"])]))
        codes = pc.dictionary_encode(t["topic"]).combine_chunks()
        names = codes.dictionary.to_pylist()
        key = dispatch.queue_keys(codes.indices.to_numpy(), t["queue_id"].to_numpy())
        phy = t["physical_offset"].to_numpy()
        uniq, inverse = np.unique(key, return_inverse=True)
        ends = np.array([recovered.get((names[tp], q), -1) for tp, q in map(dispatch.queue_of, uniq.tolist())],
                        dtype=np.int64)
        past = phy > ends[inverse]
        add_queue_spans(out, names, key[past], phy[past], t["queue_offset"].to_numpy()[past])
        return out

    def _dispatch(self, report: "RecoveryReport", lo: int, po: int, states: dict) -> dict:
        """Dispatch the records of [lo, po) into the queues' states (new queues are added to the report), and
        collect the valid, CRC-correct records at or after po (``report.lost``)."""
        states = self.place(report.queues, lo, po, states)
        if not self.without_derived:
            report.lost = self._lost(po, None)
            report.lost_lmq = self._lost_lmq(report.lost, po)
        return states

    def _lost_lmq(self, lost: pa.Table | None, lo: int) -> dict:
        """The LMQ multi-dispatch entries of the ``lost`` records (at or after ``lo``), per queue: (topic, queue
        id) -> [messages, lowest and highest queue offset, first and last physical offset]."""
        out: dict[tuple[str, int], list[int]] = {}
        if lost is None or not lost.num_rows:
            return out
        valid = np.sort(lost["physical_offset"].to_numpy())
        end = int(valid[-1]) + 1
        for decoder, key, phy, qo, _ in self._queued_windows(lo, end, lmq_only=True):
            keep = np.isin(phy, valid)
            add_queue_spans(out, decoder.topics, key[keep], phy[keep], qo[keep])
        return out

    def place(self, queues_seen: list[QueueRecovery], lo: int, po: int, states: dict) -> dict:
        """Place the entries of the records of [lo, po) in the queues, from their dispatch ``states``
        ((topic, queue id) -> ``QueueState``; a queue without one starts anew and is appended to
        ``queues_seen``): every queue's state afterwards. ``queues_seen`` gets the entries written, the first
        queue offset written to, for each queue. Only what placing an entry needs is decoded, by the compiled
        dispatch, and every window's entries are placed in one call (``rocketmq.consumequeue.place_many``).
        With no states, from the log's start: the queues a rebuild writes (``recovery.plan``)."""
        by_queue = {q.key: q for q in queues_seen}
        names = list(states)
        table = np.array([[st.end, st.max_physical, st.first, st.file_start, st.written, st.skipped, st.moved]
                          for st in states.values()], dtype=np.int64).reshape(-1, cq.STATE_COLUMNS)
        redispatched = np.zeros(len(names), np.int64)
        first = np.full(len(names), NONE_YET, np.int64)
        queues = _QueueRows({key: row for row, key in enumerate(names)})
        for decoder, key, phy, qo, size in self._queued_windows(lo, po):
            rows = queues.rows(decoder, key)
            for k in np.unique(key[rows < 0]).tolist():     # queues without files: placed from scratch
                topic, queue_id = dispatch.queue_of(k)
                name = (decoder.topics[topic], queue_id)
                queues.add(name, len(names))
                names.append(name)
                by_queue[name] = QueueRecovery(*name, [])
                queues_seen.append(by_queue[name])
                table = np.vstack([table, cq.new_states(1)])
                redispatched = np.append(redispatched, 0)
                first = np.append(first, NONE_YET)
            if (rows < 0).any():
                rows = queues.rows(decoder, key)
            slots = cq.place_many(table, rows, qo, phy, size, self.settings.consume_queue_file_size)
            written = slots >= 0
            redispatched += np.bincount(rows[written], minlength=len(names))
            np.minimum.at(first, rows[written], slots[written])
        for name, row in zip(names, range(len(names))):
            q = by_queue[name]
            q.redispatched += int(redispatched[row])
            if first[row] != NONE_YET:
                q.first_redispatched = int(first[row]) if q.first_redispatched < 0 else \
                    min(q.first_redispatched, int(first[row]))
        return {name: cq.queue_state(table[row]) for row, name in enumerate(names)}

    def _queued_windows(self, lo: int, hi: int, lmq_only: bool = False):
        """(decoder, queue keys, physical offsets, queue offsets, sizes) of the ConsumeQueue entries the records
        of [lo, hi) dispatch (with LMQ multi-dispatch, theirs too: ``codec.lmq``; ``lmq_only``: only those), a
        window at a time through the compiled dispatch (``codec.dispatch_kernel``: no strings built; queue keys
        number topics as ``decoder.topics`` does)."""
        if hi <= lo:
            return
        lmq = lmq_mode(self.settings)
        if lmq_only and not lmq:
            return
        decoder = DispatchDecoder(self.settings.message_delay_level, index=False, batch_rows=1 << 16,
                                  tags_code=False, lmq=lmq,        # placing entries needs no tagsCode
                                  batch_topics=self.batch_topics)
        for k, seg in enumerate(self.layout.segments):
            if seg.base_offset + seg.size <= lo or seg.base_offset >= hi:
                continue
            reader = SegmentReader(seg.path, seg.base_offset, decoder, start=max(0, lo - seg.base_offset),
                                   end=min(seg.size, hi - seg.base_offset), followed=self.layout.followed(k))
            for decoded in reader:
                w = decoded.batch
                if lmq_only:
                    rows, topic, queue_id, queue_offset = (w.lmq_row, w.lmq_topic, w.lmq_queue_id, w.lmq_queue_offset)
                elif w.lmq_row is None or not len(w.lmq_row):
                    # the classic case: one gather per column of the records taken
                    take = np.flatnonzero(w.queued & (w.physical_offset >= lo) & (w.physical_offset < hi))
                    if len(take):
                        yield (decoder, dispatch.queue_keys(w.topic[take], w.queue_id[take]), w.physical_offset[take],
                               w.queue_offset[take], w.size[take])
                    continue
                else:
                    rows, topic, queue_id, queue_offset = w.entries()
                phy = w.physical_offset[rows]
                take = np.flatnonzero((phy >= lo) & (phy < hi))
                if len(take):
                    yield (decoder, dispatch.queue_keys(topic[take], queue_id[take]), phy[take], queue_offset[take],
                           w.size[rows[take]])

    def _unreachable(self, lo: int, hi: int, ends: dict, kept: bool = False) -> dict:
        """The queued records of [lo, hi) — the log the restart keeps but does not dispatch again — that their
        queue will not hold after it: a record at or past the end of the queue's last entry (``ends``: (topic,
        queue id) -> that physical offset; entries follow the log's order, whatever queue offset they were
        placed at), or of a queue that has no entry at all (its files were lost and nothing rebuilds them).
        (topic, queue id) -> [messages, lowest and highest queue offset, first and last physical offset].
        Window by window: memory follows the queues, not the log. ``kept``: the records their queue does hold
        instead."""
        out: dict[tuple[str, int], list[int]] = {}
        names = list(ends)
        queue_ends = np.array([ends[name] for name in names] + [-1], dtype=np.int64)     # row -1: no entry
        queues = _QueueRows({name: row for row, name in enumerate(names)})
        for decoder, key, phy, qo, _ in self._queued_windows(lo, hi):
            beyond = phy >= queue_ends[queues.rows(decoder, key)]
            beyond = np.flatnonzero(~beyond if kept else beyond)
            if not len(beyond):
                continue
            add_queue_spans(out, decoder.topics, key[beyond], phy[beyond], qo[beyond])
        return out

    def _lost(self, lo: int, hi: int | None) -> pa.Table | None:
        """The valid, CRC-correct records in [lo, hi) (hi None: to the end): what a cut at ``lo`` loses; in a store
        with BatchCQ topics, with ``inner_messages``: each of their records' batch size — the messages a consumer
        receives of it (``batch_queues.base_and_size``; null for the other topics' records)."""
        columns = ("physical_offset", "topic", "queue_id", "queue_offset", "store_timestamp", "transaction_type")
        extra = ("properties",) if self.batch_topics else ()
        lost = [t.filter(t["body_crc_ok"]).select(columns + extra)
                for t in self._records((*columns, *extra, "body_crc_ok"), lo, hi)]
        if not lost:
            return None
        t = pa.concat_tables(lost)
        if extra:
            batch = pc.is_in(t["topic"], value_set=pa.array(sorted(self.batch_topics))).to_numpy(
                zero_copy_only=False)
            inner = np.ones(t.num_rows, np.int64)
            if batch.any():
                try:
                    inner[batch] = base_and_size(t.filter(pa.array(batch)))[1]
                except BatchQueueError:
                    pass                # RocketMQ's dispatch throws on it: counted as one message each
            t = t.drop_columns(["properties"]).append_column("inner_messages", pa.array(inner, mask=~batch))
        return t

    def _records(self, columns: tuple[str, ...], lo: int, hi: int | None):
        """The records whose physical offset lies in [lo, hi) (hi None: to the end), as tables of ``columns``;
        the next segments are decoded in background threads (SCAN_THREADS at once) while the caller works on
        this one's: at most SCAN_THREADS + 1 segments' dispatch columns are held."""
        ks = [k for k, seg in enumerate(self.layout.segments)
              if seg.base_offset + seg.size > lo and (hi is None or seg.base_offset < hi)]

        def decode(k: int) -> list[pa.Table]:
            # batches joined into chunks of up to CHUNK_ROWS: per-queue work is per chunk, not per batch
            seg, out, pending, rows = self.layout.segments[k], [], [], 0
            decoder = RecordDecoder(columns, batch_rows=1 << 16)
            for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=max(0, lo - seg.base_offset),
                                         followed=self.layout.followed(k)):
                t = pa.Table.from_batches([decoded.batch])
                phy = t["physical_offset"].to_numpy()
                inside = (phy >= lo) & (phy < hi) if hi is not None else phy >= lo
                pending.append(t if inside.all() else t.filter(pa.array(inside)))
                rows += pending[-1].num_rows
                if rows >= CHUNK_ROWS:
                    out.append(pa.concat_tables(pending).combine_chunks())
                    pending, rows = [], 0
            if pending:
                out.append(pa.concat_tables(pending).combine_chunks())
            return out

        with ThreadPoolExecutor(max_workers=SCAN_THREADS, thread_name_prefix="recovery-decode") as ahead:
            queued = deque()
            for k in ks:
                queued.append(ahead.submit(decode, k))
                if len(queued) > SCAN_THREADS:
                    yield from queued.popleft().result()
            while queued:
                yield from queued.popleft().result()


def add_queue_spans(out: dict, topics: list[str], key: np.ndarray, phy: np.ndarray, qo: np.ndarray) -> None:
    """Records counted into ``out`` per queue: their queue keys (topics numbered as ``topics``: a
    ``DispatchDecoder``'s), physical offsets and queue offsets. ``out``: (topic, queue id) -> [messages, lowest
    and highest queue offset, first and last physical offset], grown in place (one sort per call: no loop per
    record)."""
    if not len(key):
        return
    order = np.argsort(key, kind="stable")
    key, phy, qo = key[order], phy[order], qo[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    counts = np.diff(np.r_[starts, len(key)])
    lows, highs = np.minimum.reduceat(qo, starts), np.maximum.reduceat(qo, starts)
    firsts, lasts = np.minimum.reduceat(phy, starts), np.maximum.reduceat(phy, starts)
    for j, start in enumerate(starts.tolist()):
        topic, queue_id = dispatch.queue_of(key[start])
        name = (topics[topic], queue_id)
        row = [int(counts[j]), int(lows[j]), int(highs[j]), int(firsts[j]), int(lasts[j])]
        agg = out.setdefault(name, row)
        if agg is not row:
            agg[0] += row[0]
            agg[1], agg[2] = min(agg[1], row[1]), max(agg[2], row[2])
            agg[3], agg[4] = min(agg[3], row[3]), max(agg[4], row[4])


class QueueFeed:
    """The unreachable records (``Simulation._unreachable``) counted from every queue's records as another pass
    of the same store already holds them (the audit: verify's spill, ``verify.store``), instead of dispatching
    the log a second time. Two threads meet here: the simulation ``ask``s with the range and the queues' ends
    and waits; the other pass ``feed``s each queue's records (numpy columns ``physical_offset`` and
    ``queue_offset`` of the queued records of one queue, every queued record of the log in all) — its first
    feed waits for the question — and ``close``s, complete or not (an incomplete feed: the simulation
    dispatches the log itself). ``withdraw``: the simulation ended without asking (the feeder stops waiting).
    The same counts as ``_unreachable``: a filter and a min/max per queue, in any order. The other pass's
    segment scans come the same way (``offer_scans``; the simulation's ``scans``), so a segment is not scanned
    twice (nor, on a store larger than the page cache, read from the disk twice)."""

    def __init__(self):
        self._asked: Future = Future()
        self._done: Future = Future()
        self._scans: Future = Future()          # (check_crc, {base offset: SegmentSummary}) or None
        self._out: dict[tuple[str, int], list[int]] = {}
        self._lock = threading.Lock()

    def ask(self, lo: int, hi: int, ends: dict) -> dict | None:
        """(simulation) The unreachable records of [lo, hi) as ``_unreachable`` returns them; None when the
        feed did not see every queue."""
        with self._lock:
            if not self._asked.done():
                self._asked.set_result((lo, hi, ends))
        return self._done.result()

    def withdraw(self) -> None:
        """(simulation) Done without asking: the feeder need not wait."""
        with self._lock:
            if not self._asked.done():
                self._asked.set_result(None)

    def offer_scans(self, check_crc: bool, scans: dict | None) -> None:
        """(the other pass) Its segment scans (``store.scan.SegmentSummary`` by base offset; None: none made),
        BODYCRC checked with ``check_crc``; before its first ``feed`` (which, like ``close``, offers none if
        this was not called: the simulation waits for the scans before it asks)."""
        with self._lock:
            if not self._scans.done():
                self._scans.set_result((check_crc, scans) if scans is not None else None)

    def scans(self, check_crc: bool) -> dict | None:
        """(simulation) The other pass's segment scans by base offset, if they were made with the same BODYCRC
        check; None when there are none (the simulation scans itself)."""
        offered = self._scans.result()
        return offered[1] if offered is not None and offered[0] == check_crc else None

    def feed(self, topic: str, queue_id: int, cols: dict) -> None:
        """(the other pass) Records of one queue, ``physical_offset`` and ``queue_offset`` columns."""
        self.offer_scans(False, None)           # no scans offered after the feeding starts
        asked = self._asked.result()
        if asked is None or self._done.done():
            return
        lo, hi, ends = asked
        phy, qo = cols["physical_offset"], cols["queue_offset"]
        beyond = (phy >= lo) & (phy < hi) & (phy >= ends.get((topic, queue_id), -1))
        if not beyond.any():
            return
        phy, qo = phy[beyond], qo[beyond]
        row = [len(phy), int(qo.min()), int(qo.max()), int(phy.min()), int(phy.max())]
        with self._lock:
            agg = self._out.setdefault((topic, queue_id), row)
            if agg is not row:
                agg[0] += row[0]
                agg[1], agg[2] = min(agg[1], row[1]), max(agg[2], row[2])
                agg[3], agg[4] = min(agg[3], row[3]), max(agg[4], row[4])

    def close(self, complete: bool) -> None:
        """(the other pass) Every queue fed (``complete``), or not; a second close changes nothing."""
        self.offer_scans(False, None)
        with self._lock:
            if not self._done.done():
                self._done.set_result(self._out if complete and self._asked.done() and
                                      self._asked.result() is not None else None)


class _QueueRows:
    """(topic, queue id) -> a row of some table, looked up for a window's queue keys at once (their topic
    numbers are a ``DispatchDecoder``'s, which grow as it meets topics): one searchsorted, no strings."""

    def __init__(self, rows: dict[tuple[str, int], int]):
        self.by_topic: dict[str, list[tuple[int, int]]] = {}
        for (topic, queue_id), row in rows.items():
            self.by_topic.setdefault(topic, []).append((queue_id, row))
        self.numbered = -1
        self.keys = self.values = np.zeros(0, np.int64)

    def add(self, name: tuple[str, int], row: int) -> None:
        self.by_topic.setdefault(name[0], []).append((name[1], row))
        self.numbered = -1

    def rows(self, decoder, keys: np.ndarray) -> np.ndarray:
        """The row of each queue key; -1 for a queue without one."""
        if len(decoder.topics) != self.numbered:
            self.numbered = len(decoder.topics)
            pairs = sorted((int(dispatch.queue_keys(t, q)), row) for t, topic in enumerate(decoder.topics)
                           for q, row in self.by_topic.get(topic, ()))
            self.keys = np.array([p[0] for p in pairs], np.int64)
            self.values = np.array([p[1] for p in pairs], np.int64)
        if not len(self.keys):
            return np.full(len(keys), -1, np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, self.values[at], -1)


@dataclass
class LaterStart:
    """A clean start after the one simulated that cuts the log further (``Simulation.later_starts``)."""
    walk: Walk
    commitlog_files_deleted: list[str]      # beyond the start before's
    lost: pa.Table | None                   # valid, CRC-correct records between its end and the start before's


@dataclass
class RecoveryReport:
    release_family: str
    shutdown: str                            # "normal" or "abnormal"
    checkpoint: dict
    max_cq: int
    queues: list[QueueRecovery]
    walk: Walk | None = None
    shutdown_reason: str = ""
    commitlog_files_deleted: list[str] = field(default_factory=list)
    index_files_deleted: list[str] = field(default_factory=list)
    dispatch_from: int | None = None
    dispatch_to: int | None = None
    lost: pa.Table | None = None             # valid, CRC-correct records at or after process_offset
    lost_lmq: dict = field(default_factory=dict)    # their LMQ multi-dispatch entries per queue (``_lost_lmq``)
    later_starts: list[LaterStart] = field(default_factory=list)
    # queued records the restart keeps in the log but no queue reaches: (topic, queue id) -> [messages, first
    # and last queue offset, first and last physical offset] (``Simulation._unreachable``)
    unreachable: dict = field(default_factory=dict)
    queue_end_after: int = -1                # the largest queue end after the restart's dispatch (-1: none)
    dledger: object = None                   # a DLedger store: DLedger's own recovery (rocketmq.dledger_recovery)
    dledger_walk: dict | None = None         # ... and DLedgerCommitLog's crash walk
    past_log_end: dict = field(default_factory=dict)    # queue entries kept past the end the log serves (DLedger)
    batch_queues: list = field(default_factory=list)    # BatchConsumeQueues through the restart (rocketmq.batch_recovery)
    batch_unreachable: dict = field(default_factory=dict)   # their records no unit reaches (``_unreachable_batch``)


def no_record_reason(path: str, start: int) -> str:
    """Why a dispatch that finds no record at file position ``start`` of ``path`` stops there: '' for a BLANK
    or zero fill (which lead to the next segment), else RocketMQ's check fails there."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            head = os.pread(fd, 8, start)
        finally:
            os.close(fd)
    except OSError:                 # gone or unreadable since it was listed: nothing to dispatch
        head = b""
    magic = int.from_bytes(head[4:8], "big", signed=True) if len(head) == 8 else 0
    return "" if magic in (0, BLANK_MAGIC) else "no valid record where the dispatch begins"


@dataclass(frozen=True)
class DispatchPiece:
    """A byte range of one segment that a restart dispatches in one go, free of damage: physical offsets
    [start, end) of the segment at ``path`` — or, ``to_stop``, [start, the first BLANK, zero fill or damage
    before ``end``), found as the range is read (``RestartDispatch.read``)."""
    path: str
    base_offset: int
    followed: bool                           # a later segment exists (the reader's ``followed``)
    start: int
    end: int
    phase: str                               # "recovery" (the CommitLog walk dispatches) or "reput" (start())
    to_stop: bool = False
    name: str = ""                           # the segment's path in the store (for ``stops``)
    next_path: str | None = None             # where the next segment lies, when not beside this one (multi-path)


@dataclass
class RestartDispatch:
    """What a restart of a store whose ``consumequeue/`` and ``index/`` were removed dispatches — RocketMQ's own
    rebuild of them (``restart_dispatch``): the records of ``pieces``, in that order, each through the queue
    placement and the index's put (which skips a record below the last one indexed)."""
    report: RecoveryReport                   # the simulated restart (no queues, no IndexFiles)
    ranges: list[tuple[int, int, str]]       # (from, to, phase): what is dispatched, in order (one per phase)
    pieces: list[DispatchPiece]              # the ranges cut at segment ends and where a segment's reading stops
    stops: list[tuple[str, int, str]]        # (file, byte, why): a segment whose dispatch ends before its data does
    recovery_delay_levels: bool = True       # the release's ``Family.recovery_delay_levels``
    # (segment, file position) of the tails ``read`` has reported: a crash's recovery and reput phases both end
    # at the restart's end of log, and its tail (a pre-allocated segment's zeros, perhaps) is read once
    _tails: set = field(default_factory=set, repr=False)

    def delay_levels(self, phase: str, message_delay_level: str) -> str:
        """The delay-level table a phase's dispatch computes SCHEDULE_TOPIC_XXXX tagsCodes with: none for a
        4.x crash recovery (its delay table is loaded after it: the entries keep the TAGS hash)."""
        return message_delay_level if phase != "recovery" or self.recovery_delay_levels else ""

    def read(self, piece: DispatchPiece, decoder, findings: list) -> Iterator:
        """The decoded batches ``piece`` dispatches (executor or driver: wherever the rebuild runs), everything
        the reading met appended to ``findings``. A ``to_stop`` piece is read on to its end, so that damage
        and records after a BLANK are reported as a whole-log read reports them, but only the records before
        its first BLANK, zero fill or damage are yielded; where that is is added to ``stops`` (reput)."""
        reader = SegmentReader(piece.path, piece.base_offset, decoder, piece.start - piece.base_offset,
                               piece.end - piece.base_offset, followed=piece.followed, next_path=piece.next_path)
        start = piece.start - piece.base_offset
        dispatching = True
        for decoded in reader:
            r = reader.result
            if r.first_position != start or r.stop_position is not None:
                dispatching = dispatching and not piece.to_stop
            if dispatching:
                yield decoded
        findings.extend(reader.result.findings)
        tail_at = (piece.path, reader.result.end_position)
        if piece.to_stop and reader.result.stop_position is None and reader.result.end_position >= \
                piece.end - piece.base_offset and tail_at not in self._tails:
            self._tails.add(tail_at)
            # dispatched to the range's end (where the restart's log ends, inside the segment): what lies
            # after it — the damage the recovery cut at, records after it — is reported too, from headers
            tail = SegmentReader(piece.path, piece.base_offset, AuditDecoder(check_crc=False),
                                 reader.result.end_position, followed=piece.followed, next_path=piece.next_path,
                                 at_record=True)
            for _ in tail:
                pass
            findings.extend(tail.result.findings)
        if piece.to_stop and piece.phase == "reput":
            r = reader.result
            if r.first_position is not None and r.first_position != start:
                why = no_record_reason(piece.path, start)
                if why:
                    self.stops.append((piece.name, start, why))
            elif r.stop_position is not None and piece.base_offset + r.stop_position < piece.end \
                    and r.stop.is_damage:
                self.stops.append((piece.name, r.stop_position, r.stop.describe))

    @property
    def intervals(self) -> np.ndarray:
        """The pieces as sorted, merged [start, end) physical offsets (rows of 2; not for ``to_stop`` pieces,
        whose ends are known only once read)."""
        if any(p.to_stop for p in self.pieces):
            raise ValueError("the restart's pieces were planned to stop where reading finds damage: read them first")
        spans = sorted((p.start, p.end) for p in self.pieces)
        merged: list[list[int]] = []
        for lo, hi in spans:
            if merged and lo <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], hi)
            else:
                merged.append([lo, hi])
        return np.array(merged, dtype=np.int64).reshape(-1, 2)

    def describe(self) -> list[str]:
        """The restart in sentences: where its walk starts and stops, what it dispatches."""
        r, w = self.report, self.report.walk
        out = [f"RocketMQ {r.release_family}, {r.shutdown} shutdown"]
        if w is None:
            return out + [r.shutdown_reason or "nothing to dispatch"]
        out.append(f"CommitLog walk from {w.start_file} ({w.start_reason}); the log ends at {w.process_offset}"
                   + (f" ({w.stop_file} @ byte {w.stop_position}: {w.stop_reason})" if w.stop_file else ""))
        for lo, hi, phase in self.ranges:
            out.append(f"{'recovery dispatches' if phase == 'recovery' else 'reput at start() dispatches'} "
                       f"[{lo}, {hi})" if hi > lo else f"{'recovery' if phase == 'recovery' else 'reput'}: nothing")
        out += [f"dispatch of {file} ends at byte {at}: {why} (the rest of the segment is skipped)"
                for file, at, why in self.stops]
        return out


def restart_dispatch(layout: StoreLayout, settings: BrokerSettings, lazy: bool = False) -> RestartDispatch:
    """What the release of ``settings`` dispatches when it starts on ``layout`` without ``consumequeue/`` and
    ``index/`` (driver; reads the store read-only): the restart ``Simulation`` runs without them (normal or
    crash start as the ``abort`` file says), then ``start()``'s reput runs from the largest queue end the
    recovery left (none: the CommitLog minimum) to where the log ends — what 4.9.x always does and 5.x does
    with ``recheckReputOffsetFromCq=true``, the setting RocketMQ's own rebuild needs (docs/format/recovery.md).

    The recovery's walk stops at the first damage it reads, so its dispatch holds none. The reput reads
    segments the walk did not (``checkMessageAndReturnSize`` without CRC): a BLANK leads to the next
    segment, and so does damage — ReputMessageService on a master skips the rest of that segment
    (``reputFromOffset += result.getSize() - readSize``), so every later segment is dispatched again. A
    record whose lengths do not add up is taken as damage too (RocketMQ's reput then steps by TOTALSIZE from
    a buffer left elsewhere; not modelled)."""
    from rocketstore_spark.rocketmq.dledger_recovery import dledger_dispatch   # it builds on this module
    if any(entry_frame(seg.path) for seg in layout.segments):
        return dledger_dispatch(layout, settings, lazy)
    sim = Simulation(layout, settings, without_derived=True)
    report = sim.run()
    out = RestartDispatch(report, [], [], [], sim.family.recovery_delay_levels)
    if report.walk is None:
        return out
    segs = layout.segments
    po, log_min = report.walk.process_offset, segs[0].base_offset
    recovered = report.shutdown == "abnormal" or sim.family.normal_dispatch == NormalDispatch.DURING_WALK
    if recovered:
        out.ranges.append((report.dispatch_from, po, "recovery"))
    out.ranges.append((max(report.queue_end_after if recovered else -1, log_min), po, "reput"))
    return add_pieces(out, layout, sim, lazy)


def add_pieces(out: RestartDispatch, layout: StoreLayout, sim: Simulation, lazy: bool) -> RestartDispatch:
    """``out``'s ranges cut into ``DispatchPiece``s at segment ends and where a segment's reading stops (``lazy``:
    found as the pieces are read)."""
    segs = layout.segments
    for lo, hi, phase in out.ranges:
        for k, seg in enumerate(segs):
            start, end = max(lo, seg.base_offset), min(hi, seg.base_offset + seg.size)
            if start >= end:
                continue
            name = layout.files.relative(seg.path)
            if lazy:
                out.pieces.append(DispatchPiece(seg.path, seg.base_offset, layout.followed(k), start, end, phase,
                                                to_stop=True, name=name, next_path=layout.next_path(k)))
                continue
            stop, why = sim.dispatch_end(k, start - seg.base_offset)
            if seg.base_offset + stop < end:
                end = seg.base_offset + stop
                if why and phase == "reput":
                    out.stops.append((name, stop, why))
            if end > start:
                out.pieces.append(DispatchPiece(seg.path, seg.base_offset, layout.followed(k), start, end, phase,
                                                name=name, next_path=layout.next_path(k)))
    return out


__all__ = ["DispatchPiece", "add_pieces", "LaterStart", "RecoveryReport", "RestartDispatch", "Simulation", "add_queue_spans",
           "first_entry_at_or_above", "QueueFileReads", "recover_queue", "restart_dispatch", "truncate_queue"]
