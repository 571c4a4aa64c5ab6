"""ConsumeQueue damage the golden stores do not plant, made on copies of a RocketMQ-written store: a lost middle
file, a cut file, a duplicated entry."""
from __future__ import annotations


import numpy as np

from rocketstore_spark.checks import Severity
from rocketstore_spark.codec import consumequeue
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import all_goldens
from tests.store_files import copy_store

CLEAN = {g.id: g for g in all_goldens()}["5.5.1/clean"]


def problems(store):
    return [f for f in verify_store(str(store)).findings if f.severity != Severity.INFO]


def test_a_lost_middle_file_is_a_gap_with_missing_entries(tmp_path):
    store = copy_store(CLEAN.store, tmp_path / "store")
    queue = store / "consumequeue" / "TopicTest" / "0"
    files = sorted(queue.iterdir())
    assert len(files) >= 3
    lost = files[1]
    lost.unlink()
    found = problems(store)
    gap = [f for f in found if f.check == "consumequeue.file_gap"]
    assert [(f.file, f.topic, f.queue_id) for f in gap] == [(str(files[2].relative_to(store)), "TopicTest", 0)]
    missing = [f for f in found if f.check == "consumequeue.missing_entry"]
    per_file = 500 // 20
    first = int(lost.name) // 20
    listed = [f.queue_offset for f in missing if "omitted" not in f.evidence]
    assert listed == list(range(first, first + 20))
    [summary] = [f for f in missing if "omitted" in f.evidence]
    assert summary.evidence["omitted"] == per_file - 20 and summary.queue_offset == first + 20
    assert all(f.file == str(lost.relative_to(store)) for f in missing)
    assert {f.check for f in found} == {"consumequeue.file_gap", "consumequeue.missing_entry"}


def test_a_cut_file_and_a_duplicated_entry(tmp_path):
    store = copy_store(CLEAN.store, tmp_path / "store")
    queue = store / "consumequeue" / "OrderTopic" / "3"
    first = sorted(queue.iterdir())[0]
    data = bytearray(first.read_bytes())
    entries = consumequeue.decode_entries(bytes(data))
    n = consumequeue.written_count(entries)
    assert n >= 3
    data[40:60] = data[20:40]                   # entry 2 repeats entry 1
    first.write_bytes(bytes(data[:len(data) - 20]))   # and the file loses its last (unused) entry slot
    found = problems(store)
    rel = str(first.relative_to(store))
    assert [(f.check, f.file) for f in found if f.check == "consumequeue.file_size"] == [("consumequeue.file_size", rel)]
    at2 = {f.check for f in found if f.file == rel and f.file_position == 40}
    assert at2 == {"consumequeue.entry_mismatch", "consumequeue.not_increasing"}
    assert np.all([f.file == rel for f in found])
