"""A store written with an engine we do not read yet gets no recovery verdict, no plan, no repair and no rebuild
— a refusal naming the engine — and the audit reports the engine instead of checking the store as classic.
The stores are RocketMQ's own (goldens) with another engine's files beside them; the RocksDB database is the
one RocketMQ 5.5.1 wrote (``rocksdbstore/``)."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.recovery.apply import ApplyRefused, apply_plan
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.store.engines import UnsupportedStore
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID, GOLDEN_ROOT
from tests.store_files import copy_store, tree

CRASHED = BY_ID["5.5.1/corrupt-body"]


def switched_to_dledger(tmp_path):
    store = copy_store(CRASHED.store, tmp_path / "store")
    (store / "dledger-n0" / "data").mkdir(parents=True)
    return store


def test_no_plan_for_a_store_switched_to_dledger(tmp_path):
    """Its restart is the classic recovery of the old commitlog/ (DLedgerCommitLog without data files runs it):
    the same verdict as the store before the switch; a plan is refused."""
    store = switched_to_dledger(tmp_path)
    before = tree(store)
    doc, _ = recovery_report(str(store))
    classic, _ = recovery_report(str(CRASHED.store))
    assert "no data file yet" in doc["rocketmq_version"]
    assert (doc["process_offset"], doc["consumequeues"]) == (classic["process_offset"], classic["consumequeues"])
    with pytest.raises(UnsupportedStore, match="cannot repair the store: the store uses DLedger CommitLog"):
        make_plan(str(store), tmp_path / "plan")
    assert tree(store) == before
    assert not (tmp_path / "plan").exists()


def test_the_audit_reports_the_engine_and_checks_the_store(tmp_path):
    """A DLedger store's log, queues and IndexFiles are checked (here the old commitlog/: no entry yet;
    tests/rebuild/test_dledger_rebuild.py checks RocketMQ's own DLedger stores): as before the switch, with the
    engine's warning first."""
    store = switched_to_dledger(tmp_path)
    verdict = verify_store(str(store))
    classic = verify_store(str(CRASHED.store))
    assert verdict.findings[0].check == "store.partial_engine"
    assert "DLedger CommitLog" in verdict.findings[0].message
    assert (len(verdict.segments), len(verdict.queues), len(verdict.index)) == (
        len(classic.segments), len(classic.queues), len(classic.index))


def test_the_audit_of_a_dledger_store_finds_a_bad_entry():
    verdict = verify_store(str(GOLDEN_ROOT / "dledger-5.5.1" / "corrupt-entry" / "store"))
    (bad,) = [f for f in verdict.findings if f.check == "commitlog.bad_entry"]
    assert bad.file.endswith("dledger-n0/data/00000000000000065536") and bad.file_position == 25949


def test_rocksdb_queues_leave_the_log_checked_and_the_queues_alone(tmp_path):
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    shutil.rmtree(store / "consumequeue")
    shutil.copytree(store / "rocksdbstore", store / "consumequeue")
    verdict = verify_store(str(store))
    # the queues are read from RocksDB for the lag (tests/store/test_rocksdb.py): this database is 5.5's message
    # store, without the ConsumeQueue's column families, so it is unreadable as one — a finding naming it; the
    # engine itself is one we read (a warning naming what is refused), the damage is the error
    assert sorted(f.check for f in verdict.findings if f.severity == "error") == ["rocksdb.unreadable"]
    assert [f.check for f in verdict.findings if "RocksDB ConsumeQueue" in f.message] == ["store.partial_engine"]
    assert [f.file for f in verdict.findings if f.check == "rocksdb.unreadable"] == ["consumequeue"]
    assert sum(s.records for _, s in verdict.segments) == len(BY_ID["5.5.1/clean"].messages)
    assert verdict.queues == []


def test_an_engine_that_appears_after_the_plan_refuses_the_apply(tmp_path):
    store = copy_store(CRASHED.store, tmp_path / "store")
    make_plan(str(store), tmp_path / "plan")
    (store / "dledger-n0" / "data").mkdir(parents=True)
    with pytest.raises(ApplyRefused, match="DLedger CommitLog"):
        apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert not (tmp_path / "repaired").exists()


def test_broker_conf_naming_another_engine_refuses_the_verdict(tmp_path):
    store = copy_store(CRASHED.store, tmp_path / "store")
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerName=b\nstorePathCommitLog=/disk1/commitlog,/disk2/commitlog\n")
    with pytest.raises(UnsupportedStore, match="multi-path CommitLog"):
        recovery_report(str(store), broker_conf=str(conf))
