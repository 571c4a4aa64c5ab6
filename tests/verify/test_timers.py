"""Verify's timer checks (verify.timers) on copies of the timer golden store: clean as RocketMQ wrote it; the
log cut below pending timers with the TimerLog left as it was; a unit naming a record that is no timer message;
a TimerLog unit overwritten in the middle. Every expected position comes from RocketMQ's own walk of the
TimerLog (the manifest), never from our output."""
from __future__ import annotations

import struct

import pytest

from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify.store import verify_store
from rocketstore_spark.verify.timers import check_timers
from tests.golden.timers import manifest, unpacked


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    return unpacked("crash", tmp_path_factory.mktemp("verify-timers")), manifest("crash")


def _findings(store, end=None):
    layout = discover([str(store)])[0]
    return check_timers(layout, layout.segments[-1].base_offset + layout.segments[-1].size if end is None else end)


def _unit_file(m, unit):
    f = max((f for f in m["timerlog_files"] if f["file_from_offset"] <= unit["offset"]),
            key=lambda f: f["file_from_offset"])
    return f["file"], unit["offset"] - f["file_from_offset"]


def test_the_golden_store_has_no_timer_findings(crash):
    store, m = crash
    assert _findings(store, m["commitlog_max_offset"]) == []


def test_units_past_the_end_of_a_cut_log(crash):
    store, m = crash
    cut = next(s for s in m["sends"] if s["i"] == 50)["physical_offset"]
    got = [f for f in _findings(store, cut) if "omitted" not in f.evidence]
    past = [u for u in m["timerlog_units"] if u["offset_py"] + u["size_py"] > cut]
    assert [(f.check, f.file, f.file_position, f.physical_offset) for f in got] == \
        [("timers.unit_past_log_end", "timerlog/" + _unit_file(m, u)[0], _unit_file(m, u)[1], u["offset_py"])
         for u in past][:len(got)]
    assert len(got) == min(len(past), 20)


def test_a_unit_naming_no_timer_message_and_a_bad_unit(tmp_path):
    m = manifest("crash")
    store = unpacked("crash", tmp_path)
    wrong, bad = m["timerlog_units"][3], m["timerlog_units"][-3]
    name, pos = _unit_file(m, wrong)
    with open(store / "timerlog" / name, "r+b") as f:      # offset_py -> a delivered copy in TimerTopic
        f.seek(pos + 28)
        f.write(struct.pack(">q", m["delivered"][0]["physical_offset"]))
    bad_name, bad_pos = _unit_file(m, bad)
    with open(store / "timerlog" / bad_name, "r+b") as f:   # magic with a bit above the low four
        f.seek(bad_pos + 12)
        f.write(struct.pack(">i", 0x10))
    v = verify_store(str(store))
    got = {(f.check, f.file, f.file_position) for f in v.findings if f.check.startswith("timers.")}
    # recovery truncates the TimerLog at the bad unit: the wheel file's slots whose chain ends at or after it
    # (RocketMQ's own reading of the file: the manifest) still point past its end
    stale = {("timers.slot_past_timerlog_end", "timerwheel", s["index"] * 32) for s in m["wheel_slots"]
             if s["last_pos"] >= bad["offset"] and s["time_ms"] >= m["recovered_curr_read_time_ms"]}
    assert stale
    assert got == {("timers.unit_not_timer_message", f"timerlog/{name}", pos),
                   ("timers.bad_unit", f"timerlog/{bad_name}", bad_pos)} | stale
