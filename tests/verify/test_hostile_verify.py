"""Damage and hostile input found in review: each is a finding or a clear refusal, never a traceback, and
nothing is written under a store."""
from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.dispatch import split_queues
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify.offsets import check_offsets, reset_plan
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID, all_goldens
from tests.store_files import copy_store

ROOT = Path(__file__).resolve().parents[2]


def test_an_index_file_without_entries_verifies(tmp_path):
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    newest = sorted((store / "index").iterdir())[-1]
    data = bytearray(newest.stat().st_size)
    data[36:40] = struct.pack(">i", 1)                 # a freshly rolled file: no entries yet
    newest.write_bytes(bytes(data))
    v = verify_store(str(store))
    assert {f.check for f in v.findings} <= {"store.lock_present", "index.lagging", "checkpoint.index_ahead"}


def test_a_negative_queue_id_keeps_its_topic():
    import pyarrow as pa
    t = pa.table({"topic": ["A", "B", "B"], "queue_id": pa.array([-1, -1, 0], pa.int32()),
                  "queue_offset": [0, 0, 0], "physical_offset": [0, 100, 200], "total_size": [100, 100, 100],
                  "tags_code": [0, 0, 0], "transaction_type": ["NOT_TYPE"] * 3})
    assert sorted((topic, q, len(c["queue_offset"])) for topic, q, c in split_queues(t)) == \
        [("A", -1, 1), ("B", -1, 1), ("B", 0, 1)]
    assert dispatch.queue_of(dispatch.queue_keys([5], [-7])[0]) == (5, -7)


def test_a_lost_record_with_an_impossible_store_time_is_still_counted(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    store = copy_store(g.store, tmp_path / "store")
    po = g.manifest["recovery"]["commitlog_max_offset"]
    victim = next(m for m in g.messages if m["physical_offset"] > po and m["body_crc_ok"])
    seg = store / "commitlog" / victim["segment"]
    data = bytearray(seg.read_bytes())
    bh = 20 if victim["sys_flag"] & 0x10 else 8
    struct.pack_into(">q", data, victim["file_position"] + 48 + bh, 2**62)     # STORETIMESTAMP: not under BODYCRC
    seg.write_bytes(bytes(data))
    doc, _ = recovery_report(str(store))
    assert doc["lost"]["messages"] == sum(1 for m in g.messages if m["physical_offset"] >= po and m["body_crc_ok"])


def test_a_store_without_segments_is_at_risk_and_reported(tmp_path):
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    for seg in (store / "commitlog").iterdir():
        seg.unlink()
    doc, _ = recovery_report(str(store))
    assert doc["process_offset"] is None and harmful(doc)
    proc = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", "recover", "report", str(store)],
                          cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 3 and "no CommitLog segment" in proc.stdout, proc.stderr


def test_offsets_without_queue_files_and_negative_offsets(tmp_path):
    g = BY_ID["5.5.1/consumer-offsets"]
    store = copy_store(g.store, tmp_path / "store")
    path = store / "config" / "consumerOffset.json"
    path.write_text(path.read_text().replace('"TopicTest@golden_in_range":{\n\t\t\t0:51', '"TopicTest@golden_in_range":{\n\t\t\t0:-9223372036854775808'))
    shutil.rmtree(store / "consumequeue" / "OrderTopic")
    layout = discover(str(store))[0]
    v = verify_store(str(store))
    lag = {(x.consumer_group, x.topic, x.queue_id): x for x in v.offsets.lags}
    negative = lag[("golden_in_range", "TopicTest", 0)]
    assert negative.status == "below_min" and 0 <= negative.expired < 2**31
    assert lag[("golden_caught_up", "OrderTopic", 0)].status == "unknown_queue"
    assert reset_plan(layout, v.offsets.lags, "to-datetime", "2020-01-01T00:00:00")
    assert check_offsets(layout, {}).lags


def test_outputs_inside_a_store_are_refused_before_anything_is_written(tmp_path):
    store = copy_store(BY_ID["5.5.1/consumer-offsets"].store, tmp_path / "store")
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    for argv in (["-m", "rocketstore_spark.cli.main", "offsets", str(store), "--reset-file",
                  str(store / "config" / "consumerOffset.json")],
                 ["-m", "rocketstore_spark.cli.main", "audit", str(store), "--output", str(store / "checkpoint")],
                 ["jobs/verify.py", "--store", str(store), "--json", str(store / "x.json")],
                 ["jobs/verify.py", "--store", str(store), "--output", str(store)],
                 ["jobs/recovery_report.py", "--store", str(store), "--lost-output", str(store / "lost")]):
        proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 2 and "inside the store" in proc.stderr, (argv, proc.stderr)
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


def test_files_larger_than_rocketmq_writes_are_findings_and_never_read(tmp_path):
    """A sparse 64 GiB ConsumeQueue file between two real ones, and a sparse 64 GiB IndexFile: each is a finding
    naming its size (the file sizes are Java ints: RocketMQ writes no such file), nothing reads them whole
    (verify, the recovery report, the rebuild's diff, queue bounds), and the next queue file is no gap."""
    from rocketstore_spark.rebuild.output import rebuild_store
    from rocketstore_spark.rocketmq.consumequeue import queue_bounds
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    queue = next(d for d in sorted((store / "consumequeue").glob("*/*")) if len(list(d.iterdir())) == 1)
    first = next(queue.iterdir())
    size = first.stat().st_size
    giant = queue / f"{int(first.name) + size:020d}"
    with open(giant, "wb") as f:
        f.truncate(64 << 30)
    shutil.copy(first, queue / f"{int(giant.name) + size:020d}")       # the file after the giant's slot
    index = store / "index" / "29991231235959999"
    with open(index, "wb") as f:
        f.truncate(64 << 30)
    v = verify_store(str(store))
    by_file = {}
    for f in v.findings:
        by_file.setdefault(f.file, []).append(f)
    rel = str(giant.relative_to(store))
    assert [f.check for f in by_file[rel]] == ["consumequeue.file_size"] and "not read" in by_file[rel][0].message
    assert not any(f.check == "consumequeue.file_gap" for f in v.findings)
    assert any(f.check == "index.unknown_geometry" and "larger than any IndexFile" in f.message for f in v.findings)
    assert queue_bounds(str(queue), 0)[1] >= 0
    recovery_report(str(store))
    rebuild_store(str(store), str(tmp_path / "rebuilt"))


def test_queues_checked_a_group_at_a_time_give_the_verdict_of_one_group(tmp_path, monkeypatch):
    """The queued records go through spill files a queue group at a time (bounded memory): cutting every golden
    store into many groups changes nothing in its verdict, and the spill directory is gone afterwards."""
    from rocketstore_spark.verify import store as verify_module
    work = tmp_path / "work"
    work.mkdir()
    for g in all_goldens():
        one = verify_store(str(g.store), work_dir=str(work))
        monkeypatch.setattr(verify_module, "QUEUE_GROUP_BYTES", 64 << 10)       # 6-16 groups a store
        many = verify_store(str(g.store), work_dir=str(work))
        monkeypatch.undo()
        assert [(q.topic, q.queue_id, q.min_offset, q.max_offset, [f.as_row() for f in q.findings])
                for q in many.queues] == \
               [(q.topic, q.queue_id, q.min_offset, q.max_offset, [f.as_row() for f in q.findings])
                for q in one.queues], g.id
        assert [f.as_row() for f in many.findings] == [f.as_row() for f in one.findings], g.id
        assert len(one.queues) > 1, g.id
        assert list(work.iterdir()) == []


def test_spill_files_go_when_a_queue_check_fails(tmp_path, monkeypatch):
    from rocketstore_spark.verify import store as verify_module
    work = tmp_path / "work"
    work.mkdir()

    def broken(*args, **kwargs):
        raise RuntimeError("a check that fails")
    monkeypatch.setattr(verify_module, "check_queue", broken)
    with pytest.raises(RuntimeError, match="a check that fails"):
        verify_store(str(all_goldens()[0].store), work_dir=str(work))
    assert list(work.iterdir()) == []
