"""The rocketstore CLI on the golden stores, in-process through click's runner (the real commands, no JVM):
what it prints agrees with RocketMQ's own view of each store (the manifests), and mistakes are one line."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

from tests.cli.helpers import run
from tests.golden.goldens import BY_ID
from tests.store_files import copy_store

ROOT = Path(__file__).resolve().parents[2]


def test_inspect_shows_rocketmqs_queue_bounds_and_segments():
    g = BY_ID["5.5.1/consumer-offsets"]
    r = run("inspect", g.store, "--json")
    assert r.exit_code == 0, r.output
    [doc] = json.loads(r.stdout)["stores"]
    assert doc["rocketmq_version"] == "5.4.0" and not doc["abort_present"]
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in g.manifest["queues"]}
    ours = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["queues"]}
    assert ours == {k: v for k, v in theirs.items() if k in ours or v != (0, 0)}
    assert [(s["file"], s["records"], s["valid_end"]) for s in doc["segments"]] == \
        [(s["file"], s["records"], s["valid_end"]) for s in g.manifest["segments"]]
    text = run("inspect", g.store).stdout
    assert "RocketMQ 5.4.0" in text and "TopicTest" in text


def test_verify_exits_3_on_damage_with_positions_and_0_when_clean():
    g = BY_ID["4.9.8/corrupt-body"]
    r = run("verify", g.store, "--json")
    assert r.exit_code == 3
    crc = [f for f in json.loads(r.stdout)["stores"][0]["findings"] if f["check"] == "commitlog.body_crc"]
    want = sorted(next(m for m in g.messages if m["physical_offset"] <= s["physical_offset"]
                       < m["physical_offset"] + m["total_size"])["physical_offset"] for s in g.manifest["surgery"])
    assert sorted(f["physical_offset"] for f in crc) == want
    assert run("verify", BY_ID["5.5.1/propcrc"].store).exit_code == 0


def test_offsets_statuses_and_a_reset_file(tmp_path):
    g = BY_ID["5.5.1/consumer-offsets"]
    r = run("offsets", g.store, "--json", "--reset-plan", "to-earliest", "--group", "golden_in_range",
            "--reset-file", tmp_path / "plan.csv")
    assert r.exit_code == 0, r.output                    # the group's offsets are all in range
    doc = json.loads(r.stdout)
    bounds = {(q["topic"], q["queue_id"]): q for q in g.manifest["queues"]}
    assert {q["status"] for q in doc["queues"]} == {"in_range"}
    plan = list(csv.DictReader((tmp_path / "plan.csv").open()))
    assert plan and all(int(p["new_offset"]) == bounds[(p["topic"], int(p["queue_id"]))]["min_offset"] for p in plan)
    everyone = run("offsets", g.store, "--json")
    assert everyone.exit_code == 3                       # some groups are below min, beyond max, or unknown
    assert {q["status"] for q in json.loads(everyone.stdout)["queues"]} == \
        {"in_range", "caught_up", "below_min", "beyond_max", "unknown_queue"}


def test_recover_report_is_rocketmqs_recovery():
    g = BY_ID["4.9.8/torn-tail"]
    r = run("recover", "report", g.store, "--json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc["process_offset"] == g.manifest["recovery"]["commitlog_max_offset"] and doc["shutdown"] == "abnormal"
    assert "it stops at commitlog/00000000000000393216" in run("recover", "report", g.store).stdout


def test_dump_of_a_segment_a_queue_file_and_an_index_file():
    g = BY_ID["5.5.1/clean"]
    seg = g.store / "commitlog" / "00000000000000000000"
    r = run("dump", seg, "--json", "--count", "4")
    rows = [json.loads(x) for x in r.stdout.splitlines()]
    want = [m for m in g.messages if m["segment"] == "00000000000000000000"][:4]
    assert [(x["physical_offset"], x["topic"], x["queue_id"], x["queue_offset"], x["tags"]) for x in rows] == \
        [(m["physical_offset"], m["topic"], m["queue_id"], m["queue_offset"], m["properties"].get("TAGS"))
         for m in want]
    later = [json.loads(x) for x in run("dump", seg, "--json", "--from", want[2]["physical_offset"], "--count", "1")
             .stdout.splitlines()]
    assert [x["physical_offset"] for x in later] == [want[2]["physical_offset"]]
    cq = sorted((g.store / "consumequeue" / "TopicTest" / "0").iterdir())[0]
    entries = [json.loads(x) for x in run("dump", cq, "--json", "--count", "0").stdout.splitlines()]
    topic_test_0 = sorted((m for m in g.messages if m["topic"] == "TopicTest" and m["queue_id"] == 0
                           and m["transaction_type"] in (0, 8)), key=lambda m: m["queue_offset"])  # NOT_TYPE, COMMIT
    assert [(e["queue_offset"], e["physical_offset"]) for e in entries] == \
        [(m["queue_offset"], m["physical_offset"]) for m in topic_test_0[:len(entries)]]
    ix = sorted((g.store / "index").iterdir())[0]
    first = [json.loads(x) for x in run("dump", ix, "--json", "--count", "2").stdout.splitlines()]
    assert [e["entry"] for e in first] == [1, 2]


def test_rebuild_of_a_clean_store_is_identical_and_refuses_an_output_inside_it(tmp_path):
    g = BY_ID["5.5.1/clean"]
    assert run("rebuild", g.store, "--output", tmp_path / "out").exit_code == 0
    bad = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", "rebuild", str(g.store), "--output",
                          str(g.store / "x")], cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode == 2 and "inside the store" in bad.stderr and "Traceback" not in bad.stderr


def test_mistakes_are_one_line_with_exit_2(tmp_path):
    for argv in (["inspect", str(tmp_path / "nope")], ["verify", str(tmp_path)],
                 ["dump", str(BY_ID["5.5.1/clean"].store / "checkpoint")], ["offsets", "x", "--reset-plan", "bogus"]):
        proc = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", *argv], cwd=ROOT,
                              capture_output=True, text=True)
        assert proc.returncode == 2, (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and proc.stderr.strip(), argv


def _lines(r):
    return [json.loads(x) for x in r.stdout.splitlines()]


def test_query_by_key_uniq_key_msg_id_and_queue_position_find_what_rocketmq_stored():
    g = BY_ID["5.5.1/clean"]
    with_keys = [m for m in g.messages if m["keys"] and m["transaction_type"] != 12]     # ROLLBACK: not indexed
    sample = with_keys[len(with_keys) // 2]
    key, topic = sample["keys"].split()[-1], sample["topic"]        # RocketMQ's KEYS: split on spaces
    want = sorted(m["physical_offset"] for m in g.messages
                  if m["topic"] == topic and key in (m["keys"] or "").split() and m["transaction_type"] != 12)
    r = run("query", g.store, "--topic", topic, "--key", key, "--json")
    assert r.exit_code == 0 and [h["physical_offset"] for h in _lines(r)] == want
    u = next(m for m in g.messages if m["uniq_key"] and m["transaction_type"] != 12)
    assert [h["physical_offset"] for h in _lines(run("query", g.store, "--topic", u["topic"], "--uniq-key",
                                                     u["uniq_key"], "--json"))] == \
        sorted(m["physical_offset"] for m in g.messages if m["topic"] == u["topic"] and m["uniq_key"] == u["uniq_key"]
               and m["transaction_type"] != 12)
    m = g.messages[7]
    [hit] = _lines(run("query", g.store, "--msg-id", m["msg_id"], "--json", "--body", "hex"))
    assert hit["physical_offset"] == m["physical_offset"] and hit["topic"] == m["topic"]
    assert __import__("hashlib").sha256(bytes.fromhex(hit["body"])).hexdigest() == m["body_sha256"]
    queued = sorted((x for x in g.messages if (x["topic"], x["queue_id"]) == ("TopicTest", 2)
                     and x["transaction_type"] in (0, 8)), key=lambda x: x["queue_offset"])
    got = _lines(run("query", g.store, "--topic", "TopicTest", "--queue", 2, "--queue-offset", 4, "--count", 3, "--json"))
    assert [h["physical_offset"] for h in got] == [x["physical_offset"] for x in queued[4:7]]
    assert run("query", g.store, "--topic", topic, "--key", "no-such-key").exit_code == 3


def test_query_by_topic_and_time_window():
    import datetime as dt
    g = BY_ID["5.5.1/clean"]
    times = sorted(m["store_timestamp"] for m in g.messages if m["topic"] == "OrderTopic")
    lo, hi = times[10], times[30]
    iso = lambda ms: dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()      # noqa: E731
    got = _lines(run("query", g.store, "--topic", "OrderTopic", "--since", iso(lo), "--until", iso(hi), "--json"))
    want = sorted(m["physical_offset"] for m in g.messages if m["topic"] == "OrderTopic"
                  and m["transaction_type"] in (0, 8) and lo <= m["store_timestamp"] <= hi)
    assert [h["physical_offset"] for h in got] == want


def test_audit_combines_the_checks_and_the_recovery_verdict(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    r = run("audit", g.store, "--json", "--output", tmp_path / "audit.json")
    assert r.exit_code == 3
    [doc] = json.loads(r.stdout)["stores"]
    assert json.loads((tmp_path / "audit.json").read_text())["stores"][0]["findings"] == doc["findings"]
    assert doc["at_risk"] and doc["areas"]["CommitLog records"]["error"] == 2
    assert doc["recovery"]["process_offset"] == g.manifest["recovery"]["commitlog_max_offset"]
    assert set(doc["findings"][0]) >= {"check", "severity", "file", "file_position", "physical_offset", "topic",
                                       "queue_id", "message", "evidence"}
    # the verdict in plain words comes first: RocketMQ's own recovery of a copy kept the log up to its max offset
    end = g.manifest["recovery"]["commitlog_max_offset"]
    lost = [m for m in g.messages if m["physical_offset"] > end and m["body_crc_ok"]]
    text = run("audit", g.store).stdout.splitlines()
    assert text[1] == f"A restart now would lose {len(lost)} valid messages in {len({m['topic'] for m in lost})} topics."
    assert any(f"the log ends at physical offset {end:,}." in x for x in text[2:6])
    clean = run("audit", BY_ID["5.5.1/propcrc"].store)
    assert clean.exit_code == 0 and "healthy" in clean.stdout and "Nothing valid would be lost." in clean.stdout
    assert "A restart now keeps everything: nothing would be cut or lost." in clean.stdout


def test_the_installed_console_script_runs():
    exe = Path(sys.executable).parent / "rocketstore"
    proc = subprocess.run([str(exe), "inspect", str(BY_ID["5.5.1/clean"].store), "--json"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["stores"][0]["segments"]


def test_recover_plan_writes_outside_the_store_only(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    r = run("recover", "plan", g.store, "--output", tmp_path / "plan", "--json")
    assert r.exit_code == 3 and (tmp_path / "plan" / "lost-messages.parquet").is_file()
    assert [a["action"] for a in json.loads(r.stdout)["actions"]][:2] == ["export", "cut"]
    inside = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", "recover", "plan", str(g.store),
                             "--output", str(g.store / "plan")], cwd=ROOT, capture_output=True, text=True)
    assert inside.returncode == 2 and "inside the store" in inside.stderr


def test_verify_spills_into_the_work_dir_given_and_never_into_a_store(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    work = tmp_path / "work"
    work.mkdir()
    default = json.loads(run("verify", g.store, "--json").stdout)
    r = run("verify", g.store, "--work-dir", work, "--json")
    assert r.exit_code == 3 and json.loads(r.stdout) == default and list(work.iterdir()) == []
    inside = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", "verify", str(g.store),
                             "--work-dir", str(g.store / "commitlog")], cwd=ROOT, capture_output=True, text=True)
    assert inside.returncode == 2 and "work directory is inside the store" in inside.stderr
    assert "Traceback" not in inside.stderr


def test_verify_on_a_full_disk_says_where_to_spill_instead(tmp_path, monkeypatch):
    """The usual incident: the broker's disk is full, and the temporary directory with it."""
    import errno

    from rocketstore_spark.verify import store as verify_module

    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(verify_module, "scan_range", no_room)
    r = run("verify", BY_ID["4.9.8/clean"].store, "--work-dir", tmp_path)
    assert r.exit_code == 2 and "no room for the queue check's spill files" in r.stderr and "--work-dir" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_store_of_another_engine_is_refused_by_every_command_that_would_answer_wrong(tmp_path):
    """A store switched to DLedger: its log is read (here the old commitlog/: no entry written yet) and its
    restart predicted (exit 3: the crash loses data), but the command that would repair it refuses with exit 2
    naming the engine; inspect and audit show the engine (audit: a problem, exit 3)."""
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path / "store")
    (store / "dledger-n0" / "data").mkdir(parents=True)
    assert run("recover", "report", store).exit_code == 3
    refusals = {
        "recover plan": ["recover", "plan", store, "--output", tmp_path / "plan"],
    }
    for name, argv in refusals.items():
        result = run(*argv)
        assert result.exit_code == 2, (name, result.output)
        assert "the store uses DLedger CommitLog (dledger-n0/ after a classic commitlog/" in result.stderr, name
    assert not (tmp_path / "plan").exists()
    exported = run("export", store, "--output", tmp_path / "out.parquet")
    assert exported.exit_code in (0, 3) and (tmp_path / "out.parquet").exists(), exported.output
    shown = json.loads(run("inspect", store, "--json").stdout)
    (entry,) = shown["stores"]
    assert entry["engines"][0]["engine"] == "DLedger CommitLog" and entry["segments"]
    audit = run("audit", store, "--json")
    assert audit.exit_code == 3
    assert json.loads(audit.stdout)["stores"][0]["findings"][0]["check"] == "store.partial_engine"


def test_names_that_are_not_utf8_are_printed_escaped_never_an_encoding_error(tmp_path):
    """File names that are not UTF-8 (a store copied between file systems, damage) reach the findings as
    surrogate escapes: the commands print them escaped and write them into JSON exactly (\\u escapes) instead of
    ending with "'utf-8' codec can't encode characters" (found by the mutation campaign driving the CLI)."""
    import os
    store = copy_store(BY_ID["4.9.8/corrupt-body"].store, tmp_path / "store")
    stray = os.path.join(os.fsencode(store / "commitlog"), b"junk\xff\xfe")
    with open(stray, "wb") as f:
        f.write(b"x")
    name = os.fsdecode(stray)
    audit = run("audit", store, "--json")
    assert audit.exit_code == 3, audit.output
    stray_files = [f["file"] for f in json.loads(audit.stdout)["stores"][0]["findings"]
                   if f["check"] == "store.stray_file"]
    assert stray_files == ["commitlog/junk\udcff\udcfe"] or stray_files == [name]
    for argv in (["audit", store], ["inspect", store], ["verify", store], ["recover", "report", store],
                 ["recover", "plan", store, "--output", tmp_path / "plan"]):
        result = run(*argv)
        assert result.exit_code in (0, 3) and "codec can't encode" not in result.output, (argv, result.output)
    assert "junk\\udcff\\udcfe" in run("inspect", store).stdout          # printed as backslash escapes
