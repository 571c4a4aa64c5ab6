"""Golden regenerations run in the background of the rest of the suite (pytest process; the regenerations are
subprocesses).

A regeneration test (``BACKGROUND``) runs tests/golden/regenerate.py, minutes of RocketMQ runs spent mostly in
JVM start-ups and RocketMQ's own waits (the cleaner's first run a minute after start-up, 3-second shutdowns, the
writer's pauses for the flush services), leaving the CPUs half idle. So when such a test is among the session's
tests, its regeneration starts as soon as collection ends, at a lower priority (``nice``), one regeneration at a
time, into a directory of its own; the test itself waits for it (``regeneration`` fixture) and then makes its
checks on what it wrote, exactly as when it ran the command itself. A test run alone (or a session that
reaches it before its regeneration started) just waits for the same command. Whatever is still running when the
session ends is stopped, and the directories are removed. The terminal summary gives each regeneration's wall
time and how long its test waited for it (what running it beside the suite saved: the difference).

The test's only signal is the command's exit: it returns after every RocketMQ JVM it ran has exited and every
manifest is written, so no store is read while RocketMQ writes it; a failed or killed run is a non-zero exit
the test asserts on first. The checks read the fresh stores' own bytes (tests/golden/test_manifests.py
segment_bytes is keyed by path: the fresh stores have the committed ones' ids).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.golden.goldens import GOLDEN_ROOT

REGENERATE = GOLDEN_ROOT / "regenerate.py"

#: test name -> the regenerate.py arguments it checks the output of (``--out`` is added)
BACKGROUND = {
    # three JVMs at a time: most of a JVM run is waiting, and it runs beside the other tests at a lower priority
    "test_regeneration_builds_runs_and_passes_every_check": ("--jobs", "3"),
    "test_rocksdb_regeneration_reads_as_rocketmq_sees_it": ("--rocksdb",),
}

#: the longest a regeneration may take (it timed out at 30 and 15 minutes when each test ran it itself)
TIMEOUT = 1800


class Regenerations:
    """The session's background regenerations: one at a time, in submission order."""

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="golden-regenerations-"))
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="golden-regeneration")
        self.runs: dict[str, Future] = {}
        self.procs: list[subprocess.Popen] = []
        self.lock = threading.Lock()
        self.closed = False
        self.seconds: dict[str, float] = {}       # name -> the regeneration's wall time
        self.waited: dict[str, float] = {}        # name -> how long its test waited for it

    def start(self, name: str) -> Future:
        """``name``'s regeneration, submitted now unless it already was."""
        with self.lock:
            if name not in self.runs:
                self.runs[name] = self.pool.submit(self._run, name)
            return self.runs[name]

    def _run(self, name: str) -> tuple[subprocess.CompletedProcess, Path]:
        out = self.root / name
        out.mkdir()
        cmd = ["nice", "-n", "10", sys.executable, str(REGENERATE), *BACKGROUND[name], "--out", str(out)]
        with self.lock:
            if self.closed:
                raise RuntimeError("the session ended before this regeneration started")
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)     # a process group: stopping it stops its JVMs
            self.procs.append(proc)
        started = time.monotonic()
        try:
            stdout, stderr = proc.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            stderr += f"\n(regeneration stopped after {TIMEOUT} s)"
        self.seconds[name] = time.monotonic() - started
        return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr), out

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for proc in self.procs:
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGKILL)
        self.pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(self.root, ignore_errors=True)


_KEY = pytest.StashKey[Regenerations]()


def _regenerations(config: pytest.Config) -> Regenerations:
    if _KEY not in config.stash:
        config.stash[_KEY] = Regenerations()
    return config.stash[_KEY]


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    selected = {item.name for item in session.items}
    for name in BACKGROUND:
        if name in selected:
            _regenerations(session.config).start(name)


def pytest_terminal_summary(terminalreporter, config: pytest.Config) -> None:
    """What the background saved, in every CI log: each regeneration's wall time and its test's wait."""
    regenerations = config.stash.get(_KEY, None)
    for name, seconds in sorted(regenerations.seconds.items()) if regenerations else ():
        waited = regenerations.waited.get(name)
        terminalreporter.write_line(
            f"golden regeneration for {name}: {seconds:.0f} s beside the other tests; "
            + (f"the test waited {waited:.0f} s for it" if waited is not None else "its test did not run"))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _KEY in config.stash:
        config.stash[_KEY].close()


@pytest.fixture
def regeneration(request) -> tuple[subprocess.CompletedProcess, Path]:
    """The finished regeneration of this test (``BACKGROUND``): the process (return code, stderr) and its
    ``--out`` directory."""
    regenerations = _regenerations(request.config)
    started = time.monotonic()
    try:
        return regenerations.start(request.node.name).result()
    finally:
        regenerations.waited[request.node.name] = time.monotonic() - started
