"""Which storage engines a store was written with, told from its files (and from broker.conf where given), so
that nothing answers about a store it does not understand as if it were the classic file store.

RocketMQ chooses its engines in broker.conf; each leaves its own files under the store root
(``storePathRootDir``):

    classic (ours)     commitlog/<20 digits>, consumequeue/<topic>/<queue>/<20 digits>, index/<17 digits>,
                       checkpoint, abort, lock, config/*.json, consumequeue_ext/, compaction/, timerlog/,
                       timerwheel, rocksdbstore/ (5.5's message RocksDB, created empty by every 5.5 broker)
    DLedger            dledger-<selfId>/data/, index/, checkpoint          enableDLegerCommitLog=true (4.5+)
    RocksDB queues     consumequeue/CURRENT, MANIFEST-*, *.sst             storeType=defaultRocksDB (5.2+)
                       consumequeue_rocksdb/ instead                       + useSeparateStorePathForRocksdbCQ
    RocksDB config     config/topics/, consumerOffsets/, subscriptionGroups/ (RocksDB dirs; 5.x v1),
                       config/metadata/ (v1, useSingleRocksDBForAllConfigs), config/rdb/ (configManagerVersion=v2, 5.3.2+)
    RocksDB index      rocksdbstore/ holding data                          indexRocksDBEnable / transRocksDBEnable /
                                                                           timerRocksDBEnable (5.5)
    batch queues       batchconsumequeue/<topic>/<queue>/                  topic attribute queue.type=BatchCQ (5.0+)
    LMQ                consumequeue/%LMQ%<name>/0/                         enableLmq + enableMultiDispatch (4.9.3+)
    multi-path log     storePathCommitLog=dir1,dir2,...                    (4.9.2+; only broker.conf shows it;
                                                                           read as one log: store.multipath)

(paths from RocketMQ 5.5.1's ``StorePathConfigHelper``, ``MessageRocksDBStorage``, ``RocksDBConsumeQueueStore``,
the broker's ``RocksDB*ConfigManager`` and ``ConfigStorage``, and DLedger 0.3.3.4's ``DLedgerConfig``).

A DLedger store with one ``dledger-<selfId>/data/`` is read (``store.discovery``: the old ``commitlog/`` below
the divide, then the entries of the data files); its queues and config are classic files, checked and rebuilt
against that log; its restart is predicted (``rocketmq.dledger_recovery``). A repair stays refused.

The RocksDB ConsumeQueue and the RocksDB config — v1 and v2's ``config/rdb``: consumer offsets, topics,
subscription groups — are read (``store.rocksdb``, ``store.files``; the queue checks, the lag and the recovery
report follow them): only the work still not done on them is refused (reading ConsumeQueue files — queries,
exports and system-topic views by queue —, a rebuild, a repair).

BatchConsumeQueues (``batchconsumequeue/``, 5.x topics with ``queue.type=BatchCQ``) are read, rebuilt, checked
and their restart predicted in-process (``rebuild.output``, ``verify.store``, ``recovery.report`` allow the engine
by name: ``BATCH_ENGINE``), rebuilt and checked by the Spark jobs (``spark.rebuild``, ``spark.verify``)
and repaired (``recovery.plan``/``apply`` cut them with the log as RocketMQ 5.5.1's restart does); a
caller that does not allow the engine by name refuses them (``BATCH_REFUSED``: none left).

Until an engine is read as RocketMQ reads it, ``detect`` reports it (``store.unsupported_engine``, an error naming
the evidence and what is refused); an engine we do read, with some work still not mirrored — a DLedger
CommitLog, a RocksDB ConsumeQueue, the RocksDB config — is a ``store.partial_engine`` warning naming what
is read and what is refused. ``Engines.refuse`` stops the work either would get wrong — reading the CommitLog
of a DLedger store, taking queue bounds from ConsumeQueue files a RocksDB store does not use, a rebuild, a
repair, a recovery verdict — with a one-line ``UnsupportedStore`` error: a refusal, never a silent wrong
answer. Entries under the root that belong to no engine we know are ``store.unknown_entry`` warnings (a
backup copy, a file an operator left; hidden entries and ``lost+found`` are passed over) and refuse nothing. Listing and ``stat`` only; runs wherever a store is
discovered (driver, CLI).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from rocketstore_spark.findings import Finding, finding


class Work(Enum):
    """What a caller is about to do with a store (what an unsupported engine can make wrong)."""
    READ_COMMITLOG = "read the CommitLog"
    READ_QUEUES = "read the ConsumeQueue files"
    READ_QUEUE_UNITS = "read the queues' entries and bounds"      # files, or a RocksDB ConsumeQueue
    CHECK_QUEUES = "check the ConsumeQueues against the CommitLog"
    READ_INDEX = "check the IndexFiles"
    READ_CONFIG = "read the config tables (topics, subscription groups, delay offsets)"
    READ_OFFSETS = "read consumer offsets"
    REBUILD = "rebuild ConsumeQueues and IndexFiles"
    RECOVER = "predict a restart"
    REPAIR = "repair the store"


class UnsupportedStore(ValueError):
    """A store written with an engine we do not read yet, for work that engine would make wrong."""


@dataclass(frozen=True)
class Engine:
    """One engine found: its name, the evidence (files or settings), the work it makes wrong, and why (empty:
    an engine this release does not read)."""
    name: str
    evidence: str
    refuses: frozenset[Work]
    why: str = ""


_EVERYTHING = frozenset(Work)
_QUEUE_WORK = frozenset({Work.READ_QUEUES, Work.READ_QUEUE_UNITS, Work.CHECK_QUEUES, Work.REBUILD, Work.RECOVER,
                         Work.REPAIR})
_DISPATCH_WORK = frozenset({Work.CHECK_QUEUES, Work.REBUILD, Work.REPAIR})
# DLedger: the log is read through its entries (store.discovery, codec.commitlog's frame); the ConsumeQueues and
# config are classic files, checked against the log and rebuilt from it; the restart is predicted
# (rocketmq.dledger_recovery). A repair is refused (_DLEDGER_REPAIR).
_DLEDGER_WORK = _EVERYTHING - {Work.READ_COMMITLOG, Work.READ_QUEUES, Work.READ_QUEUE_UNITS, Work.READ_CONFIG,
                               Work.READ_OFFSETS, Work.RECOVER, Work.CHECK_QUEUES, Work.READ_INDEX, Work.REBUILD}
# a RocksDB ConsumeQueue is read (store.rocksdb: the rocketmq_consumequeue source, queue bounds, lag: the work
# that asks for READ_QUEUE_UNITS), checked against the CommitLog (verify.rocksdb_queues) and its restart
# predicted (rocketmq.rocksdb_recovery); whatever reads ConsumeQueue files (READ_QUEUES: queries and exports by
# queue, the system topics), a rebuild and a repair are not done yet
_DLEDGER_REPAIR = ("a repair would have to truncate DLedger's data files, index units and checkpoint together as "
                   "DLedgerMmapFileStore.recover does, and no such repair has been proven by reopening it in "
                   "RocketMQ; `rocketstore recover report` says what the broker's own restart will cut, and "
                   "`rocketstore export` saves the messages it would lose")
_ROCKSDB_QUEUE_WORK = frozenset({Work.READ_QUEUES, Work.REBUILD, Work.REPAIR})
_ROCKSDB_QUEUE_READS = ("queues, their bounds, their check and RocksDB mode's recovery read from RocksDB (read-only); "
                        "`rocketstore rebuild` writes classic files and the differences against the database")

BATCH_ENGINE = "batch ConsumeQueue"
#: an engine we read (its finding the store.partial_engine warning: a clean BatchCQ store verifies clean); done
#: in-process (rebuild.output.rebuild_store, verify.store, recovery.report allow the engine by name): the rebuild
#: writes batchconsumequeue/ beside consumequeue/, verify checks both (the BatchCQ topics' records are not
#: expected in consumequeue/), the recovery report follows RocketMQ 5.5.1's restart of both
#: (rocketmq.batch_recovery), the Spark rebuild and verify jobs do the same (spark.rebuild, spark.verify)
#: and the repair cuts batchconsumequeue/ with the log as that restart does (recovery.plan's
#: cut_batch_queues)
_BATCH_QUEUE_READS = ("units read (rocketmq_batchconsumequeue), inner batches unwrapped (rocketmq option unwrapBatches); "
                      "`rocketstore rebuild` writes batchconsumequeue/ for the BatchCQ topics and consumequeue/ for the "
                      "others, `rocketstore verify` and `audit` check both (batchcq.*, queue.*), `rocketstore recover "
                      "report` follows RocketMQ's restart of both, `recover plan`/`apply` cut batchconsumequeue/ "
                      "with the log as that restart does; the Spark rebuild and verify jobs do the same")
_BATCH_WHY = ("a caller that does not follow batchconsumequeue/ would expect the BatchCQ topics' records in "
              "consumequeue/; `rocketstore rebuild`, `verify`, `audit`, `recover report`, `recover plan`/`apply` "
              "and the Spark rebuild and verify jobs follow these queues")
BATCH_REFUSED = "nothing"
#: the work a caller that does not allow BATCH_ENGINE by name refuses (every caller here allows it)
_BATCH_REFUSES = frozenset({Work.CHECK_QUEUES, Work.REBUILD, Work.RECOVER})

# what every entry of a classic store root is (anything else is store.unknown_entry)
KNOWN_ROOT_ENTRIES = frozenset({
    "commitlog", "consumequeue", "consumequeue_ext", "index", "checkpoint", "abort", "abort.bak", "lock",
    "config", "compaction", "timerlog", "timerwheel", "rocksdbstore", "batchconsumequeue", "consumequeue_rocksdb",
    "transaction",
})
# what a file system or a person puts beside a store without being part of it: not worth a finding (hidden
# entries — a dot file — are passed over too)
NOT_STORE_ENTRIES = frozenset({"lost+found"})
# the RocksDB config databases: what each holds, and how store.rocksdb reads it (store.files: consumer offsets,
# topics, groups as the broker's v1 RocksDB managers load them, merge with a newer JSON file included, and as
# the v2 managers load config/rdb); a repair stays refused on all of them
KNOWN_CONFIG_DIRS = {
    "topics": ("topics", "topics read from RocksDB, as RocksDBTopicConfigManager loads them"),
    "consumerOffsets": ("consumer offsets",
                        "consumer offsets read from RocksDB, as RocksDBConsumerOffsetManager loads them"),
    "subscriptionGroups": ("subscription groups", "subscription groups and their forbidden bits read from RocksDB, "
                                                  "as RocksDBSubscriptionGroupManager loads them"),
    "rdb": ("every config table (v2)", "consumer offsets, topics and subscription groups read from RocksDB, as the "
                                       "v2 managers (configManagerVersion=v2) load them"),
    "metadata": ("every config table (useSingleRocksDBForAllConfigs)",
                 "consumer offsets, topics and subscription groups read from RocksDB, as the v1 RocksDB managers "
                 "load them with useSingleRocksDBForAllConfigs"),
}


def is_rocksdb(path: Path) -> bool:
    """Whether ``path`` is a RocksDB database directory (its CURRENT file names the live MANIFEST)."""
    return path.is_dir() and (path / "CURRENT").is_file()


def _holds_data(db: Path) -> bool:
    """Whether a RocksDB directory holds any key: a table file, or a write-ahead log that is not empty."""
    try:
        with os.scandir(db) as entries:
            for e in entries:
                if e.name.endswith(".sst") or (e.name.endswith(".log") and e.is_file() and e.stat().st_size > 0):
                    return True
    except OSError:
        return True                     # unreadable: it cannot be shown empty
    return False


def _truthy(conf: dict[str, str], key: str) -> bool:
    return str(conf.get(key, "")).strip().lower() == "true"


@dataclass
class Engines:
    """The engines of one store, and the findings that say so."""
    root: Path | None
    engines: list[Engine] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def classic(self) -> bool:
        return not self.engines

    def refused(self, work: Work) -> list[Engine]:
        return [e for e in self.engines if work in e.refuses]

    def refuse(self, work: Work, allow: frozenset[str] = frozenset()) -> None:
        """Raise ``UnsupportedStore`` when an engine of this store makes ``work`` wrong (``allow``: names of
        engines the caller handles itself)."""
        blocking = [e for e in self.refused(work) if e.name not in allow]
        if blocking:
            where = f"{self.root}: " if self.root is not None else ""
            unread = [e for e in blocking if not e.why]
            raise UnsupportedStore(
                f"{where}cannot {work.value}: the store uses "
                + "; ".join(f"{e.name} ({e.evidence}{': ' + e.why if e.why else ''})" for e in blocking)
                + (", on which rocketstore-spark does not do that yet; refusing rather than answering as if the "
                   "store were RocketMQ's classic file store" if unread else "; refused"))

    def add(self, name: str, evidence: str, refuses: frozenset[Work], file: Path | str, reads: str | None = None,
            read: bool = False, why: str = "", still: str | None = None) -> None:
        """One engine found; ``reads``: what this release does read of it (None: nothing); ``read``: an engine
        we read correctly (its finding the ``store.partial_engine`` warning naming what is still refused; else
        the ``store.unsupported_engine`` error: what we cannot read); ``why``: why the refused work is refused
        (empty: not done yet); ``still``: what is still refused in words, where some of ``refuses`` is done by
        callers that allow the engine by name."""
        self.engines.append(Engine(name, evidence, refuses, why))
        what = ", ".join(sorted(w.value for w in refuses))
        if read:
            done = ", ".join(sorted(w.value for w in _EVERYTHING - refuses))
            self.findings.append(finding("store.partial_engine", str(file), None,
                                         f"{name} ({evidence}): we {done}{' (' + reads + ')' if reads else ''}; "
                                         f"not mirrored yet, so refused: {still or what or 'nothing'}",
                                         engine=name, evidence=evidence))
            return
        self.findings.append(finding("store.unsupported_engine", str(file), None,
                                     f"{name} ({evidence}): {reads or 'not read by this release'}; refused: {what}",
                                     engine=name, evidence=evidence))


def detect(root: Path | None, conf: dict[str, str] | None = None) -> Engines:
    """The engines of the store at ``root`` (None: a bare CommitLog directory, nothing to tell) from its files,
    and from ``conf`` (broker.conf's properties) where given."""
    out = Engines(root)
    conf = conf or {}
    if root is not None and root.is_dir():
        _from_files(root, out)
    _from_conf(conf, out, root)
    return out


LMQ_ENGINE = "LMQ multi-dispatch"
#: an engine we read (its finding the store.partial_engine warning, which alone is no problem): every work is done
#: as RocketMQ dispatches the %LMQ% queues — the rebuilds (rebuild.output, spark.rebuild), the checks
#: (verify.store, spark.verify), the recovery report and the repair (recovery.plan/apply) — so nothing is refused
LMQ_READS = ("the %LMQ% queues are followed as RocketMQ dispatches them (INNER_MULTI_DISPATCH / "
             "INNER_MULTI_QUEUE_OFFSET): `rocketstore rebuild` and the Spark rebuild write them, `rocketstore verify` "
             "and the Spark verify check them and their lag (config/lmqConsumerOffset.json), the recovery report "
             "counts what each loses, `recover plan`/`apply` cut them with the log")
LMQ_REFUSES: frozenset[Work] = frozenset()


def _from_files(root: Path, out: Engines) -> None:
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return
    dledger = [n for n in names if n.startswith("dledger-") and (root / n).is_dir()]
    for name in names:
        path = root / name
        if name in dledger:
            switched = " after a classic commitlog/ (switched)" if (root / "commitlog").is_dir() else ""
            several = len(dledger) > 1 or not (path / "data").is_dir()
            out.add("DLedger CommitLog", f"{name}/{switched}" + (
                    f" (one of {len(dledger)} dledger-* directories: which is this broker's?)" if len(dledger) > 1
                    else " (no data/ directory)" if several else ""), _EVERYTHING if several else _DLEDGER_WORK, path,
                    read=not several, why="" if several else _DLEDGER_REPAIR)
        elif name not in KNOWN_ROOT_ENTRIES and not name.startswith(".") and name not in NOT_STORE_ENTRIES:
            out.findings.append(finding("store.unknown_entry", str(path), None,
                                        "not a file or directory of any RocketMQ store engine we know (left alone)"))
    cq = root / "consumequeue"
    if is_rocksdb(cq):
        out.add("RocksDB ConsumeQueue", "consumequeue/ is a RocksDB database (storeType=defaultRocksDB)",
                _ROCKSDB_QUEUE_WORK, cq, _ROCKSDB_QUEUE_READS, read=True)
    if is_rocksdb(root / "consumequeue_rocksdb"):
        out.add("RocksDB ConsumeQueue", "consumequeue_rocksdb/ (useSeparateStorePathForRocksdbCQ)",
                _ROCKSDB_QUEUE_WORK, root / "consumequeue_rocksdb", _ROCKSDB_QUEUE_READS, read=True)
    config = root / "config"
    for sub, (what, reads) in KNOWN_CONFIG_DIRS.items():
        if is_rocksdb(config / sub):
            out.add("RocksDB config", f"config/{sub}/ holds {what} in RocksDB", frozenset({Work.REPAIR}),
                    config / sub, reads, read=True)
    if (root / "rocksdbstore").is_dir() and _holds_data(root / "rocksdbstore"):
        out.add("RocksDB message store", "rocksdbstore/ holds data (5.5's RocksDB index, timer or transaction store)",
                frozenset({Work.READ_INDEX, Work.REPAIR}), root / "rocksdbstore")
    batch = root / "batchconsumequeue"
    if batch.is_dir() and any(batch.iterdir()):
        # read (BATCH_ENGINE); the work refused here is done by callers that allow the engine by name (the
        # rebuilds, the checks, the recovery report, the repair)
        out.add(BATCH_ENGINE, "batchconsumequeue/ (topics with queue.type=BatchCQ)",
                _BATCH_REFUSES, batch, _BATCH_QUEUE_READS, read=True, still=BATCH_REFUSED,
                why=_BATCH_WHY)
    if cq.is_dir() and not is_rocksdb(cq):
        try:
            lmq = sorted(e.name for e in os.scandir(cq) if e.name.startswith("%LMQ%"))
        except OSError:
            lmq = []
        if lmq:
            out.add(LMQ_ENGINE, f"{len(lmq)} %LMQ% queue(s) in consumequeue/, e.g. {lmq[0]}",
                    LMQ_REFUSES, cq / lmq[0], LMQ_READS, read=True)


def _from_conf(conf: dict[str, str], out: Engines, root: Path | None) -> None:
    where = str(root) if root is not None else "broker.conf"
    known = {e.name for e in out.engines}
    if _truthy(conf, "enableDLegerCommitLog") and "DLedger CommitLog" not in known:
        # no dledger-*/ under the root: its data lies elsewhere (storePathDLedgerCommitLog), commitlog/ is not the log
        out.add("DLedger CommitLog", "enableDLegerCommitLog=true in broker.conf, no dledger-*/ under the store root",
                _EVERYTHING, where)
    if str(conf.get("storeType", "")).strip().lower() == "defaultrocksdb" and "RocksDB ConsumeQueue" not in known:
        # the broker then keeps topics, groups and consumer offsets in RocksDB too (RocksDB*ConfigManager)
        out.add("RocksDB ConsumeQueue", "storeType=defaultRocksDB in broker.conf",
                _QUEUE_WORK | {Work.READ_CONFIG, Work.READ_OFFSETS}, where)
    if _truthy(conf, "indexRocksDBEnable") and str(conf.get("indexFileWriteEnable", "true")).strip().lower() == "false":
        out.add("RocksDB index", "indexRocksDBEnable=true and indexFileWriteEnable=false: no IndexFiles are written",
                frozenset({Work.READ_INDEX, Work.REBUILD, Work.REPAIR}), where)
    if (_truthy(conf, "enableLmq") or _truthy(conf, "enableMultiDispatch")) and LMQ_ENGINE not in known:
        out.add(LMQ_ENGINE, "enableLmq/enableMultiDispatch=true in broker.conf",
                LMQ_REFUSES, where, LMQ_READS, read=True)
