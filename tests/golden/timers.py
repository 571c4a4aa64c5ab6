"""The timer golden stores (tests/golden/timers-5.5.1/{clean,crash}/, written by RocketMQ's TimerMessageStore:
TimerGolden.java, ``regenerate.py --timers``). Their 38.7 MB ``timerwheel`` is committed as ``timerwheel.gz``;
``unpacked`` copies a store to a test's directory with the wheel as RocketMQ wrote it (checked against the
manifest's digest). Tests only."""
from __future__ import annotations

import gzip
import hashlib
import json
import shutil
from pathlib import Path

TIMERS_ROOT = Path(__file__).resolve().parent / "timers-5.5.1"
SCENARIOS = ("clean", "crash")


def manifest(scenario: str) -> dict:
    return json.loads((TIMERS_ROOT / scenario / "manifest.json").read_text())


def unpacked(scenario: str, dest: Path) -> Path:
    """A copy of the scenario's store under ``dest`` with ``timerwheel`` unpacked; returns the store root."""
    store = dest / scenario
    shutil.copytree(TIMERS_ROOT / scenario / "store", store)
    spec = manifest(scenario)["timerwheel"]
    packed = store / spec["file"]
    raw = gzip.decompress(packed.read_bytes())
    assert len(raw) == spec["unpacked_size"] and hashlib.sha256(raw).hexdigest() == spec["sha256"]
    (store / "timerwheel").write_bytes(raw)
    packed.unlink()
    return store


def rocketmq_view(store: Path, work: Path) -> dict:
    """RocketMQ 5.5.1's own view of ``store``'s timers (TimerGolden view on a copy: its TimerLog, wheel, recover()
    and the timers its dequeue would deliver, each unit's message read back with StoreUtil.getMessage)."""
    import subprocess
    from tests.golden import regenerate, serve_check
    cp = serve_check.classpath("5.5.1", timers=True)
    out = work / "view.json"
    with regenerate.java(cp, "io.rocketstore.golden.TimerGolden", "view", "--store", str(store), "--work",
                         str(work / "copy"), "--out", str(out)) as cmd:
        subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return json.loads(out.read_text())
