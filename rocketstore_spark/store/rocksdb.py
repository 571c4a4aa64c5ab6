"""RocketMQ's RocksDB databases in a store, read-only: the RocksDB ConsumeQueue (``storeType=defaultRocksDB``,
5.2+) and the RocksDB config (v1 and v2: consumer offsets, topics, subscription groups). Layout (RocketMQ 5.5.1's ``RocksDBConsumeQueueTable``,
``RocksDBConsumeQueueOffsetTable``, ``RocksDBConfigManager``; docs/format/rocksdb-queues.md):

    consumequeue/ (or consumequeue_rocksdb/ with useSeparateStorePathForRocksdbCQ), column families:
      default   key  int32 len(topic) | 0x01 | topic | 0x01 | int32 queueId | 0x01 | int64 queue offset
                value int64 physical offset | int32 size | int64 tagsCode | int64 store time    (28 bytes)
      offset    key  int32 len(topic) | 0x01 | topic | 0x01 | "max"/"min" | 0x01 | int32 queueId
                value int64 physical offset | int64 queue offset                                (16 bytes)
                "max" names the queue's LAST entry (getMaxOffsetInQueue = it + 1); the key of topic
                CHECKPOINT_TOPIC, "max", queue 0 holds 8 bytes: the end of the last dispatched record
                (getMaxPhyOffsetInConsumeQueue, where recovery starts dispatching)
    config/consumerOffsets/ (v1; config/metadata/ column family "consumerOffset" with
      useSingleRocksDBForAllConfigs): key "topic@group", value JSON {"offsetTable":{"<queue>":offset}};
      column family "kvDataVersion" (consumerOffsetVersion) key "kvDataVersionKey": the DataVersion JSON.
    config/topics/ (v1; config/metadata/ column families "topic" / "topicVersion"): key the topic name, value
      the TopicConfig's JSON (fastjson, BrowserCompatible); config/subscriptionGroups/ (config/metadata/
      "subscriptionGroup" / "subscriptionGroupVersion"): key the group, value the SubscriptionGroupConfig's
      JSON, and column family "forbidden": key the group, value JSON {topic: forbidden bits}.
    config/rdb/ (configManagerVersion=v2, 5.3.2+; ConfigStorage, ConfigHelper, the *ManagerV2), one column family:
      key  0x01 | int16 table id | record prefix (2 data, 1 data version) | ...
           topics (3), groups (4): int16 len | name        value 0x01 (JSON) | the config's JSON
           consumer offsets (1), pull offsets (2): int16 len | group | 0x01 | int16 len | topic | 0x01 | int32 queue
                                                          value int64 offset
           data version: "data_version"                   value int64 state version | timestamp | counter
      (no forbidden table, no JSON file merge: the v2 managers have neither)
    Integers big-endian (Java ByteBuffer).

Opening never writes under the store and never takes the broker's lock: the database directory is mirrored
by symbolic links in a private temporary directory and opened there read-only (``rocksdict``; RocksDB's
read-only mode takes no LOCK, creates and repairs nothing, compacts nothing; its info LOG and rocksdict's
``rocksdict-config.json`` land in the temporary directory). A database a running broker holds is read as of
its last flush — RocketMQ writes the ConsumeQueue without a write-ahead log, so that is also what a crash
leaves. A missing, damaged or unreadable database raises ``RocksDBUnreadable`` naming the path (callers
turn it into a finding). Runs wherever called (driver, Spark worker, CLI).
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from rocketstore_spark.store.engines import is_rocksdb

CTRL_1 = b"\x01"
CHECKPOINT_TOPIC = "CHECKPOINT_TOPIC"          # TopicValidator.RMQ_SYS_ROCKSDB_OFFSET_TOPIC
OFFSET_CF = "offset"
UNIT_SIZE = 28
UNIT_DTYPE = np.dtype([("physical_offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8"),
                       ("store_timestamp", ">i8")])
QUEUE_DIRS = ("consumequeue", "consumequeue_rocksdb")
OFFSET_DBS = (("consumerOffsets", "default", "kvDataVersion"),
              ("metadata", "consumerOffset", "consumerOffsetVersion"))
DATA_VERSION_KEY = b"kvDataVersionKey"
BATCH = 1 << 16


class RocksDBUnreadable(Exception):
    """A RocksDB database that cannot be opened or read (missing, damaged, foreign): ``path`` and why."""

    def __init__(self, path: Path | str, why: str):
        super().__init__(f"{path}: {why}")
        self.path = str(path)
        self.why = why


def queue_db(root: Path | None) -> Path | None:
    """The store's RocksDB ConsumeQueue database (consumequeue/ or consumequeue_rocksdb/), or None."""
    if root is None:
        return None
    for name in QUEUE_DIRS:
        if is_rocksdb(root / name):
            return root / name
    return None


@contextmanager
def open_readonly(db: Path) -> Iterator[object]:
    """``db`` opened read-only through a private mirror of symbolic links (module docstring); yields the
    rocksdict ``Rdict`` (raw bytes) with every column family the database has."""
    from rocksdict import AccessType, Options, Rdict
    db = Path(db)
    if not is_rocksdb(db):
        raise RocksDBUnreadable(db, "not a RocksDB database (no CURRENT file)")
    mirror = Path(tempfile.mkdtemp(prefix="rocketstore-rocksdb-"))
    rd = None
    try:
        try:
            for entry in os.scandir(db):
                if entry.is_file() and entry.name != "LOCK" and not entry.name.startswith("LOG"):
                    os.symlink(os.path.abspath(entry.path), mirror / entry.name)
        except OSError as e:
            raise RocksDBUnreadable(db, f"cannot list the database: {e}") from None
        try:
            names = Rdict.list_cf(str(mirror))
            opts = Options(raw_mode=True)
            opts.create_if_missing(False)
            opts.set_db_log_dir(str(mirror))
            rd = Rdict(str(mirror), options=opts, access_type=AccessType.read_only(),
                       column_families={n: Options(raw_mode=True) for n in names if n != "default"})
        except Exception as e:            # rocksdict raises plain Exceptions carrying RocksDB's status
            raise RocksDBUnreadable(db, f"RocksDB refuses to open it read-only: {str(e).replace(str(mirror), str(db))}"
                                    ) from None
        yield rd
    finally:
        if rd is not None:
            try:
                rd.close()
            except Exception:
                pass
        shutil.rmtree(mirror, ignore_errors=True)


def _column(rd, name: str):
    try:
        return rd if name == "default" else rd.get_column_family(name)
    except Exception:
        return None


def _pairs(cf, path: str, name: str) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) of a column family in key order; RocksDBUnreadable when reading fails midway."""
    it = cf.iter()
    it.seek_to_first()
    while it.valid():
        yield it.key(), it.value()
        it.next()
    try:
        it.status()
    except Exception as e:
        raise RocksDBUnreadable(path, f"reading the '{name}' column family: {e}") from None


def offset_key(topic: str, queue_id: int, kind: str) -> bytes:
    t = topic.encode("utf-8")
    return struct.pack(">i", len(t)) + CTRL_1 + t + CTRL_1 + kind.encode() + CTRL_1 + struct.pack(">i", queue_id)


def unit_key(topic: str, queue_id: int, queue_offset: int) -> bytes:
    t = topic.encode("utf-8")
    return struct.pack(">i", len(t)) + CTRL_1 + t + CTRL_1 + struct.pack(">i", queue_id) + CTRL_1 + \
        struct.pack(">q", queue_offset)


@dataclass
class QueueOffsets:
    """One queue's entries of the ``offset`` column family: (physical offset, queue offset) of its last entry
    ("max") and of its first live entry ("min", written when RocketMQ first corrects it), None if absent."""
    topic: str
    queue_id: int
    max: tuple[int, int] | None = None
    min: tuple[int, int] | None = None


@dataclass
class QueueTable:
    """The ``offset`` column family of a RocksDB ConsumeQueue: the dispatch checkpoint and every queue."""
    path: str
    max_physical_offset: int | None                       # CHECKPOINT_TOPIC's value; None when absent
    queues: dict[tuple[str, int], QueueOffsets] = field(default_factory=dict)
    malformed: int = 0                                     # keys or values of no known shape


def read_queue_table(rd, path: str) -> QueueTable:
    """The offset column family of an opened database (``open_readonly``), as RocketMQ's ``forEach`` parses it."""
    cf = _column(rd, OFFSET_CF)
    if cf is None:
        raise RocksDBUnreadable(path, "no 'offset' column family: not a RocketMQ ConsumeQueue database")
    table = QueueTable(path, None)
    for k, v in _pairs(cf, path, OFFSET_CF):
        if len(k) < 14:
            table.malformed += 1
            continue
        n = struct.unpack_from(">i", k)[0]
        if n < 0 or len(k) != 14 + n or k[4:5] != CTRL_1 or k[5 + n:6 + n] != CTRL_1:
            table.malformed += 1
            continue
        topic = k[5:5 + n].decode("utf-8", "replace")
        kind = k[6 + n:9 + n]
        queue_id = struct.unpack_from(">i", k, 10 + n)[0]
        if topic == CHECKPOINT_TOPIC and len(v) == 8:
            table.max_physical_offset = struct.unpack(">q", v)[0]
            continue
        if len(v) != 16 or kind not in (b"max", b"min"):
            table.malformed += 1
            continue
        q = table.queues.setdefault((topic, queue_id), QueueOffsets(topic, queue_id))
        value = struct.unpack(">qq", v)
        if kind == b"max":
            q.max = value
        else:
            q.min = value
    return table


def read_units(rd, topic: str, queue_id: int, start: int = 0, stop: int | None = None,
               batch: int = BATCH, path: str = "") -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(queue offsets int64, units UNIT_DTYPE) of one queue's keys in the default column family from queue
    offset ``start`` up to ``stop`` (exclusive; None: every key), ascending, in batches of ``batch``. Values of
    another length than 28 bytes are passed over (RocketMQ's reads would fail on them). The binding yields a
    pair at a time; the decoding is numpy's."""
    prefix = unit_key(topic, queue_id, 0)[:-8]
    it = rd.iter()
    it.seek(unit_key(topic, queue_id, max(start, 0)))
    offs: list[bytes] = []
    vals: list[bytes] = []

    def flush():
        o = np.frombuffer(b"".join(offs), dtype=">i8").astype(np.int64)
        u = np.frombuffer(b"".join(vals), dtype=UNIT_DTYPE)
        offs.clear()
        vals.clear()
        return o, u

    while it.valid():
        k = it.key()
        if len(k) != len(prefix) + 8 or not k.startswith(prefix):
            break
        if stop is not None and struct.unpack_from(">q", k, len(prefix))[0] >= stop:
            break
        v = it.value()
        if len(v) == UNIT_SIZE:
            offs.append(k[len(prefix):])
            vals.append(v)
            if len(offs) >= batch:
                yield flush()
        it.next()
    _status(it, path, topic, queue_id)
    if offs:
        yield flush()
    del it


def _status(it, path: str, topic: str, queue_id: int) -> None:
    """Raise RocksDBUnreadable when an iteration ended on an error (a damaged block) rather than at the end."""
    try:
        it.status()
    except Exception as e:
        raise RocksDBUnreadable(path, f"reading the units of {topic}/{queue_id}: {e}") from None


def get_unit(rd, topic: str, queue_id: int, queue_offset: int) -> np.void | None:
    """One unit (``RocksDBConsumeQueueTable.getCQInKV``), or None."""
    v = rd.get(unit_key(topic, queue_id, queue_offset))
    return np.frombuffer(v, dtype=UNIT_DTYPE)[0] if v is not None and len(v) == UNIT_SIZE else None


class QueueUnits:
    """One queue of an opened RocksDB ConsumeQueue with ``lookup.queue_files.QueueFiles``' ``entry``."""

    def __init__(self, rd, topic: str, queue_id: int):
        self.rd, self.topic, self.queue_id = rd, topic, queue_id

    def entry(self, queue_offset: int) -> tuple[int, int, int] | None:
        """(physical offset, size, tagsCode) of the unit at ``queue_offset``; None where there is none."""
        u = get_unit(self.rd, self.topic, self.queue_id, queue_offset)
        return None if u is None else (int(u["physical_offset"]), int(u["size"]), int(u["tags_code"]))


# ------------------------------------------------------------------------------------- consumer offsets

def offsets_db(root: Path | None) -> tuple[Path, str, str] | None:
    """(database, column family of the offsets, column family of the data version) of the store's v1
    RocksDB consumer offsets, or None when it keeps them in config/consumerOffset.json."""
    if root is None:
        return None
    for name, cf, version_cf in OFFSET_DBS:
        if is_rocksdb(root / "config" / name):
            return root / "config" / name, cf, version_cf
    return None


@dataclass
class RocksOffsets:
    """Consumer offsets of a RocksDB config database: (topic, group, queue_id, offset) rows, the kv data
    version's counter, and the keys that did not parse ("key: why")."""
    path: str
    rows: list[tuple[str, str, int, int]]
    counter: int | None
    problems: list[str]


def read_rocksdb_offsets(db: Path, cf_name: str, version_cf: str) -> RocksOffsets:
    """Every ``topic@group`` key of ``db`` (``RocksDBConsumerOffsetManager.decodeOffset``)."""
    rows, problems = [], []
    kv = read_kv(db, cf_name, version_cf)
    for k, v in kv.tables[cf_name].items():
        key = k.decode("utf-8", "replace")
        topic, at, group = key.rpartition("@")
        try:
            table = json.loads(v.decode("utf-8"))["offsetTable"]
            parsed = sorted((int(q), int(o)) for q, o in table.items())
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            problems.append(f"{key}: {type(e).__name__}: {e}")
            continue
        if not at:
            problems.append(f"{key}: not topic@group")
            continue
        rows.extend((topic, group, q, o) for q, o in parsed)
    return RocksOffsets(str(db), rows, kv.counter, problems + kv.problems)


@dataclass
class RocksKV:
    """Column families of a RocksDB config database, each key -> value (raw bytes) in key order, and the
    kv data version's counter (None when the database has none)."""
    path: str
    tables: dict[str, dict[bytes, bytes]]
    counter: int | None
    problems: list[str]


def read_kv(db: Path, cf_name: str, version_cf: str, optional: tuple[str, ...] = ()) -> RocksKV:
    """``RocksDBConfigManager.loadDataVersion`` and ``loadData`` of one v1 config database read-only: every pair
    of column family ``cf_name`` (required) and of ``optional`` ones (absent: empty, as ``iterate`` skips a
    column family it lacks), and ``version_cf``'s ``kvDataVersionKey`` counter."""
    problems, counter, tables = [], None, {}
    with open_readonly(db) as rd:
        for name in (cf_name, *optional):
            cf = _column(rd, name)
            if cf is None and name == cf_name:
                raise RocksDBUnreadable(db, f"no '{cf_name}' column family")
            tables[name] = {} if cf is None else dict(_pairs(cf, str(db), name))
        vcf = _column(rd, version_cf)
        raw = vcf.get(DATA_VERSION_KEY) if vcf is not None else None
        if raw:
            try:
                counter = int(json.loads(raw.decode("utf-8"))["counter"])
            except (ValueError, KeyError, TypeError):
                problems.append(f"{DATA_VERSION_KEY.decode()}: unparsable data version")
    return RocksKV(str(db), tables, counter, problems)


# ---------------------------------------------------------------------- topics and subscription groups (v1)

#: the v1 databases of each config table: (directory under config/, column family, data version column
#: family), the separate database first (RocksDBTopicConfigManager / RocksDBSubscriptionGroupManager
#: .rocksdbConfigFilePath; config/metadata/ with useSingleRocksDBForAllConfigs)
CONFIG_DBS = {
    "topics": (("topics", "default", "kvDataVersion"), ("metadata", "topic", "topicVersion")),
    "subscriptionGroups": (("subscriptionGroups", "default", "kvDataVersion"),
                           ("metadata", "subscriptionGroup", "subscriptionGroupVersion")),
}
FORBIDDEN_CF = "forbidden"      # RocksDBSubscriptionGroupManager: group -> JSON {topic: bits}, both layouts


def config_db(root: Path | None, table: str) -> tuple[Path, str, str] | None:
    """(database, column family, data version column family) of the store's v1 RocksDB ``table`` ("topics",
    "subscriptionGroups"), or None when the broker keeps it in its JSON file."""
    if root is None:
        return None
    for name, cf, version_cf in CONFIG_DBS[table]:
        # config/metadata/ holds a table only once its column family exists (a single database may carry
        # only the consumer offsets)
        if is_rocksdb(root / "config" / name) and (name != "metadata" or cf in _column_families(root / "config" / name)):
            return root / "config" / name, cf, version_cf
    return None


def _column_families(db: Path) -> list[str]:
    try:
        from rocksdict import Rdict
        return Rdict.list_cf(str(db))          # reads CURRENT and the MANIFEST only
    except Exception:
        return []


@dataclass
class RocksConfig:
    """A v1 RocksDB config table as the broker's manager decodes it: ``table`` name -> parsed JSON object
    (TopicConfig / SubscriptionGroupConfig), ``forbidden`` group -> parsed JSON {topic: bits} (groups only),
    the data version counter, and the keys passed over ("key: why")."""
    path: str
    table: dict[str, object]
    forbidden: dict[str, object]
    counter: int | None
    problems: list[str]


def read_rocksdb_config(db: Path, cf_name: str, version_cf: str, forbidden: bool = False) -> RocksConfig:
    """``decodeTopicConfig`` / ``decodeSubscriptionGroup`` (key: the name in UTF-8, value: the config's JSON) of
    every key, and with ``forbidden`` (the groups) ``decodeForbidden`` of that column family. A value that is not a JSON object is
    a problem naming its key and is passed over (the broker's ``JSON.parseObject`` would stop its start-up)."""
    kv = read_kv(db, cf_name, version_cf, (FORBIDDEN_CF,) if forbidden else ())
    problems = list(kv.problems)

    def decode(pairs: dict[bytes, bytes]) -> dict[str, object]:
        out = {}
        for k, v in pairs.items():
            key = k.decode("utf-8", "replace")
            try:
                value = json.loads(v.decode("utf-8"))
            except (ValueError, RecursionError) as e:
                problems.append(f"{key}: not JSON: {e}")
                continue
            if not isinstance(value, dict):
                problems.append(f"{key}: not a JSON object")
                continue
            out[key] = value
        return out

    return RocksConfig(str(db), decode(kv.tables[cf_name]), decode(kv.tables.get(FORBIDDEN_CF, {})), kv.counter,
                       problems)


# ---------------------------------------------------------------------------- v2: config/rdb (5.3.2+)

V2_DIR = "rdb"
V2_TABLE_PREFIX = 1                               # TablePrefix.TABLE
V2_DATA_VERSION, V2_DATA = 1, 2                   # RecordPrefix
V2_CONSUMER_OFFSET, V2_PULL_OFFSET, V2_TOPIC, V2_SUBSCRIPTION_GROUP = 1, 2, 3, 4     # TableId
V2_JSON = 1                                       # SerializationType.JSON
V2_DATA_VERSION_KEY = b"data_version"


def v2_db(root: Path | None) -> Path | None:
    """The store's v2 config database (config/rdb/, ``configManagerVersion=v2``), or None."""
    if root is None or not is_rocksdb(root / "config" / V2_DIR):
        return None
    return root / "config" / V2_DIR


@dataclass
class RocksV2:
    """config/rdb/ as the v2 managers load it: ``topics`` and ``groups`` name -> parsed JSON config,
    ``offsets`` (topic, group, queue_id, offset) consumer offset rows, each table's data version counter
    (TableId -> counter), and the records passed over ("key: why")."""
    path: str
    topics: dict[str, object]
    groups: dict[str, object]
    offsets: list[tuple[str, str, int, int]]
    counters: dict[int, int]
    problems: list[str]


def _v2_name(k: bytes) -> str | None:
    """[prefix][table id][record prefix][name length: 2][name] -> the name (None: another shape)."""
    if len(k) < 6:
        return None
    n = struct.unpack_from(">H", k, 4)[0]
    return k[6:].decode("utf-8", "replace") if len(k) == 6 + n else None


def _v2_offset_key(k: bytes) -> tuple[str, str, int] | None:
    """[..4][group len: 2][group][0x01][topic len: 2][topic][0x01][queue id: 4] -> (group, topic, queue id)."""
    try:
        g = struct.unpack_from(">H", k, 4)[0]
        t = struct.unpack_from(">H", k, 7 + g)[0]
    except struct.error:
        return None
    if len(k) != 14 + g + t or k[6 + g:7 + g] != CTRL_1 or k[9 + g + t:10 + g + t] != CTRL_1:
        return None
    return (k[6:6 + g].decode("utf-8", "replace"), k[9 + g:9 + g + t].decode("utf-8", "replace"),
            struct.unpack_from(">i", k, 10 + g + t)[0])


def read_v2(db: Path) -> RocksV2:
    """Every record of config/rdb/'s default column family, parsed as TopicConfigManagerV2.parseTopicConfig,
    SubscriptionGroupManagerV2.parseSubscription, ConsumerOffsetManagerV2.loadConsumerOffsets and
    ConfigHelper.onDataVersionLoad parse them. A config value of another serialization than JSON is passed over
    as the managers pass it over (a problem says so); a value that is not a JSON object, or a key or offset of
    another shape, is a problem naming the key. Consumer offsets of %LMQ% topics are rows too (the broker
    serves them from the database: ``queryOffset``). Pull offsets (TableId 2) are not consumer offsets."""
    out = RocksV2(str(db), {}, {}, [], {}, [])
    with open_readonly(db) as rd:
        for k, v in _pairs(rd, str(db), "default"):
            if len(k) < 4 or k[0] != V2_TABLE_PREFIX:
                out.problems.append(f"{k[:16].hex()}: not a v2 config table key")
                continue
            table, record = struct.unpack_from(">H", k, 1)[0], k[3]
            if record == V2_DATA_VERSION:
                if k[4:] == V2_DATA_VERSION_KEY and len(v) == 24:
                    out.counters[table] = struct.unpack_from(">q", v, 16)[0]
                continue
            if record != V2_DATA or table == V2_PULL_OFFSET:
                continue
            if table == V2_CONSUMER_OFFSET:
                parsed = _v2_offset_key(k)
                if parsed is None or len(v) != 8:
                    out.problems.append(f"{k.hex()}: not a consumer offset record")
                    continue
                group, topic, queue_id = parsed
                out.offsets.append((topic, group, queue_id, struct.unpack(">q", v)[0]))
            elif table in (V2_TOPIC, V2_SUBSCRIPTION_GROUP):
                name = _v2_name(k)
                if name is None:
                    out.problems.append(f"{k.hex()}: not a topic or group key")
                    continue
                if not v or v[0] != V2_JSON:
                    out.problems.append(f"{name}: serialization type {v[:1].hex() or 'missing'} is not JSON: "
                                        "passed over, as the broker does")
                    continue
                try:
                    value = json.loads(v[1:].decode("utf-8"))
                except (ValueError, RecursionError) as e:
                    out.problems.append(f"{name}: not JSON: {e}")
                    continue
                if not isinstance(value, dict):
                    out.problems.append(f"{name}: not a JSON object")
                    continue
                (out.topics if table == V2_TOPIC else out.groups)[name] = value
    return out
