"""DLedger stores: the ConsumeQueue and IndexFile checks against the log, and the rebuild of both from it, against
the files RocketMQ 5.5.1 wrote through DLedgerCommitLog (tests/golden/dledger-5.5.1: physical offsets entry pos +
48, sizes the records')."""
from __future__ import annotations

import os

import pytest

from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.verify.store import verify_store
from tests.cli.helpers import run
from tests.golden.goldens import GOLDEN_ROOT

ROOT = GOLDEN_ROOT / "dledger-5.5.1"


def files_under(d) -> dict[str, bytes]:
    return {os.path.relpath(os.path.join(p, f), d): open(os.path.join(p, f), "rb").read()
            for p, _, fs in os.walk(d) for f in fs}


@pytest.mark.parametrize("scenario", ["clean", "crash", "switched", "corrupt-record"])
def test_rocketmqs_own_queues_and_indexfiles_check_clean_against_the_log(scenario):
    v = verify_store(str(ROOT / scenario / "store"))
    assert [f.check for f in v.findings if f.check.startswith(("consumequeue.", "index."))] == []
    on_disk = sum(1 for _ in (ROOT / scenario / "store" / "consumequeue").glob("*/*"))
    assert len(v.queues) == on_disk and len(v.index) == len(os.listdir(ROOT / scenario / "store" / "index"))


def test_a_queue_entry_the_log_does_not_hold_is_found():
    """The corrupt-entry store: the reader passes over the record inside the bad entry (commitlog.bad_entry),
    so the queue entry RocketMQ wrote for it is one the log read does not hold."""
    v = verify_store(str(ROOT / "corrupt-entry" / "store"))
    assert [f.file_position for f in v.findings if f.check == "commitlog.bad_entry"] == [25949]
    found = [f for f in v.findings if f.check.startswith("consumequeue.")]
    assert found and any("(91533," in f.message for f in found)      # entry 170's record: pos 91485 + 48


@pytest.mark.parametrize("scenario", ["switched", "corrupt-record"])
def test_the_rebuild_writes_rocketmqs_files_byte_for_byte(scenario, tmp_path):
    """What the broker's dispatch wrote: every record to DLedger's committed end, no CRC (corrupt-record's bad
    body keeps its entry, as RocketMQ wrote it); the old commitlog/ of a switched store first."""
    store = ROOT / scenario / "store"
    result = rebuild_store(str(store), tmp_path / "out")
    assert {d.status for d in result.differences} == {"identical"}
    assert files_under(tmp_path / "out" / "consumequeue") == files_under(store / "consumequeue")
    mine, theirs = files_under(tmp_path / "out" / "index"), files_under(store / "index")
    assert [mine[k] for k in sorted(mine)] == [theirs[k] for k in sorted(theirs)]     # names: wall clock


def test_the_rebuild_command_exits_clean_when_it_matches(tmp_path):
    """The engine's note (store.partial_engine) is no problem of the store: exit 0 when every file matches."""
    r = run("rebuild", ROOT / "clean" / "store", "--output", tmp_path / "out")
    assert r.exit_code == 0, r.output
