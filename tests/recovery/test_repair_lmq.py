"""The repair of an LMQ multi-dispatch store (tests/golden/lmq-5.5.1/cut, written by RocketMQ 5.5.1 with enableLmq
+ enableMultiDispatch, a record's body then zeroed so that RocketMQ's own recovery cuts the log there; its
manifest is RocketMQ's view after that restart): the %LMQ% queues are cut with the log, what each loses is in
the plan, the committed offsets past a new end are rewritten in config/lmqConsumerOffset.json (the file the
broker loads), and real RocketMQ opening the repaired copy serves every kept message of every %LMQ% queue and
nothing past the cut (slow)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore_spark.recovery.apply import apply_plan
from rocketstore_spark.recovery.plan import make_plan
from tests.golden import serve_check
from tests.golden.goldens import fastjson_loads
from tests.recovery.test_apply import raw_entries
from tests.store_files import tree

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lmq-5.5.1"
CUT, CRASH = GOLDEN / "cut", GOLDEN / "crash"


def manifest(path: Path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def lmq_queues(view: dict) -> dict:
    return {(q["topic"], q["queue_id"]): q for q in view["queues"] if q["topic"].startswith("%LMQ%")}


@pytest.fixture(scope="module")
def repaired(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lmq-repair")
    before = tree(CUT / "store")
    plan = make_plan(str(CUT / "store"), tmp / "plan", reset_offsets_past_end=True)
    receipt = apply_plan(tmp / "plan", output=tmp / "repaired")
    assert tree(CUT / "store") == before                  # the store itself untouched
    return plan, receipt, tmp / "repaired"


def test_the_plan_cuts_the_lmq_queues_with_the_log_and_counts_what_each_loses(repaired):
    plan, _, _ = repaired
    recovered = manifest(CUT)["recovery"]
    assert [a for a in plan["actions"] if a["action"] == "cut"]
    # every %LMQ% queue keeps the bounds RocketMQ's own restart of the store gives it
    kept = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in plan["queues"]
            if q["topic"].startswith("%LMQ%")}
    assert kept and kept == {k: (q["min_offset"], q["max_offset"]) for k, q in lmq_queues(recovered).items()}
    # lost per %LMQ% queue: the entries RocketMQ's crash view holds past the record the cut lands on
    cut = recovered["commitlog_max_offset"]
    expected = {}
    for key, q in lmq_queues(manifest(CRASH)["recovery"]).items():
        past = [u for u in q["units"] if u[1] > cut]
        if past:
            expected[key] = (len(past), past[0][0], past[-1][0])
    lost = {(q["topic"], q["queue_id"]): (q["messages"], q["first_queue_offset"], q["last_queue_offset"])
            for q in plan["report"]["lost"]["queues"] if q["topic"].startswith("%LMQ%")}
    assert expected and lost == expected


def test_the_repaired_lmq_queues_hold_what_rocketmqs_restart_keeps(repaired):
    """Every %LMQ% queue of the repaired copy holds, entry for entry, the units RocketMQ's restart of the store
    kept, and no entry past them (the rebuild of the cut log); the offset committed past %LMQ%gamma's new end
    is rewritten to it in lmqConsumerOffset.json, the file before kept as .bak."""
    _, receipt, out = repaired
    entries = raw_entries(out / "consumequeue")
    for key, q in lmq_queues(manifest(CUT)["recovery"]).items():
        got = {o: (phy, size, tags) for o, (phy, size, tags) in entries[key].items() if size}
        assert sorted(got) == list(range(q["min_offset"], q["max_offset"])), key
        assert [[o, *got[o]] for o in sorted(got)] == q["units"], key
    assert receipt["staged"]["offsets_reset"] == 1
    config = out / "config"
    assert (config / "lmqConsumerOffset.json.bak").read_bytes() == \
        (CUT / "store" / "config" / "lmqConsumerOffset.json").read_bytes()
    end = lmq_queues(manifest(CUT)["recovery"])[("%LMQ%gamma", 0)]["max_offset"]
    assert fastjson_loads((config / "lmqConsumerOffset.json").read_text())["lmqOffsetTable"]["%LMQ%gamma@%LMQ%beyond"] == end


@pytest.mark.slow
def test_real_rocketmq_serves_every_kept_lmq_message_and_nothing_past_the_cut(repaired):
    """RocketMQ 5.5.1 opens the repaired copy (load, start, dispatch caught up): every %LMQ% queue has the bounds
    its own restart of the store gave, getMessage returns at every kept offset the record it returned then, and
    at the end nothing (no record past the cut)."""
    _, _, out = repaired
    m = manifest(CUT)
    want = lmq_queues(m["recovery"])
    queries = []
    for (topic, queue_id), q in want.items():
        queries.append({"op": "offsets", "topic": topic, "queue_id": queue_id})
        queries += [{"op": "get", "topic": topic, "queue_id": queue_id, "queue_offset": o, "max_msg_nums": 1}
                    for o in range(q["min_offset"], q["max_offset"] + 1)]       # the end too: nothing there
    settings = {"mappedFileSizeCommitLog": m["geometry"]["mapped_file_size_commitlog"],
                "mappedFileSizeConsumeQueue": m["geometry"]["mapped_file_size_consume_queue"],
                "maxHashSlotNum": m["geometry"]["max_hash_slot_num"], "maxIndexNum": m["geometry"]["max_index_num"],
                "messageDelayLevel": m["geometry"]["message_delay_level"]}
    served_by = serve_check.serve("5.5.1", out, queries, settings=settings)
    assert served_by["loaded"] is True
    assert served_by["commitlog_max_offset"] == m["recovery"]["commitlog_max_offset"]       # the log ends at the cut
    answers = iter(served_by["answers"])
    for (topic, queue_id), q in want.items():
        bounds = next(answers)
        assert (bounds["min_offset"], bounds["max_offset"]) == (q["min_offset"], q["max_offset"]), topic
        served = [[x["physical_offset"] for x in next(answers)["messages"]]
                  for _ in range(q["min_offset"], q["max_offset"] + 1)]
        assert served == [[u[1]] for u in q["units"]] + [[]], topic


def test_a_torn_lmq_store_keeps_rocketmqs_own_lmq_files(tmp_path):
    """torn: a record's properties zeroed in the part of the log a restart does not dispatch again; RocketMQ's
    restart keeps its %LMQ% entries, which the log no longer names. The repair keeps those queues' own files (a
    rebuild would renumber them): every queue of the repaired copy has the bounds RocketMQ's restart gave."""
    from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
    from rocketstore_spark.store.discovery import discover
    torn = GOLDEN / "torn"
    plan = make_plan(str(torn / "store"), tmp_path / "plan")
    kept = [q["queue"] for a in plan["actions"] if a["action"] == "keep_queues" for q in a["queues"]]
    assert kept and all(q.startswith("consumequeue/%LMQ%") for q in kept)
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    bounds = store_queue_bounds(discover(str(tmp_path / "repaired"))[0], expired_min_is_max=True)
    assert {k: v for k, v in bounds.items() if v[1]} == \
        {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in manifest(torn)["recovery"]["queues"]}
