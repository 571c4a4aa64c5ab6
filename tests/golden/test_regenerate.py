"""The regeneration command still builds and runs, and what it produces passes every manifest check.

Marked ``slow`` (Maven downloads the RocketMQ versions on a fresh machine, then several minutes of
RocketMQ runs). It runs in CI (`make test`); locally, `make test-fast` skips it. The regeneration starts when
the session's collection ends and runs beside the other tests (tests/golden/conftest.py): the test's own
duration is what is left of it when the test is reached, plus the checks.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.goldens import GOLDEN_ROOT, all_goldens
from tests.golden.test_manifests import CHECKS

REGENERATE = GOLDEN_ROOT / "regenerate.py"


@pytest.mark.slow
def test_regeneration_builds_runs_and_passes_every_check(regeneration):
    # regenerate.py --jobs 3 --out DIR, run in the background of the other tests (tests/golden/conftest.py)
    proc, out = regeneration
    assert proc.returncode == 0, proc.stderr[-4000:]
    fresh = all_goldens(out)
    committed = {(g.version, g.scenario) for g in all_goldens()}
    assert {(g.version, g.scenario) for g in fresh} == committed
    for golden in fresh:
        for check, scenarios in CHECKS:
            if scenarios is None or golden.scenario in scenarios:
                check(golden)


@pytest.mark.slow
def test_unknown_version_fails_with_a_clear_message(tmp_path: Path):
    proc = subprocess.run([sys.executable, str(REGENERATE), "--versions", "4.0.99", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1
    assert "RocketMQ 4.0.99 could not be resolved from Maven Central" in proc.stderr


def test_missing_jdk_fails_with_a_clear_message(tmp_path: Path):
    env = {"PATH": str(tmp_path)}   # neither java nor mvn on it
    proc = subprocess.run([sys.executable, str(REGENERATE), "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 1
    assert "'java' not found on PATH" in proc.stderr
