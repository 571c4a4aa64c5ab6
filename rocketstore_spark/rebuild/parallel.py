"""The parallel rebuild's writing tasks (the Spark job ``spark.rebuild`` runs them on executors; nothing here
imports Spark): they read the spill files that ``store.spill.scan_range`` tasks wrote and write the rebuilt
files.

``write_queue_group`` reads one queue group's spill files of every scan task in CommitLog order and writes its
queues (``rebuild.output.ConsumeQueueWriter``, the in-process rebuild's writer); ``write_index_file`` reads
the ``count`` keys from global rank ``first`` on and writes one IndexFile, its header pre-set from the key
before. So the CommitLog is read once, no per-record rows go through Spark, and every output file is written
by one task, under a temporary name, fsynced and renamed (``rebuild.output``). A store with BatchCQ topics:
each scan task reads the records of those topics it dispatched again, with their properties
(``spill_batch_units``, as the in-process rebuild does), and ``write_batch_group`` writes a queue group's
BatchConsumeQueues (``rebuild.output.BatchQueueWriter``).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.findings import Finding
from rocketstore_spark.rebuild.output import (BatchQueueResult, BatchQueueWriter, ConsumeQueueWriter, QueueResult,
                                              finish_index_file, open_index_file)
from rocketstore_spark.rocketmq import indexfile as ix
from rocketstore_spark.rocketmq.batch_queues import BatchQueueError, dispatched_units, range_records
from rocketstore_spark.store.durable import temporary
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.spill import (BATCH_SPILL, ENTRY_SPILL, KEY_SPILL, batch_path, entries_path, key_at,
                                          keys_path, locate, queue_group, read_spill)


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


def spill_batch_units(ranges, spill: Path, task: int, groups: int, topics: list[str], physical: np.ndarray,
                      message_delay_level: str) -> BatchQueueError | None:
    """The units RocketMQ's dispatch requests for the records of the BatchCQ ``topics`` (sorted) at ``physical``
    (what scan task ``task`` dispatched of them, sorted) in its ``ranges``, appended to one spill file per
    queue group (``store.spill.BATCH_SPILL``; executor): the records read again, window by window, their
    INNER_NUM and INNER_BASE parsed (``rocketmq.batch_queues.dispatched_units``). Returns the smallest
    ``BatchQueueError`` (by ``rank``) the windows raised, None without."""
    number = {name: k for k, name in enumerate(topics)}
    error = None
    with contextlib.ExitStack() as opened:
        files = [opened.enter_context(open(batch_path(spill, task, g), "wb")) for g in range(groups)]
        for batch in range_records(ranges, frozenset(topics), physical, message_delay_level):
            try:
                names, topic, queue_id, units = dispatched_units(pa.Table.from_batches([batch]), frozenset(topics))
            except BatchQueueError as e:
                error = e if error is None or e.rank < error.rank else error
                continue
            rows = np.empty(len(units), BATCH_SPILL)
            rows["topic"] = np.array([number[n] for n in names], np.int32)[topic] if len(names) else 0
            rows["queue_id"], rows["unit"] = queue_id, units
            group = queue_group(rows["topic"], rows["queue_id"], groups)
            for g in np.unique(group).tolist():
                files[g].write(rows[group == g].tobytes())
    return error


def write_batch_group(spill: Path, group: int, tasks: int, topics: list[str], output: Path, file_size: int
                      ) -> tuple[list[BatchQueueResult], list[Finding]]:
    """Write the BatchConsumeQueues of one queue group (executor) into the rebuild's ``output`` directory from
    its batch spill files of scan tasks 0 .. tasks-1, in that order (``rebuild.output.BatchQueueWriter``, the
    in-process rebuild's writer): (queues written, findings)."""
    findings: list[Finding] = []
    writer = BatchQueueWriter(StoreMap.of_root(output), file_size, findings)
    for task in range(tasks):
        path = batch_path(spill, task, group)
        if path.exists():
            for rows in read_spill(path, BATCH_SPILL):
                writer.add(topics, rows["topic"], rows["queue_id"], rows["unit"])
    return writer.close(), findings


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
