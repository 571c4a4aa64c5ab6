"""The recovery report of a DLedger store against what RocketMQ 5.5.1 (dledger 0.3.3.4) did when it reopened
the golden stores (tests/golden/dledger-5.5.1/*/manifest.json, written by DLedgerGolden from RocketMQ's own
views after load(): the ledger's begin/end/committed index and pos, getMaxOffset, getMaxOffsetInQueue,
getMinOffsetInQueue, the records its crash recovery dispatched, the files it deleted)."""
from __future__ import annotations

import hashlib
import json

import pytest

from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.report.recovery_text import render_recovery
from tests.golden.goldens import GOLDEN_ROOT

SCENARIOS = ("clean", "crash", "switched", "corrupt-entry", "corrupt-index", "corrupt-record")


def golden(scenario: str):
    root = GOLDEN_ROOT / "dledger-5.5.1" / scenario
    return json.loads((root / "manifest.json").read_text()), root / "store"


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_restart_is_rocketmqs(scenario):
    m, store = golden(scenario)
    doc, r = recovery_report(str(store))
    led, after = doc["dledger"], m["ledger_after_load"]
    assert doc["shutdown"] == ("abnormal" if m["abort_present"] else "normal")
    # DLedger's own recovery: where the ledger ends, what it keeps committed
    assert (led["begin_index"], led["end_index"], led["end_term"], led["committed_index"], led["committed_pos"],
            led["write_pos"]) == (after["ledgerBeginIndex"], after["ledgerEndIndex"], after["ledgerEndTerm"],
                                  after["committedIndex"], after["committedPos"], after["writePos"])
    assert doc["process_offset"] == after["writePos"] and led["committed_pos"] == m["commitlog_max_offset"]
    # DLedgerCommitLog's: every queue's bounds as getMaxOffsetInQueue / getMinOffsetInQueue gave them
    expected = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in m["queues"]}
    assert {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]} == expected
    # a crash walk dispatches what RocketMQ's did (past DLedger's end: its entry headers are not looked at)
    d, walk = m["dispatched_during_load"], doc["dledger_crash_walk"]
    if d["records"]:
        assert (walk["records"], walk["first_physical_offset"], walk["end_physical_offset"]) == (
            d["records"], d["first_physical_offset"], d["end_physical_offset"])
        # processOffset adds the records' sizes without their 48-byte headers
        assert walk["short_by"] == 48 * d["records"]
    else:
        assert walk is None
    # the files it deleted: IndexFiles newer than the checkpoint after a crash, data files past the end
    deleted = set(m["files_deleted"])
    assert set(doc["index_files_deleted"]) == {f for f in deleted if f.startswith("index/")}
    assert set(led["data_files_deleted"]) == {f for f in deleted if "/data/" in f}


def test_a_bad_entry_ends_the_ledger_and_its_entries_are_gone():
    m, store = golden("corrupt-entry")
    (cut,) = m["surgery"]
    doc, _ = recovery_report(str(store))
    led = doc["dledger"]
    assert doc["stop"]["file"] == cut["file"]
    assert doc["stop"]["file_position"] == cut["entry_pos"] - int(cut["file"].rsplit("/", 1)[1])
    assert led["stop_reason"] == "entry pos is not its position"
    crash, _ = golden("crash")
    # the index units after the last good entry: the crash store's entries RocketMQ no longer has
    assert led["entries_truncated"] == len(crash["entries"]) - len(m["entries"])
    # the records of those entries are lost (the one in the bad entry itself is passed over by our reader's
    # resync: entries_truncated counts it)
    gone = [e["pos"] + 48 for e in crash["entries"] if e["index"] > m["ledger_after_load"]["ledgerEndIndex"]]
    assert doc["lost"]["messages"] == len(gone) - 1
    assert (doc["lost"]["first_physical_offset"], doc["lost"]["last_physical_offset"]) == (gone[1], gone[-1])
    # queue entries RocketMQ kept below its short processOffset point past the end of what the log serves
    past = doc["queue_entries_past_log_end"]
    assert past["messages"] > 0 and past["first_physical_offset"] >= led["committed_pos"]
    maxes = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["queues"]}
    for q in past["queues"]:
        assert q["last_queue_offset"] < maxes[(q["topic"], q["queue_id"])]


def test_a_crash_drops_the_queue_entries_of_the_last_records():
    """The queue-entry drop quirk (docs/format/dledger.md): the entries cut are those the crash store's
    queues had and RocketMQ's restart no longer serves, their records still in the log (unreachable)."""
    m, store = golden("crash")
    clean, _ = golden("clean")
    doc, _ = recovery_report(str(store))
    short = {(q["topic"], q["queue_id"]): q["max_offset"] for q in clean["queues"]}
    dropped = {(q["topic"], q["queue_id"]): short[(q["topic"], q["queue_id"])] - q["max_offset"]
               for q in m["queues"] if short[(q["topic"], q["queue_id"])] != q["max_offset"]}
    assert dropped
    assert {(q["topic"], q["queue_id"]): q["messages"] for q in doc["unreachable"]["queues"]} == dropped
    assert doc["lost"]["messages"] == 0


def test_the_text_report_names_both_recoveries():
    _, store = golden("corrupt-entry")
    doc, _ = recovery_report(str(store))
    text = render_recovery(doc)
    assert "DLedger (dledger-n0): entries 0 .. 169" in text and "48 per record" in text
    assert "kept past the end of the log" in text


def test_an_index_unit_that_disagrees_is_rewritten_and_no_entry_is_lost():
    """corrupt-index: RocketMQ's restart keeps every entry (ledger end unchanged: the parametrised test above)
    and leaves the index file as it was before the flip — DLedger rewrote the units from the one that disagreed."""
    m, store = golden("corrupt-index")
    (flip,) = m["surgery"]
    doc, _ = recovery_report(str(store))
    assert doc["dledger"]["index_rewritten_from"] == flip["entry_index"]
    assert doc["dledger"]["entries_truncated"] == 0 and doc["lost"]["messages"] == 0
    data = bytearray((store / flip["file"]).read_bytes())
    data[flip["file_position"]] = flip["old"]
    (after,) = [f for f in m["files_after"] if f["path"] == flip["file"]]
    assert hashlib.sha256(bytes(data)).hexdigest() == after["sha256"]
