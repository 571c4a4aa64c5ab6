"""A multi-path CommitLog (store.multipath) against RocketMQ's own: the golden stores of
``tests/golden/multipath-5.5.1/`` were written by RocketMQ 5.5.1 with ``storePathCommitLog`` over two directories
(``store/commitlog`` and ``disk2/commitlog``; MultiPath.java); their manifests hold RocketMQ's decoding of every
record and its real recovery of a copy. Every row, the recovery report and the rebuild are RocketMQ's; overlaps,
gaps and a missing directory are findings or refusals, never a traceback; the store given without its second
directory is reported."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.recovery.plan import make_plan
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.engines import UnsupportedStore, Work
from rocketstore_spark.store.records import read_table
from rocketstore_spark.verify.store import verify_store
from tests.cli.helpers import run
from tests.codec.test_golden_decode import actual_row, expected_row
from tests.golden.goldens import GOLDEN_ROOT

ROOT = GOLDEN_ROOT / "multipath-5.5.1"
SCENARIOS = ("clean", "crash")


def manifest(scenario: str) -> dict:
    return json.loads((ROOT / scenario / "manifest.json").read_text())


def dirs(folder: Path) -> list[str]:
    """storePathCommitLog of a scenario folder (or a copy of one), in broker.conf's order."""
    return [str(folder / d) for d in manifest("clean")["store_path_commitlog"]]


def broker_conf(tmp_path: Path, folder: Path) -> str:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"brokerName=b\nstorePathRootDir={folder / 'store'}\nstorePathCommitLog={','.join(dirs(folder))}\n")
    return str(conf)


def copy(scenario: str, tmp_path: Path) -> Path:
    folder = tmp_path / scenario
    shutil.copytree(ROOT / scenario, folder, ignore=shutil.ignore_patterns("manifest.json"))
    return folder


def scenario_relative(folder: Path, path: str) -> str:
    """A path of a recovery report (relative to the store root) as the manifest names it (the scenario folder)."""
    return os.path.normpath(os.path.join("store", path))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_record_is_rocketmqs_at_the_offset_rocketmq_reports(scenario):
    folder = ROOT / scenario
    table, findings = read_table(folder / "store", commitlog_dirs=dirs(folder))
    want = [expected_row(m) for m in sorted(manifest(scenario)["messages"], key=lambda m: m["physical_offset"])]
    assert [actual_row(r) for r in table.to_pylist()] == want
    assert [f.check for f in findings] == ["store.multipath_commitlog"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_segments_are_listed_from_the_directories_rocketmq_put_them_in(tmp_path, scenario):
    folder = ROOT / scenario
    layout = discover(str(folder / "store"))[0]
    layout.note_broker_conf({"storePathCommitLog": ",".join(dirs(folder))})      # as --broker-conf gives it
    got = [(os.path.relpath(os.path.dirname(s.path), folder), os.path.basename(s.path)) for s in layout.segments]
    assert got == [(s["directory"], s["file"]) for s in manifest(scenario)["segments"]]
    # RocketMQ places segment k in the k-th directory by sorted name, not in broker.conf's order: disk2/ first
    assert got[0][0] == "disk2/commitlog" and not layout.refused(Work.RECOVER) and layout.refused(Work.REPAIR)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_recovery_report_is_rocketmqs_restart(tmp_path, scenario):
    folder, m = ROOT / scenario, manifest(scenario)
    doc = recovery_report(str(folder / "store"), broker_conf=broker_conf(tmp_path, folder))[0]
    rec = m["recovery"]
    assert doc["shutdown"] == ("abnormal" if m["abort_present"] else "normal")
    assert doc["process_offset"] == rec["commitlog_max_offset"]
    deleted = sorted(scenario_relative(folder, f) for f in doc["commitlog_files_deleted"] + doc["index_files_deleted"]
                     + [f for q in doc["consumequeues"] for f in q["files_deleted"]])
    assert deleted == sorted(f for f in rec["files_deleted"] if f.split("/")[1] in ("commitlog", "consumequeue", "index"))
    if rec["dispatched_during_load"]["records"]:         # the crash: abnormal recovery's start file and end
        assert doc["start_file"] == f"{rec['dispatched_during_load']['first_physical_offset']:020d}"
        assert doc["process_offset"] == rec["dispatched_during_load"]["end_physical_offset"]
    ours = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]}
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in rec_queues(m)}
    assert ours == {k: v for k, v in theirs.items() if k in ours or v[1]}
    assert doc["lost"]["messages"] == 0
    # the stop is named where it is: the last segment lies in disk2/
    assert scenario_relative(folder, doc["stop"]["file"]) == "disk2/commitlog/00000000000000262144"


def rec_queues(m: dict) -> list[dict]:
    return m["queues"]


def test_a_rebuild_writes_what_rocketmq_wrote_and_verify_is_clean(tmp_path):
    folder = ROOT / "clean"
    options = {"storePathCommitLog": ",".join(dirs(folder))}          # the explicit list, as --commitlog-path
    result = rebuild_store(str(folder / "store"), tmp_path / "out", options=options)
    assert {d.status for d in result.differences if d.kind == "consumequeue"} == {"identical"}
    assert {(q.topic, q.queue_id): q.state.max_offset for q in result.queues} == \
        {(q["topic"], q["queue_id"]): q["max_offset"] for q in manifest("clean")["queues"] if q["max_offset"]}
    v = verify_store(str(folder / "store"), options=options)
    assert [f.check for f in v.findings if f.severity != "info"] == []


def test_a_repair_is_refused_with_the_reason(tmp_path):
    folder = ROOT / "crash"
    with pytest.raises(UnsupportedStore, match="cannot repair the store: .*multi-path CommitLog.*cannot move"):
        make_plan(str(folder / "store"), tmp_path / "plan", broker_conf=broker_conf(tmp_path, folder))
    assert not (tmp_path / "plan").exists() or not any((tmp_path / "plan").iterdir())


def test_the_store_without_its_second_directory_is_reported_not_read_as_a_shorter_log(tmp_path):
    crash = ROOT / "crash"
    # only the root: its commitlog/ holds every other segment (131072 and the preallocated 393216)
    checks = [f.check for f in discover(str(crash / "store"))[0].findings]
    assert "commitlog.multipath_suspected" in checks and "commitlog.gap" in checks
    # the clean store's root holds one segment, closed by a BLANK: the log it continues in is missing, and the
    # ConsumeQueues point past the end of what is here
    v = verify_store(str(ROOT / "clean" / "store"))
    checks = {f.check for f in v.findings}
    assert {"commitlog.missing_next_segment", "consumequeue.entry_past_end"} <= checks
    # broker.conf names both directories but the copy lacks disk2/: a finding, and no verdict on part of a log
    folder = copy("crash", tmp_path)
    shutil.rmtree(folder / "disk2")
    conf = broker_conf(tmp_path, folder)
    layout = discover(str(folder / "store"))[0]
    layout.note_broker_conf({"storePathCommitLog": ",".join(dirs(folder))})
    assert "commitlog.path_missing" in [f.check for f in layout.findings]
    with pytest.raises(UnsupportedStore, match="a directory of the log is missing"):
        recovery_report(str(folder / "store"), broker_conf=conf)
    r = run("audit", folder / "store", "--broker-conf", conf)
    assert r.exit_code == 3 and "commitlog.path_missing" in r.output


@pytest.mark.parametrize("equal", [True, False])
def test_the_same_segment_in_two_directories_is_a_finding_and_refuses_the_verdict(tmp_path, equal):
    folder = copy("clean", tmp_path)
    twin = folder / "store" / "commitlog" / "00000000000000000000"
    shutil.copyfile(folder / "disk2" / "commitlog" / "00000000000000000000", twin)
    if not equal:
        data = bytearray(twin.read_bytes())
        data[1000] ^= 0xFF
        twin.write_bytes(bytes(data))
    table, findings = read_table(folder / "store", commitlog_dirs=dirs(folder))
    check = "commitlog.path_duplicate_segment" if equal else "commitlog.path_conflicting_segment"
    # the copy in the directory listed first (store/commitlog: the twin) is read, the other named
    original = folder / "disk2" / "commitlog" / twin.name
    assert [(f.file, f.evidence["kept"]) for f in findings if f.check == check] == [(str(original), str(twin))]
    if equal:            # read once: every record RocketMQ wrote, once
        want = [expected_row(m) for m in sorted(manifest("clean")["messages"], key=lambda m: m["physical_offset"])]
        assert [actual_row(r) for r in table.to_pylist()] == want
    with pytest.raises(UnsupportedStore, match="hash order"):
        recovery_report(str(folder / "store"), options={"storePathCommitLog": ",".join(dirs(folder))})
    r = run("verify", folder / "store", "--commitlog-path", dirs(folder)[0], "--commitlog-path", dirs(folder)[1])
    assert r.exit_code == 3 and check in r.output


def test_a_gap_between_the_directories_names_where_the_segment_should_be(tmp_path):
    folder = copy("clean", tmp_path)
    (folder / "store" / "commitlog" / "00000000000000131072").unlink()
    layout = discover(str(folder / "store"), commitlog_dirs=dirs(folder))[0]
    gap = [f for f in layout.findings if f.check == "commitlog.path_gap"]
    assert len(gap) == 1 and gap[0].evidence["expected_dirs"] == [str(folder / "store" / "commitlog")]
    assert "commitlog.gap" not in [f.check for f in layout.findings]


def test_a_root_commitlog_left_out_of_the_list_and_a_commitlog_directory_given_as_the_store(tmp_path):
    folder = ROOT / "crash"
    disk2 = str(folder / "disk2" / "commitlog")
    layout = discover(str(folder / "store"), commitlog_dirs=[disk2])[0]
    assert sorted(f.check for f in layout.findings if f.check.startswith("commitlog.")) == \
        ["commitlog.path_gap", "commitlog.path_unlisted"]
    # a CommitLog directory given as the store: no root, the log over the directories given
    table, findings = read_table(disk2, commitlog_dirs=dirs(folder))
    assert len(table) == len(manifest("crash")["messages"])
    assert [f.check for f in findings] == ["store.multipath_commitlog"]


def test_export_over_the_directories_given(tmp_path):
    folder = ROOT / "crash"
    out = tmp_path / "topic.jsonl"
    r = run("export", folder / "store", "--commitlog-path", ",".join(dirs(folder)), "--topic", "BigBodyTopic",
            "--output", out)
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    want = sorted(m["physical_offset"] for m in manifest("crash")["messages"] if m["topic"] == "BigBodyTopic")
    assert sorted(row["physical_offset"] for row in rows) == want


def test_broker_conf_makes_a_multi_path_log_as_rocketmq_does():
    from rocketstore_spark.store.multipath import conf_dirs
    # only a value holding the splitter; read-only directories only then; the value trimmed, its pieces not
    assert conf_dirs({"storePathCommitLog": "/d1/commitlog", "readOnlyCommitLogStorePaths": "/old,/older"}) is None
    assert conf_dirs({"storePathCommitLog": " /d1,/d2 ", "readOnlyCommitLogStorePaths": "/old"}) == ["/d1", "/d2", "/old"]
    assert conf_dirs({"storePathCommitLog": "/d1, /d2,/d1,"}) == ["/d1", " /d2"]
    assert conf_dirs({}) is None


def test_directories_name_the_log_of_one_store():
    from rocketstore_spark.store.discovery import StorePathError
    with pytest.raises(StorePathError, match="give one store"):
        discover([str(ROOT / "clean" / "store"), str(ROOT / "crash" / "store")], commitlog_dirs=dirs(ROOT / "clean"))


def test_inspect_over_the_directories_given():
    """``inspect --commitlog-path`` lists the segments of every directory, as RocketMQ's multi-path log holds
    them (its manifest: the CommitLog's min and max offsets)."""
    folder = ROOT / "clean"
    r = run("inspect", folder / "store", "--commitlog-path", ",".join(dirs(folder)), "--json")
    assert r.exit_code == 0, r.output
    (doc,) = json.loads(r.stdout)["stores"]
    segments = manifest("clean")["segments"]            # RocketMQ's: file, base offset, records, valid end
    assert [(s["file"], s["base_offset"], s["records"], s["valid_end"]) for s in doc["segments"]] == \
        [(s["file"], s["base_offset"], s["records"], s["valid_end"]) for s in segments]
