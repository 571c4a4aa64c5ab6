"""A repair keeps every queue's offsets and resets, only when asked, the consumer offsets past a queue's new end
(issue #26, items 5 and 8).

Expected values are RocketMQ's: the queue bounds after its own restart of each golden store (manifest
``queues``), the committed offsets as the broker wrote them (config/consumerOffset.json, read by the tests' own
fastjson reader), and real RocketMQ opening the repaired copies (slow)."""
from __future__ import annotations

import json

import pytest

from rocketstore_spark.recovery.apply import ApplyFailed, apply_plan
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.store.discovery import discover
from tests.cli.helpers import run
from tests.golden import serve_check
from tests.golden.goldens import BY_ID, fastjson_loads
from tests.recovery.test_apply import queue_entries
from tests.store_files import copy_store, tree

OFFSETS = [BY_ID[f"{v}/consumer-offsets"] for v in ("4.9.8", "5.1.4", "5.3.3", "5.5.1")]
QUEUED = (0, 8)


def rocketmq_bounds(g) -> dict[tuple[str, int], tuple[int, int]]:
    """Every queue's (min, max) after RocketMQ's own restart of the golden store; the empty queues its schedule
    service only looked up are left out (a store holds no file for them)."""
    return {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]
            if q["max_offset"]}


def repaired_bounds(root, g) -> dict[tuple[str, int], tuple[int, int]]:
    layout = discover(str(root))[0]
    bounds = store_queue_bounds(layout, expired_min_is_max=not g.version.startswith("4."))
    return {k: v for k, v in bounds.items() if v[1]}


def kept_queues(plan: dict) -> dict[str, dict]:
    """The queues a plan keeps RocketMQ's own files for: store-relative directory -> what the plan says."""
    return {q["queue"]: q for a in plan["actions"] if a["action"] == "keep_queues" for q in a["queues"]}


def queue_offset_field(store, g, m) -> tuple:
    """(segment file, byte position) of message ``m``'s QUEUEOFFSET (8 bytes, big-endian, at 20 in the record)."""
    seg = max((s for s in g.manifest["segments"] if s["base_offset"] <= m["physical_offset"]),
              key=lambda s: s["base_offset"])
    return store / "commitlog" / seg["file"], m["physical_offset"] - seg["base_offset"] + 20


def lower_queue_offset(store, g, m) -> None:
    """Message ``m``'s QUEUEOFFSET lowered by one in its record's header (which the body CRC does not cover)."""
    path, at = queue_offset_field(store, g, m)
    data = bytearray(path.read_bytes())
    assert int.from_bytes(data[at:at + 8], "big") == m["queue_offset"]
    data[at:at + 8] = (m["queue_offset"] - 1).to_bytes(8, "big")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("gid", [g.id for g in OFFSETS])
def test_a_queue_whose_messages_all_expired_keeps_its_offsets_in_the_repaired_copy(gid, tmp_path):
    """consumer-offsets: RocketMQ's cleaner deleted the first segment; SCHEDULE_TOPIC_XXXX queues whose only
    messages were there keep their offsets (queue 17 at 2). No record of the log is theirs: the repaired copy
    keeps their own ConsumeQueue files, and every queue has RocketMQ's min and max."""
    g = BY_ID[gid]
    before = tree(g.store)
    plan = make_plan(str(g.store), tmp_path / "plan")
    kept = kept_queues(plan)
    assert kept["consumequeue/SCHEDULE_TOPIC_XXXX/17"]["rebuilt"] is None          # nothing to rebuild it from
    receipt = apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert receipt["staged"]["kept_queues"] == len(kept) and tree(g.store) == before
    assert repaired_bounds(tmp_path / "repaired", g) == rocketmq_bounds(g)
    # the recovery report of the store predicts the same min and max for every queue it keeps
    doc = recovery_report(str(g.store))[0]
    assert {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]
            if q["max_offset"]} == rocketmq_bounds(g)


def test_a_record_whose_queue_offset_its_consumequeue_does_not_hold_keeps_the_queues_own_files(tmp_path):
    """A QUEUEOFFSET lowered by one in a record's header in the part of the log a restart does not dispatch
    again: RocketMQ's restart keeps its own entries there, while ConsumeQueues rebuilt from the log would skip
    that record as a duplicate and move every later entry of the queue down by one. The repair keeps the
    queue's own files instead: every queue has RocketMQ's offsets, the entries are RocketMQ's."""
    g = BY_ID["5.5.1/clean"]
    store = copy_store(g.store, tmp_path / "store")
    m = mutated_message(g)
    lower_queue_offset(store, g, m)
    result = run("recover", "plan", store, "--output", tmp_path / "plan", "--json")
    assert result.exit_code == 0, result.output
    rel = f"consumequeue/TopicTest/{m['queue_id']}"
    assert list(kept_queues(json.loads(result.stdout))) == [rel]
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert repaired_bounds(tmp_path / "repaired", g) == rocketmq_bounds(g)
    assert tree(tmp_path / "repaired" / rel) == tree(g.store / rel)


def mutated_message(g):
    end = g.manifest["recovery"]["commitlog_max_offset"]
    return next(m for m in g.messages if m["topic"] == "TopicTest" and m["transaction_type"] in QUEUED
                and m["queue_offset"] >= 2 and m["physical_offset"] < end // 2)


def test_a_renumbered_queue_the_restart_also_dispatches_into_is_refused_at_plan_time(tmp_path):
    """cq-lag-crash: the crash recovery dispatches the entries its ConsumeQueues lack; lowering a QUEUEOFFSET
    the files do hold makes the rebuild renumber that queue, and its own files cannot be kept (the restart adds
    to them). The plan refuses (exit 2, naming the queue) instead of promising what apply's gate would refuse."""
    g = BY_ID["5.1.4/cq-lag-crash"]
    doc = recovery_report(str(g.store))[0]
    unreachable = {(q["topic"], q["queue_id"]) for q in doc["unreachable"]["queues"]}
    q = next(q for q in doc["consumequeues"] if q["topic"] == "TopicTest" and q["entries_dispatched"]
             and not q["entries_moved"] and (q["topic"], q["queue_id"]) not in unreachable)
    held = q["max_offset_on_disk"]
    m = next(m for m in g.messages if (m["topic"], m["queue_id"]) == ("TopicTest", q["queue_id"])
             and 2 <= m["queue_offset"] < held - 1 and m["transaction_type"] in QUEUED
             and m["physical_offset"] >= g.manifest["commitlog"]["min_offset"])
    store = copy_store(g.store, tmp_path / "store")
    lower_queue_offset(store, g, m)
    before = tree(store)
    result = run("recover", "plan", store, "--output", tmp_path / "plan")
    assert result.exit_code == 2, result.output
    assert f"TopicTest/{q['queue_id']}" in result.output and "renumber" in result.output
    assert not (tmp_path / "plan" / "plan.json").exists() and tree(store) == before


def test_apply_refuses_a_copy_whose_queues_differ_from_the_plans_prediction(tmp_path):
    """The gate compares every queue the plan lists with the staged copy: a plan whose prediction the copy does
    not meet publishes nothing."""
    g = BY_ID["4.9.8/clean"]
    make_plan(str(g.store), tmp_path / "plan")
    path = tmp_path / "plan" / "plan.json"
    plan = json.loads(path.read_text())
    q = next(q for q in plan["queues"] if q["topic"] == "TopicTest")
    q["max_offset"] += 1
    path.write_text(json.dumps(plan))
    with pytest.raises(ApplyFailed, match=rf"renumber 1 queue\(s\) \(TopicTest/{q['queue_id']} "):
        apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert not (tmp_path / "repaired").exists() or not any((tmp_path / "repaired").iterdir())


def past_end(g) -> dict[tuple[str, str, int], tuple[int, int]]:
    """(group, topic, queue) -> (committed offset, RocketMQ's max after its restart) of every committed offset
    past its queue's end, from the file the broker wrote."""
    table = fastjson_loads((g.store / "config" / "consumerOffset.json").read_text())["offsetTable"]
    ends = {(q["topic"], q["queue_id"]): q["max_offset"] for q in g.manifest["queues"]}
    out = {}
    for key, per_queue in table.items():
        topic, group = key.split("@", 1)
        for queue_id, offset in per_queue.items():
            end = ends.get((topic, int(queue_id)))
            if end is not None and offset > end:
                out[(group, topic, int(queue_id))] = (offset, end)
    return out


def test_offsets_past_the_end_are_reset_only_when_asked_with_before_after_and_a_bak(tmp_path):
    g = BY_ID["5.5.1/consumer-offsets"]
    want = past_end(g)
    assert want
    config = g.store / "config"
    original = (config / "consumerOffset.json").read_bytes()

    # not asked: listed as an alternative, nothing rewritten
    plan = make_plan(str(g.store), tmp_path / "plain")
    assert not any(a["action"] == "reset_offsets" for a in plan["actions"])
    assert any("--reset-offsets-past-end" in a for a in plan["alternatives"])
    apply_plan(tmp_path / "plain", output=tmp_path / "kept")
    assert (tmp_path / "kept" / "config" / "consumerOffset.json").read_bytes() == original

    # asked: before and after per group and queue in the plan and its --json export
    result = run("recover", "plan", g.store, "--output", tmp_path / "plan", "--reset-offsets-past-end", "--json")
    assert result.exit_code in (0, 3), result.output
    [reset] = [a for a in json.loads(result.stdout)["actions"] if a["action"] == "reset_offsets"]
    assert {(o["consumer_group"], o["topic"], o["queue_id"]): (o["before"], o["after"]) for o in reset["offsets"]} \
        == want
    assert json.loads((tmp_path / "plan" / "plan.json").read_text())["actions"] == \
        json.loads(result.stdout)["actions"]
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    repaired = tmp_path / "repaired" / "config"
    # the file before kept as .bak, as the broker's ConfigManager.persist keeps it (MixAll.string2File)
    assert (repaired / "consumerOffset.json.bak").read_bytes() == original
    old, new = fastjson_loads(original.decode()), fastjson_loads((repaired / "consumerOffset.json").read_text())
    for (group, topic, queue_id), (_, end) in want.items():
        old["offsetTable"][f"{topic}@{group}"][str(queue_id)] = end
    assert new == old and '"0":' not in (repaired / "consumerOffset.json").read_text()     # fastjson's keys
    assert recovery_report(str(tmp_path / "repaired"))[0]["consumer_offsets_past_end"] == []
    assert (config / "consumerOffset.json").read_bytes() == original


@pytest.mark.slow
@pytest.mark.parametrize("gid", [g.id for g in OFFSETS])
def test_real_rocketmq_gives_the_repaired_queues_their_offsets(gid, tmp_path):
    """RocketMQ opens the repaired copy of consumer-offsets (load, start, dispatch caught up) and gives every
    queue the min and max offset it gave after its own restart of the store."""
    g = BY_ID[gid]
    make_plan(str(g.store), tmp_path / "plan")
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    want = rocketmq_bounds(g)
    queries = [{"op": "offsets", "topic": t, "queue_id": q} for t, q in want]
    answers = serve_check.serve(g.version, tmp_path / "repaired", queries, settings=g.settings)
    assert answers["loaded"] is True
    assert {k: (a["min_offset"], a["max_offset"]) for k, a in zip(want, answers["answers"])} == want


@pytest.mark.slow
def test_real_rocketmq_serves_a_kept_queue_as_it_served_the_store(tmp_path):
    """The repaired copy of a store with a lowered QUEUEOFFSET (the queue's own files kept): RocketMQ gives the
    queue its offsets and returns, at every one of them, the record it returned from the store."""
    g = BY_ID["5.5.1/clean"]
    store = copy_store(g.store, tmp_path / "store")
    m = mutated_message(g)
    lower_queue_offset(store, g, m)
    make_plan(str(store), tmp_path / "plan")
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    lo, hi = rocketmq_bounds(g)[("TopicTest", m["queue_id"])]
    # what the store's own ConsumeQueue holds at each offset (its record, where a topic re-created under its old
    # name restarted its QUEUEOFFSETs at 0, is not always the last one to carry that QUEUEOFFSET)
    want = {o: phy for o, (phy, _) in queue_entries(g.store)[("TopicTest", m["queue_id"])].items() if lo <= o < hi}
    assert sorted(want) == list(range(lo, hi))
    queries = [{"op": "offsets", "topic": "TopicTest", "queue_id": m["queue_id"]}] + \
        [{"op": "get", "topic": "TopicTest", "queue_id": m["queue_id"], "queue_offset": o, "max_msg_nums": 1}
         for o in sorted(want)]
    answers = serve_check.serve(g.version, tmp_path / "repaired", queries, settings=g.settings)
    bounds, *got = answers["answers"]
    assert (bounds["min_offset"], bounds["max_offset"]) == (lo, hi)
    assert [[x["physical_offset"] for x in a["messages"]] for a in got] == [[want[o]] for o in sorted(want)]
