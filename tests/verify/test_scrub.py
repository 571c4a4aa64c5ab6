"""The incremental scrub (``rocketstore audit --scrub``) against the full audit, in-process: on RocketMQ's own
stores its answer equals the audit's; unchanged segments are carried over and a rotation scans each again
once in N runs at 1/N of the bytes a run; appended data, and bytes changed under the same size and time, are
found; the state never goes under a store."""
from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import pytest

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.documents import DocumentError, json_text
from rocketstore_spark.report.audit import audit_stores
from rocketstore_spark.report.scrub import scan_here, scrub_stores
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.outputs import OutputError
from rocketstore_spark.verify.scrub import BLOCK, load_state
from tests.builders import write_segments
from tests.store_files import copy_store
from tests.cli.helpers import run as cli
from tests.golden.goldens import BY_ID


def rows(findings) -> Counter:
    return Counter(json.dumps(f, sort_keys=True) for f in findings)


def audit(store):
    return audit_stores(discover(str(store))).docs[0]


def scrub(store, state, **kw):
    return scrub_stores(discover(str(store)), str(state), **kw).audit.docs[0]


def as_json(obj):
    return json.loads(json_text(obj, indent=None))


def same_answer(got: dict, want: dict) -> None:
    """The scrub's entry says what the full audit's does: findings, recovery report, verdict."""
    assert rows(got["findings"]) == rows(want["findings"])
    assert as_json(got["recovery"]) == as_json(want["recovery"]) and got["at_risk"] == want["at_risk"]
    assert got["areas"] == want["areas"] and as_json(got["settings"]) == as_json(want["settings"])


@pytest.mark.parametrize("gid", ["4.9.8/corrupt-body", "5.5.1/corrupt-body", "5.5.1/consumer-offsets"])
def test_the_scrub_answers_as_the_full_audit_and_carries_an_unchanged_store_over(gid, tmp_path):
    store = BY_ID[gid].store
    want = audit(store)
    first = scrub(store, tmp_path / "state.json")
    same_answer(first, want)
    s = first["scrub"]
    assert s["run"] == 1 and s["cross_checks"] == "run"
    assert [c["reason"] for c in s["checked"]] == ["new"] * s["segments"] and s["bytes_checked"] == s["bytes"]
    again = scrub(store, tmp_path / "state.json")
    same_answer(again, want)
    assert again["scrub"]["run"] == 2 and again["scrub"]["cross_checks"] == "carried"
    assert {c["reason"] for c in again["scrub"]["checked"]} <= {"rotation"}


def many_segments(root, n: int, segment: int = 1 << 14) -> SegmentWriter:
    """A bare CommitLog of ``n`` full segments of ``segment`` bytes (our encoder)."""
    w = SegmentWriter(segment)
    i = 0
    while len(w.segments) <= n:
        w.append(Message(topic=f"T{i % 3}", body=bytes([i % 251]) * 300, queue_id=i % 2,
                         store_timestamp=1_700_000_000_000 + i, born_timestamp=1_700_000_000_000 + i))
        i += 1
    write_segments(w, root / "commitlog")
    (root / "commitlog" / f"{n * segment:020d}").unlink()         # the started (n+1)th: n whole segments
    return w


def test_a_rotation_scans_each_unchanged_segment_once_in_n_runs_at_one_nth_of_the_bytes_a_run(tmp_path):
    """15 segments and N = 28: 15 of 28 runs scan one segment, the others none (the share is 15/28 of a
    segment a run, never a whole one each run), and every segment exactly once, the oldest first."""
    store = tmp_path / "store"
    many_segments(store, 15)
    state = tmp_path / "state.json"
    first = scrub(store, state)
    assert len(first["scrub"]["checked"]) == 15
    per_run = []
    for _ in range(28):
        entry = scrub(store, state)
        assert entry["scrub"]["cross_checks"] == "carried"
        per_run.append([c["segment"] for c in entry["scrub"]["checked"]])
        assert {c["reason"] for c in entry["scrub"]["checked"]} <= {"rotation"}
    assert sorted(len(r) for r in per_run) == [0] * 13 + [1] * 15
    scanned = [name for r in per_run for name in r]
    assert scanned == sorted(scanned) and len(set(scanned)) == 15      # each once, in CommitLog order (oldest)
    assert entry["scrub"]["run"] == 29


def test_appended_messages_and_a_new_segment_are_scanned_and_the_cross_checks_resumed(tmp_path):
    g = BY_ID["5.5.1/consumer-offsets"]
    store = tmp_path / "store"
    shutil.copytree(g.store, store)
    state = tmp_path / "state.json"
    scrub(store, state)
    last = sorted((store / "commitlog").iterdir())[-1]
    os.utime(last)                                     # the broker wrote into its last segment
    (store / "commitlog" / f"{int(last.name) + last.stat().st_size:020d}").write_bytes(bytes(last.stat().st_size))
    entry = scrub(store, state)
    reasons = {c["segment"]: c["reason"] for c in entry["scrub"]["checked"]}
    assert reasons[f"commitlog/{last.name}"] in ("modified", "followed")
    assert sorted(reasons.values()).count("new") == 1
    assert entry["scrub"]["cross_checks"] == "resumed"
    same_answer(entry, audit(store))


def test_bytes_changed_under_the_same_size_and_time_are_found_and_scanned_again(tmp_path):
    """A body byte flipped inside the first sampled block, the file's times put back: scrub.segment_changed,
    and the segment's scan finds the BODYCRC failure the full audit finds."""
    g = BY_ID["5.5.1/clean"]
    store = tmp_path / "store"
    shutil.copytree(g.store, store)
    state = tmp_path / "state.json"
    assert scrub(store, state)["at_risk"] is False
    first = next(m for m in g.messages if m["file_position"] + m["total_size"] < BLOCK and m["body_length"] > 0)
    seg = store / "commitlog" / f"{first['physical_offset'] - first['file_position']:020d}"
    st = seg.stat()
    data = bytearray(seg.read_bytes())
    body = data.index(bytes.fromhex(first["body_head"]), first["file_position"])
    assert body < first["file_position"] + first["total_size"]
    data[body] ^= 0xFF
    seg.write_bytes(bytes(data))
    os.utime(seg, ns=(st.st_atime_ns, st.st_mtime_ns))
    entry = scrub(store, state)
    changed = [f for f in entry["findings"] if f["check"] == "scrub.segment_changed"]
    assert [f["file"] for f in changed] == [f"commitlog/{seg.name}"]
    assert {"segment": f"commitlog/{seg.name}", "reason": "bytes changed"} in entry["scrub"]["checked"]
    assert entry["scrub"]["cross_checks"] == "run" and entry["at_risk"] is True
    want = audit(store)
    assert any(f["check"] == "commitlog.body_crc" for f in want["findings"])
    assert rows(f for f in entry["findings"] if f["check"] != "scrub.segment_changed") == rows(want["findings"])
    assert as_json(entry["recovery"]) == as_json(want["recovery"])


def test_the_state_is_never_under_a_store_and_another_document_is_refused(tmp_path):
    store = BY_ID["5.5.1/clean"].store
    with pytest.raises(OutputError, match="scrub state is inside the store"):
        scrub(store, store / "state.json")
    other = tmp_path / "other.json"
    other.write_text('{"document_type": "rocketstore-spark/audit", "document_version": 1}')
    with pytest.raises(DocumentError, match="expected 'rocketstore-spark/scrub-state'"):
        load_state(str(other))
    with pytest.raises(ValueError, match="--rotation 0"):
        scrub_stores(discover(str(store)), str(tmp_path / "s.json"), rotation=0, scan=scan_here)


def test_an_older_state_is_started_over_and_a_newer_one_refused(tmp_path):
    """A state is a cache: one an older release wrote (other digests) starts over as a first run; a newer
    release's is not guessed at."""
    store = BY_ID["5.5.1/clean"].store
    state = tmp_path / "state.json"
    scrub(store, state)
    doc = json.loads(state.read_text())
    older = dict(doc, document_version=doc["document_version"] - 1)
    state.write_text(json.dumps(older))
    entry = scrub(store, state)
    assert entry["scrub"]["run"] == 1 and entry["scrub"]["cross_checks"] == "run"
    assert json.loads(state.read_text())["document_version"] == doc["document_version"]
    state.write_text(json.dumps(dict(doc, document_version=doc["document_version"] + 1)))
    with pytest.raises(DocumentError, match="this release reads version"):
        load_state(str(state))


def test_rocketstore_audit_scrub(tmp_path):
    store = BY_ID["4.9.8/corrupt-body"].store
    state = tmp_path / "state.json"
    r = cli("audit", store, "--scrub", state)
    assert r.exit_code == 3, r.output
    assert "segments scanned:" in r.stdout and "cross-checks run again" in r.stdout
    assert "commitlog.body_crc" in r.stdout
    r = cli("audit", store, "--scrub", state, "--json")
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc["stores"][0]["scrub"]["cross_checks"] == "carried"
    assert cli("audit", store, "--scrub", state, "--html", tmp_path / "a.html").exit_code == 2
    r = cli("audit", store, "--scrub", store / "state.json")
    assert r.exit_code == 2 and "inside the store" in r.stderr


def test_the_state_names_the_prefixes_the_next_run_checks_and_only_files_of_its_stores_are_read(tmp_path,
                                                                                                monkeypatch):
    """The state keeps what the run digested (``digested``: each prefix's longest; the next run digests those of
    the changed files beside its own work); an entry naming a file outside the scrubbed stores (a state edited,
    or moved to other stores) makes nothing read."""
    from rocketstore_spark.store import digests
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "store")
    state = tmp_path / "state.json"
    scrub(store, state)
    digested = json.loads(state.read_text())["digested"]
    assert digested and all(os.path.abspath(p).startswith(str(store)) for p, *_ in digested)
    assert len({(p, start) for p, _, start, _ in digested}) == len(digested)
    outside = tmp_path / "outside"
    outside.write_bytes(b"x" * 4096)
    doc = json.loads(state.read_text())
    doc["digested"].append([str(outside), 4096, 0, [0, 0, 0]])
    doc["digested"].append([str(store / ".." / "outside"), 4096, 0, [0, 0, 0]])
    state.write_text(json.dumps(doc))
    seen, real = [], digests.hash_range
    monkeypatch.setattr(digests, "hash_range", lambda h, path, *a: seen.append(path) or real(h, path, *a))
    scrub(store, state)
    assert not [p for p in seen if "outside" in p]
    assert not [p for p, *_ in json.loads(state.read_text())["digested"] if "outside" in p]     # and dropped


def test_the_cli_and_a_library_call_without_settings_share_one_state(tmp_path):
    """``rocketstore audit --scrub`` (no --rocketmq-version) and ``scrub_stores`` with no options go on from each
    other's state; a version given is another state (the settings resolve otherwise)."""
    store = BY_ID["5.5.1/clean"].store
    state = tmp_path / "state.json"
    assert cli("audit", store, "--scrub", state).exit_code == 0
    assert scrub(store, state)["scrub"]["cross_checks"] == "carried"
    assert json.loads(cli("audit", store, "--scrub", state, "--json").stdout)["stores"][0]["scrub"][
        "cross_checks"] == "carried"
    doc = json.loads(cli("audit", store, "--scrub", state, "--json", "--rocketmq-version", "5.5.1").stdout)
    assert doc["stores"][0]["scrub"]["cross_checks"] == "run" and doc["stores"][0]["scrub"]["run"] == 1


@pytest.mark.parametrize("scenario", ["clean", "crash"])
def test_a_multi_path_log_given_to_discover_is_audited_and_scrubbed_over_all_its_directories(scenario, tmp_path):
    # RocketMQ 5.5.1's log over two directories, given as discover(commitlog_dirs=): verify and the recovery
    # report discover the store again by name, and must be told the directories (else: one directory's
    # segments, a gap, and every queue entry past the end)
    from tests.store.test_multipath import ROOT, dirs
    folder = ROOT / scenario
    layouts = lambda: discover(str(folder / "store"), commitlog_dirs=dirs(folder))     # noqa: E731
    want = audit_stores(layouts()).docs[0]
    checks = {f["check"] for f in want["findings"]}
    assert "store.multipath_commitlog" in checks
    assert not {c for c in checks if c.startswith(("consumequeue.", "index.", "commitlog."))}
    first = scrub_stores(layouts(), str(tmp_path / "state.json")).audit.docs[0]
    same_answer(first, want)
    again = scrub_stores(layouts(), str(tmp_path / "state.json")).audit.docs[0]
    same_answer(again, want)


def test_a_run_gives_the_heap_back_to_the_collector_and_leaves_a_frozen_one_frozen(tmp_path):
    """The scrub keeps the heap alive at its start out of full GC passes for the run only; a process that froze
    its heap itself keeps it frozen. Frozen objects the run frees (a cache entry it replaces) leave the frozen
    set, so its size may shrink; what must hold is that an object frozen before the run is still frozen after:
    in none of the collector's three generations."""
    import gc
    store = BY_ID["5.5.1/clean"].store
    assert gc.get_freeze_count() == 0
    scrub(store, tmp_path / "a.json")
    assert gc.get_freeze_count() == 0
    sentinel = [object()]
    assert gc.is_tracked(sentinel)
    gc.freeze()
    try:
        scrub(store, tmp_path / "b.json")
        assert gc.get_freeze_count() > 0
        assert not any(o is sentinel for generation in range(3) for o in gc.get_objects(generation))
    finally:
        gc.unfreeze()
    assert any(o is sentinel for o in gc.get_objects(2))        # the check above can see it when it is not frozen
