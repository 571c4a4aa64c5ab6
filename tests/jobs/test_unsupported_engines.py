"""Every spark-submit job refuses a store written with an engine it does not follow, with one line and exit 2,
before Spark starts (the jobs run here as plain Python: the refusal comes before any SparkSession)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID
from tests.store_files import copy_store

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def batched(tmp_path_factory) -> Path:
    """A store with batch ConsumeQueues beside its classic files: an engine whose dispatch and recovery we do
    not follow (DLedger stores are followed now: tests/recovery/test_dledger_recovery.py)."""
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path_factory.mktemp("batch") / "store")
    (store / "batchconsumequeue" / "T" / "0").mkdir(parents=True)
    return store


# store_summary and verify read such a store's log (verify skips the queue and index checks it refuses);
# these follow what is not mirrored
@pytest.mark.parametrize("job,extra", [("recovery_report", []),
                                       ("rebuild", ["--output", "{tmp}/rebuilt"])])
def test_a_job_refuses_a_store_of_another_engine_before_spark_starts(batched, tmp_path, job, extra):
    argv = [sys.executable, f"jobs/{job}.py", "--store", str(batched), *(a.format(tmp=tmp_path) for a in extra)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{job}: ") and "the store uses batch ConsumeQueue" in proc.stderr
    assert "Traceback" not in proc.stderr and "SparkContext" not in proc.stderr
    assert not (tmp_path / "rebuilt").exists()
