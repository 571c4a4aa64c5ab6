"""Faults while a plan is applied (issue #12): a process killed (SIGKILL) between any two steps, a full disk
(a real small tmpfs) and an injected I/O error leave the store either as it was or repaired — never a mix —
and the next apply finishes the job; the same for a rollback.

The "repaired" tree every outcome is compared with is an uninterrupted apply of the same store into a copy.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore_spark.recovery.apply import ApplyFailed, apply_plan, rollback
from rocketstore_spark.recovery.documents import journal_path
from rocketstore_spark.recovery.plan import make_plan
from tests.golden.goldens import BY_ID
from tests.store_files import tree

GOLDEN = BY_ID["4.9.8/corrupt-body"]        # a cut, deleted segments, an abort
REPO = Path(__file__).resolve().parents[2]

CHILD = """
import os, signal, sys
from rocketstore_spark.recovery import apply as A
plan, mode, step, nth, two_renames = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] == "1"
seen = [0]
def reached(name):
    if name == step:
        seen[0] += 1
        if seen[0] == nth:
            os.kill(os.getpid(), signal.SIGKILL)
A._reached = reached
if two_renames:
    A.exchange = lambda a, b: False          # a filesystem that cannot exchange two names
if mode == "apply":
    A.apply_plan(plan, in_place=True)
else:
    A.rollback(plan)
print("not killed")
"""


@pytest.fixture(scope="module")
def repaired_tree(tmp_path_factory) -> dict[str, str]:
    work = tmp_path_factory.mktemp("reference")
    make_plan(str(GOLDEN.store), work / "plan")
    apply_plan(work / "plan", output=work / "repaired")
    return tree(work / "repaired")


def fresh(tmp_path: Path) -> tuple[Path, Path, dict]:
    store = tmp_path / "store"
    shutil.copytree(GOLDEN.store, store)
    plan = make_plan(str(store), tmp_path / "plan")
    return store, tmp_path / "plan", plan


def run_child(plan: Path, mode: str, step: str, nth: int = 1, two_renames: bool = False) -> str:
    env = os.environ | {"PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", CHILD, str(plan), mode, step, str(nth), "1" if two_renames else "0"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode in (0, -9), proc.stderr[-3000:]
    return "killed" if proc.returncode == -9 else "finished"


def states(tmp_path: Path, store: Path, plan: dict) -> dict:
    pid = plan["plan_id"]
    return {"store": tree(store), "backup": tree(tmp_path / f"store.before-repair-{pid}"),
            "staging": tree(tmp_path / f".store.repair-{pid}")}


STEPS = [("file", 1), ("file", 4), ("staged", 1), ("checked", 1), ("journaled", 1), ("exchanged", 1),
         ("applied", 1)]


@pytest.mark.parametrize("step,nth", STEPS, ids=[f"{s}-{n}" for s, n in STEPS])
def test_a_kill_at_any_step_leaves_the_old_or_the_new_store_and_apply_again_finishes(step, nth, tmp_path,
                                                                                    repaired_tree):
    store, plan_dir, plan = fresh(tmp_path)
    original = tree(store)
    assert run_child(plan_dir, "apply", step, nth) == "killed"
    s = states(tmp_path, store, plan)
    if s["store"] == original:
        assert s["backup"] is None                            # not published: the store was never touched
    else:
        assert s["store"] == repaired_tree                    # published whole; the old store whole beside it
        assert original in (s["backup"], s["staging"])
    receipt = apply_plan(plan_dir, in_place=True)
    s = states(tmp_path, store, plan)
    assert s == {"store": repaired_tree, "backup": original, "staging": None}
    assert receipt["phase"] == "applied"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan", "store", f"store.before-repair-{plan['plan_id']}"]


def test_without_an_atomic_exchange_a_kill_between_the_two_renames_loses_neither_store(tmp_path, repaired_tree):
    store, plan_dir, plan = fresh(tmp_path)
    original = tree(store)
    assert run_child(plan_dir, "apply", "moved-old", two_renames=True) == "killed"
    s = states(tmp_path, store, plan)
    assert s == {"store": None, "backup": original, "staging": repaired_tree}     # both whole, none mixed
    apply_plan(plan_dir, in_place=True)
    assert states(tmp_path, store, plan) == {"store": repaired_tree, "backup": original, "staging": None}


@pytest.mark.parametrize("step,two_renames", [("exchanged-back", False), ("moved-repaired", True)])
def test_a_killed_rollback_is_finished_by_the_next_one(step, two_renames, tmp_path, repaired_tree):
    store, plan_dir, plan = fresh(tmp_path)
    original = tree(store)
    apply_plan(plan_dir, in_place=True)
    assert run_child(plan_dir, "rollback", step, two_renames=two_renames) == "killed"
    kept = tmp_path / f"store.repaired-{plan['plan_id']}"
    assert tree(store) in (original, repaired_tree, None)
    done = rollback(plan_dir)
    assert tree(store) == original and tree(kept) == repaired_tree and done["phase"] == "rolled-back"


def test_an_injected_io_error_removes_the_staging_and_changes_nothing(tmp_path, monkeypatch, repaired_tree):
    store, plan_dir, plan = fresh(tmp_path)
    original = tree(store)
    real_fsync, calls = os.fsync, [0]

    def failing_fsync(fd):
        calls[0] += 1
        if calls[0] == 3:
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(ApplyFailed, match="Input/output error.*nothing was changed"):
        apply_plan(plan_dir, in_place=True)
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert states(tmp_path, store, plan) == {"store": original, "backup": None, "staging": None}
    assert not journal_path(plan_dir).exists()
    apply_plan(plan_dir, in_place=True)
    assert tree(store) == repaired_tree


@pytest.fixture
def small_disk(tmp_path):
    """A real 4 MiB tmpfs, unmounted afterwards; skipped where mounting is not allowed (not root)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    yield mnt
    subprocess.run(["umount", str(mnt)], check=True)


def test_a_full_disk_while_staging_in_place_changes_nothing_and_a_retry_with_space_succeeds(small_disk,
                                                                                           repaired_tree):
    store = small_disk / "store"
    shutil.copytree(GOLDEN.store, store)
    plan = make_plan(str(store), small_disk.parent / "plan")
    original = tree(store)
    ballast = small_disk / "ballast"
    free = shutil.disk_usage(small_disk).free
    with open(ballast, "wb") as f:                           # leave 64 KiB: less than one segment to copy
        f.write(b"\1" * (free - 64 * 1024))
    with pytest.raises(ApplyFailed, match="No space left on device.*nothing was changed"):
        apply_plan(small_disk.parent / "plan", in_place=True)
    assert tree(store) == original
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast", "store"]
    ballast.unlink()
    apply_plan(small_disk.parent / "plan", in_place=True)
    assert tree(store) == repaired_tree
    assert tree(small_disk / f"store.before-repair-{plan['plan_id']}") == original


def test_a_full_disk_while_copying_leaves_no_output(small_disk, tmp_path):
    plan_dir = tmp_path / "plan"
    make_plan(str(GOLDEN.store), plan_dir)
    free = shutil.disk_usage(small_disk).free
    with open(small_disk / "ballast", "wb") as f:
        f.write(b"\1" * (free - 256 * 1024))
    with pytest.raises(ApplyFailed, match="No space left on device"):
        apply_plan(plan_dir, output=small_disk / "repaired")
    assert sorted(p.name for p in small_disk.iterdir()) == ["ballast"]
