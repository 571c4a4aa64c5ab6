"""The recovery report on BatchCQ stores (rocketmq.batch_recovery): each BatchConsumeQueue's bounds after the
restart against RocketMQ 5.5.1's own restart — of the golden stores (their manifests' ``recovery``) and, with the
JVM (slow), of copies of the crashed one whose log is cut inside the queues' units or whose queue files are gone
(BatchCQGolden view: RocketMQ's restart of the copy, tests/golden/serve_check.batchcq_view)."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.recovery.report import recovery_report
from tests.cli.helpers import run
from tests.golden import serve_check
from tests.store.test_batchconsumequeue import SCENARIOS, batch_queues, manifest, store


def bounds(doc: dict) -> dict:
    """(topic, queue id) -> (min, max) of every queue of a report, both kinds."""
    return {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
            for q in doc["consumequeues"] + doc["batchconsumequeues"]}


def rocketmqs(recovery: dict) -> dict:
    return {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in recovery["queues"]}


def deleted_queue_files(doc: dict) -> set[str]:
    return {f for q in doc["consumequeues"] + doc["batchconsumequeues"] for f in q["files_deleted"]}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_restart_of_rocketmqs_batch_cq_stores(scenario):
    doc, _ = recovery_report(str(store(scenario)))
    recovery = manifest(scenario)["recovery"]
    assert bounds(doc) == rocketmqs(recovery)
    assert [q["topic"] for q in doc["batchconsumequeues"]] == [q["topic"] for q in batch_queues(scenario)]
    assert doc["process_offset"] == recovery["commitlog_max_offset"]
    assert set(doc["commitlog_files_deleted"] + doc["index_files_deleted"]) <= set(recovery["files_deleted"])
    assert deleted_queue_files(doc) == set()
    dispatched = recovery["dispatched_during_load"]
    if scenario == "crash":     # the crash recovery dispatches again from the checkpoint's segment: no new unit
        assert doc["dispatch"] == {"from": dispatched["first_physical_offset"], "to": dispatched["end_physical_offset"]}
        assert all(q["units_dispatched"] == 0 for q in doc["batchconsumequeues"])
    assert doc["lost"]["messages"] == 0 and doc["unreachable"]["messages"] == 0


def test_recover_report_runs_on_a_batch_cq_store():
    result = run("recover", "report", store("clean"), "--json")
    assert result.exit_code == 0, result.output
    assert '"batchconsumequeues"' in result.stdout


def test_a_plan_for_a_store_the_restart_cuts_nothing_of_leaves_the_batch_queues_alone(tmp_path):
    """The crashed golden: RocketMQ's restart loses no message (it deletes the empty segment after the log's end:
    exit 3), so the plan has nothing to cut in batchconsumequeue/ (the repair itself:
    tests/recovery/test_repair_batchcq.py)."""
    result = run("recover", "plan", store("crash"), "--output", tmp_path / "plan", "--json")
    assert result.exit_code == 3, result.output
    assert '"messages": 0' in result.stdout
    assert "cut_batch_queues" not in result.stdout and '"rebuild"' in result.stdout


def cut_inside_the_units(root) -> None:
    """The crashed store's log damaged at BatchTopic/2's third file's first record (a bad magic): the restart
    cuts the log there, so every queue loses the units at or past it (two third files whole, one in part)."""
    first = next(f for f in manifest("crash")["files"] if f["path"] == "batchconsumequeue/BatchTopic/2/00000000000000001840")
    at = int(first["units"][0][:16], 16)
    segment = max((p for p in (root / "commitlog").iterdir() if int(p.name) <= at), key=lambda p: int(p.name))
    with open(segment, "r+b") as f:
        f.seek(at - int(segment.name) + 4)
        magic = f.read(1)
        f.seek(at - int(segment.name) + 4)
        f.write(bytes([magic[0] ^ 0xFF]))


def queue_files_gone(root) -> None:
    """BatchTopic/1 without its last two files, BatchTopic/2 without any: the crash recovery dispatches their
    units again from the checkpoint's segment on, after what is left (a queue created anew starts there)."""
    for name in ("00000000000000000920", "00000000000000001840"):
        (root / "batchconsumequeue" / "BatchTopic" / "1" / name).unlink()
    shutil.rmtree(root / "batchconsumequeue" / "BatchTopic" / "2")


@pytest.mark.slow
def test_the_restart_of_a_changed_store_is_rocketmqs(tmp_path):
    """One JVM run (BatchCQGolden view) for both changes: the log cut inside the units, queue files gone."""
    root = tmp_path / "store"
    shutil.copytree(store("crash"), root)
    cut_inside_the_units(root)
    queue_files_gone(root)
    doc, _ = recovery_report(str(root))
    view = serve_check.batchcq_view(root)
    recovery = view["recovery"]
    assert bounds(doc) == rocketmqs(recovery)
    assert deleted_queue_files(doc) == {f for f in recovery["files_deleted"] if f.startswith("batchconsumequeue/")}
    units = {(q["topic"], q["queue_id"]): len(q["units"]) for q in recovery["queues"] if q["cq_type"] == "BatchCQ"}
    ours = {(q["topic"], q["queue_id"]): q["units"] for q in doc["batchconsumequeues"]}
    assert ours == units
    assert doc["process_offset"] == recovery["commitlog_max_offset"]
    assert [q["units_cut"] > 0 for q in doc["batchconsumequeues"]] == [True, False, False]   # the others re-dispatched
    assert doc["lost"]["messages"] > 0
    assert {(q["topic"], q["queue_id"]) for q in doc["batchconsumequeues"] if q["units_dispatched"]} == {
        ("BatchTopic", 1), ("BatchTopic", 2)}
    # the offsets RocketMQ's units leave uncovered below the queue's max: where our unreachable records start
    gaps = {}
    for q in recovery["queues"]:
        covered = {o for base, *_, n, _ in q.get("units", []) for o in range(base, base + n)}
        holes = [o for o in range(q["max_offset"]) if o not in covered]
        if q["cq_type"] == "BatchCQ" and holes:
            gaps[(q["topic"], q["queue_id"])] = holes[0]
    assert {(u["topic"], u["queue_id"]): u["first_queue_offset"] for u in doc["unreachable"]["queues"]} == gaps
