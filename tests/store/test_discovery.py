"""What users type as a store path: each kind of mistake gets one line saying what it is and what to give."""
from __future__ import annotations

import os

import pytest

from rocketstore_spark.store.discovery import StorePathError, discover
from tests.golden.goldens import all_goldens

STORE = {g.id: g for g in all_goldens()}["5.5.1/clean"].store


@pytest.mark.parametrize("path,message", [
    ("/nope/store", "/nope/store: no such file or directory"),
    (str(STORE / "commitlog" / ("0" * 20)), "is a single CommitLog segment file: give its directory"),
    (str(STORE / "checkpoint"), "checkpoint is a file, not a store"),
    (str(STORE / "index"), "is neither a RocketMQ store root"),
    ("s3://bucket/store", "s3:// is not supported"),
    ("/nope/*/store", "/nope/*/store: the pattern matches nothing"),
])
def test_a_path_that_is_not_a_store_says_what_it_is(path, message):
    with pytest.raises(StorePathError, match=message.replace("*", r"\*")) as err:
        discover(path)
    assert "\n" not in str(err.value)


def test_file_urls_and_relative_paths_become_absolute_local_paths(monkeypatch):
    assert discover(f"file://{STORE}")[0].files.root == STORE
    monkeypatch.chdir(STORE.parent)
    layout = discover("store")[0]
    assert layout.name == "store" and layout.files.root == STORE              # absolute for the executors
    assert all(os.path.isabs(s.path) for s in layout.segments)


def test_a_missing_relative_path_says_where_it_was_looked_for(monkeypatch, tmp_path):
    # on Spark Connect the sources plan in the server's working directory, not the client's
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorePathError, match=rf"^tests/store: no such file or directory \(relative to {tmp_path}: "
                                             "give an absolute path\\)$"):
        discover("tests/store")
