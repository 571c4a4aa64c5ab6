"""The repair of a store with timers (plan action ``cut_timers``): the timer golden store after a crash with one
body byte of a pending timer's message flipped (RocketMQ's recovery ends the log at that record). The repaired
copy's TimerLog, wheel and timercheck follow the cut; the timers the cut loses are listed; and RocketMQ 5.5.1's
own TimerMessageStore, opened on the repaired copy, would deliver every timer below the cut and only those
(slow: a JVM)."""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from rocketstore_spark.lookup.timers import timers
from rocketstore_spark.recovery.apply import apply_plan
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.store.discovery import discover
from tests.golden.timers import manifest, rocketmq_view, unpacked

DAMAGED = 50            # the send whose record gets a flipped body byte: a timer pending at the crash


@pytest.fixture(scope="module")
def repaired(tmp_path_factory):
    base = tmp_path_factory.mktemp("timer-repair")
    store = unpacked("crash", base)
    m = manifest("crash")
    send = next(s for s in m["sends"] if s["i"] == DAMAGED)
    segment = store / "commitlog" / "00000000000000000000"
    data = bytearray(segment.read_bytes())
    body = data.index(f"golden message {DAMAGED} | ".encode(), send["physical_offset"])
    data[body] ^= 0xFF
    segment.write_bytes(bytes(data))
    plan = make_plan(str(store), base / "plan")
    apply_plan(base / "plan", output=base / "repaired")
    return base, store, plan, m, send["physical_offset"]


def below(m: dict, cut: int) -> list[dict]:
    return [p for p in m["pending"] if p["offset_py"] + p["size_py"] <= cut]


def test_the_cut_and_the_timers_it_loses(repaired):
    base, _, plan, m, cut = repaired
    assert plan["process_offset"] == cut
    act = next(a for a in plan["actions"] if a["action"] == "cut_timers")
    lost = pq.read_table(base / "plan" / act["lost_timers"]["file"]).to_pylist()
    assert [(t["timerlog_offset"], t["uniq_key"], t["real_queue_id"]) for t in lost] == \
        [(p["timerlog_offset"], p["uniq_key"], int(p["real_queue_id"])) for p in m["pending"]
         if p["offset_py"] + p["size_py"] > cut]
    first_gone = min(u["offset"] for u in m["timerlog_units"] if u["offset_py"] + u["size_py"] > cut)
    assert act["timerlog_end"] == first_gone
    t = timers(discover([str(base / "repaired")])[0])
    assert t.timerlog.units["offset"].to_pylist() == [u["offset"] for u in m["timerlog_units"] if u["offset"] < first_gone]
    assert t.unreadable.num_rows == 0
    assert [(r["timerlog_offset"], r["uniq_key"]) for r in t.pending.to_pylist()] == \
        [(p["timerlog_offset"], p["uniq_key"]) for p in below(m, cut)]


@pytest.mark.slow
def test_rocketmq_delivers_every_timer_below_the_cut_and_only_those(repaired, tmp_path):
    base, _, _, m, cut = repaired
    view = rocketmq_view(base / "repaired", tmp_path)
    assert view["loaded"] and view["commitlog_max_offset"] == cut
    assert all(p["message_found"] for p in view["pending"])
    assert [(p["timerlog_offset"], p["uniq_key"]) for p in view["pending"]] == \
        [(p["timerlog_offset"], p["uniq_key"]) for p in below(m, cut)]
