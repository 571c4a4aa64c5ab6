"""Verifying a whole store in-process (CLI, notebooks, tests; ``spark.verify`` runs the same units as Spark
tasks over many stores).

The units, each in its own module: every CommitLog segment scanned with BODYCRC and store-time checks
(``store.scan``), every queue against its records (``verify.queues``), every IndexFile against the
records it covers (``verify.index``), the checkpoint, abort and lock files (``verify.state``), and the
committed consumer offsets against the queues' bounds (``verify.offsets``). Settings (ConsumeQueue file
size, IndexFile geometry, release family, delay levels) come from ``rocketmq.settings.resolve``: options >
broker.conf > what the files show > RocketMQ's defaults.

Findings name files relative to the store root. Two threads (``THREADS``; the compiled kernels release the
GIL): the CommitLog is dispatched once (``Dispatched``: ``store.spill.scan_range``, the rebuild's compiled
dispatch, a task a segment) into spill files — its queue entries by queue group, 36 bytes a queued message, and
its IndexFile keys, 20 bytes a key, in a temporary directory (``work_dir``, default the system's; never under the
store) — and the same walk makes every segment's CRC and store-time scan (``store.scan.summarize``: each record
header decoded once, each segment read from the disk once even when the store is larger than the page cache;
the AHEAD_BYTES after each thread's read ahead, and the IndexFiles and ConsumeQueue files when the log's last
piece is reached: ``store.readahead``); then the IndexFiles are
checked against the spilled keys (``verify.index``, streamed) while the queues are checked one queue group at a
time (a group holds the queues of at most 1 GiB of CommitLog and about 3 M messages — the first segment's
average record size says how many a byte holds —, at most 128 groups). A group that holds more than SPLIT_ROWS
records all the same (queues are grouped by a hash: one hot queue makes its group as large as itself) is split
into a spill file per queue, each read back and checked a chunk at a time (``split_group``; ``verify.queues``
checks a queue in parts). Memory: one segment window per thread, two queue groups of at most SPLIT_ROWS records
(one checked while the next is read), and the IndexFile check's slot tables — not the store, nor its largest
queue.
"""
from __future__ import annotations

import bisect
import contextlib
import errno
import os
import shutil
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.batch_queues import batch_topics
from rocketstore_spark.rocketmq.recovery import QueueFeed
from rocketstore_spark.rocketmq.settings import BrokerSettings, lmq_mode, resolve
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.engines import BATCH_ENGINE, LMQ_ENGINE, Work
from rocketstore_spark.store.indexes import IndexFileView, read_index_file
from rocketstore_spark.store.outputs import OutputError, outside_stores, store_roots
from rocketstore_spark.store.readahead import ReadAhead
from rocketstore_spark.store.rocksdb import queue_db
from rocketstore_spark.store.scan import SegmentSummary, scan_segment
from rocketstore_spark.store.segment_reader import SegmentReader
from rocketstore_spark.store.spill import ENTRY_SPILL, entries_path, read_spill, scan_range, small_keys, spilled_keys
from rocketstore_spark.verify.batch_queues import check_batch_queues, queue_type_mismatches
from rocketstore_spark.verify.index import IndexVerdict, check_index_file
from rocketstore_spark.verify.offsets import OffsetsReport, check_offsets, offsets_against_stored_bounds
from rocketstore_spark.verify.queues import Locate, LogBounds, QueueVerdict, check_queue, check_resumed_queues
from rocketstore_spark.verify.rocksdb_queues import check_rocksdb_queues
from rocketstore_spark.verify.state import LogState, check_state
from rocketstore_spark.verify.timers import check_timers


@dataclass
class StoreVerdict:
    store: str
    settings: BrokerSettings
    log: LogBounds
    segments: list[tuple[str, SegmentSummary]]          # (segment file name, scan)
    queues: list[QueueVerdict]
    index: list[IndexVerdict]
    offsets: OffsetsReport
    findings: list[Finding] = field(default_factory=list)


def store_root(layout: StoreLayout) -> str:
    """The directory findings name files relative to: the store root, or the CommitLog directory's parent."""
    return str(layout.files.base)


def relative(f: Finding, root: str) -> Finding:
    return replace(f, file=os.path.relpath(f.file, root)) if os.path.isabs(f.file) else f


def has_consume_queue_ext(layout: StoreLayout) -> bool:
    """Whether the broker ran with enableConsumeQueueExt (its ``consumequeue_ext/`` directory exists)."""
    return layout.files.root is not None and layout.files.consume_queue_ext_dir.is_dir()


def segment_locator(segments) -> Locate:
    """physical offset -> (segment file, position in it); ``segments``: (base offset, file name) in order."""
    bases = [b for b, _ in segments]
    names = [n for _, n in segments]

    def locate(physical_offset: int) -> tuple[str, int]:
        k = max(0, bisect.bisect_right(bases, physical_offset) - 1)
        return (names[k], physical_offset - bases[k]) if names else ("commitlog", physical_offset)
    return locate


def segment_names(layout: StoreLayout, root: str) -> tuple[tuple[int, str], ...]:
    """(base offset, segment file relative to ``root``) of every segment of the store."""
    return tuple((s.base_offset, os.path.relpath(s.path, root)) for s in layout.segments)


def log_bounds(layout: StoreLayout, scans: list[tuple[int, SegmentSummary]]) -> LogBounds:
    """The CommitLog's minimum (its first segment's base offset) and the end of its data (``scans``: (base
    offset, scan) of every segment)."""
    first = layout.segments[0].base_offset if layout.segments else 0
    ends = [base + s.data_end for base, s in scans if s.records]
    return LogBounds(first, max(ends, default=first))


def queue_files(layout: StoreLayout) -> list[str]:
    """Every ConsumeQueue file of the store (what the queue check reads after the log: read ahead while the
    last segment is dispatched)."""
    return [os.path.join(d, name) for _, _, d in layout.files.queue_dirs() for name in sorted(os.listdir(d))]


class PendingLog:
    """``LogBounds`` whose ``end`` is known only once the whole log is dispatched (an IndexFile checked while
    the dispatch goes on: its check reads ``end`` only to describe a wrong entry): ``min_offset`` now, ``end``
    waited for (``settle``: the bounds, or the exception that stopped verify)."""

    def __init__(self, min_offset: int):
        self.min_offset = min_offset
        self._bounds = Future()

    def settle(self, log: LogBounds | None = None, error: BaseException | None = None) -> None:
        if not self._bounds.done():
            self._bounds.set_exception(error) if log is None else self._bounds.set_result(log)

    @property
    def end(self) -> int:
        return self._bounds.result().end


def index_views(layout: StoreLayout, settings: BrokerSettings) -> list[IndexFileView]:
    """The store's IndexFiles with the geometry the settings give (those that do not fit stay without one)."""
    if settings.geometry is None:
        return []
    return [read_index_file(str(p), settings.geometry.hash_slot_num) for p in layout.files.index_files()]


QUEUE_GROUP_BYTES = 1 << 30        # CommitLog bytes per queue group: bounds the queued records held at once
QUEUE_GROUP_MESSAGES = 3 << 20     # and messages per queue group (about 90 bytes each while checked: 280 MB)
SAMPLE_BYTES = 4 << 20             # of the first segment, to estimate the messages a byte of CommitLog holds
SPLIT_ROWS = 6 << 20               # a queue group of more records is split: a spill file per queue, read in chunks
MAX_QUEUE_GROUPS = 128             # spill files open at once while the CommitLog is read
THREADS = 2                        # the in-process verify's threads (its compiled kernels release the GIL)
AHEAD_BYTES = 128 << 20            # of the log read ahead of each thread: the piece after the one it is in
MAX_DISPATCH_TASKS = 256           # dispatch tasks of the in-process verify (a spill file a queue group each)
_ENTRY_COLUMNS = ("queue_offset", "physical_offset", "size", "tags_code")


def average_record_size(layout: StoreLayout) -> int:
    """The average record size of the first SAMPLE_BYTES of the first segment (a store of small messages needs
    more queue groups for the same bytes); 1 KiB when there is nothing to sample."""
    if not layout.segments:
        return 1024
    seg = layout.segments[0]
    records = sum(len(d.positions) for d in SegmentReader(seg.path, seg.base_offset, RecordDecoder(("total_size",)),
                                                          0, min(seg.size, SAMPLE_BYTES)))
    return max(64, min(seg.size, SAMPLE_BYTES) // records) if records else 1024


class Dispatched:
    """The CommitLog read once through the compiled dispatch (``store.spill.scan_range``, the rebuild's) into
    spill files under a temporary directory in ``work_dir`` (never under the store): its queue entries by queue
    group and, with ``index``, its IndexFile keys. The segments are split between up to THREADS scan tasks run
    on ``pool`` (whole segments each, in CommitLog order), started on construction; ``wait`` for them. A context
    manager: the spill directory goes on exit, whatever happened."""

    def __init__(self, layout: StoreLayout, settings: BrokerSettings, work_dir: str | None, index: bool, pool,
                 start: int = 0, scan_crc: bool | None = None, started=None):
        """``start``: the physical offset (a record's, or the log's end) the dispatch starts at (the scrub's
        resumed cross-checks dispatch only what was written since their last run). ``scan_crc`` (not None): the
        dispatch's walk also scans every segment it reads whole, as ``store.scan.scan_segment`` does (BODYCRC
        when True, ``__CRC32#`` and store times: ``store.spill.scan_range``'s ``scans``; ``scan``), a task per
        segment (at most MAX_DISPATCH_TASKS: consecutive segments share a task beyond), so the two threads
        work on two consecutive segments; else the segments split between THREADS tasks. ``started``: called
        with a segment's index (in ``layout.segments``) and the file position of each window its dispatch
        walks."""
        self.layout = layout
        ranges = [(seg.path, seg.base_offset, max(0, start - seg.base_offset), seg.size, layout.followed(k),
                   layout.next_path(k))
                  for k, seg in enumerate(layout.segments) if seg.base_offset + seg.size > start]
        first = len(layout.segments) - len(ranges)          # the index of the first segment dispatched
        total = sum(end - begin for _, _, begin, end, _, _ in ranges)
        messages = total // average_record_size(layout)
        self.groups = min(MAX_QUEUE_GROUPS, max(1, -(-total // QUEUE_GROUP_BYTES), -(-messages // QUEUE_GROUP_MESSAGES)))
        self.tasks = max(1, min(THREADS if scan_crc is None else MAX_DISPATCH_TASKS, len(ranges)))
        cut = [len(ranges) * t // self.tasks for t in range(self.tasks + 1)]
        # the physical offset each task's ranges end at (a task's records start below it)
        self._task_ends = [ranges[cut[t + 1] - 1][1] + ranges[cut[t + 1] - 1][3] if cut[t + 1] > cut[t] else start
                           for t in range(self.tasks)]
        # the spill directory is never under the store, whoever calls (the CLI checks --work-dir; TMPDIR or an
        # API caller's work_dir may point anywhere)
        self.parent = outside_stores(work_dir or tempfile.gettempdir(), store_roots([layout]), "work directory")
        self.dir = None
        with self._room():
            self.dir = Path(tempfile.mkdtemp(prefix="rocketstore-verify-", dir=self.parent))
        self.futures = []
        # BatchCQ topics' records go to batchconsumequeue/ (verify.batch_queues), not to a ConsumeQueue
        batch = batch_topics(layout.files) if layout.files.root is not None else frozenset()
        # segment index -> (task, its place among the task's scans): the segments read whole
        self._scanned = {first + i: (t, i - cut[t]) for t in range(self.tasks) for i in range(cut[t], cut[t + 1])
                         if scan_crc is not None and ranges[i][2] == 0}
        self._scans: list[list] = []
        for t in range(self.tasks):
            self._scans.append([] if scan_crc is not None else None)
            on_start = None if started is None else (lambda i, pos, at=first + cut[t]: started(at + i, pos))
            self.futures.append(pool.submit(scan_range, ranges[cut[t]:cut[t + 1]], self.dir, t, self.groups,
                                            settings.message_delay_level, index=index,
                                            index_tags=settings.release.index_tags, lmq=lmq_mode(settings),
                                            batch_topics=batch, scans=self._scans[t], check_crc=bool(scan_crc),
                                            started=on_start))
        self.topics: list[list[str]] = []

    @property
    def scanned(self) -> set[int]:
        """Indices (in ``layout.segments``) of the segments the dispatch scans (``scan``)."""
        return set(self._scanned)

    def scan(self, k: int) -> SegmentSummary:
        """The scan of segment ``k`` (one of ``scanned``) the dispatch made; after ``wait``."""
        task, i = self._scanned[k]
        return self._scans[task][i]

    @contextlib.contextmanager
    def _room(self):
        """Writing spill files: a full (or unwritable) work directory is a refusal naming it, not a traceback."""
        try:
            yield
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                # the usual incident: the broker's disk is full, and so is the temporary directory on it
                why = "no room for"
            elif e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                why = "cannot write"
            else:
                raise
            raise OutputError(f"{self.parent}: {why} the queue check's spill files (36 bytes a message of "
                              f"{self.layout.name}, twice that for a queue group too large to hold): give a "
                              f"directory on another disk (--work-dir)") from e

    def wait(self) -> "Dispatched":
        with self._room():
            self.topics = [f.result()[0] for f in self.futures]
        return self

    def __enter__(self) -> "Dispatched":
        return self

    def __exit__(self, *exc) -> None:
        for f in self.futures:
            f.cancel()
        for f in self.futures:
            if not f.cancelled():
                f.exception()                   # finished before its files go
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def queues(self):
        """(topic, queue id, records) of each queue's records that get an entry, in CommitLog order, one queue
        group at a time (``queue_groups``)."""
        for group in self.queue_groups():
            yield from group

    def queue_groups(self):
        """``queues`` a queue group at a time: a list of (topic, queue id, records) per group, the records numpy
        columns — or, in a group of more than SPLIT_ROWS records (``split_group``), an iterable of such chunks."""
        names: dict[str, int] = {}
        remap = [np.array([names.setdefault(t, len(names)) for t in topics], dtype=np.int32)
                 for topics in self.topics]
        topics = list(names)
        for group in range(self.groups):
            paths = [entries_path(self.dir, task, group) for task in range(self.tasks)]
            if sum(p.stat().st_size for p in paths if p.exists()) > SPLIT_ROWS * ENTRY_SPILL.itemsize:
                yield self.split_group(group, remap, topics)
                continue
            rows = _read_group(paths, remap)
            if not len(rows):
                continue
            order, queues = _queue_order(rows["topic"], rows["queue_id"])
            cols = {c: rows[c][order] for c in _ENTRY_COLUMNS}      # a gather per column; each queue a slice
            yield [(topics[topic], queue_id, {c: col[start:stop] for c, col in cols.items()})
                   for topic, queue_id, start, stop in queues]

    def split_group(self, group: int, remap: list[np.ndarray], topics: list[str]) -> list:
        """A queue group too large to hold (one busy queue, or many): its spill files read READ_ROWS records at a
        time into one spill file per queue (each queue's records in CommitLog order), then removed. Returns
        (topic, queue id, chunks) per queue, the chunks its records read back READ_ROWS at a time (the file goes
        once read)."""
        split = self.dir / f"split-{group:04d}"
        queues: dict[int, Path] = {}
        with self._room():
            split.mkdir()
            for task in range(self.tasks):
                path = entries_path(self.dir, task, group)
                if not path.exists():
                    continue
                for rows in read_spill(path, ENTRY_SPILL):
                    key = dispatch.queue_keys(remap[task][rows["topic"]], rows["queue_id"])
                    order = np.argsort(key, kind="stable")
                    key, rows = key[order], rows[order]
                    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
                    for start, stop in zip(starts.tolist(), np.r_[starts[1:], len(key)].tolist()):
                        queue = queues.setdefault(int(key[start]), split / f"{len(queues):08d}")
                        with open(queue, "ab") as f:
                            f.write(rows[start:stop])
                path.unlink()
        out = []
        for key in sorted(queues):
            topic, queue_id = dispatch.queue_of(key)
            out.append((topics[topic], queue_id, _read_back(queues[key])))
        return out

    def keys(self):
        """The spilled IndexFile keys as a ``verify.index.KeySource``."""
        return spilled_keys(self.dir, self.tasks)

    def keys_when_dispatched(self):
        """``keys`` usable before ``wait``: a ``verify.index.KeySource`` whose ``keys(begin, end)`` first waits
        for the dispatch tasks that put the keys of the records up to ``end`` (None: every task), and the task
        after them (whose key file the read may open to find that ``end`` is passed)."""
        inner = self.keys()

        def keys(begin: int, end: int | None):
            self.wait_through(end)
            return inner(begin, end)
        return keys

    def wait_through(self, end: int | None) -> None:
        """Wait for the dispatch tasks that hold the records up to physical offset ``end`` (None: all) and the
        task after them; a task's failure is raised (as by ``wait``)."""
        last = self.tasks - 1 if end is None else \
            min(self.tasks - 1, bisect.bisect_right(self._task_ends, end) + 1)
        with self._room():
            for f in self.futures[:last + 1]:
                f.result()


def _read_group(paths: list[Path], remap: list[np.ndarray]) -> np.ndarray:
    """A queue group's spill files (one a scan task, in task order: CommitLog order) read into one array, their
    topics renumbered into the store's (``remap``: a task's topic index -> the store's)."""
    sizes = [p.stat().st_size // ENTRY_SPILL.itemsize if p.exists() else 0 for p in paths]
    rows = np.empty(sum(sizes), ENTRY_SPILL)
    at = 0
    for task, (path, n) in enumerate(zip(paths, sizes)):
        if n:
            part = rows[at:at + n]
            with open(path, "rb") as f:
                f.readinto(part.view(np.uint8))
            part["topic"] = remap[task][part["topic"]]
            at += n
    return rows


def _queue_order(topic: np.ndarray, queue_id: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int, int]]]:
    """(the order that puts records queue by queue — stable: each queue's records stay in CommitLog order —,
    (topic, queue id, start, stop) of each queue's slice in that order, queues ascending as ``dispatch.queue_keys``
    orders them: topic, then queue id as an unsigned 32-bit number). A group of a few thousand queues at most
    sorts a 16-bit code (a radix sort, linear); any other, the 64-bit queue keys."""
    topic = topic.astype(np.int64)
    unsigned = queue_id.astype(np.int64) & 0xFFFFFFFF
    low, span = int(unsigned.min()), int(unsigned.max() - unsigned.min()) + 1
    codes = (int(topic.max()) + 1) * span
    if int(topic.min()) >= 0 and codes <= 1 << 16:
        code = topic * span + (unsigned - low)
        order = np.argsort(small_keys(code, codes), kind="stable")
        counts = np.bincount(code, minlength=codes)
        stops = np.cumsum(counts)
        return order, [(c // span, int(np.int32(np.uint32(c % span + low))), int(stops[c] - counts[c]), int(stops[c]))
                       for c in np.flatnonzero(counts).tolist()]
    key = dispatch.queue_keys(topic, queue_id)
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    return order, [(*dispatch.queue_of(key[start]), int(start), int(stop))
                   for start, stop in zip(starts.tolist(), np.r_[starts[1:], len(key)].tolist())]


def _read_back(path: Path):
    """A split queue's records (``Dispatched.split_group``), READ_ROWS at a time; the file goes once read."""
    for rows in read_spill(path, ENTRY_SPILL):
        yield {c: rows[c] for c in _ENTRY_COLUMNS}
    path.unlink()


def verify_store(path: str, *, options: dict | None = None, broker_conf: str | None = None,
                 check_crc: bool = True, work_dir: str | None = None, queue_feed: QueueFeed | None = None
                 ) -> StoreVerdict:
    """Verify one store (see module docstring); ``options`` as for the rebuild (broker setting names and
    ``rocketmqVersion``); ``work_dir``: where the queue entries are spilled (default: the system's temporary
    directory); ``queue_feed``: also given every queue's records as they are checked, then closed (complete
    when the log was dispatched: ``rocketmq.recovery.QueueFeed``, the audit's recovery report)."""
    try:
        return _verify_store(path, options, broker_conf, check_crc, work_dir, queue_feed)
    finally:
        if queue_feed is not None:
            queue_feed.close(complete=False)        # not fed whole (refused, failed): a no-op once closed


#: engines whose queues this module checks as RocketMQ dispatches them: LMQ (the spill carries its entries,
#: ``store.spill.scan_range``), as the Spark verify (``spark.verify``: its queue check takes them in too)
LMQ_CHECKED = frozenset({LMQ_ENGINE})
#: and BatchCQ topics: their records are dispatched to batchconsumequeue/ (``Dispatched``), checked there
#: (verify.batch_queues), not expected in consumequeue/
BATCH_CHECKED = frozenset({BATCH_ENGINE})


def _verify_store(path: str, options: dict | None, broker_conf: str | None, check_crc: bool, work_dir: str | None,
                  queue_feed: QueueFeed | None) -> StoreVerdict:
    layouts = discover(path)
    if len(layouts) != 1:
        raise ValueError(f"{path}: names {len(layouts)} stores; verify_store takes one (spark.verify takes many)")
    layout = layouts[0]
    root = store_root(layout)
    settings = resolve(layout, options, broker_conf)
    findings = list(layout.findings)
    if layout.refused(Work.READ_COMMITLOG):
        # another engine's log (store.unsupported_engine says which): nothing checked rather than checked wrong
        return StoreVerdict(layout.name, settings, LogBounds(0, 0), [], [], [], OffsetsReport(None),
                            [relative(f, root) for f in findings])
    check_queues = not layout.refused(Work.CHECK_QUEUES, LMQ_CHECKED | BATCH_CHECKED)
    views = index_views(layout, settings) if not layout.refused(Work.READ_INDEX) else []
    known = [v for v in views if v.geometry is not None]
    # the pool is shut down (its work done) before the spill directory goes
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="verify") as pool:
        # the CommitLog read by one pass: its dispatch into spill files (queue entries, and the keys the
        # IndexFiles are checked against) whose walk also makes every segment's CRC and store-time scan (each
        # segment read from the disk once, even when the store is larger than the page cache), the AHEAD_BYTES
        # after each thread's window read ahead
        pieces = [[(seg.path, at, min(at + AHEAD_BYTES, seg.size))] for seg in layout.segments
                  for at in range(0, max(seg.size, 1), AHEAD_BYTES)]
        first_piece = np.cumsum([0] + [max(1, -(-seg.size // AHEAD_BYTES)) for seg in layout.segments]).tolist()
        ahead = stack.enter_context(ReadAhead(pieces + [[v.path for v in known] +
                                                        queue_files(layout) * check_queues]))

        def reading(k: int, position: int) -> None:
            """A pass walks segment ``k`` from ``position``: the piece it is in and the next read ahead."""
            at = first_piece[k] + position // AHEAD_BYTES
            ahead.want(at - 1)
            ahead.want(at)

        def scan(k: int) -> SegmentSummary:
            reading(k, 0)
            seg = layout.segments[k]
            return scan_segment(seg.path, seg.base_offset, check_crc=check_crc, followed=layout.followed(k),
                                check_properties_crc=True, check_times=True, next_path=layout.next_path(k))
        # each segment's scan made by the walk of its dispatch (the log read once, each header decoded once), a
        # task a segment; segments the dispatch does not read (no queues checked) scanned on their own
        spill = stack.enter_context(Dispatched(layout, settings, work_dir, bool(known), pool, scan_crc=check_crc,
                                               started=reading)) if check_queues else None

        def check_index(k: int, keys, log) -> IndexVerdict:
            return check_index_file(layout, known[k], root, settings.geometry, settings.release,
                                    settings.message_delay_level, log, newest=k == len(known) - 1,
                                    previous_end=known[k - 1].header["end_timestamp"] if k else None, keys=keys)
        # every IndexFile but the newest checked on a thread of its own as soon as the dispatch has passed its
        # end (while the rest of the log is read), one after the other
        early = []
        if spill is not None and len(known) > 1:
            side = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-index"))
            pending = PendingLog(layout.segments[0].base_offset if layout.segments else 0)
            stack.callback(pending.settle, None, RuntimeError("verify stopped before the log was read"))

            def check_early(k: int) -> IndexVerdict:
                spill.wait_through(int(known[k].header["end_phy_offset"]))      # its keys put, as the header says
                return check_index(k, spill.keys_when_dispatched(), pending)
            early = [side.submit(check_early, k) for k in range(len(known) - 1)]
        scanned = spill.scanned if spill is not None else set()
        alone = {k: pool.submit(scan, k) for k in range(len(layout.segments)) if k not in scanned}
        if spill is not None:
            spill.wait()
        scans = [(seg.base_offset, spill.scan(k) if k in scanned else alone[k].result())
                 for k, seg in enumerate(layout.segments)]
        if queue_feed is not None:
            queue_feed.offer_scans(check_crc, dict(scans))          # the recovery report's scans (the audit's)
        for _, s in scans:
            findings += s.findings
        findings += [finding("index.unknown_geometry", v.path, None, v.problem or "unknown geometry")
                     for v in views if v.geometry is None]
        log = log_bounds(layout, scans)
        if early:
            pending.settle(log)
        findings += check_timers(layout, log.end)
        keys = spill.keys() if spill is not None else None
        # then the (newest) IndexFiles on the pool while this thread checks the queues, a queue group at a time
        checked = early + [pool.submit(check_index, k, keys, log) for k in range(len(early), len(known))]
        queues = check_queues_of(layout, settings, spill, log, pool, findings=findings, queue_feed=queue_feed) \
            if check_queues else []
        index = [f.result() for f in checked]
    if layout.root is not None:
        # BatchConsumeQueues (5.x queue.type=BatchCQ) against the log's dispatch (verify.batch_queues)
        findings += check_batch_queues(path, layout.files)
    return conclude(layout, settings, log, scans, queues, index, known, findings)


def check_queues_of(layout: StoreLayout, settings: BrokerSettings, spill: Dispatched, log: LogBounds, pool,
                    resume: dict | None = None, findings: list[Finding] | None = None,
                    queue_feed: QueueFeed | None = None, queue_reads=None) -> list[QueueVerdict]:
    """Every queue of the store (its directory, or records in ``spill``, waited for) checked, sorted by topic
    and queue id: a queue group on ``pool`` while this thread reads and sorts the next (two groups held at
    most). ``resume``: (topic, queue id) -> the ``check_queue`` resume of the queues it names (the scrub's
    resumed cross-checks: ``spill`` then holds only the records written since; every queue is checked on in one
pass, ``verify.queues.check_resumed_queues``, on this thread). A RocksDB ConsumeQueue's units
    are checked against the same dispatch instead (never resumed); what is wrong with the database itself is
    appended to ``findings``. ``queue_feed``: given each queue's records as they are checked, then closed
    (complete: every queue of the log fed). ``queue_reads``: resumed, the summaries of each queue's last file
    shared with the recovery report running beside (``check_resumed_queues``)."""
    root = store_root(layout)
    db = queue_db(layout.root)
    if db is not None:
        if resume:
            raise ValueError("a RocksDB ConsumeQueue's check does not resume")
        queues, problems = check_rocksdb_queues(db, spill.queue_groups(), log, root)
        if findings is not None:
            findings += problems
        return queues
    resume = resume or {}
    dirs = {(t, q): str(d) for t, q, d in layout.files.queue_dirs()}
    locate = segment_locator(segment_names(layout, root))
    queues = []
    seen = set()
    empty = {c: np.zeros(0, np.int64) for c in _ENTRY_COLUMNS}

    def fed(topic, queue_id, cols):
        if queue_feed is None:
            return cols
        if isinstance(cols, dict):
            queue_feed.feed(topic, queue_id, cols)
            return cols
        return (queue_feed.feed(topic, queue_id, chunk) or chunk for chunk in cols)     # a split queue's chunks

    def check(topic, queue_id, cols):
        return check_queue(topic, queue_id, dirs.get((topic, queue_id)), root, fed(topic, queue_id, cols), log,
                           settings.consume_queue_file_size, locate, settings.release.expired_min_is_max,
                           has_consume_queue_ext(layout), resume.get((topic, queue_id)))
    if resume:
        # resumed: what was written since is small; every queue checked on in one pass (``check_resumed_queues``)
        if queue_feed is not None:
            queue_feed.close(complete=False)         # the spill holds only the records written since
        found = [q for group in spill.queue_groups() for q in group]
        seen = {(topic, queue_id) for topic, queue_id, _ in found}
        found += [(topic, queue_id, empty) for topic, queue_id in sorted(dirs.keys() | resume.keys())
                  if (topic, queue_id) not in seen]
        queues = check_resumed_queues([(topic, queue_id, dirs.get((topic, queue_id)), cols,
                                        resume.get((topic, queue_id))) for topic, queue_id, cols in found],
                                      root, log, settings.consume_queue_file_size, locate,
                                      settings.release.expired_min_is_max, has_consume_queue_ext(layout),
                                      queue_reads)
        queues.sort(key=lambda q: (q.topic, q.queue_id))
        return queues
    checking = None
    for group in spill.queue_groups():
        seen.update((topic, queue_id) for topic, queue_id, _ in group)
        if checking is not None:
            queues += checking.result()
        checking = pool.submit(lambda g: [check(*q) for q in g], group)
    if checking is not None:
        queues += checking.result()
    if queue_feed is not None:
        queue_feed.close(complete=True)
    queues += [check(topic, queue_id, empty) for topic, queue_id in sorted(dirs.keys() | resume.keys())
               if (topic, queue_id) not in seen]
    queues.sort(key=lambda q: (q.topic, q.queue_id))
    return queues


def conclude(layout: StoreLayout, settings: BrokerSettings, log: LogBounds, scans, queues: list[QueueVerdict],
             index: list[IndexVerdict], known: list[IndexFileView], findings: list[Finding]) -> StoreVerdict:
    """The store's verdict from its parts: the checkpoint, abort and lock files, the consumer offsets and the
    queue directories' kinds against their topics' queue.type (``verify.batch_queues.queue_type_mismatches``)
    checked (cheap: a few small files and listings), every finding named relative to the store root.
    ``scans``: (base offset, scan) of every segment (the scan's ``records``, ``data_end``,
    ``last_store_timestamp`` and ``findings`` are read); ``known``: the IndexFiles of known geometry, in order;
    ``findings``: the layout's and the segment scans' so far."""
    root = store_root(layout)
    newest_index_end = known[-1].header["end_timestamp"] if known else None
    last_ts = max((s.last_store_timestamp for _, s in scans if s.last_store_timestamp is not None), default=None)
    findings = findings + check_state(layout.files, LogState(last_ts, log.end), newest_index_end)
    findings += queue_type_mismatches(layout.files, settings.release.family)
    # bounds of the queues that have files (as the broker and `rocketstore offsets` see them)
    if not (layout.refused(Work.READ_OFFSETS) or layout.refused(Work.CHECK_QUEUES)):
        rocks = queue_db(layout.root) is not None
        offsets = check_offsets(layout, {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in queues
                                         if q.files or (rocks and q.max_offset)})
    elif not (layout.refused(Work.READ_OFFSETS) or layout.refused(Work.READ_QUEUE_UNITS)):
        # queues read but not checked (a RocksDB ConsumeQueue): the bounds RocketMQ gives them as stored
        offsets, bounds_findings = offsets_against_stored_bounds(layout, settings.release.expired_min_is_max)
        findings += bounds_findings
    else:
        offsets = OffsetsReport(None)
    findings += [f for q in queues for f in q.findings] + [f for i in index for f in i.findings] + offsets.findings
    names = {seg.base_offset: os.path.basename(seg.path) for seg in layout.segments}
    return StoreVerdict(layout.name, settings, log, [(names[b], s) for b, s in scans], queues, index, offsets,
                        [relative(f, root) for f in findings])
