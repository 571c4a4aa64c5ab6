"""Store engines other than the classic file store are told from their files (or broker.conf) and refused for
the work they would make wrong; RocketMQ's own classic stores (the goldens, 5.5.1's empty rocksdbstore/
included) are not. The RocksDB databases here are real ones: 5.5.1's ``rocksdbstore/`` as RocketMQ wrote it,
copied to where another engine keeps its database."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.engines import BATCH_ENGINE, BATCH_REFUSED, UnsupportedStore, Work, detect
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID, GOLDEN_ROOT, GOLDENS
from tests.store_files import copy_store

ROCKSDB = BY_ID["5.5.1/clean"].store / "rocksdbstore"          # a RocksDB database written by RocketMQ 5.5.1


@pytest.mark.parametrize("g", GOLDENS, ids=lambda g: g.id)
def test_rocketmqs_own_classic_stores_show_no_other_engine(g):
    layout = discover(str(g.store))[0]
    assert layout.engines.classic and not layout.engines.findings
    for work in Work:
        layout.refuse(work)


def classic(tmp_path):
    return copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")


def test_a_store_switched_to_dledger_reads_its_log_and_refuses_what_is_not_mirrored(tmp_path):
    """Switched, no entry written yet: the log is the old commitlog/ (as DLedgerCommitLog reads it), and so is
    its restart, checks and rebuild (tests/recovery/test_unsupported_engines.py); a repair is not mirrored (tests/store/test_dledger.py reads RocketMQ's own DLedger stores)."""
    store = classic(tmp_path)
    (store / "dledger-n0" / "data").mkdir(parents=True)
    layout = discover(str(store))[0]
    assert [f.check for f in layout.findings[:1]] == ["store.partial_engine"]
    assert len(layout.segments) == len(discover(str(BY_ID["5.5.1/clean"].store))[0].segments)
    for work in (Work.READ_COMMITLOG, Work.READ_QUEUES, Work.READ_CONFIG, Work.RECOVER, Work.CHECK_QUEUES,
                 Work.READ_INDEX, Work.REBUILD):
        layout.refuse(work)
    for work in (Work.REPAIR,):
        with pytest.raises(UnsupportedStore, match=r"DLedger CommitLog \(dledger-n0/ after a classic commitlog/"):
            layout.refuse(work)


def test_several_dledger_directories_refuse_everything(tmp_path):
    """Which self id is this broker's? Reading either would be a guess."""
    store = classic(tmp_path)
    for self_id in ("n0", "n1"):
        (store / f"dledger-{self_id}" / "data").mkdir(parents=True)
    layout = discover(str(store))[0]
    for work in Work:
        with pytest.raises(UnsupportedStore, match="one of 2 dledger-\\* directories"):
            layout.refuse(work)


def test_a_dledger_store_without_commitlog_is_a_store(tmp_path):
    store = tmp_path / "store"
    (store / "dledger-n1" / "data").mkdir(parents=True)
    (store / "dledger-n1" / "index").mkdir()
    layout = discover(str(store))[0]
    assert layout.segments == [] and [f.check for f in layout.findings] == ["store.partial_engine"]
    with pytest.raises(UnsupportedStore, match="cannot repair the store: the store uses DLedger"):
        layout.refuse(Work.REPAIR)


def test_rocksdb_consume_queues_refuse_queue_work_but_not_the_commitlog(tmp_path):
    store = classic(tmp_path)
    shutil.rmtree(store / "consumequeue")
    shutil.copytree(ROCKSDB, store / "consumequeue")
    layout = discover(str(store))[0]
    layout.refuse(Work.READ_COMMITLOG)
    layout.refuse(Work.READ_QUEUE_UNITS)       # read and recovered through store.rocksdb (tests/store/test_rocksdb.py)
    layout.refuse(Work.RECOVER)
    layout.refuse(Work.CHECK_QUEUES)
    for work in (Work.READ_QUEUES, Work.REBUILD, Work.REPAIR):
        with pytest.raises(UnsupportedStore, match="RocksDB ConsumeQueue"):
            layout.refuse(work)


def test_rocksdb_consume_queues_in_their_separate_directory(tmp_path):
    store = classic(tmp_path)
    shutil.copytree(ROCKSDB, store / "consumequeue_rocksdb")
    with pytest.raises(UnsupportedStore, match="useSeparateStorePathForRocksdbCQ"):
        discover(str(store))[0].refuse(Work.REBUILD)


@pytest.mark.parametrize("sub", ["consumerOffsets", "metadata", "topics", "subscriptionGroups", "rdb"])
def test_config_in_rocksdb_is_read_but_not_repaired(tmp_path, sub):
    # read as the broker's v1 and v2 RocksDB managers load it: tests/store/test_rocksdb_config.py, test_rocksdb.py
    store = classic(tmp_path)
    shutil.copytree(ROCKSDB, store / "config" / sub)
    layout = discover(str(store))[0]
    layout.refuse(Work.READ_OFFSETS)
    layout.refuse(Work.READ_CONFIG)
    with pytest.raises(UnsupportedStore, match=f"config/{sub}/"):
        layout.refuse(Work.REPAIR)


def test_5_5_message_rocksdb_counts_only_when_it_holds_data(tmp_path):
    store = classic(tmp_path)
    detect(store).refuse(Work.READ_INDEX)                   # as 5.5.1 creates it: empty
    wal = next((store / "rocksdbstore").glob("*.log"))
    wal.write_bytes(b"\x01" * 64)                           # a write-ahead log with records in it
    with pytest.raises(UnsupportedStore, match="rocksdbstore/ holds data"):
        detect(store).refuse(Work.READ_INDEX)
    detect(store).refuse(Work.READ_QUEUES)


def test_lmq_queues_are_an_engine_that_refuses_nothing(tmp_path):
    """%LMQ% queues (or enableLmq in broker.conf) are told and said (store.partial_engine), and every work
    follows them as RocketMQ dispatches them (#30): nothing is refused."""
    store = classic(tmp_path)
    queue = store / "consumequeue" / "%LMQ%orders" / "0"
    queue.mkdir(parents=True)
    layout = discover(str(store))[0]
    [f] = [f for f in layout.findings if f.check == "store.partial_engine"]
    assert "LMQ multi-dispatch (1 %LMQ% queue" in f.message and f.message.endswith("so refused: nothing")
    conf = detect(classic(tmp_path / "conf"), {"enableLmq": "true"})
    assert [e.name for e in conf.engines] == ["LMQ multi-dispatch"]
    for work in Work:
        layout.refuse(work)
        conf.refuse(work)


def test_batch_consume_queues_refuse_the_dispatch_checks(tmp_path):
    store = classic(tmp_path)
    (store / "batchconsumequeue" / "BatchTopic" / "0").mkdir(parents=True)
    with pytest.raises(UnsupportedStore, match="batch ConsumeQueue"):
        discover(str(store))[0].refuse(Work.REBUILD)


def test_a_batch_cq_store_reads_and_still_refuses_what_is_not_mirrored():
    # RocketMQ 5.5.1's own BatchCQ store: its log and units read; the queue checks and the rebuild are done by
    # the callers that allow the engine by name (verify.store, rebuild.output, spark.rebuild); the repair cuts
    # them (recovery.plan/apply: tests/recovery/test_repair_batchcq.py)
    from tests.store.test_batchconsumequeue import store as golden
    layout = discover(str(golden("clean")))[0]
    for work in (Work.READ_COMMITLOG, Work.READ_QUEUES, Work.READ_QUEUE_UNITS, Work.READ_CONFIG):
        layout.refuse(work)
    layout.refuse(Work.CHECK_QUEUES, frozenset({BATCH_ENGINE}))
    layout.refuse(Work.REBUILD, frozenset({BATCH_ENGINE}))
    layout.refuse(Work.REPAIR)
    for work in (Work.CHECK_QUEUES, Work.REBUILD):
        with pytest.raises(UnsupportedStore, match="batch ConsumeQueue"):
            layout.refuse(work)
    [f] = [f for f in layout.findings if f.check.endswith("_engine")]
    assert f.check == "store.partial_engine" and f.severity.value == "warning"
    assert "`rocketstore rebuild` writes batchconsumequeue/" in f.message
    assert f.message.endswith("so refused: " + BATCH_REFUSED)


def test_an_unknown_entry_is_a_warning_that_refuses_nothing(tmp_path):
    store = classic(tmp_path)
    (store / "commitlog.old").mkdir()
    (store / "lost+found").mkdir()                          # a mount point's, and hidden files: not findings
    (store / ".built-by-bench").write_text("x")
    layout = discover(str(store))[0]
    unknown = [f for f in layout.findings if f.check == "store.unknown_entry"]
    assert [f.file for f in unknown] == [str(store / "commitlog.old")]
    assert layout.engines.classic
    for work in Work:
        layout.refuse(work)


@pytest.mark.parametrize("conf,engine,work", [
    ({"enableDLegerCommitLog": "true"}, "DLedger CommitLog", Work.READ_COMMITLOG),
    ({"storeType": "defaultRocksDB"}, "RocksDB ConsumeQueue", Work.READ_CONFIG),
    ({"indexRocksDBEnable": "true", "indexFileWriteEnable": "false"}, "RocksDB index", Work.READ_INDEX),
])
def test_broker_conf_names_engines_the_files_may_not_show_yet(tmp_path, conf, engine, work):
    store = classic(tmp_path)
    with pytest.raises(UnsupportedStore, match=engine):
        detect(store, conf).refuse(work)


def test_broker_conf_of_a_classic_broker_refuses_nothing(tmp_path):
    store = classic(tmp_path)
    engines = detect(store, {"storeType": "default", "storePathCommitLog": str(store / "commitlog"),
                             "indexRocksDBEnable": "true", "enableDLegerCommitLog": "false"})
    assert engines.classic


@pytest.mark.parametrize("store", ["rocksdb-5.5.1/clean/store", "dledger-5.5.1/clean/store"])
def test_an_engine_we_read_is_a_warning_naming_what_is_refused_not_a_problem(store):
    """RocketMQ's own RocksDB ConsumeQueue and DLedger stores: engines we read, so each is a store.partial_engine
    warning naming the work still refused (a repair), never the store.unsupported_engine error; alone, it makes
    no check exit 3 (a clean DLedger store verifies clean)."""
    from rocketstore_spark.findings import any_problem
    layout = discover(str(GOLDEN_ROOT / store))[0]
    engines = [f for f in layout.findings if f.check.endswith("_engine")]
    assert engines and {f.check for f in engines} == {"store.partial_engine"}
    assert all("so refused:" in f.message and "repair the store" in f.message for f in engines)
    assert not any_problem(engines)
    if store.startswith("dledger"):
        assert run("verify", GOLDEN_ROOT / store).exit_code == 0
