"""The BatchConsumeQueues of a store checked against its CommitLog (driver, CLI): each queue's units on disk
(``store.queues.read_batch_queue``: up to the first unit RocketMQ's recovery would stop at) against the units
RocketMQ 5.x's dispatch writes for the log (``rocketmq.batch_queues.expected_queues``), unit by unit, in order:
a unit that differs is ``batchcq.unit_mismatch``, units beyond the expected ones ``batchcq.extra_unit``, expected
units missing at the queue's end ``batchcq.lagging``. The log is decoded once, the columns
``batch_queues.UNIT_COLUMNS`` of every record (Arrow, no per-message Python); memory holds those columns. The
Spark verify (``spark.verify``) makes the same checks a queue per task.

Apart from the log (``queue_type_mismatches``, run by every verify's driver step, the scrub's resumed
cross-checks too, and by ``recover plan``, which refuses such a store): RocketMQ 5.x's
``ConsumeQueueStore.loadConsumeQueues`` throws for a queue directory of the other kind than its topic's
``queue.type`` (``queueTypeShouldBe``), so the broker does not start — a ``batchconsumequeue/`` directory of a
topic the config does not give ``queue.type=BatchCQ`` is ``batchcq.not_batch_topic``, a ``consumequeue/``
directory of one it does ``batchcq.classic_queue_of_batch_topic``. Only integer-named queue directories count
(the load skips the others); a topic the config does not list is SimpleCQ; 4.x has no such rule
(``Family.queue_type_checked``).
"""
from __future__ import annotations

import numpy as np

from rocketstore_spark.codec import batchconsumequeue
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.rocketmq.batch_queues import UNIT_COLUMNS, BatchQueueError, batch_topics, expected_queues
from rocketstore_spark.rocketmq.releases import Family
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.queues import read_batch_queue

FIELDS = batchconsumequeue.UNIT_DTYPE.names


def check_batch_queues(path, files: StoreMap) -> list[Finding]:
    """Findings of every BatchConsumeQueue of a BatchCQ topic of the store at ``path`` against the log (module
    docstring); none without them. The directories of other topics are ``queue_type_mismatches``' findings."""
    dirs = files.batch_queue_dirs()
    if not dirs:
        return []
    from rocketstore_spark.store.records import read_table
    topics = batch_topics(files)
    records, _ = read_table(path, UNIT_COLUMNS)
    findings: list[Finding] = []
    try:
        expected = {(q.topic, q.queue_id): q.units for q in expected_queues(records, topics)}
    except BatchQueueError as e:
        return [unparsable(files, e)]
    for topic, queue_id, qdir in dirs:
        if topic in topics:
            findings += compare_queue(files, topic, queue_id, str(qdir), expected.get((topic, queue_id)))
    return findings


def queue_type_mismatches(files: StoreMap, family: Family) -> list[Finding]:
    """The queue directories RocketMQ's load throws for (module docstring: ``batchcq.not_batch_topic``,
    ``batchcq.classic_queue_of_batch_topic``), a finding each; none for a release family without the rule or a
    store without a root. Cheap (two directory listings and the topic config); runs on the driver."""
    if not family.queue_type_checked or files.root is None:
        return []
    stray = files.batch_queue_dirs()
    topics = batch_topics(files)
    classic = [(t, q, d) for t, q, d in files.queue_dirs() if t in topics] if topics else []
    return [not_batch_topic(files, t, q, d) for t, q, d in stray if t not in topics] + \
        [classic_queue_of_batch_topic(files, t, q, d) for t, q, d in classic]


def unparsable(files: StoreMap, error: BatchQueueError) -> Finding:
    """The one finding of a log whose INNER_NUM or INNER_BASE RocketMQ's dispatch cannot parse."""
    return finding("batchcq.unit_mismatch", files.relative(files.batch_consumequeue_dir), None, str(error))


def not_batch_topic(files: StoreMap, topic: str, queue_id: int, qdir) -> Finding:
    """A BatchConsumeQueue directory of a topic the config does not give queue.type=BatchCQ."""
    return finding("batchcq.not_batch_topic", files.relative(qdir), None,
                   f"{topic} has no queue.type=BatchCQ in config/topics.json: RocketMQ's load "
                   f"throws for this queue (\"The queue type of topic: {topic} should be BatchCQ, "
                   f"but is SimpleCQ\") and the broker does not start", topic=topic, queue_id=queue_id)


def classic_queue_of_batch_topic(files: StoreMap, topic: str, queue_id: int, qdir) -> Finding:
    """A ConsumeQueue (``consumequeue/``) directory of a topic the config gives queue.type=BatchCQ."""
    return finding("batchcq.classic_queue_of_batch_topic", files.relative(qdir), None,
                   f"{topic} has queue.type=BatchCQ in config/topics.json: RocketMQ's load throws for this "
                   f"ConsumeQueue (\"The queue type of topic: {topic} should be SimpleCQ, but is BatchCQ\") and "
                   f"the broker does not start", topic=topic, queue_id=queue_id)


def compare_queue(files: StoreMap, topic: str, queue_id: int, qdir: str, want: np.ndarray | None) -> list[Finding]:
    """One queue's units on disk (``qdir``) against ``want``, the units RocketMQ's dispatch writes (None: none),
    unit by unit (module docstring); runs wherever called (driver, CLI, a Spark verify task)."""
    want = want if want is not None else np.zeros(0, dtype=batchconsumequeue.UNIT_DTYPE)
    out: list[Finding] = []
    k = 0
    for chunk in read_batch_queue(qdir):
        have = chunk.units
        n = min(len(have), max(len(want) - k, 0))
        if n:
            differs = np.zeros(n, dtype=bool)
            for name in FIELDS:
                differs |= have[name][:n] != want[name][k:k + n]
            for i in np.flatnonzero(differs)[:20].tolist():      # the first few of a chunk: findings, not a flood
                out.append(finding(
                    "batchcq.unit_mismatch", files.relative(chunk.file), int(chunk.file_positions[i]),
                    f"unit {int(chunk.unit_indexes[i])} differs from the one RocketMQ's dispatch writes",
                    physical_offset=int(have["physical_offset"][i]), topic=topic, queue_id=queue_id,
                    queue_offset=int(have["base_offset"][i]), found=have[i].tobytes().hex(),
                    expected=want[k + i].tobytes().hex()))
        if len(have) > n:
            i = n
            out.append(finding("batchcq.extra_unit", files.relative(chunk.file), int(chunk.file_positions[i]),
                               f"{len(have) - n} unit(s) from unit {int(chunk.unit_indexes[i])} on where RocketMQ's "
                               f"dispatch writes none", physical_offset=int(have["physical_offset"][i]),
                               topic=topic, queue_id=queue_id, queue_offset=int(have["base_offset"][i])))
        k += len(have)
    if k < len(want):
        name = files.relative(files.batch_queue_dir(topic, queue_id))
        out.append(finding("batchcq.lagging", name, None,
                           f"{len(want) - k} record(s) of the log have no unit, from physical offset "
                           f"{int(want['physical_offset'][k])} on", physical_offset=int(want["physical_offset"][k]),
                           topic=topic, queue_id=queue_id, queue_offset=int(want["base_offset"][k]),
                           missing=len(want) - k))
    return out
