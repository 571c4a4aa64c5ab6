"""Applying a repair plan (issue #12): the repaired store keeps RocketMQ's own bytes below the end of the log,
zeros after it, a ConsumeQueue entry for every dispatchable record RocketMQ wrote there, and a checkpoint
of its last record; real RocketMQ opens it and cuts nothing (slow tests); a copy leaves the store untouched,
an in-place apply keeps the old store whole as a backup and is undone by rollback; stale plans, live brokers
and bad targets are refused. Fault injection is in test_apply_faults.py.

Expected values come from the golden manifests (RocketMQ's records and its recovery), not from our code.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.recovery.apply import ApplyRefused, apply_plan, rollback
from rocketstore_spark.recovery.plan import make_plan
from tests.cli.helpers import run
from tests.golden import serve_check
from tests.golden.goldens import BY_ID, Golden, all_goldens
from tests.store_files import copy_store, tree

QUEUED = (0, 8)                          # NOT_TYPE and COMMIT records get a ConsumeQueue entry
CQ_ENTRY = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])     # an independent reading
FILLER_SIZE = 2**31 - 1
CRASHED = [g for g in all_goldens() if g.manifest["abort_present"] or g.manifest["surgery"]]


def end_of_log(g: Golden) -> int:
    return g.manifest["recovery"]["commitlog_max_offset"]


def raw_entries(root: Path) -> dict[tuple[str, int], dict[int, tuple[int, int, int]]]:
    """Every 20-byte slot of every ConsumeQueue file under ``root``, written or not."""
    out = {}
    for qdir in sorted(root.glob("*/*")):
        for f in sorted(qdir.iterdir()):
            raw = np.frombuffer(f.read_bytes(), dtype=CQ_ENTRY)
            first = int(f.name) // CQ_ENTRY.itemsize
            out.setdefault((qdir.parent.name, int(qdir.name)), {}).update(
                {first + k: (int(e["offset"]), int(e["size"]), int(e["tags_code"])) for k, e in enumerate(raw)})
    return out


def queue_entries(root: Path) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """Every written ConsumeQueue entry under ``root``: (topic, queue) -> queue offset -> (physical offset, size).
    RocketMQ pads a queue whose first file starts after offset 0 (its segments expired) with filler entries
    (physical offset 0, size Integer.MAX_VALUE) up to the first record's queue offset: not entries."""
    return {key: {o: (phy, size) for o, (phy, size, _) in slots.items() if 0 < size != FILLER_SIZE}
            for key, slots in raw_entries(root / "consumequeue").items()}


def expected_entries(g: Golden) -> dict[tuple[str, int], dict[int, tuple[int, int]]]:
    """What RocketMQ's records below the end of the log ask for: every queued record at its QUEUEOFFSET."""
    out: dict = {}
    for m in g.messages:
        if m["physical_offset"] < end_of_log(g) and m["transaction_type"] in QUEUED:
            out.setdefault((m["topic"], m["queue_id"]), {})[m["queue_offset"]] = (m["physical_offset"],
                                                                                   m["total_size"])
    return out


@pytest.mark.parametrize("gid", sorted(BY_ID))
def test_the_repaired_copy_holds_what_rocketmq_keeps_and_the_store_is_only_read(gid, tmp_path):
    g = BY_ID[gid]
    before = tree(g.store)
    plan = make_plan(str(g.store), tmp_path / "plan")
    receipt = apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    assert tree(g.store) == before
    repaired, po = tmp_path / "repaired", end_of_log(g)
    assert receipt["target"] == str(repaired) and plan["process_offset"] == po

    # the CommitLog: RocketMQ's bytes below the end of the log, zeros from it; the segments RocketMQ deleted gone
    deleted = {f for f in g.manifest["recovery"]["files_deleted"] if f.startswith("commitlog/")}
    for seg in sorted((g.store / "commitlog").iterdir()):
        rel = f"commitlog/{seg.name}"
        assert (repaired / rel).exists() == (rel not in deleted), rel
        if rel in deleted:
            continue
        old, new = seg.read_bytes(), (repaired / rel).read_bytes()
        keep = max(0, min(len(old), po - int(seg.name)))
        assert len(new) == len(old) and new[:keep] == old[:keep] and not any(new[keep:]), rel

    # a ConsumeQueue entry for every queued record below the end of the log, at its QUEUEOFFSET, and nothing else
    file_size = g.manifest["geometry"]["mapped_file_size_consume_queue"]
    log_min = g.manifest["commitlog"]["min_offset"] or 0
    ours = queue_entries(repaired)
    live = {key: {o: e for o, e in slots.items() if e[0] >= log_min} for key, slots in ours.items()}
    assert {key: slots for key, slots in live.items() if slots} == expected_entries(g)
    # entries of records whose segments RocketMQ's cleaner deleted: only in the queues whose own files the plan
    # keeps (no record of the log is theirs), as RocketMQ wrote them
    kept = {q["queue"] for a in plan["actions"] if a["action"] == "keep_queues" for q in a["queues"]}
    own = queue_entries(g.store)
    for key, slots in ours.items():
        expired = {o: e for o, e in slots.items() if e[0] < log_min}
        if expired:
            assert f"consumequeue/{key[0]}/{key[1]}" in kept and expired == {o: own[key][o] for o in expired}
    for f in (repaired / "consumequeue").glob("*/*/*"):
        assert f.stat().st_size == file_size

    # a clean shutdown's files: no abort, a checkpoint whose CommitLog and ConsumeQueue times are the last kept
    # record's store time and whose index time is the last indexed one's (RocketMQ's index_keys of a record)
    assert not (repaired / "abort").exists()
    kept = [m for m in g.messages if m["physical_offset"] < po]
    last = max(kept, key=lambda m: m["physical_offset"])
    indexed = max((m["store_timestamp"] for m in kept if m["index_keys"]), default=0)
    head = np.frombuffer((repaired / "checkpoint").read_bytes()[:24], dtype=">i8")
    assert head.tolist() == [last["store_timestamp"], last["store_timestamp"], indexed]
    if g.version.startswith("4."):
        assert not any((repaired / "checkpoint").read_bytes()[24:])
    # everything else the broker keeps (config/, 5.x directories, lock) comes along unchanged
    for rel, digest in before.items():
        if not rel.startswith(("commitlog/", "consumequeue/", "index/")) and rel not in ("checkpoint", "abort"):
            assert tree(repaired).get(rel) == digest, rel


RECOVERED = [g for g in all_goldens() if (g.path / "expected-recovery" / "consumequeue").is_dir()]


@pytest.mark.parametrize("gid", [g.id for g in RECOVERED])
def test_the_repaired_queues_equal_rocketmqs_recovered_ones_wherever_rocketmqs_are_right(gid, tmp_path):
    """Between each queue's min and max offset after RocketMQ's own recovery (the manifest), the repaired
    ConsumeQueues hold RocketMQ's recovered entries (expected-recovery/) — except where RocketMQ's entry is
    wrong: a hole, or a record placed at a queue offset other than its QUEUEOFFSET (a queue whose file was
    removed is re-dispatched from offset 0); there ours points at the record whose QUEUEOFFSET it is."""
    g = BY_ID[gid]
    make_plan(str(g.store), tmp_path / "plan")
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    theirs = raw_entries(g.path / "expected-recovery" / "consumequeue")
    ours = raw_entries(tmp_path / "repaired" / "consumequeue")
    record = {m["physical_offset"]: m for m in g.messages}
    wrong = 0
    for q in g.manifest["queues"]:
        key = (q["topic"], q["queue_id"])
        for slot in range(q["min_offset"], q["max_offset"]):
            t, u = theirs.get(key, {}).get(slot), ours[key][slot]
            m = record.get(t[0]) if t else None
            if m is not None and (m["topic"], m["queue_id"], m["queue_offset"]) == (*key, slot):
                assert u == t, (key, slot)
            else:
                wrong += 1
                mine = record[u[0]]
                assert (mine["topic"], mine["queue_id"], mine["queue_offset"], mine["total_size"]) == (*key, slot, u[1])
    assert wrong == 0 or g.scenario.startswith("cq-lag")


def test_applying_twice_does_nothing_more_and_the_cli_says_so(tmp_path):
    g = BY_ID["5.5.1/torn-tail"]
    make_plan(str(g.store), tmp_path / "plan")
    first = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "rep")
    assert first.exit_code == 0, first.output
    assert "Repaired store published at" in first.output and "cut nothing more" in first.output
    published = tree(tmp_path / "rep")
    again = run("recover", "apply", tmp_path / "plan", "--output", tmp_path / "rep", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["already_applied"] is True
    assert tree(tmp_path / "rep") == published


def test_in_place_keeps_the_old_store_whole_and_rollback_puts_it_back(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    store = copy_store(g.store, tmp_path / "store")
    original = tree(store)
    make_plan(str(store), tmp_path / "plan")
    apply_plan(tmp_path / "plan", output=tmp_path / "copy")                    # the same repair, as a copy first
    with pytest.raises(ApplyRefused, match="applied into"):                     # a plan is applied once
        apply_plan(tmp_path / "plan", in_place=True)
    make_plan(str(store), tmp_path / "plan2")
    receipt = apply_plan(tmp_path / "plan2", in_place=True)
    backup = Path(receipt["backup"])
    assert backup.parent == store.parent and tree(backup) == original
    assert tree(store) == tree(tmp_path / "copy")                             # in place = the copy, byte for byte
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert leftovers == []
    # untouched segments are hard links (staging cost only what changed); the appended-to one is not
    segs = sorted((store / "commitlog").iterdir())
    assert os.stat(segs[0]).st_ino == os.stat(backup / "commitlog" / segs[0].name).st_ino
    assert os.stat(segs[-1]).st_ino != os.stat(backup / "commitlog" / segs[-1].name).st_ino

    done = rollback(tmp_path / "plan2")
    assert tree(store) == original and tree(Path(done["repaired_kept"])) == tree(tmp_path / "copy")
    assert not backup.exists()
    with pytest.raises(ApplyRefused, match="rolled back"):
        apply_plan(tmp_path / "plan2", in_place=True)


def test_the_readme_repair_commands_work_as_written(tmp_path):
    """The README's plan and apply lines, run with the installed console script from the repository root
    (their /tmp paths moved into this test's directory)."""
    root = Path(__file__).resolve().parents[2]
    section = (root / "README.md").read_text().split("## Repairing a store", 1)[1].split("\n## ", 1)[0]
    lines = [ln.split("#")[0].strip() for ln in section.split("```bash", 1)[1].split("```", 1)[0].splitlines()]
    commands = [ln.replace("/tmp/", f"{tmp_path}/") for ln in lines if ln]
    assert [c.split()[:3] for c in commands] == [["rocketstore", "recover", "plan"], ["rocketstore", "recover", "apply"]]
    script = Path(sys.executable).with_name("rocketstore")
    env = os.environ | {"PYTHONPATH": str(root)}
    for command, expected in zip(commands, (3, 0)):                # 3: the plan cuts and loses messages
        proc = subprocess.run([str(script), *command.split()[1:]], cwd=root, capture_output=True, text=True, env=env)
        assert proc.returncode == expected, proc.stderr
    g = BY_ID["4.9.8/corrupt-body"]
    assert (tmp_path / "repaired-store" / "commitlog").is_dir() and not (tmp_path / "repaired-store" / "abort").exists()
    assert queue_entries(tmp_path / "repaired-store") == expected_entries(g)


def test_a_stale_plan_a_live_broker_and_bad_targets_are_refused(tmp_path):
    g = BY_ID["5.1.4/crash"]
    store = copy_store(g.store, tmp_path / "store")
    make_plan(str(store), tmp_path / "plan")
    original = tree(store)

    with pytest.raises(ApplyRefused, match="inside the store"):
        apply_plan(tmp_path / "plan", output=store / "repaired")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ApplyRefused, match="not an empty directory"):
        apply_plan(tmp_path / "plan", output=tmp_path / "full")

    # a broker (another process) holding the store's lock, as FileChannel.tryLock does
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl,sys,time; f=open(sys.argv[1],'r+b'); "
                               "fcntl.lockf(f, fcntl.LOCK_EX|fcntl.LOCK_NB, 1, 0); print('locked', flush=True); "
                               "time.sleep(60)", str(store / "lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ApplyRefused, match="a broker is running"):
            apply_plan(tmp_path / "plan", in_place=True)
    finally:
        holder.kill()
        holder.wait()

    # the export of what the cut loses is what makes it safe: missing or changed, no apply
    export = tmp_path / "plan" / "lost-messages.parquet"
    saved = export.read_bytes()
    export.write_bytes(saved + b"\0")
    with pytest.raises(ApplyRefused, match="export"):
        apply_plan(tmp_path / "plan", output=tmp_path / "a")
    export.write_bytes(saved)

    # the store changed since the plan (a ConsumeQueue file rewritten, a segment's content): make a new plan
    cq = next((store / "consumequeue").glob("*/*/*"))
    os.utime(cq, ns=(cq.stat().st_atime_ns, cq.stat().st_mtime_ns + 1_000_000_000))
    with pytest.raises(ApplyRefused, match="changed since the plan"):
        apply_plan(tmp_path / "plan", in_place=True)
    assert tree(store) == original and not (tmp_path / "a").exists()

    result = run("recover", "apply", tmp_path / "plan", "--in-place")
    assert result.exit_code == 2 and "changed since the plan" in result.output
    assert len(result.output.strip().splitlines()) == 1
    result = run("recover", "apply", tmp_path / "plan")
    assert result.exit_code == 2 and "--output DIR" in result.output


def test_a_mount_point_is_not_swapped_in_place(tmp_path):
    mnt = tmp_path / "store"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        shutil.copytree(BY_ID["4.9.8/crash"].store, mnt, dirs_exist_ok=True)
        make_plan(str(mnt), tmp_path / "plan")
        with pytest.raises(ApplyRefused, match="mount point"):
            apply_plan(tmp_path / "plan", in_place=True)
        apply_plan(tmp_path / "plan", output=tmp_path / "copy")                # a copy is the way there
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


# ------------------------------------------------------------------------------------- real RocketMQ

@pytest.mark.slow
@pytest.mark.parametrize("gid", sorted(g.id for g in CRASHED if g.scenario != "propcrc"))
def test_real_rocketmq_starts_the_repaired_store_without_cutting_and_serves_every_kept_message(gid, tmp_path):
    """RocketMQ opens the repaired copy (load: recovery; start: dispatch caught up), ends its CommitLog where the
    plan said, deletes none of the CommitLog, ConsumeQueue or IndexFiles, and getMessage by topic, queue and
    queue offset returns every queued record RocketMQ had written below the end of the log."""
    g = BY_ID[gid]
    make_plan(str(g.store), tmp_path / "plan")
    apply_plan(tmp_path / "plan", output=tmp_path / "repaired")
    wanted = [(m["topic"], m["queue_id"], m["queue_offset"], m["physical_offset"]) for m in g.messages
              if m["physical_offset"] < end_of_log(g) and m["transaction_type"] in QUEUED]
    queries = [{"op": "get", "topic": t, "queue_id": q, "queue_offset": o, "max_msg_nums": 1} for t, q, o, _ in wanted]
    answers = serve_check.serve(g.version, tmp_path / "repaired", queries, settings=g.settings)
    assert answers["loaded"] is True
    assert answers["commitlog_max_offset"] == end_of_log(g)
    assert [f for f in answers["files_deleted"] if f.startswith(("commitlog/", "consumequeue/", "index/"))] == []
    got = [(a["status"], [m["physical_offset"] for m in a.get("messages", [])]) for a in answers["answers"]]
    assert got == [("FOUND", [phy]) for *_, phy in wanted]
