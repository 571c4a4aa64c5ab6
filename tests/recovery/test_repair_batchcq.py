"""The repair of a BatchCQ store (5.x queue.type=BatchCQ): a copy of tests/golden/batchcq-5.5.1/crash (written by
RocketMQ 5.5.1, crashed) whose log is damaged at BatchTopic/2's third file's first record (a bad magic: the
restart cuts the log there) and whose BatchTopic/1 lost its last file (the restart dispatches its unit again).
The plan cuts batchconsumequeue/ with the log as RocketMQ's restart does and says what each queue loses, inner
messages too; the repaired copy holds, byte for byte, the units RocketMQ's own dispatch wrote below the cut
(the golden's view of its files), and real RocketMQ 5.5.1 opening it cuts nothing, serves every kept message as a
consumer receives it and reports the bounds the plan predicted (slow)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rocketstore_spark.recovery.apply import apply_plan
from rocketstore_spark.recovery.plan import make_plan
from tests.cli.helpers import run
from tests.golden import serve_check
from tests.recovery.test_batch_recovery import cut_inside_the_units
from tests.store.test_batchconsumequeue import batch_queues, manifest, store
from tests.store_files import tree

DAMAGED_QUEUE_FILE = "batchconsumequeue/BatchTopic/2/00000000000000001840"


def damaged(root: Path) -> None:
    """The crashed store's log damaged inside the queues' units (``cut_inside_the_units``) and BatchTopic/1's
    last file gone."""
    shutil.copytree(store("crash"), root)
    cut_inside_the_units(root)
    (root / "batchconsumequeue" / "BatchTopic" / "1" / "00000000000000001840").unlink()


def cut_at() -> int:
    """Where RocketMQ's restart ends the damaged log: the damaged record's physical offset, its unit's in
    RocketMQ's own file."""
    first = next(f for f in manifest("crash")["files"] if f["path"] == DAMAGED_QUEUE_FILE)
    return int(first["units"][0][:16], 16)


@pytest.fixture(scope="module")
def repaired(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batchcq-repair")
    damaged(tmp / "store")
    before = tree(tmp / "store")
    plan = make_plan(str(tmp / "store"), tmp / "plan")
    receipt = apply_plan(tmp / "plan", output=tmp / "repaired")
    assert tree(tmp / "store") == before                  # the store itself untouched
    return plan, receipt, tmp


def batch_action(plan: dict) -> dict:
    [action] = [a for a in plan["actions"] if a["action"] == "cut_batch_queues"]
    return {(q["topic"], q["queue_id"]): q for q in action["queues"]}


def test_the_plan_cuts_each_batch_queue_where_rocketmq_does_and_counts_its_inner_messages(repaired):
    """Against RocketMQ's units of the crashed store (the golden's restart view): each queue keeps those below the
    cut (its max offset the last kept unit's base + batch size) and loses the others — records and the inner
    messages they hold, the damaged record's too (its unit is all that is left of it: unreadable, not exported)."""
    plan, receipt, _ = repaired
    at = cut_at()
    assert plan["process_offset"] == at
    queues = batch_action(plan)
    for q in batch_queues("crash"):
        key = (q["topic"], q["queue_id"])
        kept = [u for u in q["units"] if u[1] < at]
        lost = [u for u in q["units"] if u[1] >= at]
        assert (queues[key]["min_offset"], queues[key]["max_offset"]) == (0, kept[-1][0] + kept[-1][4]), key
        assert queues[key]["lost"] == {
            "units": len(lost), "inner_messages": sum(u[4] for u in lost), "first_queue_offset": lost[0][0],
            "last_queue_offset": lost[-1][0] + lost[-1][4] - 1, "exported": sum(u[1] > at for u in lost),
            "unreadable": sum(u[1] == at for u in lost)}, key
    # the recovery report in the plan: the inner messages of the readable records lost, per queue
    reported = {(q["topic"], q["queue_id"]): q["inner_messages"] for q in plan["report"]["lost"]["queues"]
                if "inner_messages" in q}
    assert reported == {(q["topic"], q["queue_id"]): sum(u[4] for u in q["units"] if u[1] > at)
                        for q in batch_queues("crash")}
    # the restart deletes the files whose first unit is past the cut, and dispatches BatchTopic/1's lost unit again
    assert queues[("BatchTopic", 2)]["files_deleted"] == ["00000000000000001840"]
    assert queues[("BatchTopic", 1)]["dispatch"]["units"] == 1
    assert receipt["staged"]["batch_queues_cut"] == 3


def test_the_repaired_batch_queues_are_rocketmqs_units_below_the_cut(repaired):
    """Every batchconsumequeue/ file of the repaired copy is, byte for byte, the file RocketMQ's dispatch wrote
    into the crashed store (the golden's view as written; BatchTopic/1's last one is gone from the damaged copy)
    with the units past the cut zeroed; files whose units all lie past it are gone."""
    _, _, tmp = repaired
    at = cut_at()
    size = manifest("crash")["bcq_file_size"]
    want = {}
    for f in manifest("crash")["files"]:
        kept = [bytes.fromhex(u) for u in f["units"] if int(u[:16], 16) < at]
        if kept:
            want[f["path"]] = b"".join(kept).ljust(size, b"\0")
    out = tmp / "repaired"
    got = {str(p.relative_to(out)): p.read_bytes() for p in sorted((out / "batchconsumequeue").rglob("*"))
           if p.is_file()}
    assert got == want


def test_the_cli_names_what_each_batch_queue_loses(repaired, tmp_path):
    _, _, tmp = repaired
    result = run("recover", "plan", tmp / "store", "--output", tmp_path / "plan")
    assert result.exit_code == 3, result.output
    assert ("BatchTopic/2: max offset 250 -> 224, loses 5 record(s) holding 26 message(s) (queue offsets 224..249; "
            "4 exported, 1 unreadable)") in result.output


@pytest.mark.slow
def test_real_rocketmq_opens_the_repaired_copy_and_serves_every_kept_message(repaired):
    """RocketMQ 5.5.1 (BatchCQGolden view) restarts the repaired copy without deleting or changing a CommitLog or
    queue file; every queue has the bounds the plan predicted; getMessage serves every kept offset, and the
    messages a consumer receives (inner batches unwrapped) are those it received from the crashed store below
    the cut. Its rebuild of the repaired copy writes the same batchconsumequeue/ bytes."""
    plan, _, tmp = repaired
    at = cut_at()
    view = serve_check.batchcq_view(tmp / "repaired")
    recovery = view["recovery"]
    assert recovery["loaded"] is True and recovery["commitlog_max_offset"] == at
    assert not [f for f in recovery["files_deleted"] + recovery["files_changed"]
                if f.startswith(("commitlog/", "batchconsumequeue/", "consumequeue/"))]
    predicted = batch_action(plan)
    crashed = {(q["topic"], q["queue_id"]): q for q in batch_queues("crash")}
    served = [q for q in recovery["queues"] if q["cq_type"] == "BatchCQ"]
    assert {(q["topic"], q["queue_id"]) for q in served} == set(crashed)
    for q in served:
        key = (q["topic"], q["queue_id"])
        assert (q["min_offset"], q["max_offset"]) == (predicted[key]["min_offset"], predicted[key]["max_offset"])
        assert q["units"] == [u for u in crashed[key]["units"] if u[1] < at], key
        assert all(g[1] == "FOUND" and g[2] >= 1 for g in q["get_message"]), key
        assert [g[0] for g in q["get_message"]] == list(range(q["max_offset"])), key
        assert q["received"] == [m for m in crashed[key]["received"] if m["commitlog_offset"] < at], key
    ours = {f: (tmp / "repaired" / f).read_bytes() for f in
            (str(p.relative_to(tmp / "repaired")) for p in (tmp / "repaired" / "batchconsumequeue").rglob("*")
             if p.is_file())}
    assert {f["path"]: f["units"] for f in view["rebuild"]["files"]} == {
        f: [data[i:i + 46].hex() for i in range(0, len(data), 46) if any(data[i:i + 46])] for f, data in ours.items()}
