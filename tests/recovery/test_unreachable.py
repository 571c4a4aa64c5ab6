"""Messages a restart keeps in the CommitLog but that no queue reaches afterwards are data at risk (issue #26):
counted per queue, in the headline, exit 3, with the remedy. The stores are RocketMQ's own (goldens); what a
restart dispatches follows the recovery model checked against RocketMQ's restarts (test_recovery_goldens)."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from rocketstore_spark.codec.consumequeue import decode_entries, valid_mask
from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.report.recovery_text import recovery_in_words
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.layout import StoreMap
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID
from tests.store_files import copy_store

QUEUED = (0, 8)              # the manifests' transaction types: TRANSACTION_NOT_TYPE and COMMIT_TYPE get an entry


def without_queues(gid, tmp_path):
    store = copy_store(BY_ID[gid].store, tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.rmtree(store / "index")
    return store


def queued_per_queue(gid) -> Counter:
    return Counter((m["topic"], m["queue_id"]) for m in BY_ID[gid].messages if m["transaction_type"] in QUEUED)


def test_a_5_0_to_5_3_1_store_without_its_queues_keeps_every_message_unreadable(tmp_path):
    """5.0-5.3.1 start normally without dispatching (reput from the end): a store whose consumequeue/ is gone
    keeps its whole log, and no consumer can read any of it."""
    store = without_queues("5.1.4/clean", tmp_path)
    doc, _ = recovery_report(str(store))
    assert doc["lost"]["messages"] == 0 and doc["commitlog_bytes_cut"] == 0
    expected = queued_per_queue("5.1.4/clean")
    assert {(q["topic"], q["queue_id"]): q["messages"] for q in doc["unreachable"]["queues"]} == dict(expected)
    assert doc["unreachable"]["messages"] == sum(expected.values()) and harmful(doc)
    headline, sentences = recovery_in_words(doc)
    assert "where no consumer can read them" in headline and "Nothing" not in headline
    assert any("recheckReputOffsetFromCq=true" in s for s in sentences)
    result = run("recover", "report", store)
    assert result.exit_code == 3 and "UNREACHABLE" in result.stdout


@pytest.mark.parametrize("gid", ["4.9.8/clean", "5.3.3/clean", "5.5.1/clean"])
def test_releases_that_dispatch_the_log_again_leave_nothing_unreachable(tmp_path, gid):
    # without IndexFiles the store cannot show 5.3.2+ from 5.0: the operator names the release
    doc, _ = recovery_report(str(without_queues(gid, tmp_path)), options={"rocketmqVersion": BY_ID[gid].version})
    assert doc["unreachable"] == {"messages": 0, "first_physical_offset": None, "last_physical_offset": None,
                                  "topics": {}, "queues": [], "remedy": None}


@pytest.mark.parametrize("gid", ["4.9.8/cq-lag-clean", "5.5.1/cq-lag-clean"])
def test_lagging_queues_after_a_clean_start_leave_their_tail_unreachable(gid):
    """A clean start does not grow queues that lag behind the log before the dispatch start: their messages
    past the queue's last entry (the store's own ConsumeQueue files, which the clean start keeps) stay
    unreadable."""
    g = BY_ID[gid]
    doc, _ = recovery_report(str(g.store))
    ends = {}                                       # (topic, queue) -> end of its last entry on disk
    for topic, queue_id, queue_dir in discover(str(g.store))[0].files.queue_dirs():
        for path, _ in StoreMap.queue_files(queue_dir):
            entries = decode_entries(Path(path).read_bytes())
            valid = entries[valid_mask(entries)]
            if len(valid):
                ends[(topic, queue_id)] = int(valid["commit_log_offset"][-1]) + int(valid["size"][-1])
    below = doc["dispatch"]["from"]
    expected = Counter((m["topic"], m["queue_id"]) for m in g.messages
                       if m["transaction_type"] in QUEUED and m["physical_offset"] < below
                       and m["physical_offset"] >= ends.get((m["topic"], m["queue_id"]), -1))
    assert expected and {(q["topic"], q["queue_id"]): q["messages"] for q in doc["unreachable"]["queues"]} == \
        dict(expected)
