"""Damage a crash recovery skips but a later clean start walks (``later_starts`` of the recovery report).

A crash recovery starts where the checkpoint allows (4.9.x: the newest segment stored before the checkpoint's
minimum), so a bad body two segments back is not read: the log keeps everything. The broker's next clean
start walks the last three segments (4.9.x, 5.0-5.3.1), meets the bad body and cuts the log there, deleting
the segments after it. The report says so, the repair cuts there at once (after exporting what it loses) so
that every later start is clean, and the slow cases show both against real RocketMQ: a crash recovery of a
copy, then a clean restart of what it left.
"""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.recovery.apply import apply_plan
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.recovery.report import final_process_offset, harmful, recovery_report
from rocketstore_spark.report.recovery_text import recovery_in_words
from tests.golden import serve_check
from tests.verify.test_verify_properties import build

SEGMENT = 2048
GEOMETRY = {"mappedFileSizeCommitLog": SEGMENT, "mappedFileSizeConsumeQueue": 80, "maxHashSlotNum": 4,
            "maxIndexNum": 16}


def crashed_store(tmp_path, release: str, damaged_segment: int):
    """Five 2 KiB segments of 40 messages a second apart, one body byte of the second record of segment
    ``damaged_segment`` flipped, an abort file and a checkpoint as of the last record. Returns (store,
    options, the flipped record's physical offset, the physical offset of every record)."""
    msgs = [Message(topic="T", body=bytes([65 + i % 26]) * 100, queue_id=i % 2,
                    store_timestamp=1_795_000_000_000 + 1000 * i, born_timestamp=1_795_000_000_000 + 1000 * i - 5,
                    properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"},
                    trailing_separator=not release.startswith("4"))
             for i in range(40)]
    spec = {"messages": msgs, "segment_size": SEGMENT, "cq_entries": 4, "slots": 4, "index_num": 16,
            "release": release}
    store, options = build(tmp_path, spec)
    segments = sorted((store / "commitlog").iterdir())
    assert len(segments) == 5
    records = []
    for seg in segments:
        data, at = seg.read_bytes(), 0
        while at + 8 <= len(data) and int.from_bytes(data[at + 4:at + 8], "big", signed=True) == -626843481:
            records.append(int(seg.name) + at)
            at += int.from_bytes(data[at:at + 4], "big")
    seg = segments[damaged_segment]
    data = bytearray(seg.read_bytes())
    first_size = int.from_bytes(data[0:4], "big")
    data[first_size + first_size // 2] ^= 0x5A          # inside the second record's body
    seg.write_bytes(bytes(data))
    (store / "abort").write_bytes(b"")
    return store, options, int(seg.name) + first_size, records


@pytest.mark.parametrize("release", ["4.9.8", "5.1.4"])
def test_a_crash_recovery_that_skips_damage_is_followed_by_a_clean_start_that_cuts_there(tmp_path, release):
    store, options, flipped, records = crashed_store(tmp_path, release, damaged_segment=2)
    doc, _ = recovery_report(str(store), options=options)
    # the crash recovery starts in the last segment and keeps the whole log
    assert doc["start_file"] == f"{4 * SEGMENT:020d}" and doc["lost"]["messages"] == 0
    assert doc["commitlog_bytes_cut"] == 0
    later, = doc["later_starts"]
    assert later["start_file"] == f"{2 * SEGMENT:020d}" and "third-last" in later["start_reason"]
    assert later["process_offset"] == flipped and later["stop"]["reason"].startswith("BODYCRC")
    assert later["stop"] == {"file": f"commitlog/{2 * SEGMENT:020d}", "file_position": flipped - 2 * SEGMENT,
                             "reason": later["stop"]["reason"]}
    assert later["commitlog_files_deleted"] == [f"commitlog/{3 * SEGMENT:020d}", f"commitlog/{4 * SEGMENT:020d}"]
    assert later["lost"]["messages"] == sum(1 for phy in records if phy > flipped)
    assert harmful(doc) and final_process_offset(doc) == flipped
    headline, _ = recovery_in_words(doc)
    assert f"clean restart after it would cut the log and lose {later['lost']['messages']} valid messages" in headline
    # the repair cuts there now: the copy starts cleanly, and so does every start after it
    plan = make_plan(str(store), tmp_path / "plan", options=options)
    assert plan["process_offset"] == flipped
    assert plan["export"]["messages"] == later["lost"]["messages"]
    cut = next(a for a in plan["actions"] if a["action"] == "cut")
    assert (cut["file"], cut["at"]) == (later["stop"]["file"], later["stop"]["file_position"])
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    after, _ = recovery_report(str(tmp_path / "repaired"), options=options)
    assert after["process_offset"] == flipped and not harmful(after)


def test_damage_older_than_a_clean_start_walks_has_no_later_start(tmp_path):
    store, options, _, _ = crashed_store(tmp_path, "4.9.8", damaged_segment=0)
    doc, _ = recovery_report(str(store), options=options)
    assert doc["later_starts"] == [] and not harmful(doc)


def test_5_5_starts_cleanly_from_the_newest_valid_segment_and_never_reaches_the_damage(tmp_path):
    store, options, _, _ = crashed_store(tmp_path, "5.5.1", damaged_segment=2)
    doc, _ = recovery_report(str(store), options=options)
    assert doc["later_starts"] == [] and not harmful(doc)


@pytest.mark.slow
@pytest.mark.parametrize("release,damaged", [("4.9.8", 2), ("5.1.4", 2), ("5.5.1", 2), ("4.9.8", 0)])
def test_real_rocketmq_crash_recovery_then_a_clean_restart_end_where_the_report_says(tmp_path, release, damaged):
    store, options, _, _ = crashed_store(tmp_path, release, damaged)
    doc, _ = recovery_report(str(store), options=options)
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    crash = serve_check.serve(release, copy, [], GEOMETRY, in_place=True)
    assert crash["loaded"] and crash["commitlog_max_offset"] == doc["process_offset"]
    assert not (copy / "abort").exists()
    clean = serve_check.serve(release, copy, [], GEOMETRY, in_place=True)
    assert clean["commitlog_max_offset"] == final_process_offset(doc)
    deleted = sorted(f for f in clean["files_deleted"] if f.startswith("commitlog/"))
    assert deleted == sorted(f for later in doc["later_starts"] for f in later["commitlog_files_deleted"])
    # and the repaired copy: RocketMQ starts it cleanly, twice, ending where the plan said
    make_plan(str(store), tmp_path / "plan", options=options)
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    for _ in range(2):
        again = serve_check.serve(release, tmp_path / "repaired", [], GEOMETRY, in_place=True)
        assert again["commitlog_max_offset"] == final_process_offset(doc)
        assert [f for f in again["files_deleted"] if f.startswith(("commitlog/", "consumequeue/", "index/"))] == []
