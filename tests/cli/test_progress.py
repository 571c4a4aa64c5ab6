"""Progress (issue #13): the segment reader reports how far it has read each CommitLog file (its own
counters), and the CLI turns that into bars on stderr — never on stdout, whose JSON stays clean."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from rocketstore_spark import progress
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import all_goldens

G = {g.id: g for g in all_goldens()}["5.5.1/clean"]
ROOT = Path(__file__).resolve().parents[2]


def test_the_reader_reports_every_segment_up_to_its_end():
    seen: dict[str, list[tuple[int, int]]] = {}
    lock = threading.Lock()

    def sink(path, position, size):
        with lock:
            seen.setdefault(os.path.basename(path), []).append((position, size))

    with progress.reporting(sink):
        verify_store(str(G.store))
    segments = {s["file"]: s["file_size"] for s in G.manifest["segments"]}
    assert set(seen) == set(segments)
    for name, reports in seen.items():
        assert all(size == segments[name] and 0 <= pos <= size for pos, size in reports)
        assert (segments[name], segments[name]) in reports            # each read reached the end of the file
    progress.advance("x", 1, 2)                                         # no sink installed: nothing happens


def test_the_cli_draws_bars_on_stderr_and_keeps_stdout_json():
    env = os.environ | {"PYTHONPATH": str(ROOT), "ROCKETSTORE_PROGRESS": "1"}
    proc = subprocess.run([str(Path(sys.executable).with_name("rocketstore")), "verify", str(G.store), "--json"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout)
    last = G.manifest["segments"][-1]["file"]
    assert "CommitLog read" in proc.stderr and f"commitlog/{last}" in proc.stderr
