"""Verifying one ConsumeQueue against the CommitLog records of its topic-queue (one Spark task per queue, or
in-process; reads the queue's files read-only).

What RocketMQ's dispatch writes for these records (``rocketmq.consumequeue.place``, the same rules the rebuild
uses) is compared entry by entry, by queue offset, with what the files hold:

* an entry that differs from the dispatched one: ``consumequeue.entry_mismatch`` (or ``entry_past_end``
  when it points beyond the CommitLog's data);
* an entry where dispatch writes none: ``extra_entry`` / ``entry_past_end``; entries pointing below the
  CommitLog's first segment are expired, not findings;
* a dispatched record without entry: ``missing_entry`` below the queue's end, ``lagging`` (one finding per
  queue) at or after it;
* invalid entries (RocketMQ's test: offset >= 0 and size > 0) followed by valid ones: ``invalid_entry``;
  physical offsets that do not increase: ``not_increasing``; file sizes and names: ``file_size``,
  ``file_gap``.

The records' QUEUEOFFSETs are checked too (``commitlog.queue_offset_*``). Also computed: the queue's min and
max offsets as RocketMQ does on load (``ConsumeQueue.recover`` from the third-last file, then
``correctMinOffset``), the bounds consumer offsets are checked against.

Bounded memory whatever the queue's size (one hot queue of 100 M messages is checked as one of 1,000): the
records come in chunks (``records``: one dict of columns, or an iterable of them, e.g. read back from a spill
file). First the checks that follow the files' order — invalid runs, physical offsets that do not increase,
the counts, where the queue's written entries end — read every file in that order PART_SLOTS entries at a time
(``_FileOrder``), carrying what one read leaves open (a run of invalid entries, the last offset) to the next.
Then dispatch and the files are compared PART_SLOTS queue offsets at a time, in queue-offset order
(``_Compare``): dispatch writes a queue's entries at dense, increasing queue offsets, so a part's dispatched
entries are the ones placed since the last part (the records are placed PART_SLOTS at a time, the
``QueueState`` carried), and its file entries are read from each file at the positions of that range (files
that overlap, misnamed or oversized, each give theirs, in file order). Findings come in the same order
whatever the part size: the per-entry ones by queue offset, then file order. Memory: a part's records and
entries, about 300 bytes a queue offset of PART_SLOTS (80 MB at the default), nothing spilled.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE, EXT_ADDRESS_MAX
from rocketstore_spark.findings import CappedRun, Finding, finding
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.store.layout import StoreMap, relative_name, stat_once
from rocketstore_spark.store.queues import held_file_count, read_held, unreadable_queue_file

Locate = Callable[[int], tuple[str, int]]        # physical offset -> (segment file, position in it)


@dataclass(frozen=True)
class LogBounds:
    """The CommitLog a store's queues are checked against: ``min_offset`` its first segment's base offset
    (RocketMQ's getMinPhyOffset), ``end`` the physical offset after its last record."""
    min_offset: int
    end: int


@dataclass
class QueueVerdict:
    topic: str
    queue_id: int
    files: int = 0
    min_offset: int = 0             # RocketMQ's getMinOffsetInQueue after load
    max_offset: int = 0             # getMaxOffsetInQueue after load (ConsumeQueue.recover)
    entries: int = 0                # valid entries in the files (fillers not counted)
    expired: int = 0                # entries pointing below the CommitLog's first segment
    records: int = 0                # CommitLog records dispatched to this queue
    dispatch_max_offset: int = 0    # where the queue would end if RocketMQ dispatched the whole CommitLog
    findings: list[Finding] = field(default_factory=list)
    resume: dict | None = None      # where the check stands after the last record (``check_queue``'s resume)
    held: list = field(default_factory=list)    # (path, index of its first entry, entries held) of each file read


PART_SLOTS = 1 << 18        # queue offsets compared, records placed and file entries read at a time
_COLUMNS = ("queue_offset", "physical_offset", "size", "tags_code")


@dataclass
class _File:
    """One ConsumeQueue file of the queue that is read (``store.queues.unreadable_queue_file``)."""
    name: str                       # relative to the store root
    path: str
    cq_offset: int                  # its queue byte offset (its name)
    count: int = 0                  # the entries ``consumequeue.held`` keeps of it
    base: int = 0                   # the index of its first entry among every file's, in file order

    @property
    def first(self) -> int:
        """The queue offset of its first entry."""
        return self.cq_offset // ENTRY_SIZE

    def read(self, start: int, end: int) -> np.ndarray:
        """Its entries [start, end)."""
        with open(self.path, "rb") as f:
            f.seek(start * ENTRY_SIZE)
            return consumequeue.decode_entries(f.read((end - start) * ENTRY_SIZE))


def _listing(queue_dir: str | None, root: str) -> list[tuple[str, str, int, int, tuple | None]]:
    """(path, name relative to ``root``, queue byte offset, size, ``unreadable_queue_file``) of each file of the
    queue's directory, in order: listed and sized once."""
    out = []
    for path, cq_offset in (StoreMap.queue_files(queue_dir) if queue_dir is not None else []):
        size = stat_once(path).st_size
        out.append((path, relative_name(path, root), cq_offset, size, unreadable_queue_file(path, cq_offset, size)))
    return out


def _queue_files(listed: list, counts: dict[str, int] | None = None,
                 held: dict[int, np.ndarray] | None = None) -> list[_File]:
    """The queue's files that are read (``listed``: ``_listing``'s), in order, each sized to what it holds (read
    from its end; ``counts``: file name relative to the root -> what it holds, of files known unchanged since
    that was read). ``held``: when given, the files not in ``counts`` are read whole instead (their held
    entries, ``store.queues.read_held``: one read) and kept there by their index among the files."""
    files, base = [], 0
    counts = counts or {}
    for path, name, cq_offset, _, unreadable in listed:
        if unreadable:
            continue
        f = _File(name, path, cq_offset, base=base)
        if f.name in counts:
            f.count = counts[f.name]
        elif held is not None:
            held[len(files)] = read_held(path)
            f.count = len(held[len(files)])
        else:
            f.count = held_file_count(path)
        files.append(f)
        base += f.count
    return files


def _entry_finding(topic: str, queue_id: int, f: _File, i: int, physical_offset, check: str, message: str,
                   **evidence) -> Finding:
    """A finding about entry ``i`` of file ``f``."""
    return finding(check, f.name, i * ENTRY_SIZE, message, topic=topic, queue_id=queue_id, queue_offset=f.first + i,
                   physical_offset=int(physical_offset), **evidence)


def _pieces(records):
    """(QUEUEOFFSET, physical offset, size, tagsCode) int64 arrays of ``records``, PART_SLOTS at most at a time."""
    for chunk in ([records] if isinstance(records, dict) else records):
        cols = [np.asarray(chunk[c], np.int64) for c in _COLUMNS]
        for start in range(0, len(cols[0]), PART_SLOTS):
            yield tuple(c[start:start + PART_SLOTS] for c in cols)


def check_queue(topic: str, queue_id: int, queue_dir: str | None, root: str, records, log: LogBounds,
                file_size: int, locate: Locate, expired_min_is_max: bool = True,
                consume_queue_ext: bool = False, resume: dict | None = None) -> QueueVerdict:
    """Verify one queue. ``records``: the queue's records that get a ConsumeQueue entry, ascending physical
    offset — numpy arrays ``queue_offset``, ``physical_offset``, ``size``, ``tags_code`` in a dict, or an
    iterable of such dicts (chunks, in order: memory follows PART_SLOTS, not the queue); ``queue_dir``: its
    directory (None: the store has none); ``root``: the store root file names are reported relative to;
    ``locate``: the segment file and position of a physical offset; ``expired_min_is_max``: the release's rule
    for a queue whose every entry is expired (``rocketmq.consumequeue.rocketmq_bounds``); ``consume_queue_ext``:
    the store has ``consumequeue_ext/`` (enableConsumeQueueExt), so a tagsCode at or below EXT_ADDRESS_MAX is an
    address there, not compared.

    ``resume``: a previous check's ``QueueVerdict.resume`` of this queue, which found nothing, its files and the
    records before ``records`` unchanged since (the caller's to make sure: ``verify.cross``; its ``counts``,
    when there, the entries held by files unchanged since, and ``summaries`` what the bounds took from those
    files, ``rocketmq.consumequeue.file_summary``): the walk of the
    files goes on after their last valid entry, dispatch from the state the earlier records left, and the
    comparison from the queue offset the files ended at — the findings and counts are the whole check's. The
    files' sizes and names and the queue's bounds are checked whole every time (no entry is read for them but
    the few files ``rocketmq_bounds`` reads, and of those not the unchanged ones whose summary settles them)."""
    v = QueueVerdict(topic, queue_id)
    listed = _listing(queue_dir, root)
    files = _queue_files(listed, (resume or {}).get("counts"))
    v.files = len(files)
    v.held = [(f.path, f.base, f.count) for f in files]
    sizes = _file_findings(topic, queue_id, [(name, o, size, bad) for _, name, o, size, bad in listed], file_size)
    summaries: dict[str, list] = {}
    v.min_offset, v.max_offset = _bounds(files, resume, log, expired_min_is_max, summaries,
                                         lambda k: files[k].read(0, files[k].count))
    # the files in their order, a read at a time
    walk = _FileOrder(topic, queue_id, log.min_offset)
    offsets = _QueueOffsets(topic, queue_id, locate)
    state = cq.QueueState()
    cursor = None
    if resume is not None:
        walk.resume(resume["walk"])
        offsets.previous = tuple(resume["previous"]) if resume["previous"] is not None else None
        state = cq.QueueState(*resume["state"])
        v.records = resume["records"]
        cursor = walk.written_end
    for f in files:
        for start in range(max(0, walk.last + 1 - f.base), f.count, PART_SLOTS):
            walk.add(f, start, f.read(start, min(f.count, start + PART_SLOTS)))
    v.entries, v.expired = walk.entries, walk.expired

    # then dispatch against the files, PART_SLOTS queue offsets at a time
    compare = _Compare(topic, queue_id, files, walk, log, file_size, consume_queue_ext)
    placed = [np.zeros(0, np.int64)] * 4     # slot, physical offset, size, tagsCode: written, not yet compared
    pieces = _pieces(records)

    def place() -> bool:
        """Dispatch the next piece of records (False: none left)."""
        piece = next(pieces, None)
        if piece is None:
            return False
        qo, phy, size, tags = piece
        v.records += len(qo)
        offsets.add(qo, phy)
        slots = cq.place(state, qo, phy, size, file_size)
        keep = slots >= 0
        placed[:] = [np.concatenate([held, col[keep]]) for held, col in zip(placed, (slots, phy, size, tags))]
        return True

    more = True
    while True:
        while more and not len(placed[0]):
            more = place()
        starts = [s for s in (int(placed[0][0]) if len(placed[0]) else None, compare.next_entry(cursor))
                  if s is not None]
        if not starts:
            break
        lo = min(starts)
        hi = lo + PART_SLOTS
        while more and state.end < hi:       # dispatch writes dense, increasing slots: the part is complete
            more = place()
        part = placed[0] < hi
        compare.part(lo, hi, *(col[part] for col in placed))
        placed[:] = [col[~part] for col in placed]
        cursor = hi
    v.dispatch_max_offset = state.max_offset
    v.findings = offsets.findings() + sizes + walk.invalid.findings() + walk.going_back.findings() + \
        compare.findings(v.dispatch_max_offset)
    v.resume = {"state": [state.end, state.max_physical, state.first, state.file_start, state.written, state.skipped,
                          state.moved],
                "previous": list(offsets.previous) if offsets.previous is not None else None,
                "walk": walk.carried(), "records": v.records, "summaries": summaries}
    return v


def _bounds(files: list[_File], resume: dict | None, log: LogBounds, expired_min_is_max: bool,
            summaries: dict[str, list], read: Callable[[int], np.ndarray], last: list | None = None,
            share: Callable[[str, list], object] | None = None) -> tuple[int, int]:
    """RocketMQ's bounds of the queue (``rocketmq.consumequeue.rocketmq_bounds``); of the closed files the
    resume's ``summaries`` name (files known unchanged, as its ``counts``) the summary is taken, not read;
    ``summaries`` gets each file's the bounds took; ``read(k)``: file k's held entries. ``last``: the last
    file's summary when the recovery report beside this check made it this run; ``share(path, summary)``: where
    the last file's summary goes when this check makes it (``rocketmq.recovery.QueueFileReads``)."""
    known = {n: x for n, x in (resume or {}).get("summaries", {}).items() if n in (resume or {}).get("counts", {})}
    if last is not None:
        known[files[-1].name] = last

    def summary(k: int) -> list:
        f = files[k]
        found = known.get(f.name)
        if found is None:
            found = cq.file_summary(read(k))
            if share is not None and k == len(files) - 1:
                share(f.path, found)
        summaries[f.name] = found
        return found
    return cq.rocketmq_bounds([(f.name, f.cq_offset) for f in files], read, log.min_offset, expired_min_is_max,
                              summary)


def check_resumed_queues(queues: list[tuple], root: str, log: LogBounds, file_size: int, locate: Locate,
                         expired_min_is_max: bool = True, consume_queue_ext: bool = False,
                         queue_reads=None) -> list[QueueVerdict]:
    """``check_queue`` of many queues at once, each resumed (the scrub's resumed cross-checks): ``queues`` holds
    (topic, queue id, directory, records — one dict of columns —, resume) each; the verdicts come back in that
    order, each the one ``check_queue`` gives.

    A queue check resumed after a broker appended is, queue by queue, the same few steps on a few entries; here
    each queue's files are still listed, sized and bounded as ``check_queue`` does it (a few files a queue; a
    file the bounds read and the walk goes on in is read once), but the walk of the entries written since, the
    QUEUEOFFSET checks, dispatch (``rocketmq.consumequeue.place_many``: one state table) and the comparison run
    once over every queue's new entries and records together, as numpy columns. That pass shows only the
    common answer: no finding — every new entry valid and real (no filler), the invalid ones (the zeros past
    the end) all after the last valid one, physical offsets increasing from the last checked entry, QUEUEOFFSETs
    following on without a gap, repeat or reset, every record written (none skipped) at the queue offset the
    files' next entry holds, with the same offset, size and tagsCode. A queue where any of that fails — or that
    has no resume, records in chunks, files whose sizes or names are findings, a ConsumeQueueExt — is checked
    by ``check_queue`` itself, whose findings (and everything else) it then has: the answer is ``check_queue``'s
    either way.

    ``queue_reads``: the ``rocketmq.recovery.QueueFileReads`` of the recovery report running beside this check
    (the scrub's): each queue's last file — the one a broker appends to, read whole here for its count and
    bounds — is summarized once between the two. When the report summarized it first, only its entries written
    since are read here."""
    out: list[QueueVerdict | None] = [None] * len(queues)
    fast = []                   # (k in queues, verdict so far, files, resume, records, new entries, their qos, walk idx)
    for k, (topic, queue_id, queue_dir, records, resume) in enumerate(queues):
        if consume_queue_ext or resume is None or "counts" not in resume or not isinstance(records, dict):
            continue
        listed = _listing(queue_dir, root)
        if _file_findings(topic, queue_id, [(name, o, size, bad) for _, name, o, size, bad in listed], file_size):
            continue
        held: dict[int, np.ndarray] = {}        # the files read whole: those a broker appended to since
        counts, reported = resume["counts"], None
        if queue_reads is not None and listed and listed[-1][4] is None and listed[-1][1] not in counts:
            reported = queue_reads.last_file(listed[-1][0])     # the recovery report's summary, or None
            if reported is not None:
                counts = {**counts, listed[-1][1]: reported[0]}     # what it holds: not read whole again
        files = _queue_files(listed, counts, held)
        v = QueueVerdict(topic, queue_id, files=len(files), held=[(f.path, f.base, f.count) for f in files])

        def read(j: int, files=files, held=held) -> np.ndarray:
            if j not in held:
                held[j] = files[j].read(0, files[j].count)
            return held[j]
        summaries: dict[str, list] = {}
        v.min_offset, v.max_offset = _bounds(files, resume, log, expired_min_is_max, summaries, read, reported,
                                             queue_reads.share_last_file if queue_reads is not None else None)
        v.resume = {"summaries": summaries}
        last = resume["walk"]["last"]
        raws, qos, walked = [], [], []
        for j, f in enumerate(files):
            start = max(0, last + 1 - f.base)
            if start < f.count:
                # a copy of the new part: the file's whole entries are not kept while every queue is gathered
                raws.append(held[j][start:].copy() if j in held else f.read(start, f.count))
                qos.append(f.first + np.arange(start, f.count, dtype=np.int64))
                walked.append(f.base + np.arange(start, f.count, dtype=np.int64))
        fast.append((k, v, resume, records, raws, qos, walked))
    if fast:
        for (k, v), good in zip(((k, v) for k, v, *_ in fast), _resumed_answers(fast, log, file_size)):
            if good:
                out[k] = v
    for k, (topic, queue_id, queue_dir, records, resume) in enumerate(queues):
        if out[k] is None:
            out[k] = check_queue(topic, queue_id, queue_dir, root, records, log, file_size, locate,
                                 expired_min_is_max, consume_queue_ext, resume)
    return out


def _resumed_answers(fast: list[tuple], log: LogBounds, file_size: int) -> list[bool]:
    """``check_resumed_queues``' one pass over the queues of ``fast``: for each, whether it shows no finding (then
    its verdict is completed in place: counts, where the walk and dispatch stand, the resume); else the queue
    is left to ``check_queue``."""
    n = len(fast)
    qn = lambda parts: np.concatenate([np.full(sum(map(len, p)), i, np.int64)            # noqa: E731
                                       for i, p in enumerate(parts)]) if n else np.zeros(0, np.int64)
    # the new entries of every queue, in each queue's file order, queue after queue
    raw = np.concatenate([r for *_, raws, _, _ in fast for r in raws] or [np.zeros(0, consumequeue.ENTRY_DTYPE)])
    e_q = qn([raws for *_, raws, _, _ in fast])
    e_qo = np.concatenate([q for *_, qos, _ in fast for q in qos] or [np.zeros(0, np.int64)])
    e_walked = np.concatenate([w for *_, walked in fast for w in walked] or [np.zeros(0, np.int64)])
    # the records written since, queue after queue, each queue's in CommitLog order
    cols = {c: np.concatenate([np.asarray(records[c], np.int64) for _, _, _, records, *_ in fast])
            for c in _COLUMNS}
    r_q = np.concatenate([np.full(len(records["queue_offset"]), i, np.int64) for i, (_, _, _, records, *_)
                          in enumerate(fast)])
    bad = np.zeros(n, bool)
    # the walk: invalid entries only after the last valid one, no filler, physical offsets increasing
    valid = consumequeue.valid_mask(raw)
    bad[e_q[consumequeue.is_filler(raw)]] = True
    position = np.arange(len(raw))
    first_invalid = np.full(n, len(raw), np.int64)
    np.minimum.at(first_invalid, e_q[~valid], position[~valid])
    last_valid = np.full(n, -1, np.int64)
    np.maximum.at(last_valid, e_q[valid], position[valid])
    bad |= last_valid > first_invalid
    a_q, a_qo, a_walked = e_q[valid], e_qo[valid], e_walked[valid]
    a_phy, a_size, a_tags = (raw[c][valid].astype(np.int64) for c in ("commit_log_offset", "size", "tags_code"))
    walks = [resume["walk"] for _, _, resume, *_ in fast]
    before = np.array([w["previous"] if w["previous"] is not None else -1 for w in walks], np.int64)
    has_before = np.array([w["previous"] is not None for w in walks])
    head = np.r_[True, a_q[1:] != a_q[:-1]] if len(a_q) else np.zeros(0, bool)
    step_from = np.where(head, before[a_q], np.r_[-1, a_phy[:-1]])
    bad[a_q[(~head | has_before[a_q]) & (a_phy <= step_from)]] = True
    # QUEUEOFFSET: gap, repeat, reset (``_QueueOffsets``) against the record before, the last run's last first
    r_qo, r_phy = cols["queue_offset"], cols["physical_offset"]
    prev_qo = np.array([resume["previous"][0] if resume["previous"] is not None else 0 for _, _, resume, *_ in fast],
                       np.int64)
    has_prev = np.array([resume["previous"] is not None for _, _, resume, *_ in fast])
    r_head = np.r_[True, r_q[1:] != r_q[:-1]] if len(r_q) else np.zeros(0, bool)
    step = r_qo - np.where(r_head, prev_qo[r_q], np.r_[0, r_qo[:-1]])
    compared = ~r_head | has_prev[r_q]
    bad[r_q[compared & ((step > 1) | ((step <= 0) & (r_qo != 0)) | ((step < 0) & (r_qo == 0)))]] = True
    # dispatch: every record written, at the queue offset of the files' next entry, which holds the same entry
    states = np.array([resume["state"][:cq.WRITTEN] + [0, 0, 0] for _, _, resume, *_ in fast], np.int64) \
        .reshape(n, cq.STATE_COLUMNS)
    slots = cq.place_many(states, r_q, r_qo, r_phy, cols["size"], file_size)
    bad[r_q[slots < 0]] = True
    per_queue_a, per_queue_r = np.bincount(a_q, minlength=n), np.bincount(r_q, minlength=n)
    bad |= per_queue_a != per_queue_r
    if not bad.all():
        same = ~bad[a_q]                                     # queues whose counts agree: entry i <-> record i
        ok_r = ~bad[r_q]
        differ = (a_qo[same] != slots[ok_r]) | (a_phy[same] != r_phy[ok_r]) | (a_size[same] != cols["size"][ok_r]) \
            | (a_tags[same] != cols["tags_code"][ok_r])
        bad[a_q[same][differ]] = True
    # each queue's rows are one run of a_q and of r_q (gathered queue after queue): its slice, not a mask per queue
    queue_ids = np.arange(n)
    a_lo, a_hi = np.searchsorted(a_q, queue_ids), np.searchsorted(a_q, queue_ids, side="right")
    r_lo, r_hi = np.searchsorted(r_q, queue_ids), np.searchsorted(r_q, queue_ids, side="right")
    expired = np.r_[0, np.cumsum(a_phy < log.min_offset)]
    for i, (_, v, resume, records, *_) in enumerate(fast):
        if bad[i]:
            continue
        walk = dict(resume["walk"])
        lo, hi = int(a_lo[i]), int(a_hi[i])
        if hi > lo:
            walk["previous"] = int(a_phy[hi - 1])
            walk["entries"] += hi - lo
            walk["expired"] += int(expired[hi] - expired[lo])
            walk["last"], walk["written_end"] = int(a_walked[hi - 1]), int(a_qo[hi - 1]) + 1
        rlo, rhi = int(r_lo[i]), int(r_hi[i])
        previous = [int(r_qo[rhi - 1]), int(r_phy[rhi - 1])] if rhi > rlo else resume["previous"]
        state = [int(x) for x in states[i, :cq.WRITTEN]] + [int(a + b) for a, b in zip(resume["state"][cq.WRITTEN:],
                                                                                    states[i, cq.WRITTEN:])]
        v.entries, v.expired = walk["entries"], walk["expired"]
        v.records = resume["records"] + rhi - rlo
        v.dispatch_max_offset = max(state[cq.END], 0)
        v.resume = {"state": state, "previous": previous, "walk": walk, "records": v.records,
                    "summaries": v.resume["summaries"]}
    return (~bad).tolist()


class _FileOrder:
    """The checks that follow the files' order (RocketMQ's recovery walks them so): every file's entries in file
    order, a read at a time (``add``), with what a read leaves open carried to the next — a run of invalid
    entries (``consumequeue.invalid_entry`` once a valid entry follows it: a run after the last valid entry is
    the queue's end, not a finding), the last real entry's physical offset (``consumequeue.not_increasing``).
    Also counts the real (not filler) and expired entries and finds the last valid entry."""

    def __init__(self, topic: str, queue_id: int, log_min: int):
        self.topic, self.queue_id, self.log_min = topic, queue_id, log_min
        self.invalid, self.going_back = CappedRun(), CappedRun()
        self.run: tuple | None = None       # the open run of invalid entries: (file, index in it, offset, length)
        self.previous: int | None = None    # the last real entry's physical offset
        self.entries = self.expired = 0
        self.last = -1                      # the last valid entry: its index among every file's entries
        self.written_end = 0                # and the queue offset after it

    def carried(self) -> dict:
        """What goes on to a check resumed after the last valid entry (``check_queue``'s resume): the counts,
        the last real entry's offset, where the valid entries end. A run of invalid entries after the last
        valid one is read again then."""
        return {"previous": self.previous, "entries": self.entries, "expired": self.expired, "last": self.last,
                "written_end": self.written_end}

    def resume(self, carried: dict) -> None:
        """Go on from ``carried`` (a walk of files whose every entry up to its ``last`` found nothing)."""
        self.previous, self.entries, self.expired = carried["previous"], carried["entries"], carried["expired"]
        self.last, self.written_end = carried["last"], carried["written_end"]

    def add(self, f: _File, start: int, raw: np.ndarray) -> None:
        """Entries ``start`` on of file ``f``: the next read in file order."""
        n = len(raw)
        if not n:
            return
        valid = consumequeue.valid_mask(raw)
        phy = raw["commit_log_offset"]
        good = np.flatnonzero(valid)
        if len(good):
            self.last = f.base + start + int(good[-1])
            self.written_end = f.first + start + int(good[-1]) + 1

        # runs of invalid entries: [starts, ends) in this read
        bad = np.flatnonzero(~valid)
        cut = np.flatnonzero(np.diff(bad) != 1) + 1
        starts = bad[np.r_[0, cut]] if len(bad) else bad
        ends = bad[np.r_[cut - 1, len(bad) - 1]] + 1 if len(bad) else bad
        carried = self.run
        if carried is not None and (not len(bad) or starts[0] > 0):     # a valid entry ends the carried run
            self.invalid.add(lambda _: self._run(*carried), [0])
            carried = None
        open_end = bool(len(bad)) and int(ends[-1]) == n

        def make(j: int) -> Finding:
            if carried is not None and j == 0:                          # the carried run goes on here
                return self._run(*carried[:3], carried[3] + int(ends[0]))
            return self._run(f, start + int(starts[j]), phy[starts[j]], int(ends[j] - starts[j]))
        self.invalid.add(make, range(len(starts) - open_end))
        if not open_end:
            self.run = None
        elif carried is not None and len(starts) == 1:
            self.run = (*carried[:3], carried[3] + n)
        else:
            self.run = (f, start + int(starts[-1]), int(phy[starts[-1]]), n - int(starts[-1]))

        real = np.flatnonzero(valid & ~consumequeue.is_filler(raw))
        a_phy = phy[real].astype(np.int64)
        self.entries += len(real)
        self.expired += int((a_phy < self.log_min).sum())
        shift = int(self.previous is not None)
        path = np.r_[self.previous, a_phy] if shift else a_phy          # the previous real entry first
        self.going_back.add(lambda j: _entry_finding(
            self.topic, self.queue_id, f, start + int(real[j - shift]), path[j], "consumequeue.not_increasing",
            f"physical offset {int(path[j])} is not above the previous entry's {int(path[j - 1])}",
            previous=int(path[j - 1])), np.flatnonzero(np.diff(path) <= 0) + 1)
        if len(a_phy):
            self.previous = int(a_phy[-1])

    def _run(self, f: _File, i: int, physical_offset, length: int) -> Finding:
        return _entry_finding(self.topic, self.queue_id, f, i, physical_offset, "consumequeue.invalid_entry",
                              f"{length} invalid entr{'y' if length == 1 else 'ies'} (offset < 0 or size <= 0) "
                              f"with valid entries after them: RocketMQ's recovery ends the queue here",
                              entries=length)


class _Compare:
    """What dispatch writes against what the files hold, entry by entry by queue offset, a range of queue offsets
    at a time in ascending order (``part``): ``consumequeue.entry_mismatch``, ``entry_past_end``, ``extra_entry``,
    ``missing_entry`` and ``lagging``. ``walk``: the files' walk (where their written entries end)."""

    def __init__(self, topic: str, queue_id: int, files: list[_File], walk: _FileOrder, log: LogBounds,
                 file_size: int, consume_queue_ext: bool):
        self.topic, self.queue_id, self.files, self.walk, self.log = topic, queue_id, files, walk, log
        self.file_size, self.consume_queue_ext = file_size, consume_queue_ext
        self.starts = np.array([f.first for f in files], np.int64)
        self.ends = self.starts + np.array([f.count for f in files], np.int64)
        self.mismatch, self.extra, self.missing = CappedRun(), CappedRun(), CappedRun()
        self.lagging = 0
        self.first_lagging: tuple[int, int] | None = None       # (slot, physical offset)

    def next_entry(self, at: int | None) -> int | None:
        """The lowest queue offset at or after ``at`` (None: any) some file has an entry at."""
        held = self.ends > (self.starts if at is None else at)
        if not held.any():
            return None
        return int(self.starts[held].min()) if at is None else max(at, int(self.starts[held].min()))

    def part(self, lo: int, hi: int, e_slot, e_phy, e_size, e_tags) -> None:
        """The queue offsets [lo, hi): what dispatch writes there (its slots ascending) against every file's
        entries there, in file order."""
        topic, queue_id, log = self.topic, self.queue_id, self.log
        raws = [np.zeros(0, consumequeue.ENTRY_DTYPE)]
        qos, ks, idx, order = ([np.zeros(0, np.int64)] for _ in range(4))
        for k in np.flatnonzero((self.starts < hi) & (self.ends > lo)).tolist():
            f = self.files[k]
            i0, i1 = max(0, lo - f.first), min(f.count, hi - f.first)
            raws.append(f.read(i0, i1))
            idx.append(np.arange(i0, i0 + len(raws[-1]), dtype=np.int64))
            qos.append(f.first + idx[-1])
            ks.append(np.full(len(idx[-1]), k, np.int64))
            order.append(f.base + idx[-1])                 # the entry's place in the files' walk
        raw, qo, file_of_entry, index, walked = (np.concatenate(c) for c in (raws, qos, ks, idx, order))
        valid = consumequeue.valid_mask(raw)
        real = np.flatnonzero(valid & ~consumequeue.is_filler(raw))
        a_qo, a = qo[real], raw[real]
        a_phy, a_size, a_tags = (a[c].astype(np.int64) for c in ("commit_log_offset", "size", "tags_code"))
        expired = a_phy < log.min_offset
        at = lambda j, check, message, **ev: _entry_finding(                # noqa: E731  about real entry j
            topic, queue_id, self.files[int(file_of_entry[real[j]])], int(index[real[j]]), a_phy[j], check, message,
            **ev)
        show = lambda p, s, t: f"({int(p)}, {int(s)}, {int(t)})"           # noqa: E731

        # the first entry at a queue offset (in file order) against dispatch's
        _, ia, ie = np.intersect1d(a_qo, e_slot, assume_unique=False, return_indices=True)
        ext = self.consume_queue_ext & (a_tags[ia] <= EXT_ADDRESS_MAX)  # an address in consumequeue_ext/
        differ = (a_phy[ia] != e_phy[ie]) | (a_size[ia] != e_size[ie]) | (~ext & (a_tags[ia] != e_tags[ie]))
        bad_a, bad_e = ia[differ], ie[differ]

        def mismatch(m: int) -> Finding:
            j, e = int(bad_a[m]), int(bad_e[m])
            if a_phy[j] >= log.end:
                return at(j, "consumequeue.entry_past_end", f"entry {show(a_phy[j], a_size[j], a_tags[j])} points "
                          f"beyond the CommitLog's end {log.end}", log_end=log.end)
            return at(j, "consumequeue.entry_mismatch",
                      f"entry (physical offset, size, tagsCode) {show(a_phy[j], a_size[j], a_tags[j])}; RocketMQ's "
                      f"dispatch writes {show(e_phy[e], e_size[e], e_tags[e])}",
                      expected=show(e_phy[e], e_size[e], e_tags[e]))
        self.mismatch.add(mismatch, range(len(bad_a)))

        # entries where dispatch writes none: by queue offset, then file order
        only_a = np.flatnonzero(~np.isin(a_qo, e_slot) & ~expired)
        only_a = only_a[np.lexsort((real[only_a], a_qo[only_a]))]
        self.extra.add(lambda j: at(j, "consumequeue.entry_past_end", f"entry {show(a_phy[j], a_size[j], a_tags[j])} "
                                    f"points beyond the CommitLog's end {log.end}", log_end=log.end)
                       if a_phy[j] >= log.end else
                       at(j, "consumequeue.extra_entry", f"entry {show(a_phy[j], a_size[j], a_tags[j])}: RocketMQ's "
                          f"dispatch writes no entry at this queue offset for this CommitLog"), only_a)

        # dispatched entries the files lack (a position that holds an invalid entry before the last valid one
        # is RocketMQ's recovery's business: invalid_entry)
        written_end = self.walk.written_end
        only_e = np.flatnonzero(~np.isin(e_slot, a_qo) & ~np.isin(e_slot, qo[~valid & (walked <= self.walk.last)]))
        missing = only_e[e_slot[only_e] < written_end]
        lagging = only_e[e_slot[only_e] >= written_end]
        self.missing.add(lambda k: finding(
            "consumequeue.missing_entry", self._file_of(int(e_slot[k])), int(e_slot[k]) * ENTRY_SIZE % self.file_size,
            f"no entry for the record at physical offset {int(e_phy[k])} (QUEUEOFFSET {int(e_slot[k])}), below the "
            f"queue's end {written_end}", topic=topic, queue_id=queue_id, queue_offset=int(e_slot[k]),
            physical_offset=int(e_phy[k])), missing)
        if len(lagging) and self.first_lagging is None:
            self.first_lagging = int(e_slot[lagging[0]]), int(e_phy[lagging[0]])
        self.lagging += len(lagging)

    def _file_of(self, slot: int) -> str:
        size = self.file_size
        return StoreMap.queue_file_name(self.topic, self.queue_id, (slot * ENTRY_SIZE // size) * size)

    def findings(self, dispatch_end: int) -> list[Finding]:
        out = self.mismatch.findings() + self.extra.findings() + self.missing.findings()
        if self.lagging:
            slot, phy = self.first_lagging
            written_end = self.walk.written_end
            out.append(finding(
                "consumequeue.lagging", self._file_of(slot), slot * ENTRY_SIZE % self.file_size,
                f"{self.lagging} record(s) of the queue after its end {written_end} have no entry (the first at "
                f"physical offset {phy}); dispatching the whole CommitLog ends the queue at {dispatch_end}",
                topic=self.topic, queue_id=self.queue_id, queue_offset=slot, physical_offset=phy,
                records=self.lagging, queue_end=written_end, dispatch_end=dispatch_end))
        return out


class _QueueOffsets:
    """``commitlog.queue_offset_*`` over one queue's dispatchable records in CommitLog order, as they come
    (``add`` a chunk at a time: the last record of a chunk is compared with the first of the next)."""

    def __init__(self, topic: str, queue_id: int, locate: Locate):
        self.topic, self.queue_id, self.locate = topic, queue_id, locate
        self.gap, self.repeat, self.reset = CappedRun(), CappedRun(), CappedRun()
        self.previous: tuple[int, int] | None = None         # (QUEUEOFFSET, physical offset) of the last record

    def add(self, queue_offset: np.ndarray, physical_offset: np.ndarray) -> None:
        if not len(queue_offset):
            return
        if self.previous is not None:
            queue_offset, physical_offset = np.r_[self.previous[0], queue_offset], np.r_[self.previous[1],
                                                                                        physical_offset]
        self.previous = int(queue_offset[-1]), int(physical_offset[-1])
        topic, queue_id = self.topic, self.queue_id
        step = np.diff(queue_offset)
        at = lambda i, check, message: finding(check, *self.locate(int(physical_offset[i])), message,  # noqa: E731
                                               topic=topic, queue_id=queue_id, queue_offset=int(queue_offset[i]),
                                               physical_offset=int(physical_offset[i]),
                                               previous=int(queue_offset[i - 1]))
        self.gap.add(lambda i: at(i, "commitlog.queue_offset_gap",
                                  f"QUEUEOFFSET {int(queue_offset[i])} follows {int(queue_offset[i - 1])} in "
                                  f"{topic}/{queue_id}: {int(step[i - 1]) - 1} offset(s) missing"),
                     np.flatnonzero(step > 1) + 1)
        self.repeat.add(lambda i: at(i, "commitlog.queue_offset_repeat",
                                     f"QUEUEOFFSET {int(queue_offset[i])} follows {int(queue_offset[i - 1])} in "
                                     f"{topic}/{queue_id}"), np.flatnonzero((step <= 0) & (queue_offset[1:] != 0)) + 1)
        self.reset.add(lambda i: at(i, "commitlog.queue_offset_reset",
                                    f"QUEUEOFFSET restarts at 0 after {int(queue_offset[i - 1])} in {topic}/{queue_id} "
                                    "(topic re-created?)"), np.flatnonzero((step < 0) & (queue_offset[1:] == 0)) + 1)

    def findings(self) -> list[Finding]:
        return self.gap.findings() + self.repeat.findings() + self.reset.findings()


def _file_findings(topic: str, queue_id: int, files: list[tuple[str, int, int, tuple | None]], file_size: int
                   ) -> list[Finding]:
    """Sizes and names of every file of a queue: (relative name, queue byte offset, size, ``store.queues.unreadable_queue_file``)."""
    out = []
    for k, (name, cq_offset, size, skipped) in enumerate(files):
        if skipped and skipped[0] == "consumequeue.file_gap":      # a name beyond int64: that is all it gets
            out.append(finding(skipped[0], name, None, skipped[1], topic=topic, queue_id=queue_id))
            continue
        if size != file_size:
            out.append(finding("consumequeue.file_size", name, None,
                               skipped[1] if skipped else f"{size} bytes; the queue file size is {file_size}",
                               topic=topic, queue_id=queue_id, size=size, expected=file_size))
        if cq_offset % file_size:
            out.append(finding("consumequeue.file_gap", name, None,
                               f"name {cq_offset} is not a multiple of the file size {file_size}",
                               topic=topic, queue_id=queue_id))
        elif k and cq_offset != files[k - 1][1] + file_size:
            out.append(finding("consumequeue.file_gap", name, None,
                               f"starts at queue byte offset {cq_offset}; the previous file ends at "
                               f"{files[k - 1][1] + file_size}", topic=topic, queue_id=queue_id,
                               previous=files[k - 1][0]))
    return out
