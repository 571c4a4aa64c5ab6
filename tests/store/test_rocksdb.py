"""The RocksDB ConsumeQueue and RocksDB consumer offsets (storeType=defaultRocksDB) against RocketMQ 5.5.1's own
view of tests/golden/rocksdb-5.5.1/ (RocksDBGolden: the database as stored, and a real restart): every unit,
every queue's bounds, the dispatch checkpoint, the committed offsets and their lag, the recovery report
against RocketMQ's real restart; the store untouched by every command; a damaged database a finding, a locked
one read."""
from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.store import rocksdb
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.files import read_consumer_offsets
from rocketstore_spark.verify.offsets import consumer_lag
from tests.cli.helpers import run

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "rocksdb-5.5.1"
SCENARIOS = ("clean", "crash", "torn")


def manifest(scenario: str, root: Path = GOLDEN) -> dict:
    return json.loads((root / scenario / "manifest.json").read_text())


def store(scenario: str, root: Path = GOLDEN) -> Path:
    return root / scenario / "store"


def written_offsets() -> dict[tuple[str, str, int], int]:
    """(topic, group, queue) -> offset: what RocksDBGolden wrote into the clean store's config/consumerOffsets/."""
    written = {}
    for spec in manifest("clean")["consumer_offsets_written"]:        # topic@group/queue=offset
        key, _, offset = spec.rpartition("=")
        topic_group, _, queue = key.rpartition("/")
        topic, _, group = topic_group.rpartition("@")
        written[(topic, group, int(queue))] = int(offset)
    return written


def snapshot(root: Path) -> dict[str, str]:
    """Every file under ``root`` (symlinks included) and its bytes' digest."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
            for p in sorted(root.rglob("*"))}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_unit_and_max_offset_is_rocketmqs_as_stored(scenario):
    check_stored_view(scenario)


def check_stored_view(scenario: str, root: Path = GOLDEN) -> None:
    """Every unit, max offset and the checkpoint read equal RocketMQ's view as stored (also run on a fresh
    regeneration: tests/golden/test_regenerate_rocksdb.py)."""
    want = manifest(scenario, root)["stored"]
    with rocksdb.open_readonly(rocksdb.queue_db(store(scenario, root))) as rd:
        table = rocksdb.read_queue_table(rd, "consumequeue")
        assert table.max_physical_offset == want["max_physical_offset"]
        assert table.malformed == 0
        assert sorted(k for k, q in table.queues.items() if q.max) == sorted(
            (q["topic"], q["queue_id"]) for q in want["queues"])
        for q in want["queues"]:
            mine = table.queues[(q["topic"], q["queue_id"])]
            assert (mine.max[1] + 1, mine.max[0]) == (q["max_offset"], q["max_physical_offset"])
            got = [[o, *u] for offsets, units in rocksdb.read_units(rd, q["topic"], q["queue_id"], 0, q["max_offset"],
                                                                     batch=7)
                   for o, u in zip(offsets.tolist(), units.tolist())]
            assert got == q["units"], (q["topic"], q["queue_id"])


def test_queue_bounds_are_rocketmqs_after_a_clean_restart():
    # a clean shutdown: RocketMQ's restart changes nothing, so its answers then are the database's
    rec = manifest("clean")["recovery"]
    assert rec["loaded"] and rec["max_physical_offset_in_queues"] == rec["commitlog_max_offset"]
    layout = discover(str(store("clean")))[0]
    assert store_queue_bounds(layout) == {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
                                          for q in rec["queues"]}
    with rocksdb.open_readonly(rocksdb.queue_db(store("clean"))) as rd:
        for q in rec["queues"]:
            got = [[o, int(u["physical_offset"]), int(u["size"]), int(u["tags_code"])]
                   for offsets, units in rocksdb.read_units(rd, q["topic"], q["queue_id"], q["min_offset"],
                                                           q["max_offset"]) for o, u in zip(offsets.tolist(), units)]
            assert got == q["units"]


def test_a_crashed_store_is_read_as_its_database_holds_it():
    # RocketMQ writes the ConsumeQueue without a WAL: the crash kept what was flushed; its restart re-dispatches
    # from the checkpoint on. The bounds read are the stored ones, not the restart's.
    m = manifest("crash")
    stored = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["stored"]["queues"]}
    assert m["recovery"]["dispatch_from_physical_offset"] == m["stored"]["max_physical_offset"]
    assert m["stored"]["max_physical_offset"] < m["recovery"]["commitlog_max_offset"]
    bounds = store_queue_bounds(discover(str(store("crash")))[0])
    assert {k: hi for k, (lo, hi) in bounds.items()} == stored
    assert all(lo == 0 for lo, hi in bounds.values())


def test_consumer_offsets_come_from_rocksdb_with_their_lag():
    written = written_offsets()
    layout = discover(str(store("clean")))[0]
    offsets = read_consumer_offsets(layout.files)
    assert offsets.source.endswith("config/consumerOffsets") and not offsets.problems
    assert {(t, g, q): o for t, g, q, o in offsets.rows} == written
    bounds = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
              for q in manifest("clean")["recovery"]["queues"]}
    lags = {(x.topic, x.consumer_group, x.queue_id): x for x in consumer_lag([layout]).lags}
    assert lags.keys() == written.keys()
    for key, offset in written.items():
        b = bounds.get((key[0], key[2]))
        lag = lags[key]
        assert (lag.min_offset, lag.max_offset) == (b if b else (None, None))
        if b is None:
            assert lag.status == "unknown_queue"
        else:
            assert lag.status == ("beyond_max" if offset > b[1] else "caught_up" if offset == b[1] else "in_range")
            assert lag.lag == b[1] - min(max(offset, b[0]), b[1])
    # the lag's age: the store times of the records the units point at (RocketMQ's units carry the same)
    units = {(q["topic"], q["queue_id"]): {u[0]: u[4] for u in q["units"]} for q in manifest("clean")["stored"]["queues"]}
    for (topic, group, queue), lag in lags.items():
        if lag.status == "in_range":
            assert lag.oldest_unconsumed_timestamp == units[(topic, queue)][lag.consumer_offset]
            assert lag.newest_timestamp == units[(topic, queue)][lag.max_offset - 1]
    # a reset to a time: the first unit stored at or after it (here the 5th unit of TopicTest/0)
    at = units[("TopicTest", 0)][4]
    plan = {(p["topic"], p["queue_id"], p["consumer_group"]): p["new_offset"]
            for p in consumer_lag([layout], "to-datetime", _iso(at)).plan}
    first = min(o for o, t in units[("TopicTest", 0)].items() if t >= at)
    assert plan[("TopicTest", 0, "golden_in_range")] == first


def _iso(ms: int) -> str:
    import datetime as dt
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()


def test_commands_leave_the_store_untouched_and_refuse_what_they_cannot_do(tmp_path):
    before = {s: snapshot(store(s)) for s in SCENARIOS}
    for s in SCENARIOS:
        assert run("inspect", store(s)).exit_code == 0
        r = run("offsets", store(s), "--json")
        assert r.exit_code in (0, 3), r.output
        assert run("recover", "report", store(s), "--json").exit_code in (0, 3)
        assert run("rebuild", store(s), "--output", tmp_path / f"rebuilt-{s}", "--json").exit_code in (0, 3)
        r = run("recover", "plan", store(s), "--output", tmp_path / f"plan-{s}")
        assert r.exit_code == 2 and "RocksDB ConsumeQueue" in r.output and "refusing" in r.output, r.output
        # what reads ConsumeQueue files still refuses, rather than finding nothing
        r = run("query", store(s), "--topic", "TopicTest", "--queue", 0, "--queue-offset", 0)
        assert r.exit_code == 2 and "cannot read the ConsumeQueue files" in r.output, r.output
    assert {s: snapshot(store(s)) for s in SCENARIOS} == before


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_recovery_report_is_rocketmqs_restart(scenario):
    # clean: nothing to do; crash: the walk from the segment at or below the database's checkpoint, every record
    # dispatched again; torn: the log ends before the checkpoint, the re-dispatch brings the maxes back
    check_restart(scenario)


def check_restart(scenario: str, root: Path = GOLDEN) -> None:
    """The recovery report equals RocketMQ's real restart of the store (its manifest's ``recovery``)."""
    from rocketstore_spark.recovery.report import recovery_report
    m = manifest(scenario, root)
    rec = m["recovery"]
    doc, _ = recovery_report(str(store(scenario, root)))
    assert doc["store_type"] == "defaultRocksDB" and doc["max_cq"] == m["stored"]["max_physical_offset"]
    assert doc["shutdown"] == ("abnormal" if m["abort_present"] else "normal")
    assert doc["process_offset"] == rec["commitlog_max_offset"]
    assert sorted(doc["commitlog_files_deleted"] + doc["index_files_deleted"]) == sorted(
        f for f in rec["files_deleted"] if f.startswith(("commitlog/", "index/")))
    dispatched = rec["dispatched_during_load"]
    if dispatched["records"]:
        assert (doc["dispatch"]["from"], doc["dispatch"]["to"]) == (dispatched["first_physical_offset"],
                                                                    dispatched["end_physical_offset"])
    assert {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]} == {
        (q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in rec["queues"]}


def test_verify_checks_the_units_against_the_commitlog():
    from rocketstore_spark.verify.store import verify_store
    queue_findings = lambda v: [f for f in v.findings if f.check.startswith("consumequeue.")]   # noqa: E731
    # clean: nothing to say; every queue's bounds are RocketMQ's
    v = verify_store(str(store("clean")))
    assert queue_findings(v) == []
    assert {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in v.queues} == {
        (q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in manifest("clean")["recovery"]["queues"]}
    # crash: the records the database lost are lagging, as many per queue as RocketMQ's restart adds back
    m = manifest("crash")
    stored = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["stored"]["queues"]}
    restarted = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["recovery"]["queues"]}
    v = verify_store(str(store("crash")))
    assert {f.check for f in queue_findings(v)} == {"consumequeue.lagging"}
    assert {(f.topic, f.queue_id): f.evidence["records"] for f in queue_findings(v)} == {
        k: n - stored.get(k, 0) for k, n in restarted.items() if n > stored.get(k, 0)}
    # torn: the damaged record's unit no longer matches its dispatch (RocketMQ's restart re-dispatches it with
    # the tagsCode we expect), and a unit points where the log now ends (RocketMQ's restart still serves it)
    m = manifest("torn")
    after = {(q["topic"], q["queue_id"]): {u[0]: u[1:] for u in q["units"]} for q in m["recovery"]["queues"]}
    v = verify_store(str(store("torn")))
    found = {f.check: f for f in queue_findings(v)}
    assert sorted(found) == ["consumequeue.entry_mismatch", "consumequeue.extra_entry"]
    f = found["consumequeue.entry_mismatch"]
    assert [f.evidence["expected_physical_offset"], f.evidence["expected_size"], f.evidence["expected_tags_code"]] \
        == after[(f.topic, f.queue_id)][f.queue_offset]
    f = found["consumequeue.extra_entry"]
    assert f.physical_offset == m["recovery"]["commitlog_max_offset"] == after[(f.topic, f.queue_id)][f.queue_offset][0]


def _copy(tmp_path: Path, scenario: str = "clean") -> Path:
    dst = tmp_path / "store"
    shutil.copytree(store(scenario), dst)
    return dst


@pytest.mark.parametrize("damage", ["manifest-missing", "sst-truncated", "sst-block-flipped", "not-a-consume-queue"])
def test_a_damaged_database_is_a_finding_naming_it(tmp_path, damage):
    root = _copy(tmp_path)
    db = root / "consumequeue"
    if damage == "manifest-missing":
        for p in db.glob("MANIFEST-*"):
            p.unlink()
    elif damage == "sst-truncated":
        for p in db.glob("*.sst"):
            p.write_bytes(p.read_bytes()[:100])
    elif damage == "sst-block-flipped":             # a data block's bytes: the open succeeds, reading fails
        for p in db.glob("*.sst"):
            data = bytearray(p.read_bytes())
            data[40:48] = bytes(b ^ 0xFF for b in data[40:48])
            p.write_bytes(bytes(data))
    else:                                      # a RocksDB database of another kind where the queues belong
        shutil.rmtree(db)
        shutil.copytree(root / "config" / "consumerOffsets", db)
    r = run("offsets", root)
    assert r.exit_code == 3, r.output
    assert "rocksdb.unreadable" in r.output and str(db) in r.output and "Traceback" not in r.output
    r = run("inspect", root, "--json")
    assert r.exit_code in (0, 3) and "rocksdb.unreadable" in r.output


def test_damaged_consumer_offsets_are_a_problem_not_a_traceback(tmp_path):
    root = _copy(tmp_path)
    for p in (root / "config" / "consumerOffsets").glob("*.sst"):
        p.write_bytes(b"\0" * 64)
    offsets = read_consumer_offsets(discover(str(root))[0].files)
    assert offsets.rows == [] and any("config/consumerOffsets" in p for p in offsets.problems)
    r = run("offsets", root)
    assert r.exit_code == 3 and "offsets.unreadable" in r.output and "config/consumerOffsets" in r.output


def test_a_database_a_broker_holds_is_read_without_its_lock(tmp_path):
    root = _copy(tmp_path)
    lock = root / "consumequeue" / "LOCK"
    with open(lock, "r+b") as held:
        fcntl.lockf(held, fcntl.LOCK_EX | fcntl.LOCK_NB)      # as RocksDB's PosixEnv::LockFile holds it
        before = snapshot(root)
        bounds = store_queue_bounds(discover(str(root))[0])
        assert len(bounds) == len(manifest("clean")["stored"]["queues"])
        assert snapshot(root) == before


@pytest.mark.parametrize("job,refused", [("verify", "cannot read the ConsumeQueue files"),
                                         ("rebuild", "cannot rebuild ConsumeQueues and IndexFiles")])
def test_the_spark_jobs_that_read_queue_files_refuse(tmp_path, job, refused):
    # the Spark verify and rebuild jobs work on ConsumeQueue files: one line and exit 2 before Spark starts
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    extra = ["--output", str(tmp_path / "out")] if job == "rebuild" else []
    proc = subprocess.run([sys.executable, f"jobs/{job}.py", "--store", str(store("clean")), *extra], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{job}: ") and refused in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_rebuild_writes_classic_files_and_the_differences_against_the_database(tmp_path):
    from rocketstore_spark.rebuild.output import ROCKSDB_NOTE, rebuild_store
    r = rebuild_store(str(store("clean")), tmp_path / "clean")
    assert r.store_type == "defaultRocksDB" and r.document()["note"] == ROCKSDB_NOTE
    assert {(d.kind, d.status) for d in r.differences} == {("consumequeue", "identical"), ("index", "identical")}
    assert len([d for d in r.differences if d.kind == "consumequeue"]) == len(manifest("clean")["stored"]["queues"])
    # crash: the units the database lost are missing from it, per queue as many as RocketMQ's restart adds back
    m = manifest("crash")
    stored = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["stored"]["queues"]}
    restarted = {(q["topic"], q["queue_id"]): q["max_offset"] for q in m["recovery"]["queues"]}
    r = rebuild_store(str(store("crash")), tmp_path / "crash")
    missing = {(d.topic, d.queue_id): d.entries_missing for d in r.differences if d.status == "differs"}
    missing |= {(d.topic, d.queue_id): restarted[(d.topic, d.queue_id)] for d in r.differences
                if d.status == "only_rebuilt"}
    assert missing == {k: n - stored.get(k, 0) for k, n in restarted.items() if n > stored.get(k, 0)}
    assert not any(d.entries_extra or d.entries_changed for d in r.differences if d.kind == "consumequeue")
