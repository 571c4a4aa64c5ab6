"""The parallel rebuild's work, split in two kinds of task that meet through spill files (the Spark job,
``spark_rebuild``, runs them on executors; nothing here imports Spark).

1. ``scan_range``: one range of the CommitLog (``datasource.planning`` ranges, in CommitLog order) read once
   through the compiled dispatch (``codec.dispatch_kernel.DispatchDecoder``). Its ConsumeQueue entries are
   appended to one spill file per queue group (``queue_group``: a queue always falls in the same group,
   whichever task sees it), its IndexFile keys, in put order, to one keys file. Memory: one window.
2. ``write_queue_group`` reads one group's spill files of every scan task in CommitLog order and writes its
   queues (``rebuild.output.ConsumeQueueWriter``, the in-process rebuild's writer); ``write_index_file`` reads
   the ``count`` keys from global rank ``first`` on (keys are fixed-width records: a file's keys are found by
   seeking, whichever scan task put them) and writes one IndexFile, its header pre-set from the key before.

So the CommitLog is read once, no per-record rows go through Spark, and every output file is written by one
task, under a temporary name, fsynced and renamed (``rebuild.output``). Spill files live in
``DIR/.rebuild-spill`` (the output directory is already shared by every executor) and are removed by the
driver when the job ends.
"""
from __future__ import annotations

import contextlib

import os
from pathlib import Path

import numpy as np

from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.findings import Finding
from rocketstore_spark.rebuild import indexfile as ix
from rocketstore_spark.rebuild.output import ConsumeQueueWriter, QueueResult, finish_index_file, open_index_file
from rocketstore_spark.store.durable import temporary
from rocketstore_spark.store.segment_reader import SegmentReader

SPILL_DIR = ".rebuild-spill"
# one queued record: its topic (an index into its scan task's topics), queue id, QUEUEOFFSET, physical offset,
# size, tagsCode
ENTRY_SPILL = np.dtype([("topic", "<i4"), ("queue_id", "<i4"), ("queue_offset", "<i8"), ("physical_offset", "<i8"),
                        ("size", "<i4"), ("tags_code", "<i8")])
# one IndexFile key: index hash, physical offset, store time (ms)
KEY_SPILL = np.dtype([("key_hash", "<i4"), ("physical_offset", "<i8"), ("store_timestamp", "<i8")])
READ_ROWS = 1 << 20                  # spill records read at a time: bounds a writing task's memory


def entries_path(spill: Path, task: int, group: int) -> Path:
    return spill / f"entries-{task:06d}-{group:04d}"


def keys_path(spill: Path, task: int) -> Path:
    return spill / f"keys-{task:06d}"


def queue_group(topic_hash, queue_id, groups: int):
    """The queue group of (topic, queue id) from the topic's Java hashCode: the same in every task."""
    return ((np.asarray(topic_hash, np.int64) * 31 + np.asarray(queue_id, np.int64)) & 0x7FFFFFFF) % groups


def scan_range(ranges, spill: Path, task: int, groups: int, message_delay_level: str, index: bool,
               index_tags: bool) -> tuple[list[str], int, list[Finding]]:
    """Dispatch the records of ``ranges`` ((path, base offset, start, end, followed) of segment byte ranges,
    in CommitLog order) into spill files (executor): (the topics the entry files number, keys put, findings
    of the reading)."""
    decoder = DispatchDecoder(message_delay_level, index=index, index_tags=index_tags)
    findings: list[Finding] = []
    spill.mkdir(parents=True, exist_ok=True)
    topic_hashes: list[int] = []
    keys = 0
    # every spill file is closed whatever fails: on a full disk each close raises too, and a file left open
    # keeps its blocks allocated after the directory is removed
    with contextlib.ExitStack() as opened:
        files = [opened.enter_context(open(entries_path(spill, task, g), "wb")) for g in range(groups)]
        with open(keys_path(spill, task), "wb") as key_file:
            for path, base_offset, start, end, followed in ranges:
                reader = SegmentReader(path, base_offset, decoder, start, end, followed=followed)
                for decoded in reader:
                    w = decoded.batch
                    topic_hashes += decoder.topic_hashes[len(topic_hashes):]
                    q = w.queued
                    rows = np.empty(int(q.sum()), dtype=ENTRY_SPILL)
                    for name in ENTRY_SPILL.names:
                        rows[name] = getattr(w, name)[q]
                    group = queue_group(np.asarray(topic_hashes, np.int64)[rows["topic"]], rows["queue_id"], groups)
                    order = np.argsort(group, kind="stable")
                    bounds = np.searchsorted(group[order], np.arange(groups + 1))
                    for g in range(groups):
                        if bounds[g + 1] > bounds[g]:
                            files[g].write(rows[order[bounds[g]:bounds[g + 1]]].tobytes())
                    if index:
                        put = np.empty(len(w.key_hash), dtype=KEY_SPILL)
                        put["key_hash"], put["physical_offset"] = w.key_hash, w.key_physical_offset
                        put["store_timestamp"] = w.key_store_timestamp
                        key_file.write(put.tobytes())
                        keys += len(put)
                findings.extend(reader.result.findings)
    return decoder.topics, keys, findings


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


def write_queue_group(spill: Path, group: int, topics: list[list[str]], root: Path, file_size: int
                      ) -> tuple[list[QueueResult], list[tuple[str, int]], list[Finding]]:
    """Write the ConsumeQueues of one queue group (executor) from its spill files of every scan task
    (``topics[t]``: scan task t's topics): (queues written, queues skipped for an unsafe topic, findings)."""
    findings: list[Finding] = []
    writer = ConsumeQueueWriter(root, file_size, findings)
    for task, names in enumerate(topics):
        for rows in read_spill(entries_path(spill, task, group), ENTRY_SPILL):
            writer.add_entries(names, rows["topic"], rows["queue_id"], rows["queue_offset"], rows["physical_offset"],
                               rows["size"], rows["tags_code"])
    writer.close()
    return list(writer.queues.values()), writer.skipped(), findings


def key_at(spill: Path, task_keys: list[int], rank: int) -> tuple[int, int]:
    """(physical offset, store time) of the key of global ``rank`` (driver or executor)."""
    task, first = _locate(task_keys, rank)
    row = next(read_spill(keys_path(spill, task), KEY_SPILL, first, 1))[0]
    return int(row["physical_offset"]), int(row["store_timestamp"])


def _locate(task_keys: list[int], rank: int) -> tuple[int, int]:
    starts = np.concatenate([[0], np.cumsum(task_keys)])
    task = int(np.searchsorted(starts, rank, side="right")) - 1
    return task, rank - int(starts[task])


def write_index_file(spill: Path, task_keys: list[int], root: Path, name: str, geometry: Geometry, first: int,
                     count: int) -> int:
    """One IndexFile (executor): the ``count`` keys from global rank ``first`` on (``task_keys``: keys per scan
    task, in order), its header pre-set from the key before (none for the first file). Returns the keys put."""
    tmp = temporary(root / name)
    buf = open_index_file(tmp, geometry, key_at(spill, task_keys, first - 1) if first > 0 else None)
    put = 0
    task, at = _locate(task_keys, first)
    while put < count and task < len(task_keys):
        for rows in read_spill(keys_path(spill, task), KEY_SPILL, at, count - put):
            put += ix.put_keys(buf, geometry, rows["key_hash"], rows["physical_offset"], rows["store_timestamp"])
        task, at = task + 1, 0
    finish_index_file(buf, tmp, root / name)
    return put
