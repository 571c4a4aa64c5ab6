"""verify.batch_queues: the BatchConsumeQueues of RocketMQ 5.5.1's golden BatchCQ stores against their log (no
finding), and copies with one unit changed or cut (the finding at that file and byte); copies with a queue
directory of the other kind than its topic's queue.type (the finding, the repair refused, and RocketMQ 5.5.1's
own load failing on them)."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.rocketmq.releases import FAMILIES, family_named
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.verify.batch_queues import check_batch_queues, queue_type_mismatches
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
    assert check_batch_queues(copy, StoreMap.of_root(copy)) == []          # not checked against the log
    [found] = queue_type_mismatches(StoreMap.of_root(copy), family_named("5.5.x"))
    assert (found.check, found.severity.value, found.file) == ("batchcq.not_batch_topic", "error", where)
    assert "should be BatchCQ, but is SimpleCQ" in found.message
    assert [(f.check, f.file) for f in verify_store(str(copy)).findings if f.check.startswith("batchcq.")] == [
        ("batchcq.not_batch_topic", where)]
    with pytest.raises(RepairRefused, match="PlainTopic/0: a BatchConsumeQueue of a topic"):
        make_plan(str(copy), tmp_path / "plan")
    assert not (tmp_path / "plan").exists()


@pytest.mark.slow
def test_rocketmq_does_not_load_a_store_with_such_a_queue(copy):
    """What batchcq.not_batch_topic says, by RocketMQ 5.5.1 itself (BatchCQGolden view): its load fails."""
    from tests.golden import serve_check
    stray_queue(copy)
    view = serve_check.batchcq_view(copy)
    assert view["recovery"]["loaded"] is False
    assert ("java.lang.RuntimeException: The queue type of topic: PlainTopic should be BatchCQ, but is SimpleCQ"
            in view["store_log"])


def classic_queue(copy, queue: str = "0") -> str:
    """A ConsumeQueue of BatchTopic (queue.type=BatchCQ in config/topics.json): PlainTopic/1's files."""
    shutil.copytree(copy / "consumequeue" / "PlainTopic" / "1", copy / "consumequeue" / "BatchTopic" / queue)
    return f"consumequeue/BatchTopic/{queue}"


def test_a_consume_queue_of_a_batch_cq_topic_is_an_error_and_refuses_a_repair(copy, tmp_path):
    from rocketstore_spark.recovery.plan import RepairRefused, make_plan
    where = classic_queue(copy)
    (copy / "consumequeue" / "BatchTopic" / "x1").mkdir()                  # not an integer: RocketMQ skips it
    (copy / "consumequeue" / "Unlisted" / "0").mkdir(parents=True)          # not in topics.json: SimpleCQ
    verdict = verify_store(str(copy))
    [found] = [f for f in verdict.findings if f.check.startswith("batchcq.")]
    assert (found.check, found.severity.value, found.file, found.topic, found.queue_id) == (
        "batchcq.classic_queue_of_batch_topic", "error", where, "BatchTopic", 0)
    assert "The queue type of topic: BatchTopic should be SimpleCQ, but is BatchCQ" in found.message
    # its entries still described as a ConsumeQueue's: RocketMQ's dispatch writes none for a BatchCQ topic
    extra = [f for f in verdict.findings if f.check == "consumequeue.extra_entry"]
    assert len(extra) == 15 and {f.file for f in extra} == {where + "/00000000000000000000"}
    with pytest.raises(RepairRefused, match="BatchTopic/0: a ConsumeQueue of a topic config/topics.json gives "
                                            "queue.type=BatchCQ.*should be SimpleCQ, but is BatchCQ"):
        make_plan(str(copy), tmp_path / "plan")
    assert not (tmp_path / "plan").exists()
    # both directions at once: one refusal naming both
    stray_queue(copy)
    with pytest.raises(RepairRefused, match="PlainTopic/0: a BatchConsumeQueue.*BatchTopic/0: a ConsumeQueue"):
        make_plan(str(copy), tmp_path / "plan")


def test_the_queue_type_rule_holds_without_batch_queues_and_only_for_5x(copy):
    """The finding without any batchconsumequeue/ (its check of the units has nothing to do), for every 5.x family
    and none for 4.x, whose TopicConfig has no attributes and which loads consumequeue/ only."""
    shutil.rmtree(copy / "batchconsumequeue")
    (copy / "consumequeue" / "BatchTopic" / "2").mkdir(parents=True)       # empty: RocketMQ's load still throws
    files = StoreMap.of_root(copy)
    for family in FAMILIES:
        found = queue_type_mismatches(files, family)
        assert [(f.check, f.file) for f in found] == (
            [("batchcq.classic_queue_of_batch_topic", "consumequeue/BatchTopic/2")] if family.name != "4.9.x" else [])
    assert [f.file for f in verify_store(str(copy)).findings if f.check.startswith("batchcq.")] == [
        "consumequeue/BatchTopic/2"]
    assert not [f for f in verify_store(str(copy), options={"rocketmqVersion": "4.9.8"}).findings
                if f.check.startswith("batchcq.")]


@pytest.mark.slow
def test_rocketmq_does_not_load_a_store_with_a_consume_queue_of_a_batch_cq_topic(copy):
    """What batchcq.classic_queue_of_batch_topic says, by RocketMQ 5.5.1 itself (BatchCQGolden view): its load
    fails with the exception the finding quotes."""
    from tests.golden import serve_check
    classic_queue(copy)
    view = serve_check.batchcq_view(copy)
    assert view["recovery"]["loaded"] is False
    assert ("java.lang.RuntimeException: The queue type of topic: BatchTopic should be SimpleCQ, but is BatchCQ"
            in view["store_log"])


def test_the_audit_and_the_scrub_report_it_whole_and_resumed(copy, tmp_path):
    """The audit (which runs the verify) and the scrub: its first run (cross-checks run whole) and a later one whose
    cross-checks resume (a file changed above every verified point) give the audit's answer, the finding in it.
    Without batchconsumequeue/ (a store with it is a partial engine's: its cross-checks always run whole)."""
    import os
    from tests.verify.test_scrub import audit, same_answer, scrub
    shutil.rmtree(copy / "batchconsumequeue")
    (copy / "consumequeue" / "BatchTopic" / "2").mkdir(parents=True)       # empty: no entry findings, resumable
    want = audit(copy)
    assert [(f["check"], f["file"]) for f in want["findings"] if f["check"].startswith("batchcq.")] == [
        ("batchcq.classic_queue_of_batch_topic", "consumequeue/BatchTopic/2")]
    first = scrub(copy, tmp_path / "state.json")
    same_answer(first, want)
    assert first["scrub"]["cross_checks"] == "run"
    os.utime(copy / "checkpoint")
    again = scrub(copy, tmp_path / "state.json")
    same_answer(again, audit(copy))
    assert again["scrub"]["cross_checks"] == "resumed"
