"""Where a store's files live: the one owner of every file name in a RocketMQ store directory.

    {root}/commitlog/{20-digit base offset}                 CommitLog segments
    {root}/consumequeue/{topic}/{queue id}/{20-digit CQ byte offset}
    {root}/batchconsumequeue/{topic}/{queue id}/{20-digit byte offset}   topics with queue.type=BatchCQ (5.0+)
    {root}/index/{yyyyMMddHHmmssSSS}                        IndexFiles (named by creation time)
    {root}/checkpoint, {root}/abort (+ abort.bak in 5.x), {root}/lock
    {root}/config/consumerOffset.json (+ .bak), topics.json, subscriptionGroup.json, delayOffset.json
    {root}/rocksdbstore, compaction, timerwheel, timerlog, consumequeue_ext   directories only some brokers keep

(docs/format/README.md). A bare CommitLog directory has no root: only its segments exist. Everything else
asks a ``StoreMap`` for a path instead of joining names itself — for the files we read and for those we write:
a rebuild's output directory is laid out as a store (``StoreMap.of_root(output)``: its ``consumequeue/`` and
``index/``), and the repair's staging, backup and kept stores are named beside the store by ``repair_staging``,
``repair_backup`` and ``repair_kept``. A topic read from the data becomes a directory name only through
``queue_dir``, which refuses one that is not a safe path component (``safe_component``). Listing only, nothing is opened; runs on the
driver (planning) and in executors (a queue's files). Entries that are not what their name says — special
files, directories where files belong, names out of range — are left out of listings (discovery reports
those of commitlog/; queue and index directories skip them as the broker does).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path

OFFSET_NAME = re.compile(r"^\d{20}$")          # segment and ConsumeQueue file names
QUEUE_ID_NAME = re.compile(r"^\d+$")
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
CONSUMER_OFFSETS = "consumerOffset.json"
LMQ_CONSUMER_OFFSETS = "lmqConsumerOffset.json"       # enableLmq: every group's offsets (LmqConsumerOffsetManager)
TOPICS = "topics.json"
SUBSCRIPTION_GROUPS = "subscriptionGroup.json"
DELAY_OFFSETS = "delayOffset.json"


COMMITLOG, CONSUMEQUEUE, INDEX, CONFIG = "commitlog", "consumequeue", "index", "config"
BATCHCONSUMEQUEUE = "batchconsumequeue"
CHECKPOINT, ABORT, ABORT_BAK, LOCK = "checkpoint", "abort", "abort.bak", "lock"
FIVE_X_DIRECTORIES = ("rocksdbstore", "compaction", "timerwheel", "timerlog")   # written by 5.x brokers only
CONSUME_QUEUE_EXT = "consumequeue_ext"                                          # enableConsumeQueueExt
TIMERLOG, TIMERWHEEL, TIMERCHECK, TIMERMETRICS = "timerlog", "timerwheel", "timercheck", "timermetrics"  # store.timers


DLEDGER_PREFIX, DLEDGER_DATA, DLEDGER_INDEX = "dledger-", "data", "index"   # dledger-<selfId>/data/, index/


def entry_frame(path: str) -> int:
    """Bytes of DLedger entry header before each record of the segment file at ``path``: 48 for a file of a
    DLedger data directory (``dledger-<selfId>/data/<20 digits>``, docs/format/dledger.md), 0 for a classic
    CommitLog segment. The path says it: a DLedger store keeps its old classic segments in ``commitlog/``."""
    parent = os.path.dirname(os.path.abspath(path))
    if os.path.basename(parent) != DLEDGER_DATA:
        return 0
    return 48 if os.path.basename(os.path.dirname(parent)).startswith(DLEDGER_PREFIX) else 0


def offset_name(offset: int) -> str:
    """The 20-digit name of a CommitLog segment (its base offset) or ConsumeQueue file (its queue byte
    offset)."""
    return f"{offset:020d}"


def index_file_name(ms: int) -> str:
    """An IndexFile's name for a creation time (ms since the epoch): yyyyMMddHHmmssSSS, UTC."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y%m%d%H%M%S%f")[:-3]


def safe_component(name: str) -> bool:
    """Whether a name read from data (a topic) can be one directory name: not empty, ``.``/``..``, no ``/``,
    NUL or other control character, at most 255 bytes."""
    return (bool(name) and name not in (".", "..") and "/" not in name
            and not any(ord(c) < 0x20 or ord(c) == 0x7F for c in name)
            and len(name.encode("utf-8", "surrogatepass")) <= 255)


class UnsafeName(ValueError):
    """A name read from data that cannot be a directory name (``safe_component``)."""


def repair_staging(target: Path, plan_id: str) -> Path:
    """Where a repair builds the repaired store before publishing it at ``target`` (hidden, beside it)."""
    return target.parent / f".{target.name}.repair-{plan_id}"


def repair_backup(store: Path, plan_id: str) -> Path:
    """Where an in-place repair keeps the old store by default (beside it)."""
    return store.parent / f"{store.name}.before-repair-{plan_id}"


def repair_kept(store: Path, plan_id: str) -> Path:
    """Where a rollback keeps the repaired store it takes out of place (beside it)."""
    return store.parent / f"{store.name}.repaired-{plan_id}"


def parse_offset_name(name: str) -> int | None:
    """The offset a 20-digit file name stands for; None if the name is not one or exceeds int64."""
    if not OFFSET_NAME.match(name):
        return None
    value = int(name)
    return value if value <= INT64_MAX else None


def display_name(name: str) -> str:
    """A file name or path as valid text: undecodable bytes (kept by Python as surrogate escapes) become
    U+FFFD."""
    return os.fsencode(name).decode("utf-8", "replace")


@functools.lru_cache(maxsize=1 << 16)
def relative_name(path: str, root: str) -> str:
    """``os.path.relpath(path, root)``, without its two ``abspath`` calls when ``path`` is a clean path under
    ``root`` (as the store's listings give them): per file of a store with thousands, that is most of the cost.
    Remembered (a pure function of its two strings): a scrub run names each queue file four or five times."""
    if path.startswith(root) and path[len(root):len(root) + 1] == os.sep:
        rest = path[len(root) + 1:]
        if rest and f"{os.sep}." not in os.sep + rest and os.sep * 2 not in rest and not rest.endswith(os.sep):
            return rest
    return os.path.relpath(path, root)


def is_regular_file(path) -> bool:
    """A regular file (symlinks followed); False for anything that cannot be stat'ed (loops, dangling)."""
    try:
        return stat.S_ISREG(stat_once(path).st_mode)
    except OSError:
        return False


def stat_once(path) -> os.stat_result:
    """``os.stat`` of ``path`` (symlinks followed); inside ``listed_once``, the block's first one of it (an
    error is not kept: asked again, it stats again)."""
    stats = _STATS
    if stats is None:
        return os.stat(path)
    key = os.fspath(path)
    found = stats.get(key)
    if found is None:
        found = stats[key] = os.stat(key)
    return found


_LISTED: dict | None = None          # queue directory -> its ``StoreMap.queue_files`` (and a queue tree -> its
                                     # ``StoreMap.queue_dirs``), inside ``listed_once``
_STATS: dict | None = None           # path -> its ``stat_once``, inside ``listed_once``
_LISTED_USERS = 0
_LISTED_LOCK = threading.Lock()


@contextlib.contextmanager
def listed_once():
    """Inside the block (a scrub run, on the driver: its queue check, the state it records, its refusal, the
    recovery report and the settings each list every queue directory and stat its files),
    ``StoreMap.queue_dirs`` lists each queue tree once, ``StoreMap.queue_files`` each directory once and
    ``stat_once`` stats each file once, and every later caller gets that: one view of the run. A file's size and times are so taken before anything of it is read
    (the listing stats each file), which is what whoever trusts a file by them records
    (``verify.cross.file_stat``): bytes a broker appends during the run move them for the next. Blocks may nest
    or overlap (threads): the listings and stats go when the last one ends."""
    global _LISTED, _STATS, _LISTED_USERS
    with _LISTED_LOCK:
        _LISTED_USERS += 1
        if _LISTED is None:
            _LISTED, _STATS = {}, {}
    try:
        yield
    finally:
        with _LISTED_LOCK:
            _LISTED_USERS -= 1
            if not _LISTED_USERS:
                _LISTED = _STATS = None


@dataclass(frozen=True)
class StoreMap:
    """The file names of one store (``root``) or of a bare CommitLog directory (``root`` None). Picklable:
    partitions carry it to executors. ``commitlog_dirs``: the directories of a multi-path CommitLog
    (``storePathCommitLog`` with several, store.multipath), empty for the one ``commitlog_dir``."""
    root: Path | None
    commitlog_dir: Path
    commitlog_dirs: tuple[Path, ...] = ()

    @classmethod
    def of_root(cls, root) -> "StoreMap":
        root = Path(root)
        return cls(root, root / COMMITLOG)

    def _under_root(self, *parts: str) -> Path | None:
        return None if self.root is None else self.root.joinpath(*parts)

    @property
    def base(self) -> Path:
        """The directory store-relative names are relative to: the root, or a bare CommitLog's parent."""
        return self.root or self.commitlog_dir.parent

    def relative(self, path) -> str:
        """``path`` as a store-relative name (``commitlog/00000000000000000000``)."""
        return os.path.relpath(path, self.base)

    # ------------------------------------------------------------------------------------ commitlog

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        """Every directory the CommitLog's segments are listed from."""
        return self.commitlog_dirs or (self.commitlog_dir,)

    def segment_path(self, base_offset: int, segment_size: int | None = None) -> Path:
        """The segment file of ``base_offset``: where it is, in whichever CommitLog directory; where RocketMQ
        would create it if it is nowhere (multi-path: the (base / size)-th of the sorted directory names,
        modulo their count, as ``MultiPathMappedFileQueue.tryCreateMappedFile`` places it; without the segment
        size, the first directory)."""
        name = offset_name(base_offset)
        if not self.commitlog_dirs:
            return self.commitlog_dir / name
        for d in self.commitlog_dirs:
            if (d / name).exists():
                return d / name
        ordered = sorted(self.commitlog_dirs, key=str)
        return ordered[(base_offset // segment_size) % len(ordered) if segment_size else 0] / name

    # --------------------------------------------------------------------------------- consumequeue

    @property
    def consumequeue_dir(self) -> Path | None:
        return self._under_root(CONSUMEQUEUE)

    def queue_dir(self, topic: str, queue_id: int) -> Path:
        """consumequeue/{topic}/{queue_id} (a store with a root); UnsafeName for a topic that cannot be a
        directory name."""
        if not safe_component(topic):
            raise UnsafeName(f"topic {topic!r} cannot be a directory name")
        return self._under_root(CONSUMEQUEUE, topic, str(int(queue_id)))

    def queue_file_path(self, topic: str, queue_id: int, file_offset: int) -> Path:
        """The ConsumeQueue file of ``topic``/``queue_id`` whose first entry is at queue byte ``file_offset``."""
        return self.queue_dir(topic, queue_id) / offset_name(file_offset)

    @staticmethod
    def queue_file_name(topic: str, queue_id: int, file_offset: int) -> str:
        """The store-relative name of that file, for reports only (any topic; never opened)."""
        return f"{CONSUMEQUEUE}/{topic}/{queue_id}/{offset_name(file_offset)}"

    @property
    def batch_consumequeue_dir(self) -> Path | None:
        return self._under_root(BATCHCONSUMEQUEUE)

    def batch_queue_dir(self, topic: str, queue_id: int) -> Path:
        """batchconsumequeue/{topic}/{queue_id}; UnsafeName as ``queue_dir``."""
        if not safe_component(topic):
            raise UnsafeName(f"topic {topic!r} cannot be a directory name")
        return self._under_root(BATCHCONSUMEQUEUE, topic, str(int(queue_id)))

    def batch_queue_dirs(self) -> list[tuple[str, int, Path]]:
        """(topic, queue_id, directory) of every BatchConsumeQueue, listed as ``queue_dirs``."""
        return self.queue_dirs(self.batch_consumequeue_dir)

    def queue_dirs(self, under: Path | None = None) -> list[tuple[str, int, Path]]:
        """(topic, queue_id, directory) of every ConsumeQueue (``under``: of another queue tree), as RocketMQ loads
        them: queue directories whose names are not integers are skipped, as the broker skips them (inside
        ``listed_once``, the block's first listing of the tree)."""
        cq = self.consumequeue_dir if under is None else under
        listed = _LISTED
        if listed is None or cq is None:
            return self._queue_dirs(cq)
        key = ("queue dirs", os.fspath(cq))
        if key not in listed:
            listed[key] = self._queue_dirs(cq)
        return list(listed[key])

    @staticmethod
    def _queue_dirs(cq: Path | None) -> list[tuple[str, int, Path]]:
        out = []
        if cq is None or not cq.is_dir():
            return out
        for topic_dir in sorted(cq.iterdir()):
            if not topic_dir.is_dir() or topic_dir.is_symlink():
                continue
            for qdir in sorted(topic_dir.iterdir(), key=lambda p: (len(p.name), p.name)):
                if qdir.is_dir() and QUEUE_ID_NAME.match(qdir.name) and int(qdir.name) <= INT32_MAX:
                    out.append((display_name(topic_dir.name), int(qdir.name), qdir))
        return out

    @staticmethod
    def queue_files(queue_dir) -> list[tuple[str, int]]:
        """(path, CQ byte offset of its first entry) of a queue directory's files, in offset order (inside
        ``listed_once``, the block's first listing of it)."""
        listed = _LISTED
        if listed is None:
            return StoreMap._queue_files(queue_dir)
        key = os.fspath(queue_dir)
        if key not in listed:
            listed[key] = StoreMap._queue_files(queue_dir)
        return list(listed[key])

    @staticmethod
    def _queue_files(queue_dir) -> list[tuple[str, int]]:
        files = []
        for name in os.listdir(queue_dir):
            offset = parse_offset_name(name)
            path = os.path.join(queue_dir, name)
            if offset is not None and is_regular_file(path):
                files.append((path, offset))
        return sorted(files, key=lambda f: f[1])

    # ---------------------------------------------------------------------------------------- index

    @property
    def index_dir(self) -> Path | None:
        return self._under_root(INDEX)

    def index_path(self, name: str) -> Path:
        """index/{name}: an IndexFile (``index_file_name``) of a store with a root."""
        return self._under_root(INDEX, name)

    def index_files(self) -> list[Path]:
        """IndexFiles in name (= creation time) order."""
        d = self.index_dir
        if d is None or not d.is_dir():
            return []
        return [f for f in sorted(d.iterdir()) if f.name.isdigit() and is_regular_file(f)]

    # ---------------------------------------------------------------------------- small store files

    @property
    def checkpoint_path(self) -> Path | None:
        return self._under_root(CHECKPOINT)

    @property
    def abort_path(self) -> Path | None:
        return self._under_root(ABORT)

    @property
    def abort_bak_path(self) -> Path | None:
        return self._under_root(ABORT_BAK)

    @property
    def lock_path(self) -> Path | None:
        return self._under_root(LOCK)

    def five_x_dirs(self) -> list[Path]:
        """The directories only 5.x brokers write (``FIVE_X_DIRECTORIES``) that exist in the store."""
        return [p for p in (self._under_root(n) for n in FIVE_X_DIRECTORIES) if p is not None and p.is_dir()]

    @property
    def consume_queue_ext_dir(self) -> Path | None:
        return self._under_root(CONSUME_QUEUE_EXT)

    def config_path(self, name: str) -> Path | None:
        return self._under_root(CONFIG, name)

    def config_paths(self, name: str) -> tuple[Path, Path] | tuple[()]:
        """config/{name} and its .bak, in the order the broker's ConfigManager.load tries them (none without
        a root)."""
        main = self.config_path(name)
        return () if main is None else (main, main.with_name(name + ".bak"))

    def consumer_offsets_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(CONSUMER_OFFSETS)

    def lmq_consumer_offsets_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(LMQ_CONSUMER_OFFSETS)

    def topics_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(TOPICS)

    def subscription_groups_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(SUBSCRIPTION_GROUPS)

    def delay_offsets_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(DELAY_OFFSETS)

    # ------------------------------------------------------------------------- timers (store.timers)

    @property
    def timerlog_dir(self) -> Path | None:
        return self._under_root(TIMERLOG)

    @property
    def timerwheel_path(self) -> Path | None:
        return self._under_root(TIMERWHEEL)

    @property
    def timercheck_path(self) -> Path | None:
        return self.config_path(TIMERCHECK)

    def timermetrics_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(TIMERMETRICS)

    def timerlog_files(self) -> list[tuple[int, Path]]:
        """(base offset, path) of every TimerLog file, by offset (names that are not 20 digits are skipped, as
        MappedFileQueue.load would fail on them)."""
        d = self.timerlog_dir
        if d is None or not d.is_dir():
            return []
        return sorted((int(e.name), Path(e.path)) for e in os.scandir(d)
                      if OFFSET_NAME.match(e.name) and is_regular_file(e.path))
