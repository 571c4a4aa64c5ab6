"""The store map owns every file name; odd entries (links that loop, names beyond int64, special files)
are left out of listings instead of crashing them."""
from __future__ import annotations

import os

from rocketstore_spark.store.discovery import discover
import pytest

from rocketstore_spark.store.layout import (StoreMap, UnsafeName, index_file_name, offset_name, parse_offset_name,
                                            repair_backup, repair_kept, repair_staging)


def test_names():
    m = StoreMap.of_root("/data/store")
    assert str(m.segment_path(1 << 30)) == "/data/store/commitlog/00000000001073741824"
    assert str(m.checkpoint_path) == "/data/store/checkpoint" and str(m.abort_path) == "/data/store/abort"
    assert [p.name for p in m.consumer_offsets_paths()] == ["consumerOffset.json", "consumerOffset.json.bak"]
    bare = StoreMap(None, m.commitlog_dir)
    assert bare.checkpoint_path is None and bare.consumer_offsets_paths() == () and bare.index_files() == []
    assert offset_name(0) == "0" * 20 and parse_offset_name("0" * 19 + "5") == 5
    assert parse_offset_name("9" * 20) is None and parse_offset_name("123") is None


def test_the_names_we_write(tmp_path):
    m = StoreMap.of_root(tmp_path)
    assert m.queue_file_path("T", 3, 6000) == tmp_path / "consumequeue" / "T" / "3" / ("0" * 16 + "6000")
    assert m.relative(m.queue_file_path("T", 3, 0)) == StoreMap.queue_file_name("T", 3, 0) == \
        "consumequeue/T/3/" + "0" * 20
    assert m.index_path(index_file_name(1700000000123)) == tmp_path / "index" / "20231114221320123"
    assert m.relative(m.segment_path(1 << 30)) == "commitlog/00000000001073741824"
    for topic in ("", ".", "..", "a/b", "a\x00b", "x" * 256):
        with pytest.raises(UnsafeName):
            m.queue_dir(topic, 0)
    store = tmp_path / "store"
    assert repair_staging(store, "P").name == ".store.repair-P" and repair_backup(store, "P").name == \
        "store.before-repair-P" and repair_kept(store, "P").name == "store.repaired-P"
    assert {p.parent for p in (repair_staging(store, "P"), repair_backup(store, "P"))} == {tmp_path}


def test_odd_entries_in_commitlog_are_findings_not_crashes(tmp_path):
    cl = tmp_path / "commitlog"
    cl.mkdir()
    (cl / offset_name(0)).write_bytes(bytes(4096))
    os.symlink(offset_name(4096), cl / offset_name(4096))            # a link to itself: a loop
    (cl / ("9" * 20)).write_bytes(bytes(4096))                       # a name beyond int64
    os.mkfifo(cl / offset_name(8192))                               # a FIFO named like a segment
    layout = discover(tmp_path)[0]
    assert [s.base_offset for s in layout.segments] == [0]
    assert sorted(f.check for f in layout.findings) == ["store.stray_entry", "store.stray_entry", "store.stray_file"]


def test_queue_files_skip_what_is_not_a_regular_offset_named_file(tmp_path):
    q = tmp_path / "consumequeue" / "T" / "0"
    q.mkdir(parents=True)
    (q / offset_name(6000)).write_bytes(bytes(20))
    (q / offset_name(0)).write_bytes(bytes(20))
    (q / offset_name(12000)).mkdir()
    os.mkfifo(q / offset_name(18000))
    (q / ("9" * 20)).write_bytes(bytes(20))
    m = StoreMap.of_root(tmp_path)
    assert [o for _, o in m.queue_files(q)] == [0, 6000]
    assert m.queue_dirs() == [("T", 0, q)]


def test_discovery_knows_where_a_sparse_segment_s_data_ends(tmp_path):
    cl = tmp_path / "commitlog"
    cl.mkdir()
    with open(cl / offset_name(0), "wb") as f:
        f.write(b"\x01" * 10000)
        f.truncate(1 << 30)                                          # a preallocated, mostly unwritten segment
    (cl / offset_name(1 << 30)).write_bytes(b"\x01" * 5000)
    first, second = discover(tmp_path)[0].segments
    assert first.size == 1 << 30 and 10000 <= first.data_end <= 16384      # page granularity
    assert second.data_end == second.size == 5000
