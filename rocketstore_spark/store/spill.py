"""Spill files: the CommitLog read once through the compiled dispatch, its ConsumeQueue entries and IndexFile
keys written to fixed-width files that the rebuild (``rebuild.parallel``, the Spark job ``spark.rebuild``) and
verify (``verify.store.queued_records``) both read back. Nothing here imports Spark; runs on the driver, an
executor or the CLI.

``scan_range``: one range of the CommitLog (``datasource.planning`` ranges, in CommitLog order) read once
through ``codec.dispatch_kernel.DispatchDecoder``. Its ConsumeQueue entries are appended to one spill file
per queue group (``queue_group``: a queue always falls in the same group, whichever task sees it), its
IndexFile keys, in put order, to one keys file. Memory: one window. ``read_spill`` reads a spill file back a
bounded number of rows at a time; ``key_at`` finds a key by its global rank (keys are fixed-width records: a
file's keys are found by seeking, whichever scan task put them).

Spill files live in a work directory the caller owns (the rebuild's ``DIR/.rebuild-spill``, shared by every
executor; verify's temporary directory) and removes when it is done.
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from rocketstore_spark.codec import batchconsumequeue
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.findings import Finding
from rocketstore_spark.store.scan import segment_audit, summarize
from rocketstore_spark.store.segment_reader import SegmentReader

SPILL_DIR = ".rebuild-spill"
# one queued record: its topic (an index into its scan task's topics), queue id, QUEUEOFFSET, physical offset,
# size, tagsCode
ENTRY_SPILL = np.dtype([("topic", "<i4"), ("queue_id", "<i4"), ("queue_offset", "<i8"), ("physical_offset", "<i8"),
                        ("size", "<i4"), ("tags_code", "<i8")])
# one BatchConsumeQueue unit (5.x BatchCQ topics, the Spark rebuild's): its topic (an index into the store's BatchCQ
# topics, sorted), queue id, the unit as written
BATCH_SPILL = np.dtype([("topic", "<i4"), ("queue_id", "<i4"), ("unit", batchconsumequeue.UNIT_DTYPE)])
# one IndexFile key: index hash, physical offset, store time (ms)
KEY_SPILL = np.dtype([("key_hash", "<i4"), ("physical_offset", "<i8"), ("store_timestamp", "<i8")])
READ_ROWS = 1 << 20                  # spill records read at a time: bounds a writing task's memory


def entries_path(spill: Path, task: int, group: int) -> Path:
    return spill / f"entries-{task:06d}-{group:04d}"


def batch_path(spill: Path, task: int, group: int) -> Path:
    return spill / f"batch-{task:06d}-{group:04d}"


def keys_path(spill: Path, task: int) -> Path:
    return spill / f"keys-{task:06d}"


def queue_group(topic_hash, queue_id, groups: int):
    """The queue group of (topic, queue id) from the topic's Java hashCode: the same in every task."""
    return ((np.asarray(topic_hash, np.int64) * 31 + np.asarray(queue_id, np.int64)) & 0x7FFFFFFF) % groups


def scan_range(ranges, spill: Path, task: int, groups: int, message_delay_level: str, index: bool,
               index_tags: bool, key_floor: int = -1, lmq: int = 0, *,
               batch_topics: frozenset[str] = frozenset(), each_window=None, scans: list | None = None,
               check_crc: bool = True, started=None) -> tuple[list[str], int, list[Finding]]:
    """Dispatch the records of ``ranges`` ((path, base offset, start, end, followed) of segment byte ranges,
    in CommitLog order; a sixth item, where given, is where the next segment lies when not beside it) into
    spill files (executor): (the topics the entry files number, keys put, findings of the reading).
    ``key_floor``: the physical offset of the last key put before these ranges (records dispatched again: the
    IndexFile takes no key below it, ``IndexService.buildIndex``). ``lmq``: the LMQ multi-dispatch entries too
    (``DispatchDecoder``'s); ``batch_topics``: BatchCQ topics, whose records get no entry; ``each_window``:
    called with every window read and the decoder's topics (the Spark rebuild's findings of multi-dispatch
    RocketMQ passes over, ``rebuild.output.LmqSkips``, and its BatchCQ records, ``rebuild.output.BatchSeen``). ``scans``: the same walk also scans each range as ``store.scan.scan_segment``
    does (BODYCRC with ``check_crc``, ``__CRC32#`` and store times: ``DispatchDecoder``'s ``audit``), its
    ``SegmentSummary`` appended to ``scans`` with its reader's findings (which the returned findings then leave
    out). ``started``: called with each range's index and the file position of each window its reading walks
    (the first at the range's start)."""
    audited = segment_audit(check_crc, True, True) if scans is not None else None
    decoder = DispatchDecoder(message_delay_level, index=index, index_tags=index_tags, lmq=lmq,
                              batch_topics=batch_topics, audit=audited)
    findings: list[Finding] = []
    spill.mkdir(parents=True, exist_ok=True)
    topic_hashes: list[int] = []
    keys = 0
    # every spill file is closed whatever fails: on a full disk each close raises too, and a file left open
    # keeps its blocks allocated after the directory is removed
    with contextlib.ExitStack() as opened:
        files = [opened.enter_context(open(entries_path(spill, task, g), "wb")) for g in range(groups)]
        with open(keys_path(spill, task), "wb") as key_file:
            for k, (path, base_offset, start, end, followed, *next_path) in enumerate(ranges):
                reader = SegmentReader(path, base_offset, decoder, start, end, followed=followed,
                                       next_path=next_path[0] if next_path else None,
                                       on_window=None if started is None else (lambda at, k=k: started(k, at)))
                for decoded in reader:
                    w = decoded.batch
                    if each_window is not None:
                        each_window(w, decoder.topics)
                    topic_hashes += decoder.topic_hashes[len(topic_hashes):]
                    # the queued records in group order (stable: CommitLog order within a group), each column
                    # gathered on its own — a gather of the packed 36-byte rows is several times slower
                    q, topic, queue_id, queue_offset = w.entries()       # with LMQ entries (codec.lmq)
                    group = queue_group(np.asarray(topic_hashes, np.int64)[topic], queue_id, groups)
                    order = np.argsort(small_keys(group, groups), kind="stable")
                    rows = np.empty(len(order), dtype=ENTRY_SPILL)
                    rows["topic"], rows["queue_id"], rows["queue_offset"] = (
                        topic[order], queue_id[order], queue_offset[order])
                    for name in ("physical_offset", "size", "tags_code"):
                        rows[name] = getattr(w, name)[q[order]]
                    bounds = np.r_[0, np.cumsum(np.bincount(group, minlength=groups))]
                    for g in range(groups):                 # the rows' own bytes written (no copy)
                        if bounds[g + 1] > bounds[g]:
                            files[g].write(rows[bounds[g]:bounds[g + 1]])
                    if index:
                        take = w.key_physical_offset >= key_floor
                        put = np.empty(int(take.sum()), dtype=KEY_SPILL)
                        put["key_hash"], put["physical_offset"] = w.key_hash[take], w.key_physical_offset[take]
                        put["store_timestamp"] = w.key_store_timestamp[take]
                        key_file.write(put)
                        keys += len(put)
                if scans is not None:
                    scans.append(summarize(path, base_offset, reader.result, audited))
                else:
                    findings.extend(reader.result.findings)
    return decoder.topics, keys, findings


def small_keys(keys: np.ndarray, bound: int) -> np.ndarray:
    """``keys`` (non-negative, below ``bound``) in the narrowest integer type that holds them: numpy's stable
    sort of 8- and 16-bit integers is a radix sort (linear), of wider ones a merge sort."""
    return keys.astype(np.uint8 if bound <= 1 << 8 else np.uint16 if bound <= 1 << 16 else np.int64)


def read_spill(path: Path, dtype: np.dtype, first: int = 0, count: int | None = None):
    """The records [first, first + count) of a spill file, READ_ROWS at a time."""
    size = os.path.getsize(path) // dtype.itemsize
    end = size if count is None else min(size, first + count)
    with open(path, "rb") as f:
        while first < end:
            n = min(READ_ROWS, end - first)
            f.seek(first * dtype.itemsize)
            yield np.frombuffer(f.read(n * dtype.itemsize), dtype=dtype)
            first += n


def spilled_keys(spill: Path, tasks: int):
    """The keys the scan tasks 0 .. tasks-1 spilled, as a ``verify.index.KeySource``: (key hash, physical offset,
    store time) chunks of the keys of the records from ``begin`` to ``end`` inclusive (None: to the end), in
    put order — the tasks' key files in task order, each in physical offset order, entered by a binary search
    (a few reads), then read READ_ROWS at a time."""
    def keys(begin: int, end: int | None):
        for task in range(tasks):
            path = keys_path(spill, task)
            lo, hi = 0, os.path.getsize(path) // KEY_SPILL.itemsize
            with open(path, "rb") as f:
                while lo < hi:
                    mid = (lo + hi) // 2
                    f.seek(mid * KEY_SPILL.itemsize)
                    if np.frombuffer(f.read(KEY_SPILL.itemsize), KEY_SPILL)["physical_offset"][0] < begin:
                        lo = mid + 1
                    else:
                        hi = mid
            for rows in read_spill(path, KEY_SPILL, lo):
                phy = rows["physical_offset"]
                cut = len(phy) if end is None else int(np.searchsorted(phy, end, "right"))
                if cut:
                    yield rows["key_hash"][:cut].astype(np.int64), phy[:cut].copy(), rows["store_timestamp"][:cut].copy()
                if cut < len(phy):
                    return
    return keys


def key_at(spill: Path, task_keys: list[int], rank: int) -> tuple[int, int]:
    """(physical offset, store time) of the key of global ``rank`` (driver or executor)."""
    task, first = locate(task_keys, rank)
    row = next(read_spill(keys_path(spill, task), KEY_SPILL, first, 1))[0]
    return int(row["physical_offset"]), int(row["store_timestamp"])


def locate(task_keys: list[int], rank: int) -> tuple[int, int]:
    starts = np.concatenate([[0], np.cumsum(task_keys)])
    task = int(np.searchsorted(starts, rank, side="right")) - 1
    return task, rank - int(starts[task])
