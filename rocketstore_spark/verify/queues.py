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

Memory: the queue's records and entries (28 and 20 bytes each) — one queue at a time.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE, EXT_ADDRESS_MAX
from rocketstore_spark.findings import Finding, capped, finding
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.queues import unreadable_queue_file

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


@dataclass
class _Entries:
    """Every entry of a queue's files, concatenated in queue-offset order."""
    raw: np.ndarray                 # consumequeue.ENTRY_DTYPE
    queue_offset: np.ndarray        # int64
    file: np.ndarray                # int32 index into names
    position: np.ndarray            # int64 byte position in its file
    names: list[str]


def _read_entries(queue_dir: str, root: str) -> tuple[_Entries, list[tuple[str, int, int]]]:
    """The entries of every file of the queue that is read (``store.queues.unreadable_queue_file``), and (relative name, queue byte offset,
    size) of each of them."""
    files, raws, qos, idx, pos = [], [], [], [], []
    for path, cq_offset in StoreMap.queue_files(queue_dir):
        k = len(files)
        if unreadable_queue_file(path, cq_offset):
            continue
        with open(path, "rb") as f:
            data = f.read()
        raw = consumequeue.held(consumequeue.decode_entries(data))
        files.append((os.path.relpath(path, root), cq_offset, len(data)))
        positions = np.arange(len(raw), dtype=np.int64) * ENTRY_SIZE
        raws.append(raw)
        qos.append((cq_offset + positions) // ENTRY_SIZE)
        idx.append(np.full(len(raw), k, dtype=np.int32))
        pos.append(positions)
    if not files:
        return _no_entries()
    return _Entries(np.concatenate(raws), np.concatenate(qos), np.concatenate(idx), np.concatenate(pos),
                    [f[0] for f in files]), files


def check_queue(topic: str, queue_id: int, queue_dir: str | None, root: str, records: dict[str, np.ndarray],
                log: LogBounds, file_size: int, locate: Locate, expired_min_is_max: bool = True,
                consume_queue_ext: bool = False) -> QueueVerdict:
    """Verify one queue. ``records``: the queue's records that get a ConsumeQueue entry, ascending physical
    offset — numpy arrays ``queue_offset``, ``physical_offset``, ``size``, ``tags_code``; ``queue_dir``: its
    directory (None: the store has none); ``root``: the store root file names are reported relative to;
    ``locate``: the segment file and position of a physical offset; ``expired_min_is_max``: the release's rule
    for a queue whose every entry is expired (``rocketmq.consumequeue.rocketmq_bounds``); ``consume_queue_ext``:
    the store has ``consumequeue_ext/`` (enableConsumeQueueExt), so a tagsCode at or below EXT_ADDRESS_MAX is an
    address there, not compared."""
    v = QueueVerdict(topic, queue_id)
    out = v.findings
    qo, phy, size, tags = (np.asarray(records[c], np.int64) for c in ("queue_offset", "physical_offset", "size",
                                                                       "tags_code"))
    v.records = len(qo)
    out += queue_offset_findings(topic, queue_id, qo, phy, locate)

    # what dispatch writes
    state = cq.QueueState()
    slots = cq.place(state, qo, phy, size, file_size)
    v.dispatch_max_offset = state.max_offset
    keep = slots >= 0
    e_slot, e_phy, e_size, e_tags = slots[keep], phy[keep], size[keep], tags[keep]

    entries, files = _read_entries(queue_dir, root) if queue_dir is not None else _no_entries()
    v.files = len(files)
    listed = StoreMap.queue_files(queue_dir) if queue_dir is not None else []
    out += _file_findings(topic, queue_id, [(os.path.relpath(p, root), o, os.path.getsize(p), unreadable_queue_file(p, o))
                                            for p, o in listed], file_size)
    bounds = np.searchsorted(entries.file, np.arange(len(files) + 1))       # entries are in file order
    raws = [entries.raw[bounds[k]:bounds[k + 1]] for k in range(len(files))]
    v.min_offset, v.max_offset = cq.rocketmq_bounds([(f[0], f[1]) for f in files], lambda k: raws[k], log.min_offset,
                                                 expired_min_is_max)

    valid = consumequeue.valid_mask(entries.raw)
    last = int(np.flatnonzero(valid)[-1]) if valid.any() else -1
    at = lambda i, check, message, **ev: finding(                 # noqa: E731  a finding about entry i
        check, entries.names[entries.file[i]], int(entries.position[i]), message, topic=topic, queue_id=queue_id,
        queue_offset=int(entries.queue_offset[i]), physical_offset=int(entries.raw["commit_log_offset"][i]), **ev)

    invalid = np.flatnonzero(~valid[:last + 1])
    if len(invalid):
        runs = np.split(invalid, np.flatnonzero(np.diff(invalid) != 1) + 1)
        out += capped(lambda r: at(int(runs[r][0]), "consumequeue.invalid_entry",
                                   f"{len(runs[r])} invalid entr{'y' if len(runs[r]) == 1 else 'ies'} (offset < 0 or "
                                   f"size <= 0) with valid entries after them: RocketMQ's recovery ends the queue "
                                   f"here", entries=len(runs[r])), range(len(runs)))

    real = np.flatnonzero(valid[:last + 1] & ~consumequeue.is_filler(entries.raw[:last + 1]))
    a_qo, a = entries.queue_offset[real], entries.raw[real]
    a_phy, a_size, a_tags = (a[f].astype(np.int64) for f in ("commit_log_offset", "size", "tags_code"))
    v.entries = len(real)
    expired = a_phy < log.min_offset
    v.expired = int(expired.sum())

    going_back = np.flatnonzero(np.diff(a_phy) <= 0) + 1
    out += capped(lambda j: at(int(real[j]), "consumequeue.not_increasing",
                               f"physical offset {int(a_phy[j])} is not above the previous entry's "
                               f"{int(a_phy[j - 1])}", previous=int(a_phy[j - 1])), going_back)

    # entry by entry, by queue offset
    _, ia, ie = np.intersect1d(a_qo, e_slot, assume_unique=False, return_indices=True)
    ext = consume_queue_ext & (a_tags[ia] <= EXT_ADDRESS_MAX)    # an address in consumequeue_ext/, not a tagsCode
    differ = (a_phy[ia] != e_phy[ie]) | (a_size[ia] != e_size[ie]) | (~ext & (a_tags[ia] != e_tags[ie]))
    bad_a, bad_e = ia[differ], ie[differ]
    past = a_phy[bad_a] >= log.end
    show = lambda p, s, t: f"({int(p)}, {int(s)}, {int(t)})"   # noqa: E731

    def mismatch(k: int) -> Finding:
        j, e = int(bad_a[k]), int(bad_e[k])
        if past[k]:
            return at(int(real[j]), "consumequeue.entry_past_end",
                      f"entry {show(a_phy[j], a_size[j], a_tags[j])} points beyond the CommitLog's end {log.end}",
                      log_end=log.end)
        return at(int(real[j]), "consumequeue.entry_mismatch",
                  f"entry (physical offset, size, tagsCode) {show(a_phy[j], a_size[j], a_tags[j])}; RocketMQ's "
                  f"dispatch writes {show(e_phy[e], e_size[e], e_tags[e])}",
                  expected=show(e_phy[e], e_size[e], e_tags[e]))
    out += capped(mismatch, range(len(bad_a)))

    only_a = np.flatnonzero(~np.isin(a_qo, e_slot) & ~expired)
    out += capped(lambda j: at(int(real[j]), "consumequeue.entry_past_end",
                               f"entry {show(a_phy[j], a_size[j], a_tags[j])} points beyond the CommitLog's end "
                               f"{log.end}", log_end=log.end) if a_phy[j] >= log.end else
                  at(int(real[j]), "consumequeue.extra_entry",
                     f"entry {show(a_phy[j], a_size[j], a_tags[j])}: RocketMQ's dispatch writes no entry at this "
                     f"queue offset for this CommitLog"), only_a)

    written_end = int(entries.queue_offset[last]) + 1 if last >= 0 else 0
    covered = entries.queue_offset[:last + 1]                    # positions that hold something (maybe invalid)
    only_e = np.flatnonzero(~np.isin(e_slot, a_qo) & ~np.isin(e_slot, covered[~valid[:last + 1]]))
    missing = only_e[e_slot[only_e] < written_end]
    lagging = only_e[e_slot[only_e] >= written_end]
    file_of = lambda q: StoreMap.queue_file_name(topic, queue_id, (q * ENTRY_SIZE // file_size) * file_size)  # noqa: E731
    out += capped(lambda k: finding(
        "consumequeue.missing_entry", file_of(int(e_slot[k])), int(e_slot[k]) * ENTRY_SIZE % file_size,
        f"no entry for the record at physical offset {int(e_phy[k])} (QUEUEOFFSET {int(e_slot[k])}), below the "
        f"queue's end {written_end}", topic=topic, queue_id=queue_id, queue_offset=int(e_slot[k]),
        physical_offset=int(e_phy[k])), missing)
    if len(lagging):
        k = int(lagging[0])
        out.append(finding(
            "consumequeue.lagging", file_of(int(e_slot[k])), int(e_slot[k]) * ENTRY_SIZE % file_size,
            f"{len(lagging)} record(s) of the queue after its end {written_end} have no entry (the first at physical "
            f"offset {int(e_phy[k])}); dispatching the whole CommitLog ends the queue at {v.dispatch_max_offset}",
            topic=topic, queue_id=queue_id, queue_offset=int(e_slot[k]), physical_offset=int(e_phy[k]),
            records=len(lagging), queue_end=written_end, dispatch_end=v.dispatch_max_offset))
    return v


def _no_entries() -> tuple[_Entries, list]:
    empty = np.zeros(0, np.int64)
    return _Entries(np.zeros(0, consumequeue.ENTRY_DTYPE), empty, np.zeros(0, np.int32), empty, []), []


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


def queue_offset_findings(topic: str, queue_id: int, queue_offset: np.ndarray, physical_offset: np.ndarray,
                          locate: Locate) -> list[Finding]:
    """``commitlog.queue_offset_*`` for one queue's dispatchable records in CommitLog order."""
    if len(queue_offset) < 2:
        return []
    step = np.diff(queue_offset)
    at = lambda i, check, message: finding(check, *locate(int(physical_offset[i])), message,   # noqa: E731
                                           topic=topic, queue_id=queue_id, queue_offset=int(queue_offset[i]),
                                           physical_offset=int(physical_offset[i]),
                                           previous=int(queue_offset[i - 1]))
    reset = np.flatnonzero((step < 0) & (queue_offset[1:] == 0)) + 1
    gap = np.flatnonzero(step > 1) + 1
    repeat = np.flatnonzero((step <= 0) & (queue_offset[1:] != 0)) + 1
    return (capped(lambda i: at(i, "commitlog.queue_offset_gap",
                                f"QUEUEOFFSET {int(queue_offset[i])} follows {int(queue_offset[i - 1])} in "
                                f"{topic}/{queue_id}: {int(step[i - 1]) - 1} offset(s) missing"), gap)
            + capped(lambda i: at(i, "commitlog.queue_offset_repeat",
                                  f"QUEUEOFFSET {int(queue_offset[i])} follows {int(queue_offset[i - 1])} in "
                                  f"{topic}/{queue_id}"), repeat)
            + capped(lambda i: at(i, "commitlog.queue_offset_reset",
                                  f"QUEUEOFFSET restarts at 0 after {int(queue_offset[i - 1])} in {topic}/{queue_id} "
                                  "(topic re-created?)"), reset))
