"""rocketmq_timerlog, rocketmq_timerwheel, rocketmq_timers_pending in a real local session, against RocketMQ's
own reading of the timer golden stores (tests/golden/timers-5.5.1: TimerLog, TimerWheel, its dequeue's walk)."""
from __future__ import annotations

import pytest

from tests.golden.timers import manifest, unpacked

pytestmark = pytest.mark.spark


def test_timer_tables(spark, tmp_path):
    clean, crash = unpacked("clean", tmp_path), unpacked("crash", tmp_path)
    paths = f"{clean},{crash}"
    units = spark.read.format("rocketmq_timerlog").load(paths).collect()
    slots = spark.read.format("rocketmq_timerwheel").load(str(crash)).collect()
    pending = spark.read.format("rocketmq_timers_pending").schema(
        "store STRING, timerlog_offset BIGINT, due_time TIMESTAMP, real_topic STRING, uniq_key STRING").load(
        str(crash)).collect()
    for store, name in ((clean, "clean"), (crash, "crash")):
        m = manifest(name)
        assert sorted((u.offset, u.prev_pos, u.magic, u.delayed_time_ms, u.offset_py, u.size_py, u.topic_hash)
                      for u in units if u.store == str(store)) == \
            [(u["offset"], u["prev_pos"], u["magic"], u["delayed_time_ms"], u["offset_py"], u["size_py"],
              u["topic_hash"]) for u in m["timerlog_units"]]
    assert [(p.timerlog_offset, p.uniq_key, p.real_topic) for p in pending] == \
        [(p["timerlog_offset"], p["uniq_key"], p["real_topic"]) for p in manifest("crash")["pending"]]
    assert [(s["index"], s.time_ms, s.first_pos, s.last_pos, s.num) for s in slots] == \
        [(s["index"], s["time_ms"], s["first_pos"], s["last_pos"], s["num"]) for s in manifest("crash")["wheel_slots"]]
