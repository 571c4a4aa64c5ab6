"""BatchConsumeQueue files rebuilt from the CommitLog (rocketmq.batch_queues) against the ones RocketMQ 5.5.1
wrote and rebuilt itself (tests/golden/batchcq-5.5.1: ``files`` and ``rebuild.files``)."""
from __future__ import annotations

import hashlib

import pytest

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
