"""Where a store's files live: the one owner of every file name in a RocketMQ store directory.

    {root}/commitlog/{20-digit base offset}                 CommitLog segments
    {root}/consumequeue/{topic}/{queue id}/{20-digit CQ byte offset}
    {root}/index/{yyyyMMddHHmmssSSS}                        IndexFiles (named by creation time)
    {root}/checkpoint, {root}/abort, {root}/lock
    {root}/config/consumerOffset.json (+ .bak), topics.json, subscriptionGroup.json, delayOffset.json

(docs/format/README.md). A bare CommitLog directory has no root: only its segments exist. Everything else
asks a ``StoreMap`` for a path instead of joining names itself. Listing only, nothing is opened; runs on the
driver (planning) and in executors (a queue's files). Entries that are not what their name says — special
files, directories where files belong, names out of range — are left out of listings (discovery reports
those of commitlog/; queue and index directories skip them as the broker does).
"""
from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

OFFSET_NAME = re.compile(r"^\d{20}$")          # segment and ConsumeQueue file names
QUEUE_ID_NAME = re.compile(r"^\d+$")
INT64_MAX = (1 << 63) - 1
INT32_MAX = (1 << 31) - 1
CONSUMER_OFFSETS = "consumerOffset.json"
TOPICS = "topics.json"
SUBSCRIPTION_GROUPS = "subscriptionGroup.json"
DELAY_OFFSETS = "delayOffset.json"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


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


def is_regular_file(path) -> bool:
    """A regular file (symlinks followed); False for anything that cannot be stat'ed (loops, dangling)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@dataclass(frozen=True)
class StoreMap:
    """The file names of one store (``root``) or of a bare CommitLog directory (``root`` None). Picklable:
    partitions carry it to executors."""
    root: Path | None
    commitlog_dir: Path

    @classmethod
    def of_root(cls, root) -> "StoreMap":
        root = Path(root)
        return cls(root, root / "commitlog")

    def _under_root(self, *parts: str) -> Path | None:
        return None if self.root is None else self.root.joinpath(*parts)

    # ------------------------------------------------------------------------------------ commitlog

    def segment_path(self, base_offset: int) -> Path:
        return self.commitlog_dir / segment_name(base_offset)

    # --------------------------------------------------------------------------------- consumequeue

    @property
    def consumequeue_dir(self) -> Path | None:
        return self._under_root("consumequeue")

    def queue_dirs(self) -> list[tuple[str, int, Path]]:
        """(topic, queue_id, directory) of every ConsumeQueue, as RocketMQ loads them: queue directories whose
        names are not integers are skipped, as the broker skips them."""
        out = []
        cq = self.consumequeue_dir
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
        """(path, CQ byte offset of its first entry) of a queue directory's files, in offset order."""
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
        return self._under_root("index")

    def index_files(self) -> list[Path]:
        """IndexFiles in name (= creation time) order."""
        d = self.index_dir
        if d is None or not d.is_dir():
            return []
        return [f for f in sorted(d.iterdir()) if f.name.isdigit() and is_regular_file(f)]

    # ---------------------------------------------------------------------------- small store files

    @property
    def checkpoint_path(self) -> Path | None:
        return self._under_root("checkpoint")

    @property
    def abort_path(self) -> Path | None:
        return self._under_root("abort")

    @property
    def lock_path(self) -> Path | None:
        return self._under_root("lock")

    def config_path(self, name: str) -> Path | None:
        return self._under_root("config", name)

    def config_paths(self, name: str) -> tuple[Path, Path] | tuple[()]:
        """config/{name} and its .bak, in the order the broker's ConfigManager.load tries them (none without
        a root)."""
        main = self.config_path(name)
        return () if main is None else (main, main.with_name(name + ".bak"))

    def consumer_offsets_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(CONSUMER_OFFSETS)

    def topics_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(TOPICS)

    def subscription_groups_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(SUBSCRIPTION_GROUPS)

    def delay_offsets_paths(self) -> tuple[Path, Path] | tuple[()]:
        return self.config_paths(DELAY_OFFSETS)
