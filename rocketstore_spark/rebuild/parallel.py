"""The parallel rebuild's writing tasks (the Spark job ``spark.rebuild`` runs them on executors; nothing here
imports Spark): they read the spill files that ``store.spill.scan_range`` tasks wrote and write the rebuilt
files.

``write_queue_group`` reads one queue group's spill files of every scan task in CommitLog order and writes its
queues (``rebuild.output.ConsumeQueueWriter``, the in-process rebuild's writer); ``write_index_file`` reads
the ``count`` keys from global rank ``first`` on and writes one IndexFile, its header pre-set from the key
before. So the CommitLog is read once, no per-record rows go through Spark, and every output file is written
by one task, under a temporary name, fsynced and renamed (``rebuild.output``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.findings import Finding
from rocketstore_spark.rebuild.output import ConsumeQueueWriter, QueueResult, finish_index_file, open_index_file
from rocketstore_spark.rocketmq import indexfile as ix
from rocketstore_spark.store.durable import temporary
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.spill import ENTRY_SPILL, KEY_SPILL, entries_path, key_at, keys_path, locate, read_spill


def write_queue_group(spill: Path, group: int, topics: list[list[str]], output: Path, file_size: int,
                      release: np.ndarray | None = None
                      ) -> tuple[list[QueueResult], list[tuple[str, int]], list[Finding], dict]:
    """Write the ConsumeQueues of one queue group (executor) into the rebuild's ``output`` directory from its
    spill files of every scan task (``topics[t]``: scan task t's topics): (queues written, queues skipped for
    an unsafe topic, findings, beyond: the entries written for records outside ``release``'s intervals, per
    queue, as ``ConsumeQueueWriter.beyond``)."""
    findings: list[Finding] = []
    writer = ConsumeQueueWriter(StoreMap.of_root(output), file_size, findings, release=release)
    for task, names in enumerate(topics):
        for rows in read_spill(entries_path(spill, task, group), ENTRY_SPILL):
            writer.add_entries(names, rows["topic"], rows["queue_id"], rows["queue_offset"], rows["physical_offset"],
                               rows["size"], rows["tags_code"])
    writer.close()
    return list(writer.queues.values()), writer.skipped(), findings, writer.beyond


def write_index_file(spill: Path, task_keys: list[int], output: Path, name: str, geometry: Geometry, first: int,
                     count: int) -> int:
    """One IndexFile ``name`` in the rebuild's ``output`` directory (executor): the ``count`` keys from global rank ``first`` on (``task_keys``: keys per scan
    task, in order), its header pre-set from the key before (none for the first file). Returns the keys put."""
    path = StoreMap.of_root(output).index_path(name)
    tmp = temporary(path)
    buf = open_index_file(tmp, geometry, key_at(spill, task_keys, first - 1) if first > 0 else None)
    put = 0
    task, at = locate(task_keys, first)
    while put < count and task < len(task_keys):
        for rows in read_spill(keys_path(spill, task), KEY_SPILL, at, count - put):
            put += ix.put_keys(buf, geometry, rows["key_hash"], rows["physical_offset"], rows["store_timestamp"])
        task, at = task + 1, 0
    finish_index_file(buf, tmp, path)
    return put
