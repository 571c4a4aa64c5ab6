"""The recovery report under broker settings other than the golden stores' equals RocketMQ's own recovery of a
copy with the same settings (issue #12: "for any valid broker configuration"): where the walk starts, where
the CommitLog ends, which files go, every queue's end, what is lost.

Marked ``slow``: each case runs RocketMQ (tests/golden/serve_check.py ``rocketmq_recover``: the golden
generator's ``recover`` with ``--setting name=value``); ``make test-fast`` skips them.
"""
from __future__ import annotations

import pytest

from rocketstore_spark.recovery.report import recovery_report
from tests.golden import serve_check
from tests.golden.goldens import BY_ID
from tests.recovery.test_recovery_goldens import deleted_files, lost_records, queue_ends, rocketmq_deleted_files

CASES = [
    # 5.5.x looks at most commitLogRecoverMaxNum segments back: from the last two the walk never reaches the
    # flipped record, and nothing is lost (with the default 10 it stops there and deletes two segments)
    ("5.5.1/corrupt-window", {"commitLogRecoverMaxNum": 2}),
    # without the body CRC check the flip is not seen: the whole log is kept
    ("4.9.8/corrupt-window", {"checkCRCOnRecover": False}),
]


@pytest.mark.slow
@pytest.mark.parametrize("gid,settings", CASES, ids=[f"{g}:{next(iter(s))}" for g, s in CASES])
def test_recovery_with_other_settings_is_rocketmqs(gid, settings):
    g = BY_ID[gid]
    rec = serve_check.rocketmq_recover(g.version, g.store, settings)
    doc = recovery_report(str(g.store), options=settings)[0]
    seen = rec["dispatched_during_load"]
    assert doc["start_file"] == f"{seen['first_physical_offset']:020d}"
    assert doc["process_offset"] == rec["commitlog_max_offset"] == seen["end_physical_offset"]
    assert deleted_files(doc) == rocketmq_deleted_files(rec)
    ours, theirs = queue_ends(doc, rec["queues"])
    assert ours == theirs
    assert doc["lost"]["messages"] == len(lost_records(g.records_on_disk, rec["commitlog_max_offset"]))
    # the setting changed RocketMQ's outcome: the golden manifest (default settings) ends elsewhere
    assert rec["commitlog_max_offset"] != g.manifest["recovery"]["commitlog_max_offset"]


def test_commit_log_recover_max_num_from_broker_conf(tmp_path):
    """The same setting read from a broker.conf. RocketMQ 5.5.1 itself (the slow case above) recovered
    corrupt-window with commitLogRecoverMaxNum=2 from segment 786,432 and kept the log to 787,915; with its
    default it walked from 262,144 and stopped at the flip (the manifest)."""
    g = BY_ID["5.5.1/corrupt-window"]
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=golden\ncommitLogRecoverMaxNum = 2\n")
    doc = recovery_report(str(g.store), broker_conf=str(conf))[0]
    assert doc["settings"]["commitLogRecoverMaxNum"] == 2
    assert (doc["start_file"], doc["process_offset"], doc["lost"]["messages"]) == ("00000000000000786432", 787915, 0)
    # 0 or less means RocketMQ's default of 10
    conf.write_text("commitLogRecoverMaxNum=0\n")
    assert recovery_report(str(g.store), broker_conf=str(conf))[0]["process_offset"] == \
        g.manifest["recovery"]["commitlog_max_offset"]


@pytest.mark.slow
def test_a_setting_the_release_lacks_is_refused_by_rocketmq():
    """``--setting`` reaches MessageStoreConfig by its setter: 4.9.8 has no commitLogRecoverMaxNum."""
    with pytest.raises(Exception, match="has no setting commitLogRecoverMaxNum"):
        serve_check.rocketmq_recover("4.9.8", BY_ID["4.9.8/crash"].store, {"commitLogRecoverMaxNum": 2})
