"""A store without its newest segment: the last segment left ends with the BLANK RocketMQ wrote as it rolled
over to the missing one (``commitlog.missing_next_segment``). RocketMQ's recovery, clean or after a crash, ends
the log at that BLANK and appends the next message over it; the slow cases show it on real RocketMQ."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.store.records import read_table
from tests.golden import serve_check
from tests.verify.test_verify_properties import build

SEGMENT = 2048
GEOMETRY = {"mappedFileSizeCommitLog": SEGMENT, "mappedFileSizeConsumeQueue": 80, "maxHashSlotNum": 4,
            "maxIndexNum": 16}


def store_without_its_newest_segment(tmp_path, release: str, crashed: bool):
    """Five 2 KiB segments of 40 messages, the fifth deleted (ConsumeQueues and IndexFiles still point into
    it). Returns (store, options, physical offset of the fourth segment's BLANK)."""
    msgs = [Message(topic="T", body=bytes([65 + i % 26]) * 100, queue_id=i % 2,
                    store_timestamp=1_795_000_000_000 + 1000 * i, born_timestamp=1_795_000_000_000 + 1000 * i - 5,
                    properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"},
                    trailing_separator=not release.startswith("4"))
             for i in range(40)]
    store, options = build(tmp_path, {"messages": msgs, "segment_size": SEGMENT, "cq_entries": 4, "slots": 4,
                                      "index_num": 16, "release": release})
    segments = sorted((store / "commitlog").iterdir())
    assert len(segments) == 5
    segments[-1].unlink()
    data, at = segments[-2].read_bytes(), 0
    while int.from_bytes(data[at + 4:at + 8], "big", signed=True) != -875286124:        # BLANK_MAGIC_CODE
        at += int.from_bytes(data[at:at + 4], "big")
    if crashed:
        (store / "abort").write_bytes(b"")
    return store, options, int(segments[-2].name) + at


@pytest.mark.parametrize("crashed", [False, True])
def test_the_report_ends_the_log_at_the_blank_and_the_reader_says_why(tmp_path, crashed):
    store, options, blank = store_without_its_newest_segment(tmp_path, "4.9.8", crashed)
    doc, _ = recovery_report(str(store), options=options)
    assert doc["process_offset"] == blank and doc["lost"]["messages"] == 0
    _, findings = read_table(store, columns=("topic",))
    assert [(f.check, f.file_position) for f in findings] == [("commitlog.missing_next_segment", blank % SEGMENT)]


@pytest.mark.slow
@pytest.mark.parametrize("release,crashed", [("4.9.8", False), ("4.9.8", True), ("5.5.1", False), ("5.5.1", True)])
def test_real_rocketmq_ends_the_log_at_the_blank(tmp_path, release, crashed):
    store, options, blank = store_without_its_newest_segment(tmp_path, release, crashed)
    doc, _ = recovery_report(str(store), options=options)
    copy = tmp_path / "copy"
    shutil.copytree(store, copy)
    served = serve_check.serve(release, copy, [], GEOMETRY, in_place=True)
    assert served["loaded"] and served["commitlog_max_offset"] == doc["process_offset"] == blank
    assert [f for f in served["files_deleted"] if f.startswith("commitlog/")] == []
