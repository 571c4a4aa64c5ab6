"""Messages and bytes per topic over time (report.timeline), on stores our encoder writes with known store
times and on a golden store against RocketMQ's own walk of it (the manifest)."""
from __future__ import annotations

from collections import Counter

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.report.timeline import MAX_BUCKETS, bucket_width, topic_timeline
from rocketstore_spark.store.discovery import discover
from tests.builders import write_store
from tests.golden.goldens import all_goldens

T0 = 1_700_000_000_000


def test_bucket_width_is_the_narrowest_that_fits():
    assert bucket_width(T0, T0 + 11_999) == 100              # 12 s in 120 buckets of 100 ms
    assert bucket_width(T0, T0 + 12_000) == 250
    assert bucket_width(T0, T0 + 3_599_999) == 30_000          # an hour: 120 buckets of 30 s
    assert bucket_width(T0, T0 + 3_600_000) == 60_000          # one ms more needs a 121st
    assert bucket_width(T0, T0 + 400 * 86_400_000) == 7 * 86_400_000
    assert bucket_width(T0, T0 + 1000 * 86_400_000) == 9 * 86_400_000  # beyond 120 weeks: whole days


def test_counts_and_bytes_land_in_their_buckets(tmp_path):
    # store times 0, 0.05, 1.0, 2.5 and 9.99 s after T0; a clock step back to T0 - 5 s lands in the first bucket
    at = [(0, "a"), (50, "a"), (1_000, "b"), (2_500, "a"), (9_990, "b"), (-5_000, "b")]
    messages = [Message(topic=t, body=b"x" * (k + 1), store_timestamp=T0 + ms) for k, (ms, t) in enumerate(at)]
    placed = write_store(tmp_path / "commitlog", messages)
    [layout] = discover(str(tmp_path / "commitlog"))
    tl = topic_timeline(layout, T0, T0 + 9_990)
    assert tl.width_ms == 100 and tl.start_ms == T0
    sizes = [size for _, size in placed]
    want = Counter()
    for k, (ms, t) in enumerate(at):
        bucket = T0 + max(0, ms) // 100 * 100
        want[(t, bucket)] += 1
    got = {(r["topic"], r["bucket"]): r["messages"] for r in tl.series.to_pylist()}
    assert got == dict(want)
    bytes_of = {(r["topic"], r["bucket"]): r["bytes"] for r in tl.series.to_pylist()}
    assert bytes_of[("a", T0)] == sizes[0] + sizes[1] and bytes_of[("b", T0)] == sizes[5]
    assert tl.totals.to_pylist() == [
        {"topic": "a", "messages": 3, "bytes": sizes[0] + sizes[1] + sizes[3], "first_ms": T0, "last_ms": T0 + 2_500},
        {"topic": "b", "messages": 3, "bytes": sizes[2] + sizes[4] + sizes[5], "first_ms": T0 - 5_000,
         "last_ms": T0 + 9_990}]
    assert len({b for _, b in got}) <= MAX_BUCKETS
    # the top topic by messages (a tie: by name) kept, the other summed under a null topic
    folded = {(r["topic"], r["bucket"]): r["messages"] for r in tl.top_series(1).to_pylist()}
    assert folded == {(None if t == "b" else t, b): n for (t, b), n in want.items()}


def test_a_golden_store_per_topic_as_rocketmq_walked_it():
    g = next(g for g in all_goldens() if g.id == "4.9.8/corrupt-body")
    [layout] = discover(str(g.store))
    stamps = [m["store_timestamp"] for m in g.messages]
    tl = topic_timeline(layout, min(stamps), max(stamps))
    per_bucket = Counter((m["topic"], tl.start_ms + (m["store_timestamp"] - tl.start_ms) // tl.width_ms * tl.width_ms)
                         for m in g.messages)
    assert {(r["topic"], r["bucket"]): r["messages"] for r in tl.series.to_pylist()} == dict(per_bucket)
    size = Counter()
    for m in g.messages:
        size[m["topic"]] += m["total_size"]
    assert {r["topic"]: r["bytes"] for r in tl.totals.to_pylist()} == dict(size)
