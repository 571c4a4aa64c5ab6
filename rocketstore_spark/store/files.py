"""The store's small files, read-only: checkpoint, abort, lock, config/*.json (+ .bak: consumerOffset, topics,
subscriptionGroup, delayOffset).

Paths come from the store map (layout.StoreMap); runs wherever called (a Spark executor, the CLI, tests)."""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from rocketstore_spark.codec import checkpoint, config_json
from rocketstore_spark.store.layout import COMMITLOG, StoreMap


@dataclass
class StoreState:
    checkpoint: dict | None
    abort_present: bool
    lock_present: bool


def read_checkpoint(files: StoreMap) -> StoreState:
    cp = None
    if files.checkpoint_path is not None and os.path.isfile(files.checkpoint_path):
        with open(files.checkpoint_path, "rb") as f:
            cp = checkpoint.decode(f.read(checkpoint.DTYPE.itemsize))
    return StoreState(cp, files.abort_path is not None and files.abort_path.exists(),
                      files.lock_path is not None and files.lock_path.exists())


@dataclass
class ConfigFile:
    source: str | None       # the file the rows came from; None if neither exists nor loads
    rows: list               # what the codec parser returned for it
    problems: list[str]      # "path: why" for each file passed over (empty, unparsable)


def read_config(paths, parse) -> ConfigFile:
    """As ConfigManager.load does: the file, or its .bak when the file is missing, empty or unparsable
    (``parse``, a codec.config_json parser, raises ValueError for every malformation). ``paths``: the pair a
    StoreMap gives (``config_paths``); names read from the data never become paths."""
    problems = []
    for path in paths:
        path = str(path)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        if not text.strip():
            problems.append(f"{path}: empty")
            continue
        try:
            return ConfigFile(path, parse(text), problems)
        except ValueError as e:
            problems.append(f"{path}: {e}")
    return ConfigFile(None, [], problems)


def read_consumer_offsets(files: StoreMap) -> ConfigFile:
    """config/consumerOffset.json: (topic, group, queue_id, offset) rows (config/lmqConsumerOffset.json when there
    is one: a broker with enableLmq keeps every group's offsets there); on a broker that keeps them in RocksDB
    (config/consumerOffsets/, v1), the database's, unless the JSON file's data version is newer (then the broker
    loads the JSON file: ``RocksDBConsumerOffsetManager.merge``); on a v2 broker (config/rdb/) the database's
    (``_v2_config``). A database that cannot be read is a problem naming it, and no rows."""
    from rocketstore_spark.store import rocksdb
    if rocksdb.v2_db(files.root) is not None:         # configManagerVersion=v2: ConsumerOffsetManagerV2, whatever else
        return _v2_config(files, "offsets")
    lmq = files.lmq_consumer_offsets_paths()
    if any(p.is_file() for p in lmq):
        # a broker with enableLmq loads only config/lmqConsumerOffset.json (LmqConsumerOffsetManager.configFilePath)
        return read_config(lmq, config_json.lmq_consumer_offsets)
    json_file = read_config(files.consumer_offsets_paths(), config_json.consumer_offsets)
    found = rocksdb.offsets_db(files.root)
    if found is None:
        return json_file
    try:
        kv = rocksdb.read_rocksdb_offsets(*found)
    except rocksdb.RocksDBUnreadable as e:
        return ConfigFile(None, [], json_file.problems + [f"{e.path}: {e.why}"])
    problems = json_file.problems + [f"{kv.path}: {p}" for p in kv.problems]
    if json_file.source is not None and _json_counter(json_file.source) > (kv.counter or 0):
        return ConfigFile(json_file.source, json_file.rows, problems)
    return ConfigFile(kv.path, kv.rows, problems)


def _json_counter(path: str) -> int:
    """dataVersion.counter of a config JSON file (0 when absent or unreadable)."""
    import json
    try:
        with open(path, "rb") as f:
            return int(json.loads(f.read().decode("utf-8", "replace"))["dataVersion"]["counter"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def read_topics(files: StoreMap) -> ConfigFile:
    """config/topics.json: a dict per topic config (config_json.topics); on a broker that keeps its topics in
    RocksDB (config/topics/ or config/metadata/, v1) as ``RocksDBTopicConfigManager.load`` sees them (``_kv_config``),
    and in v2's config/rdb/ as ``TopicConfigManagerV2.load`` does (``_v2_config``)."""
    return _kv_config(files, read_config(files.topics_paths(), config_json.topics), "topics", False)


def read_subscription_groups(files: StoreMap) -> ConfigFile:
    """config/subscriptionGroup.json: a dict per consumer group (config_json.subscription_groups); on a broker that
    keeps its groups in RocksDB (config/subscriptionGroups/ or config/metadata/, v1) as
    ``RocksDBSubscriptionGroupManager.load`` sees them (``_kv_config``), and in v2's config/rdb/ as
    ``SubscriptionGroupManagerV2.load`` does (``_v2_config``)."""
    return _kv_config(files, read_config(files.subscription_groups_paths(), config_json.subscription_groups),
                      "subscriptionGroups", True)


def _kv_config(files: StoreMap, json_file: ConfigFile, table: str, groups: bool) -> ConfigFile:
    """The rows of a v1 RocksDB config table as the broker's RocksDB manager loads it: every key of the database
    (a value that does not decode is a problem naming the key, and no row); then ``merge``: when the JSON file's
    data version counter is greater than the database's, the JSON file's entries (and forbidden entries) are
    put over the database's. No database: ``json_file`` as it is. A database that cannot be read: a problem
    naming it, and no rows."""
    from rocketstore_spark.store import rocksdb
    if rocksdb.v2_db(files.root) is not None:
        return _v2_config(files, "groups" if groups else "topics")
    found = rocksdb.config_db(files.root, table)
    if found is None:
        return json_file
    try:
        kv = rocksdb.read_rocksdb_config(*found, forbidden=groups)
    except rocksdb.RocksDBUnreadable as e:
        return ConfigFile(None, [], json_file.problems + [f"{e.path}: {e.why}"])
    problems = json_file.problems + [f"{kv.path}: {p}" for p in kv.problems]
    rows_of = (lambda t, f: config_json.group_rows(t, f)) if groups else (lambda t, f: config_json.topic_rows(t))
    entries, forbidden = {}, {}
    for key, value in kv.table.items():          # each entry alone: one bad value does not hide the others
        try:
            rows_of({key: value}, {})
            entries[key] = value
        except ValueError as e:
            problems.append(f"{kv.path}: {key}: {e}")
    for key, value in kv.forbidden.items():
        try:
            rows_of({}, {key: value})
            forbidden[key] = value
        except ValueError as e:
            problems.append(f"{kv.path}: forbidden {key}: {e}")
    source = kv.path
    if json_file.source is not None and _json_counter(json_file.source) > (kv.counter or 0):
        with open(json_file.source, "rb") as f:          # parsed already by read_config: it loads
            text = f.read().decode("utf-8", "replace")
        names = ("subscriptionGroupTable", "forbiddenTable") if groups else ("topicConfigTable",)
        json_tables = config_json.tables(text, *names)
        entries.update(json_tables[0])
        if groups:
            forbidden.update(json_tables[1])
        source = f"{kv.path} + {json_file.source}"
    return ConfigFile(source, rows_of(entries, forbidden), problems)


def _v2_config(files: StoreMap, table: str) -> ConfigFile:
    """``table`` ("topics", "groups", "offsets") of config/rdb/ (configManagerVersion=v2): the broker's v2
    managers load the database alone (no JSON file merge, no forbidden table), so do we; a store that has
    config/rdb/ is read as a v2 broker's even beside v1 databases or JSON files (a broker switched back to v1
    would leave it stale: broker.conf's configManagerVersion decides, which the files do not show). Records that
    do not decode are problems naming them; an unreadable database a problem naming it, and no rows."""
    from rocketstore_spark.store import rocksdb
    db = rocksdb.v2_db(files.root)
    try:
        kv = rocksdb.read_v2(db)
    except rocksdb.RocksDBUnreadable as e:
        return ConfigFile(None, [], [f"{e.path}: {e.why}"])
    problems = [f"{kv.path}: {p}" for p in kv.problems]
    if table == "offsets":
        return ConfigFile(kv.path, kv.offsets, problems)
    rows_of = (lambda t: config_json.group_rows(t, {})) if table == "groups" else config_json.topic_rows
    rows = []
    for key, value in (kv.groups if table == "groups" else kv.topics).items():
        try:
            rows += rows_of({key: value})
        except ValueError as e:
            problems.append(f"{kv.path}: {key}: {e}")
    return ConfigFile(kv.path, rows, problems)


def read_delay_offsets(files: StoreMap) -> ConfigFile:
    """config/delayOffset.json: a dict per delay level (config_json.delay_offsets)."""
    return read_config(files.delay_offsets_paths(), config_json.delay_offsets)


def uncopyable_entries(root: Path, skip: tuple[str, ...] = ()) -> list[tuple[str, str]]:
    """Every entry under ``root`` (not below the top-level names ``skip``) that a faithful copy of the store
    cannot take, as (path relative to ``root``, why): a FIFO, socket or device, a symbolic link that leads
    nowhere (dangling, looping) or to a directory (a copy would not follow it: the files behind it would be
    missing from the copy), a file or directory that cannot be read, and anything but a regular file in
    ``commitlog/`` (RocketMQ maps every entry there as a segment). Symbolic links to regular files are copied
    as their content. Listing and ``stat`` only (driver, CLI)."""
    out: list[tuple[str, str]] = []

    def unreadable(e: OSError) -> None:
        out.append((os.path.relpath(e.filename, root) if e.filename else ".", f"cannot be listed: {e.strerror}"))

    for dirpath, dirnames, filenames in os.walk(root, onerror=unreadable):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in skip]
            filenames = [f for f in filenames if f not in skip]
        in_commitlog = Path(rel_dir).parts[:1] == (COMMITLOG,)
        for name in sorted(dirnames) + sorted(filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            why = _why_uncopyable(path, in_commitlog)
            if why:
                out.append((rel, why))
    return out


def _why_uncopyable(path: str, in_commitlog: bool) -> str | None:
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        try:
            target = os.stat(path)
        except OSError as e:
            return f"a symbolic link that leads nowhere ({e.strerror})"
        if stat.S_ISDIR(target.st_mode):
            return "a symbolic link to a directory: a copy would not follow it and lose what is behind it"
        st = target
    if stat.S_ISDIR(st.st_mode):
        if in_commitlog:
            return "a directory inside commitlog/, where RocketMQ maps every entry as a segment"
        return None if os.access(path, os.R_OK | os.X_OK) else "a directory that cannot be read"
    if not stat.S_ISREG(st.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device"
        return f"{kind}, not a file RocketMQ writes"
    return None if os.access(path, os.R_OK) else "a file that cannot be read"
