"""``rocketstore system delayed | transactions | retries``: the library's answers, printed and as JSON (the
answers themselves are checked against RocketMQ's goldens in tests/lookup/test_system_topics.py)."""
from __future__ import annotations

import json

from tests.cli.helpers import run
from tests.golden.goldens import BY_ID
from tests.lookup.test_system_topics import expected_pending_delayed, expected_retries, expected_transactions


def test_system_delayed_counts_per_level_and_lists_the_messages():
    g = BY_ID["4.9.8/consumer-offsets"]
    r = run("system", "delayed", g.store, "--messages", "--json")
    assert r.exit_code == 0
    (doc,) = json.loads(r.stdout)["stores"]
    expected = expected_pending_delayed(g)
    assert {(p["delay_level"], p["queue_offset"]): p["deliver_time"] for p in doc["pending"]} == expected
    assert {lv["delay_level"]: lv["pending"] for lv in doc["levels"] if lv["pending"]} == \
        {lv: sum(1 for (x, _) in expected if x == lv) for (lv, _) in expected}
    text = run("system", "delayed", g.store).stdout
    assert f"{len(expected)} delayed message(s)" in text and "delayOffset.json" in text


def test_system_transactions_and_retries():
    g = BY_ID["4.9.8/clean"]
    doc = json.loads(run("system", "transactions", g.store, "--all", "--json").stdout)["stores"][0]
    assert {t["transaction_id"]: t["state"] for t in doc["transactions"]} == \
        {k: state for k, (state, _) in expected_transactions(g).items()}
    assert doc["counts"]["PENDING"] == 0
    assert "0 pending" in run("system", "transactions", g.store).stdout
    doc = json.loads(run("system", "retries", g.store, "--json").stdout)["stores"][0]
    (group,) = doc["groups"]
    assert (group["consumer_group"], group["kind"], group["original_topic"], group["messages"]) == \
        ("golden_group", "RETRY", "TopicTest", len(expected_retries(g)))


def test_damage_met_while_reading_is_named_and_exits_3():
    """On a store whose last record was torn (half of it zeroed after RocketMQ wrote it), every ``system``
    command names the torn record — at the physical offset where RocketMQ's own manifest of the store it was
    copied from puts it — and exits 3: its answers may be missing what the damage hid. On the clean store, 0."""
    g = BY_ID["5.5.1/torn-tail"]
    (surgery,) = g.manifest["surgery"]
    torn = min(m["physical_offset"] for m in g.parent.messages
               if m["physical_offset"] + m["total_size"] > surgery["physical_offset"])
    for command in ("delayed", "transactions", "retries"):
        r = run("system", command, g.store, "--json")
        assert r.exit_code == 3, (command, r.output)
        (doc,) = json.loads(r.stdout)["stores"]
        assert [f["physical_offset"] for f in doc["findings"] if f["severity"] == "error"] == [torn], command
        text = run("system", command, g.store)
        assert text.exit_code == 3 and "what the reading met" in text.stdout and f"{torn:,}" in text.stdout
        assert run("system", command, g.parent.store, "--json").exit_code == 0
