"""BatchConsumeQueue files rebuilt from the CommitLog (rocketmq.batch_queues) against the ones RocketMQ 5.5.1
wrote and rebuilt itself (tests/golden/batchcq-5.5.1: ``files`` and ``rebuild.files``)."""
from __future__ import annotations

import hashlib

import pytest

from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.rocketmq.batch_queues import UNIT_COLUMNS, batch_topics, expected_queues, file_size_of
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.records import read_table
from tests.store.test_batchconsumequeue import SCENARIOS, manifest, store


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rebuilt_batch_consume_queues_are_byte_identical_to_rocketmqs(scenario):
    files = StoreMap.of_root(store(scenario))
    assert batch_topics(files) == {"BatchTopic"}
    records, _ = read_table(store(scenario), UNIT_COLUMNS)
    size = file_size_of(files)
    assert size == manifest(scenario)["bcq_file_size"]
    ours = {f"batchconsumequeue/{q.topic}/{q.queue_id}/{name}": hashlib.sha256(data).hexdigest()
            for q in expected_queues(records, batch_topics(files)) for name, data in q.files(size).items()}
    written = {f["path"]: f["sha256"] for f in manifest(scenario)["files"]}
    assert ours == written
    rebuilt = {f["path"]: f["sha256"] for f in manifest(scenario)["rebuild"]["files"]}
    if scenario == "clean":
        # RocketMQ restarted with no queues dispatches the whole log again: the same bytes
        assert ours == rebuilt
    else:
        # after a crash it dispatches only from its recovery's start segment on (dispatched_during_load): the
        # units of the records before it are never written again
        start = manifest(scenario)["rebuild"]["dispatched_during_load"]["first_physical_offset"]
        assert start > 0 and set(rebuilt) < set(ours)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rebuild_writes_both_queue_kinds_as_rocketmq_does(scenario, tmp_path):
    """``rocketstore rebuild`` of a BatchCQ store: batchconsumequeue/ byte for byte what RocketMQ 5.5.1 wrote when
    it restarted without its queues (``rebuild.files``: after the crash, only what that restart dispatches),
    consumequeue/ for the classic topic only; the diff pairs the batchconsumequeue/ files too."""
    out = tmp_path / "out"
    result = rebuild_store(str(store(scenario)), out)
    rebuilt = {f"batchconsumequeue/{q.topic}/{q.queue_id}/{name}": hashlib.sha256(
        (out / "batchconsumequeue" / q.topic / str(q.queue_id) / name).read_bytes()).hexdigest()
        for q in result.batch_queues for name in q.files}
    assert rebuilt == {f["path"]: f["sha256"] for f in manifest(scenario)["rebuild"]["files"]}
    assert {(q.topic, q.queue_id): q.max_offset for q in result.batch_queues} == {
        (q["topic"], q["queue_id"]): q["max_offset"] for q in manifest(scenario)["recovery"]["queues"]
        if q["cq_type"] == "BatchCQ"}
    assert [(q.topic, q.queue_id) for q in result.queues] == [("PlainTopic", 1)]       # nothing of BatchTopic
    assert [f.check for f in result.findings] == ["store.partial_engine"]
    kinds = {(d.kind, d.status) for d in result.differences}
    batch = [d for d in result.differences if d.kind == "batchconsumequeue"]
    assert {d.store_file for d in batch} == {f["path"] for f in manifest(scenario)["files"]}
    if scenario == "clean":
        # the store's own files are RocketMQ's: every one identical, the classic queue and the IndexFile too
        assert kinds == {("consumequeue", "identical"), ("batchconsumequeue", "identical"), ("index", "identical")}
    else:
        # the crashed store's files hold the units before the restart's dispatch start: each file differs, the
        # third ones are not written again
        assert {d.status for d in batch} == {"differs", "only_in_store"}
        first = next(d for d in batch if d.status == "differs")
        assert first.first_queue_offset is not None and "first difference at unit 0" in first.detail
