"""Durable, atomic file writes for everything we write outside a store (rebuilt ConsumeQueues and IndexFiles,
exports, repair plans and journals) and for the repair's staged store.

A file is written under a temporary name beside its final one (``temporary``), fsynced, renamed over the final
name, and the directory holding it fsynced: after a crash the final name holds either nothing (or the old
file) or the complete new one, never a prefix, and a completed rename is not lost with the directory's page
cache. Runs wherever files are written (driver, executors, CLI).
"""
from __future__ import annotations

import os
from pathlib import Path

from rocketstore_spark.documents import json_text


def temporary(path: Path) -> Path:
    """Where ``path`` is written until it is complete (``.NAME.tmp`` beside it)."""
    return path.with_name(f".{path.name}.tmp")


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, os.O_RDONLY | flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (created, renamed, removed files) durable."""
    _fsync(path, os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    _fsync(path, 0)


def publish(tmp: Path, path: Path, sync_dir: bool = True) -> None:
    """The complete file ``tmp`` fsynced and renamed to ``path`` (replacing it), the directory fsynced.
    ``sync_dir=False``: for a writer that publishes many files and then fsyncs their directories once
    (``fsync_dirs``; one journal commit then covers every rename instead of one commit per file)."""
    fsync_file(tmp)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(path.parent)


def rename(a: Path, b: Path) -> None:
    """``a`` renamed to ``b`` (which must not exist as a non-empty directory), ``b``'s directory fsynced."""
    os.rename(a, b)
    fsync_dir(b.parent)


def write_text(path: Path, text: str) -> None:
    """``text`` (UTF-8) to ``path`` atomically and durably."""
    tmp = temporary(path)
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        publish(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, obj) -> None:
    """``obj`` as indented JSON to ``path`` atomically and durably (values JSON cannot hold as their str)."""
    write_text(path, json_text(obj) + "\n")


def fsync_tree(root: Path) -> None:
    """Every regular file under ``root`` and every directory, ``root`` included, fsynced (symlinks skipped)."""
    for dirpath, _, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                fsync_file(Path(p))
        fsync_dir(Path(dirpath))


def fsync_dirs(root: Path) -> None:
    """Every directory under ``root``, ``root`` and its parent included, fsynced: the files published into
    a tree with ``sync_dir=False`` and the directories created for them are durable."""
    for dirpath, _, _ in os.walk(root):
        fsync_dir(Path(dirpath))
    fsync_dir(root.parent)
