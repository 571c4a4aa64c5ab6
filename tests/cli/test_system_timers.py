"""``rocketstore system timers`` on the timer golden stores: the pending timers RocketMQ's TimerMessageStore
would deliver (its own walk of its wheel, in the manifest), printed and as JSON."""
from __future__ import annotations

import json

from tests.cli.helpers import run
from tests.golden.timers import manifest, unpacked


def test_system_timers_lists_what_rocketmq_would_deliver(tmp_path):
    store = unpacked("crash", tmp_path)
    m = manifest("crash")
    r = run("system", "timers", store, "--messages", "--json")
    assert r.exit_code == 0
    (doc,) = json.loads(r.stdout)["stores"]
    assert [(t["timerlog_offset"], t["due_time"], t["real_queue_id"], t["uniq_key"]) for t in doc["timers"]] == \
        [(p["timerlog_offset"], p["slot_time_ms"], int(p["real_queue_id"]), p["uniq_key"]) for p in m["pending"]]
    assert doc["timercheck"] == m["timercheck"] and doc["timerlog_end"] == m["recovered_timerlog_end"]
    text = run("system", "timers", store).stdout
    assert f"{len(m['pending'])} timer(s) pending" in text
