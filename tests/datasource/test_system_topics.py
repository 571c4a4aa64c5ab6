"""rocketmq_delayed_pending, rocketmq_transactions, rocketmq_retries in a real local session, against what
RocketMQ wrote (the goldens' manifests and config, as tests/lookup/test_system_topics.py derives it), several
stores in one read, and a column subset."""
from __future__ import annotations

import pytest

from tests.golden.goldens import BY_ID
from tests.lookup.test_system_topics import (expected_pending_delayed, expected_retries, expected_transactions,
                                             ms)

pytestmark = pytest.mark.spark


def test_delayed_pending_of_two_releases_in_one_read(spark):
    goldens = [BY_ID["4.9.8/consumer-offsets"], BY_ID["5.5.1/clean"]]      # 5.5.1/clean: no delayOffset.json
    rows = spark.read.format("rocketmq_delayed_pending").load(",".join(str(g.store) for g in goldens)).collect()
    for g in goldens:
        assert {(r.delay_level, r.queue_offset): ms(r.deliver_time) for r in rows if r.store == str(g.store)} == \
            expected_pending_delayed(g), g.id


def test_transactions_with_a_column_subset(spark):
    g = BY_ID["5.3.3/clean"]
    rows = spark.read.format("rocketmq_transactions").schema("transaction_id STRING, state STRING, "
                                                             "commit_physical_offset BIGINT").load(str(g.store)).collect()
    assert {r.transaction_id: (r.state, r.commit_physical_offset) for r in rows} == expected_transactions(g)


def test_retries(spark):
    g = BY_ID["5.5.1/consumer-offsets"]
    rows = spark.read.format("rocketmq_retries").load(str(g.store)).collect()
    assert {r.physical_offset: (r.consumer_group, r.kind, r.original_topic, r.reconsume_times, r.origin_message_id,
                                r.consumed) for r in rows} == expected_retries(g)


def test_an_unknown_option_is_refused_on_the_driver(spark):
    with pytest.raises(Exception, match="unknown option"):
        spark.read.format("rocketmq_retries").option("messageDelayLevels", "1s").load(
            str(BY_ID["5.5.1/clean"].store)).collect()
