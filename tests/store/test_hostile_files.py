"""Hostile store files other than CommitLog records: bounded work and memory, no crash, the broker's fallbacks."""
from __future__ import annotations

import os
import shutil
import struct

import numpy as np
import pytest

from rocketstore_spark.codec import consumequeue, indexfile
from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS
from rocketstore_spark.store.files import read_checkpoint, read_consumer_offsets
from rocketstore_spark.store.indexes import iter_entries, read_index_file
from rocketstore_spark.store.layout import StoreMap, offset_name
from rocketstore_spark.store.queues import read_queue
from tests.golden.goldens import all_goldens

CLEAN = {g.id: g for g in all_goldens()}["5.5.1/clean"].store


def test_a_sparse_giant_queue_file_reads_nothing_without_reading_it_all(tmp_path):
    q = tmp_path / "consumequeue" / "T" / "0"
    q.mkdir(parents=True)
    entries = consumequeue.encode_entries([0, 100], [100, 90], [0, 0])
    with open(q / offset_name(0), "wb") as f:
        f.write(entries)
        f.truncate(64 << 30)
    chunks = list(read_queue(str(q)))
    assert [c.queue_offsets.tolist() for c in chunks] == [[0, 1]]


def test_queue_directories_beyond_int32_are_skipped_and_topic_names_become_text(tmp_path):
    cq = tmp_path / "consumequeue"
    (cq / "T" / "1099511627776").mkdir(parents=True)
    (cq / "T" / "3").mkdir()
    bad = os.fsdecode(b"topic-\xff")
    (cq / bad / "0").mkdir(parents=True)
    dirs = StoreMap.of_root(tmp_path).queue_dirs()
    assert [(t, q) for t, q, _ in dirs] == [("T", 3), ("topic-\ufffd", 0)]
    assert dirs[1][2] == cq / bad / "0"                               # the path keeps the real bytes


def test_an_index_header_claiming_billions_of_entries_reads_what_the_file_holds(tmp_path):
    geometry = indexfile.Geometry(hash_slot_num=64, index_num=256)
    header = {"begin_timestamp": 1, "end_timestamp": 2, "index_count": (1 << 31) - 1}
    entries = np.zeros(3, dtype=indexfile.ENTRY_DTYPE)
    entries["key_hash"] = [0, 11, 22]
    path = tmp_path / "20261123000000000"
    path.write_bytes(indexfile.encode(header, np.zeros(64), entries, geometry))
    view = read_index_file(str(path), 64)
    assert view.entry_count == 255                                   # bounded by the geometry, not the header
    got = np.concatenate([e for _, e in iter_entries(view, chunk_entries=100)])
    assert len(got) == 255 and got["key_hash"][:2].tolist() == [11, 22]
    with open(path, "r+b") as f:                                     # a truncated file: what is there
        f.truncate(geometry.entries_start + 10 * indexfile.ENTRY_SIZE + 7)
    view = read_index_file(str(path), 64)
    assert view.geometry is None and list(iter_entries(view)) == []


def test_a_corrupt_checkpoint_decodes_and_its_timestamps_are_not_datetimes(tmp_path):
    from rocketstore_spark.datasource.base import timestamp
    (tmp_path / "checkpoint").write_bytes(struct.pack(">qqq", -1, 1 << 62, MAX_TIMESTAMP_MS + 1).ljust(4096, b"\0"))
    state = read_checkpoint(StoreMap.of_root(tmp_path))
    assert state.checkpoint["logics_msg_timestamp"] == 1 << 62
    assert timestamp(state.checkpoint["logics_msg_timestamp"]) is None
    assert timestamp(MAX_TIMESTAMP_MS + 1) is None and timestamp(0).year == 1970


@pytest.mark.parametrize("text", ['{"offsetTable":{"T@g":{0:null}}}', '{"offsetTable":{"T@g":{0:1e400}}}',
                                  '{"offsetTable":{"T@g":{0:9223372036854775808}}}',
                                  '{"offsetTable":{"T@g":{4294967296:1}}}', '{"offsetTable":[1]}', "[" * 100000,
                                  '{"offsetTable":{"T@g":{0:"x"}}}', '{"offsetTable":{"nogroup":{0:1}}}'])
def test_a_malformed_consumer_offsets_file_falls_back_to_the_bak(tmp_path, text):
    config = tmp_path / "config"
    config.mkdir()
    (config / "consumerOffset.json").write_text(text)
    (config / "consumerOffset.json.bak").write_text('{"offsetTable":{"T@g":{0:5,1:7}}}')
    offsets = read_consumer_offsets(StoreMap.of_root(tmp_path))
    assert offsets.rows == [("T", "g", 0, 5), ("T", "g", 1, 7)]
    assert offsets.source.endswith(".bak") and "consumerOffset.json:" in offsets.problems[0]


def test_the_store_is_not_modified_by_reading_it(tmp_path):
    from rocketstore_spark.store.records import read_table
    store = tmp_path / "store"
    shutil.copytree(CLEAN, store)
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    read_table(store)
    for topic, queue_id, qdir in StoreMap.of_root(store).queue_dirs():
        list(read_queue(str(qdir)))
    for f in StoreMap.of_root(store).index_files():
        list(iter_entries(read_index_file(str(f), 64)))
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
