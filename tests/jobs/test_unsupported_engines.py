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
def switched(tmp_path_factory) -> Path:
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path_factory.mktemp("dledger") / "store")
    (store / "dledger-n0" / "data").mkdir(parents=True)
    return store


# store_summary and verify read a DLedger store's log (verify skips the queue and index checks it refuses);
# these follow what is not mirrored
@pytest.mark.parametrize("job,extra", [("recovery_report", []),
                                       ("rebuild", ["--output", "{tmp}/rebuilt"])])
def test_a_job_refuses_a_dledger_store_before_spark_starts(switched, tmp_path, job, extra):
    argv = [sys.executable, f"jobs/{job}.py", "--store", str(switched), *(a.format(tmp=tmp_path) for a in extra)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{job}: ") and "the store uses DLedger CommitLog (dledger-n0/" in proc.stderr
    assert "Traceback" not in proc.stderr and "SparkContext" not in proc.stderr
    assert not (tmp_path / "rebuilt").exists()
