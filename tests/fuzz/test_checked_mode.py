"""The codec tests that write batches and a reduced mutation campaign in the bounds-checked mode
(codec/checked.py): every write into a batch's regions checked, a write outside raising instead of corrupting
memory. Each runs in a process of its
own with ROCKETSTORE_CHECKED=1 (the mode is read once, when the codec is imported); the checked build of the
kernels is cached apart from the normal one, so only the first run compiles."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore_spark.codec import checked

ROOT = Path(__file__).resolve().parents[2]
CHECKED_ENV = {**os.environ, checked.ENV: "1"}
# codec tests that write no arena: the cache's own compiles (it sets the mode itself), JSON parsers, the heap
NOT_CHECKED = ("test_kernel_cache.py", "test_config_json.py", "test_json_lines.py", "test_native_memory.py")
CASES = 300                 # 15 % of the normal campaign's cases (a checked case costs about what a normal one does)
TOOLS_EVERY = 5


@pytest.mark.long
def test_codec_tests_pass_in_the_bounds_checked_mode():
    ignored = [f"--ignore=tests/codec/{name}" for name in NOT_CHECKED]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", "-m",
                           "not spark and not slow", "tests/codec", *ignored], cwd=ROOT, env=CHECKED_ENV,
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    # the undersized regions are refused here, not skipped as in normal mode
    assert "test_the_checked_mode_refuses" not in proc.stdout, proc.stdout[-3000:]


@pytest.mark.long
def test_campaign_is_clean_in_the_bounds_checked_mode():
    proc = subprocess.run([sys.executable, "-m", "tests.fuzz.campaign", "--cases", str(CASES), "--seed", "20261127",
                           "--memory-gib", "8", "--tools-every", str(TOOLS_EVERY), "--no-fsync"],
                          cwd=ROOT, env=CHECKED_ENV, capture_output=True, text=True, timeout=1800)
    result = json.loads(proc.stdout)
    print(f"checked mutation campaign: {result['cases']} cases ({result['tool_cases']} through the tools) in "
          f"{result['seconds']} s: {result['kinds']}")
    assert result["failures"] == [], json.dumps(result["failures"][:5], indent=1)
    assert proc.returncode == 0 and result["cases"] == CASES
