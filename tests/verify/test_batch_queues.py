"""verify.batch_queues: the BatchConsumeQueues of RocketMQ 5.5.1's golden BatchCQ stores against their log (no
finding), and copies with one unit changed or cut (the finding at that file and byte)."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.verify.batch_queues import check_batch_queues
from rocketstore_spark.verify.store import verify_store
from tests.cli.helpers import run
from tests.store.test_batchconsumequeue import SCENARIOS, manifest, store


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rocketmqs_units_have_no_finding(scenario):
    assert check_batch_queues(store(scenario), StoreMap.of_root(store(scenario))) == []


@pytest.fixture
def copy(tmp_path):
    target = tmp_path / "store"
    shutil.copytree(store("clean"), target)
    return target


def test_a_changed_unit_is_a_mismatch_at_its_byte(copy):
    f = manifest("clean")["files"][1]                  # BatchTopic/0's second file, its third unit
    path = copy / f["path"]
    data = bytearray(path.read_bytes())
    data[2 * 46 + 37] ^= 0x01                          # the batch size's low byte
    path.write_bytes(bytes(data))
    [found] = check_batch_queues(copy, StoreMap.of_root(copy))
    assert (found.check, found.file, found.file_position) == ("batchcq.unit_mismatch", f["path"], 92)
    assert found.evidence["expected"] == f["units"][2]


def test_a_cut_queue_is_lagging_and_a_stray_unit_extra(copy):
    files = [f for f in manifest("clean")["files"] if f["path"].startswith("batchconsumequeue/BatchTopic/1/")]
    last = files[-1]
    n = len(last["units"])
    path = copy / last["path"]
    data = bytearray(path.read_bytes())
    data[(n - 1) * 46:n * 46] = bytes(46)              # the queue's last unit zeroed: recovery ends before it
    path.write_bytes(bytes(data))
    other = [f for f in manifest("clean")["files"] if f["path"].startswith("batchconsumequeue/BatchTopic/2/")][-1]
    k = len(other["units"])
    assert k < 20
    stray = copy / other["path"]
    data = bytearray(stray.read_bytes())
    data[k * 46:(k + 1) * 46] = bytes.fromhex(other["units"][-1])     # its last unit written twice
    stray.write_bytes(bytes(data))
    lagging, extra = check_batch_queues(copy, StoreMap.of_root(copy))
    assert (lagging.check, lagging.queue_id, lagging.evidence["missing"]) == ("batchcq.lagging", 1, 1)
    assert lagging.physical_offset == int(last["units"][-1][:16], 16)
    assert (extra.check, extra.file, extra.file_position) == ("batchcq.extra_unit", other["path"], k * 46)


def test_verify_reports_batch_queue_findings(copy):
    path = copy / manifest("clean")["files"][0]["path"]
    data = bytearray(path.read_bytes())
    data[5] ^= 0x10                                    # the first unit's physical offset
    path.write_bytes(bytes(data))
    verdict = verify_store(str(copy))
    assert [(f.check, f.file, f.file_position) for f in verdict.findings if f.check.startswith("batchcq.")] == [
        ("batchcq.unit_mismatch", manifest("clean")["files"][0]["path"], 0)]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_classic_queue_checks_run_beside_the_batch_queues(scenario):
    """RocketMQ's BatchCQ stores: PlainTopic's ConsumeQueue checked as usual, BatchTopic's records not expected in
    consumequeue/ (they are in batchconsumequeue/); only the engine's warning and the shutdown state remain."""
    verdict = verify_store(str(store(scenario)))
    assert [(q.topic, q.queue_id, q.max_offset) for q in verdict.queues] == [("PlainTopic", 1, 15)]
    assert {f.check for f in verdict.findings} <= {"store.partial_engine", "store.lock_present", "store.abort_present"}


def test_a_clean_batch_cq_store_verifies_with_exit_0():
    result = run("verify", store("clean"))
    assert result.exit_code == 0, result.output
    assert "store.partial_engine" in result.output


def stray_queue(copy) -> str:
    """A BatchConsumeQueue of PlainTopic (not queue.type=BatchCQ in config/topics.json): BatchTopic/0's files."""
    shutil.copytree(copy / "batchconsumequeue" / "BatchTopic" / "0", copy / "batchconsumequeue" / "PlainTopic" / "0")
    return "batchconsumequeue/PlainTopic/0"


def test_a_queue_of_a_topic_that_is_not_batch_cq_is_an_error_and_refuses_a_repair(copy, tmp_path):
    from rocketstore_spark.recovery.plan import RepairRefused, make_plan
    where = stray_queue(copy)
    [found] = check_batch_queues(copy, StoreMap.of_root(copy))
    assert (found.check, found.severity.value, found.file) == ("batchcq.not_batch_topic", "error", where)
    assert "should be BatchCQ, but is SimpleCQ" in found.message
    with pytest.raises(RepairRefused, match="PlainTopic/0: a BatchConsumeQueue of a topic"):
        make_plan(str(copy), tmp_path / "plan")
    assert not (tmp_path / "plan").exists()


@pytest.mark.slow
def test_rocketmq_does_not_load_a_store_with_such_a_queue(copy):
    """What batchcq.not_batch_topic says, by RocketMQ 5.5.1 itself (BatchCQGolden view): its load fails."""
    from tests.golden import serve_check
    stray_queue(copy)
    assert serve_check.batchcq_view(copy)["recovery"]["loaded"] is False
