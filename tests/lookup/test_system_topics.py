"""The system topics' state (lookup.system_topics over rocketmq.system_topics) against what RocketMQ wrote:
delayed messages pending against the goldens' own queues and delayOffset.json, transactions and retries of the
goldens as the generator made them (tests/golden/generator: Writer.transaction, Writer.retry); what the
goldens lack — a pending, a put-back, a discarded transaction, batched op bodies, a dead letter — on a store
built with our encoder, expected values from the inputs built."""
from __future__ import annotations

import json
import shutil

import pytest

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.lookup import system_topics as lookup
from rocketstore_spark.rocketmq import system_topics as rules
from rocketstore_spark.store.discovery import discover
from tests.builders import write_segments
from tests.golden.goldens import BY_ID, GOLDENS, committed_offsets

CONFIG_GOLDENS = [g for g in GOLDENS if g.scenario == "consumer-offsets"]
CLEAN_GOLDENS = [g for g in GOLDENS if g.scenario == "clean"]


def ms(value) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


# ----------------------------------------------------------------------------------------------- expectations

def expected_pending_delayed(g, file_offsets: dict[int, int] | None = None) -> dict[tuple[int, int], int]:
    """(delay level, queue offset) -> due time (RocketMQ's tagsCode) of every SCHEDULE_TOPIC_XXXX record on disk
    at or after its level's offset: delayOffset.json as RocketMQ read it (config-manifest; none without one) or
    ``file_offsets``, moved into the queue's [min, max] as RocketMQ gave them (manifest), 0 for a level the file
    lacks."""
    if file_offsets is None:
        file_offsets = {int(k): v for k, v in g.config_manifest["delay_offsets"]["current"].items()} \
            if g.config_manifest else {}
    bounds = {q["queue_id"]: (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]
              if q["topic"] == "SCHEDULE_TOPIC_XXXX"}           # every queue with a message has bounds
    out = {}
    for m in g.messages:
        if m["topic"] != "SCHEDULE_TOPIC_XXXX":
            continue
        level = m["queue_id"] + 1
        lo, hi = bounds[m["queue_id"]]
        start = min(max(file_offsets.get(level, 0), lo), hi)
        if m["queue_offset"] >= start:
            out[(level, m["queue_offset"])] = m["tags_code"]
    return out


def expected_transactions(g) -> dict[str, tuple[str, int | None]]:
    """UNIQ_KEY -> (state, physical offset of the COMMIT record naming the half message) for every half message
    of the golden, the state from the generator's own rule (message i: committed when i % 50 == 7, rolled back
    when i % 50 == 17; its KEYS are tx-i)."""
    commits = {m["prepared_transaction_offset"]: m["physical_offset"] for m in g.messages
               if m["transaction_type"] == rules.COMMIT_TYPE}
    out = {}
    for m in g.messages:
        if m["topic"] == rules.HALF_TOPIC:
            i = int(m["keys"].removeprefix("tx-"))
            state = {7: "COMMITTED", 17: "ROLLED_BACK"}[i % 50]
            out[m["properties"]["UNIQ_KEY"]] = (state, commits.get(m["physical_offset"]))
    return out


def expected_retries(g) -> dict[int, tuple]:
    """physical offset -> (group, kind, original topic, reconsume times, origin message id, consumed) of every
    message of a %RETRY% or %DLQ% topic in the manifest; consumed from the committed offsets of its config."""
    offsets = committed_offsets(g) if (g.store / "config" / "consumerOffset.json").exists() else {}
    out = {}
    for m in g.messages:
        topic = m["topic"]
        if topic.startswith(("%RETRY%", "%DLQ%")):
            kind = "RETRY" if topic.startswith("%RETRY%") else "DLQ"
            group = topic.removeprefix("%RETRY%" if kind == "RETRY" else "%DLQ%")
            committed = offsets.get((group, topic, m["queue_id"]))
            out[m["physical_offset"]] = (group, kind, m["properties"].get("RETRY_TOPIC"), m["reconsume_times"],
                                         m["properties"].get("ORIGIN_MESSAGE_ID"),
                                         None if committed is None else m["queue_offset"] < committed[0])
    return out


# ----------------------------------------------------------------------------------------------------- goldens

@pytest.mark.parametrize("g", CONFIG_GOLDENS, ids=lambda g: g.id)
def test_pending_delayed_messages_are_those_at_or_after_rocketmqs_delivery_offset(g):
    (layout,) = discover(str(g.store))
    found = lookup.delayed(layout)
    pending = found.pending.to_pylist()
    assert {(r["delay_level"], r["queue_offset"]): ms(r["deliver_time"]) for r in pending} == \
        expected_pending_delayed(g)
    assert all(r["real_topic"] == "TopicTest" and r["delay_level"] <= 18 for r in pending)
    # the per-level table: the file's offsets and RocketMQ's own queue bounds, and the pending counts
    file_offsets = {int(k): v for k, v in g.config_manifest["delay_offsets"]["current"].items()}
    bounds = {q["queue_id"] + 1: (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]
              if q["topic"] == "SCHEDULE_TOPIC_XXXX"}
    levels = {r["delay_level"]: r for r in found.levels.to_pylist()}
    assert sorted(levels) == list(range(1, 19))
    for level, r in levels.items():
        assert r["file_offset"] == file_offsets.get(level)
        # RocketMQ's; a queue its store has not (5.x: no message of that level) the empty one findConsumeQueue makes
        assert (r["min_offset"], r["max_offset"]) == bounds.get(level, (0, 0))
        assert r["pending"] == sum(1 for (lv, _) in expected_pending_delayed(g) if lv == level)
    assert found.offsets_file == str(g.store / "config" / "delayOffset.json")


def test_pending_delayed_messages_of_a_5x_store_with_delivery_behind_and_ahead(tmp_path):
    """The 5.x goldens' delayOffset.json has every level delivered: a copy with a file of our own."""
    g = BY_ID["5.5.1/consumer-offsets"]
    store = tmp_path / "store"
    shutil.copytree(g.store, store)
    given = {1: 0, 2: 1, 18: 5}                 # level 18: past its queue's max 2, corrected down to it
    (store / "config" / "delayOffset.json").write_text(json.dumps({"offsetTable": {str(k): v for k, v in given.items()}}))
    (layout,) = discover(str(store))
    found = lookup.delayed(layout)
    expected = expected_pending_delayed(g, given)
    assert {(r["delay_level"], r["queue_offset"]): ms(r["deliver_time"]) for r in found.pending.to_pylist()} == expected
    assert expected and not any(level == 18 for level, _ in expected)
    levels = {r["delay_level"]: r for r in found.levels.to_pylist()}
    assert (levels[18]["file_offset"], levels[18]["delivery_offset"], levels[18]["pending"]) == (5, 2, 0)
    level3 = next(q for q in g.manifest["queues"] if q["topic"] == "SCHEDULE_TOPIC_XXXX" and q["queue_id"] == 2)
    assert levels[3]["file_offset"] is None and levels[3]["delivery_offset"] == level3["min_offset"] > 0   # from 0


@pytest.mark.parametrize("g", CLEAN_GOLDENS, ids=lambda g: g.id)
def test_golden_transactions_are_committed_or_rolled_back_as_the_generator_ended_them(g):
    (layout,) = discover(str(g.store))
    t, as_of = lookup.transactions(layout)
    rows = t.to_pylist()
    assert {r["transaction_id"]: (r["state"], r["commit_physical_offset"]) for r in rows} == expected_transactions(g)
    assert all(r["copies"] == 1 and r["pending_ms"] is None and r["producer_group"] == "golden_tx_group"
               and r["op_physical_offset"] is not None for r in rows)
    assert as_of == max(g.messages, key=lambda m: m["physical_offset"])["store_timestamp"]     # the last record


@pytest.mark.parametrize("g", [BY_ID["5.5.1/consumer-offsets"], BY_ID["4.9.8/clean"]], ids=lambda g: g.id)
def test_retry_messages_per_group_with_their_original_topic(g):
    (layout,) = discover(str(g.store))
    rows = [r for t in lookup.retries(layout) for r in t.to_pylist()]
    assert {r["physical_offset"]: (r["consumer_group"], r["kind"], r["original_topic"], r["reconsume_times"],
                                   r["origin_message_id"], r["consumed"]) for r in rows} == expected_retries(g)
    summary = lookup.retry_summary(lookup.retries(layout))
    assert sum(s.messages for s in summary) == len(expected_retries(g))


# --------------------------------------------------------------------------------------- a store of our own

T0 = 1_700_000_000_000
HALF_QUEUE_OFFSET = {"T1": 0, "T2": 1, "T6": 2, "T4": 3, "T3": 4, "T5": 5}       # first copies, in this order
CHECK_OFFSET = 6            # the check passed them all: T4 and T3 put back (offsets 6, 7), T5 and T6 discarded


def half(uid: str, t: int, check_times: int | None = None) -> Message:
    props = {"REAL_TOPIC": "Orders", "REAL_QID": "2", "TRAN_MSG": "true", "PGROUP": "pg", "UNIQ_KEY": uid,
             "KEYS": f"k-{uid}"}
    if check_times is not None:
        props["TRANSACTION_CHECK_TIMES"] = str(check_times)
    return Message(rules.HALF_TOPIC, b"half " + uid.encode(), store_timestamp=T0 + t, properties=props)


def op(body: bytes, t: int, tag: str = "d") -> Message:
    return Message(rules.OP_TOPIC, body, store_timestamp=T0 + t, properties={"TAGS": tag})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A store of transactions in every state, retries and a dead letter: (store path, physical offset of each
    message by name, the newest store time)."""
    root = tmp_path_factory.mktemp("system-topics") / "store"
    w = SegmentWriter(1 << 16)
    at = {}

    def add(name, m):
        at[name] = w.append(m)[0]
    for k, uid in enumerate(HALF_QUEUE_OFFSET):                     # half queue offsets 0..5
        add(f"half {uid}", half(uid, 10 + k))
    add("op T1 T2", op(b"0,1,", 20))                                # 5.x: a batch of offsets, comma-ended
    add("op junk", op(b"x,-1,+99999999999999999999,,", 21))        # names nothing
    add("copy T4", half("T4", 30, check_times=1))                   # half queue offset 6
    add("copy T3", half("T3", 31, check_times=1))                   # 7
    add("discarded T5", Message(rules.CHECK_MAX_TOPIC, b"half T5", store_timestamp=T0 + 32,
                                properties={"UNIQ_KEY": "T5", "TRANSACTION_CHECK_TIMES": "15"}))
    add("op other tag", op(b"7", 33, tag="x"))                      # not a removal: T3 stays pending
    add("retry 0", Message("%RETRY%cg", b"r0", reconsume_times=1, store_timestamp=T0 + 40,
                           properties={"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "M0"}))
    add("retry 1", Message("%RETRY%cg", b"r1", reconsume_times=2, store_timestamp=T0 + 41,
                           properties={"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "M1"}))
    add("dlq", Message("%DLQ%cg", b"d", reconsume_times=17, store_timestamp=T0 + 42,
                       properties={"RETRY_TOPIC": "Orders", "ORIGIN_MESSAGE_ID": "M2"}))
    # commits: T1 through its first half message, T4 through its put-back copy (the producer answered the check)
    add("commit T1", Message("Orders", b"half T1", queue_id=2, sys_flag=rules.COMMIT_TYPE, store_timestamp=T0 + 50,
                             prepared_transaction_offset=at["half T1"], properties={"UNIQ_KEY": "T1"}))
    add("commit T4", Message("Orders", b"half T4", queue_id=2, sys_flag=rules.COMMIT_TYPE, store_timestamp=T0 + 51,
                             prepared_transaction_offset=at["copy T4"], properties={"UNIQ_KEY": "T4"}))
    add("op T4", op(b"6", 52))                                      # 4.x: one offset
    write_segments(w, root / "commitlog")
    (root / "config").mkdir()
    (root / "config" / "consumerOffset.json").write_text(json.dumps({"offsetTable": {
        f"{rules.HALF_TOPIC}@{rules.TRANSACTION_GROUP}": {"0": CHECK_OFFSET}, "%RETRY%cg@cg": {"0": 1}}}))
    return root, at, T0 + 52


def test_transactions_in_every_state_on_a_store_of_our_own(built):
    root, offsets, newest = built
    (layout,) = discover(str(root))
    t, as_of = lookup.transactions(layout)
    assert as_of == newest
    rows = {r["transaction_id"]: r for r in t.to_pylist()}
    assert {k: r["state"] for k, r in rows.items()} == {
        "T1": "COMMITTED", "T2": "ROLLED_BACK", "T6": "DISCARDED", "T4": "COMMITTED", "T3": "PENDING",
        "T5": "DISCARDED"}
    assert list(rows) == list(HALF_QUEUE_OFFSET)                    # in the order of their first half message
    assert {k: r["half_queue_offset"] for k, r in rows.items()} == HALF_QUEUE_OFFSET
    assert rows["T1"]["commit_physical_offset"] == offsets["commit T1"]
    assert rows["T1"]["op_physical_offset"] == rows["T2"]["op_physical_offset"] == offsets["op T1 T2"]
    assert rows["T4"]["commit_physical_offset"] == offsets["commit T4"]
    assert rows["T4"]["op_physical_offset"] == offsets["op T4"]
    assert (rows["T4"]["copies"], rows["T4"]["last_half_queue_offset"], rows["T4"]["check_times"]) == (2, 6, 1)
    t3 = rows["T3"]
    assert (t3["copies"], t3["last_half_queue_offset"], t3["check_times"]) == (2, 7, 1)
    assert t3["pending_ms"] == newest - (T0 + 14)                  # its first half message, stored at T0 + 14
    assert (t3["producer_group"], t3["real_topic"], t3["real_queue_id"], t3["keys"]) == ("pg", "Orders", 2, ["k-T3"])
    assert all(r["pending_ms"] is None for k, r in rows.items() if k != "T3")


def test_retries_and_dead_letters_on_a_store_of_our_own(built):
    root, offsets, _ = built
    (layout,) = discover(str(root))
    rows = {r["physical_offset"]: r for t in lookup.retries(layout) for r in t.to_pylist()}
    assert {p: (r["consumer_group"], r["kind"], r["original_topic"], r["reconsume_times"], r["origin_message_id"],
                r["queue_offset"], r["consumed"]) for p, r in rows.items()} == {
        offsets["retry 0"]: ("cg", "RETRY", "Orders", 1, "M0", 0, True),
        offsets["retry 1"]: ("cg", "RETRY", "Orders", 2, "M1", 1, False),
        offsets["dlq"]: ("cg", "DLQ", "Orders", 17, "M2", 0, None)}
    summary = {(s.kind, s.original_topic): s for s in lookup.retry_summary(lookup.retries(layout))}
    assert (summary[("RETRY", "Orders")].messages, summary[("RETRY", "Orders")].unconsumed) == (2, 1)
    assert (summary[("DLQ", "Orders")].messages, summary[("DLQ", "Orders")].max_reconsume_times) == (1, 17)


def test_op_bodies_are_read_as_rocketmq_splits_and_parses_them():
    import pyarrow as pa
    t = pa.table({"topic": [rules.OP_TOPIC] * 4, "queue_id": pa.array([0, 1, 0, 0], pa.int32()),
                  "queue_offset": [0, 0, 1, 2], "physical_offset": [10, 20, 30, 40],
                  "store_timestamp": pa.array([0, 0, 0, 0], pa.timestamp("us", tz="UTC")),
                  "tags": ["d", "d", "d", None],
                  "body": pa.array([b"3,4,", b"+5", b"\xff,9223372036854775807,7 ,-2,8", b"1"], pa.binary())})
    removals = rules.op_removals(t)
    # Long.parseLong: a sign, ASCII digits, in range; invalid UTF-8, spaces and negatives name nothing; no tag d: no op
    named = list(zip(removals["queue_id"].to_pylist(), removals["half_queue_offset"].to_pylist(),
                     removals["op_physical_offset"].to_pylist()))
    assert named == [(0, 3, 10), (0, 4, 10), (1, 5, 20), (0, (1 << 63) - 1, 30), (0, 8, 30)]
