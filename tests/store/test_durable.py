"""Atomic, durable writes (store.durable): the final name gets the whole file or nothing, and every file and
directory entry the write made is fsynced — seen through the fsync calls themselves."""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from rocketstore_spark.store import durable


@pytest.fixture
def synced(monkeypatch):
    """The paths fsync was called on, in order."""
    seen, real = [], os.fsync

    def fsync(fd):
        seen.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_write_json_replaces_the_file_whole_and_syncs_file_then_directory(tmp_path, synced):
    target = tmp_path / "plan.json"
    target.write_text("old")
    durable.write_json(target, {"a": [1, 2], "when": Path("/x")})
    assert json.loads(target.read_text()) == {"a": [1, 2], "when": "/x"}
    assert list(tmp_path.iterdir()) == [target]                   # no temporary left
    # the file's bytes before the rename, the directory entry after it
    assert synced == [tmp_path / ".plan.json.tmp", tmp_path]


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / "journal.json"
    target.write_text("old")

    def failing(fd):
        raise OSError(errno.EIO, "Input/output error")
    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(OSError, match="Input/output error"):
        durable.write_text(target, "new")
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


def test_files_published_without_directory_syncs_are_made_durable_by_one_pass_over_the_tree(tmp_path, synced):
    root = tmp_path / "consumequeue"
    files = [root / "TopicA" / "0" / "00000000000000000000", root / "TopicA" / "1" / "00000000000000000000",
             root / "TopicB" / "0" / "00000000000006000000"]
    for f in files:
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = durable.temporary(f)
        tmp.write_bytes(b"\0" * 20)
        durable.publish(tmp, f, sync_dir=False)
    assert synced == [durable.temporary(f) for f in files]        # the files only, so far
    synced.clear()
    durable.fsync_dirs(root)
    directories = {root, tmp_path, *(f.parent for f in files), root / "TopicA", root / "TopicB"}
    assert set(synced) == directories and len(synced) == len(directories)
    assert all(f.read_bytes() == b"\0" * 20 for f in files)
