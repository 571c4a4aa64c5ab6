"""``report.inspect``: the document of a store shut down cleanly agrees with RocketMQ's own view of it (the
golden manifests: segments, queue bounds, checkpoint, shutdown state), and the queue bounds it and
``offsets`` use (``rocketmq.consumequeue.store_queue_bounds``) are RocketMQ's."""
from __future__ import annotations

import pytest

from rocketstore_spark.report.inspect import inspect_store, inspect_stores
from rocketstore_spark.report.text import utc_time
from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.store.discovery import discover
from tests.golden.goldens import BY_ID


@pytest.mark.parametrize("gid", ["4.9.8/consumer-offsets", "5.5.1/clean", "5.3.3/propcrc"])
def test_the_document_is_what_rocketmq_wrote(gid):
    g = BY_ID[gid]
    [layout] = discover(str(g.store))
    doc = inspect_store(layout)
    assert [(s["file"], s["base_offset"], s["records"], s["valid_end"]) for s in doc["segments"]] == \
        [(s["file"], s["base_offset"], s["records"], s["valid_end"]) for s in g.manifest["segments"]]
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]}
    for q in doc["queues"]:
        assert (q["min_offset"], q["max_offset"]) == theirs.get((q["topic"], q["queue_id"]), (0, 0)), q
        assert q["messages"] == q["max_offset"] - q["min_offset"] and q["files"] >= 1
    assert doc["abort_present"] == g.manifest["abort_present"]
    cp = g.manifest["checkpoint"]
    assert (doc["checkpoint"]["physic_msg_timestamp"], doc["checkpoint"]["index_msg_timestamp"]) == \
        (cp["physicMsgTimestamp"], cp["indexMsgTimestamp"])
    assert {i["file"] for i in doc["index_files"]} == {p.name for p in (g.store / "index").iterdir()}


def test_times_are_utc_to_the_millisecond_and_every_store_found_is_inspected():
    assert utc_time(None) is None and utc_time(0) == "1970-01-01 00:00:00.000"
    assert utc_time(1_700_000_000_123) == "2023-11-14 22:13:20.123"        # date -u -d @1700000000
    g = BY_ID["5.5.1/clean"]
    first = min(m["store_timestamp"] for m in g.messages if m["segment"] == g.manifest["segments"][0]["file"])
    docs = inspect_stores([g.store, BY_ID["4.9.8/clean"].store])
    assert [d["store"] for d in docs] == [str(g.store), str(BY_ID["4.9.8/clean"].store)]
    assert docs[0]["segments"][0]["first_store_time"] == utc_time(first)


def test_store_queue_bounds_are_rocketmqs_min_and_max_after_expiry():
    """consumer-offsets: RocketMQ's cleaner expired the oldest segment, so queue minimums moved up."""
    g = BY_ID["5.5.1/consumer-offsets"]
    [layout] = discover(str(g.store))
    ours = store_queue_bounds(layout)
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]}
    assert ours == {k: v for k, v in theirs.items() if k in ours or v != (0, 0)}
    assert any(lo > 0 for lo, _ in ours.values())
