"""The timer files (store.timers) and RocketMQ's restart and delivery rules on them (rocketmq.timers,
lookup.timers) against the timer golden stores: every TimerLog unit, wheel slot and timercheck field as
RocketMQ 5.5.1's own TimerLog / TimerWheel / TimerCheckpoint read them, its recover()'s processOffset,
currReadTimeMs and currQueueOffset, and the timers its dequeue would deliver (tests/golden/timers-5.5.1)."""
from __future__ import annotations

import numpy as np
import pytest

from rocketstore_spark.lookup.timers import timers
from rocketstore_spark.rocketmq import timers as rules
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.timers import (BLANK_MAGIC, UNIT_SIZE, read_timer_metrics, read_timercheck,
                                            read_timerlog, walk_timerlog_file)
from tests.golden.timers import SCENARIOS, manifest, unpacked


@pytest.fixture(scope="module", params=SCENARIOS)
def golden(request, tmp_path_factory):
    store = unpacked(request.param, tmp_path_factory.mktemp("timers"))
    return store, manifest(request.param), timers(discover([str(store)])[0])


def test_files_as_rocketmq_reads_them(golden):
    store, m, t = golden
    files = StoreMap.of_root(store)
    log = read_timerlog(files)
    assert log.units.drop_columns(["file", "position"]).to_pylist() == m["timerlog_units"]
    assert [(f.name, f.base_offset) for f in log.files] == [(f["file"], f["file_from_offset"]) for f in m["timerlog_files"]]
    assert read_timercheck(files).__dict__ == m["timercheck"]
    assert read_timer_metrics(files) == {"TimerTopic": m["timing_count"]}
    assert t.wheel.to_pylist() == m["wheel_slots"]


def test_recovery_and_pending_as_rocketmq(golden):
    _, m, t = golden
    assert t.recovered.process_offset == m["recovered_timerlog_end"]
    assert t.recovered.curr_read_time_ms == m["recovered_curr_read_time_ms"]
    assert t.resume_queue_offset == m["recovered_curr_queue_offset"]
    assert t.unreadable.num_rows == 0
    ours = [(r["source"], r["timerlog_offset"], int(r["due_time"].timestamp() * 1000), r["physical_offset"], r["size"],
             r["real_topic"], r["real_queue_id"], r["uniq_key"], r["timer_out_ms"], " ".join(r["keys"]))
            for r in t.pending.to_pylist()]
    theirs = [("timerlog", p["timerlog_offset"], p["slot_time_ms"], p["offset_py"], p["size_py"], p["real_topic"],
               int(p["real_queue_id"]), p["uniq_key"], int(p["timer_out_ms"]), p["keys"]) for p in m["pending"]]
    theirs += [("queue", None, int(q["timer_out_ms"]), q["offset_py"], None, None, None, q["uniq_key"],
                int(q["timer_out_ms"]), None) for q in m["queue_backlog"]]
    assert ours == theirs
    # what was sent, not delivered during the run and not cancelled is what is pending, each once
    delivered = {d["uniq_key"] for d in m["delivered"]}
    cancelled = {s["deletes"] for s in m["sends"] if s["deletes"]}
    assert cancelled and {c["uniq_key"] for c in m["cancelled"]} == cancelled
    assert sorted(r["uniq_key"] for r in t.pending.to_pylist()) == sorted(
        s["uniq_key"] for s in m["sends"] if s["uniq_key"] not in delivered | cancelled and not s["deletes"])


def test_recovery_revises_a_stale_wheel(golden):
    """With the wheel zeroed, recover() rebuilds the slots of the units it walks (from the checkpoint's flush
    position minus one file): those units come back, the older ones stay lost, as RocketMQ's own recovery."""
    store, m, _ = golden
    files = StoreMap.of_root(store)
    log = read_timerlog(files)
    rec = rules.recover(log, None, read_timercheck(files))
    begin = max(m["timercheck"]["last_timerlog_flush_pos"] - m["timerlog_file_size"], 0)
    first_file = max(f["file_from_offset"] for f in m["timerlog_files"] if f["file_from_offset"] <= begin)
    walked = [u for u in m["timerlog_units"] if u["offset"] >= first_file]
    units = rules.pending_units(rec)
    live = [u for u in walked if u["delayed_time_ms"] >= m["recovered_curr_read_time_ms"]]
    assert sorted(units["offset"].to_pylist()) == sorted(u["offset"] for u in live)


def test_walk_stops_as_recovery():
    unit = np.zeros(1, dtype=[("size", ">i4"), ("prev", ">i8"), ("magic", ">i4"), ("rest", "V36")])
    unit["size"], unit["prev"], unit["magic"] = UNIT_SIZE, -1, 1
    blank = np.array([(36, 0, BLANK_MAGIC)], dtype=[("s", ">i4"), ("z", ">i8"), ("m", ">i4")]).tobytes()
    data = unit.tobytes() * 2 + blank + bytes(20)
    units, end, why = walk_timerlog_file(data)
    assert (len(units), end, why) == (2, 104, "blank")
    units, end, why = walk_timerlog_file(unit.tobytes() + bytes(60))
    assert (len(units), end, why) == (1, 52, "end of log")
    bad = unit.copy()
    bad["magic"] = 0x10
    units, end, why = walk_timerlog_file(unit.tobytes() + bad.tobytes())
    assert (len(units), end, why) == (1, 52, "end of log")
    assert walk_timerlog_file(unit.tobytes() * 3)[1:] == (156, "end of file")
