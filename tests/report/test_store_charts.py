"""The notebooks' figures (``report.store_charts``) hold the data they are given, folded and bucketed as their
docstrings say (pure functions: no Spark). The figures the notebooks actually show are checked against the golden
stores in tests/test_notebook.py."""
from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from rocketstore_spark.report import store_charts as sc
from rocketstore_spark.report.html_charts import TOP_TOPICS
from tests.golden.goldens import BY_ID


@pytest.mark.parametrize("value,bucket", [(0, 0), (1, 1), (2, 2), (3, 2), (4, 4), (1023, 512), (1024, 1024),
                                          (-1, -1), (-3, -2), (-4, -4), (4 * 1024 * 1024 - 1, 2 * 1024 * 1024)])
def test_log2_bucket(value, bucket):
    assert sc.log2_bucket(value) == bucket


def test_bucket_labels_say_the_range():
    assert [sc.bucket_label(b, "B") for b in (0, 1, 2, 512)] == ["0 B", "1 B", "2..3 B", "512..1,023 B"]
    assert sc.bucket_label(-4, "ms") == "-4..-7 ms"


def test_topic_mix_folds_the_topics_beyond_the_top():
    totals = [{"topic": f"t{k:02}", "messages": 100 - k, "bytes": 1000 - k} for k in range(TOP_TOPICS + 3)]
    fig = sc.topic_mix(list(reversed(totals)))
    messages, size = fig.data
    assert list(messages.y) == [f"t{k:02}" for k in range(TOP_TOPICS)] + ["3 other topics"]
    assert list(messages.x) == [100 - k for k in range(TOP_TOPICS)] + [sum(100 - k for k in range(TOP_TOPICS, 13))]
    assert list(size.x)[-1] == sum(1000 - k for k in range(TOP_TOPICS, 13))


def test_log2_histogram_of_the_golden_body_sizes():
    messages = BY_ID["5.5.1/clean"].messages
    rows = Counter((m["topic"], sc.log2_bucket(m["body_length"])) for m in messages)
    fig = sc.log2_histogram([{"topic": t, "bucket": b, "count": n} for (t, b), n in rows.items()], "B", "body size")
    drawn = {(trace.name, x): y for trace in fig.data for x, y in zip(trace.x, trace.y)}
    assert sum(drawn.values()) == len(messages)
    assert Counter({x: y for (_, x), y in drawn.items()}) <= Counter(
        sc.bucket_label(sc.log2_bucket(m["body_length"]), "B") for m in messages)
    # the buckets in value order on the axis, whichever topic shows one first
    order = list(fig.layout.xaxis.categoryarray)
    assert order == [sc.bucket_label(b, "B") for b in sorted({b for _, b in rows})]


def test_lost_per_queue_most_first():
    fig = sc.lost_per_queue([{"topic": "a", "queue_id": 0, "messages": 2, "first_queue_offset": 5,
                              "last_queue_offset": 6},
                             {"topic": "b", "queue_id": 3, "messages": 7, "first_queue_offset": 0,
                              "last_queue_offset": 6}])
    assert list(fig.data[0].y) == ["b / 3", "a / 0"] and list(fig.data[0].x) == [7, 2]


def test_lag_history_sums_each_group_per_snapshot():
    day = dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc)
    rows = [{"run_time": day + dt.timedelta(days=d), "consumer_group": g, "lag": lag}
            for d, g, lag in [(0, "g1", 5), (0, "g1", 3), (1, "g1", 20), (0, "g2", 1), (1, "g2", None)]]
    fig = sc.lag_history(rows)
    assert [(t.name, list(t.y)) for t in fig.data] == [("g1", [8, 20]), ("g2", [1, 0])]
    assert list(fig.data[0].x) == [day, day + dt.timedelta(days=1)]
