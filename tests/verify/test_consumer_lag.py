"""``verify.offsets.consumer_lag``: the consumer-offsets golden's groups were committed by the generator at
the positions their names say (in range, caught up, below min, beyond max, a topic that does not exist);
their status, lag and reset plans follow from RocketMQ's own queue bounds (the manifest)."""
from __future__ import annotations

import csv

import pytest

from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify.offsets import RESET_COLUMNS, consumer_lag, write_reset_plan
from tests.golden.goldens import BY_ID


@pytest.fixture(scope="module", params=["4.9.8/consumer-offsets", "5.5.1/consumer-offsets"])
def golden(request):
    g = BY_ID[request.param]
    return g, discover(str(g.store)), {(q["topic"], q["queue_id"]): q for q in g.manifest["queues"]}


def test_each_group_has_the_status_its_offsets_were_committed_for(golden):
    g, layouts, bounds = golden
    lag = consumer_lag(layouts)
    status = {x.consumer_group: set() for x in lag.lags}
    for x in lag.lags:
        status[x.consumer_group].add(x.status)
    assert status["golden_caught_up"] == {"caught_up"} and status["golden_beyond_max"] == {"beyond_max"}
    assert status["golden_below_min"] == {"below_min"} and status["golden_ghost"] == {"unknown_queue"}
    for x in lag.lags:
        if x.status == "caught_up":
            assert x.consumer_offset == bounds[(x.topic, x.queue_id)]["max_offset"] and x.lag == 0
        if x.status == "below_min":       # counted from the queue's min: the rest expired
            q = bounds[(x.topic, x.queue_id)]
            assert x.lag == q["max_offset"] - q["min_offset"] and x.expired == q["min_offset"] - x.consumer_offset
    assert {f.check for f in lag.findings} == {"offsets.below_min", "offsets.beyond_max", "offsets.unknown_queue"}


def test_one_group_and_its_plan(golden, tmp_path):
    g, layouts, bounds = golden
    lag = consumer_lag(layouts, "to-latest", group="golden_below_min")
    assert lag.lags and {x.consumer_group for x in lag.lags} == {"golden_below_min"}
    assert {f.evidence["consumer_group"] for f in lag.findings} == {"golden_below_min"}
    assert [(p["topic"], p["queue_id"], p["new_offset"]) for p in lag.plan] == \
        [(x.topic, x.queue_id, bounds[(x.topic, x.queue_id)]["max_offset"]) for x in lag.lags]
    as_broker = consumer_lag(layouts, group="golden_below_min").plan       # below min: moved up to the min
    assert [p["new_offset"] for p in as_broker] == [bounds[(p["topic"], p["queue_id"])]["min_offset"]
                                                     for p in as_broker]
    write_reset_plan(lag.plan, str(tmp_path / "plan.csv"))
    rows = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert tuple(rows[0]) == RESET_COLUMNS and [int(r["new_offset"]) for r in rows] == \
        [p["new_offset"] for p in lag.plan]
