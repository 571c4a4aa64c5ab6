"""Every spark-submit job refuses a store written with an engine it does not follow, with one line and exit 2,
before Spark starts (the jobs run here as plain Python: the refusal comes before any SparkSession)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID
from tests.store_files import copy_store

ROOT = Path(__file__).resolve().parents[2]


GOLDEN = ROOT / "tests" / "golden"


@pytest.fixture(scope="module")
def two_ledgers(tmp_path_factory) -> Path:
    """A store with two DLedger directories: which one is this broker's log is not known, so nothing about its
    restart can be said."""
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path_factory.mktemp("ledgers") / "store")
    for n in (0, 1):
        (store / f"dledger-{n}" / "data").mkdir(parents=True)
    return store


# store_summary and verify read such a store's log (verify skips the queue and index checks it refuses);
# these follow what is not mirrored
@pytest.mark.parametrize("job,extra,engine", [("recovery_report", [], "DLedger CommitLog"),
                                              ("rebuild", ["--output", "{tmp}/rebuilt"], "DLedger CommitLog")])
def test_a_job_refuses_a_store_of_another_engine_before_spark_starts(two_ledgers, tmp_path, job, extra, engine):
    argv = [sys.executable, f"jobs/{job}.py", "--store", str(two_ledgers), *(a.format(tmp=tmp_path) for a in extra)]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"{job}: ") and f"the store uses {engine}" in proc.stderr
    assert "Traceback" not in proc.stderr and "SparkContext" not in proc.stderr
    assert not (tmp_path / "rebuilt").exists()


@pytest.mark.parametrize("golden", ["batchcq-5.5.1/crash", "lmq-5.5.1/crash"])
def test_the_recovery_report_job_follows_the_engines_the_report_follows(golden, tmp_path):
    """The job's check before Spark starts allows what ``recovery.report`` follows (BatchCQ, LMQ): on RocketMQ's
    crashed stores the job's document is the CLI's, whose queues tests/recovery compares with RocketMQ's restart."""
    store = GOLDEN / golden / "store"
    job = subprocess.run([sys.executable, "jobs/recovery_report.py", "--store", str(store), "--json",
                          str(tmp_path / "job.json")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    cli = subprocess.run([sys.executable, "-m", "rocketstore_spark.cli.main", "recover", "report", str(store),
                          "--json"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert job.returncode == cli.returncode and job.returncode in (0, 3), job.stderr + cli.stderr
    ours, theirs = json.loads((tmp_path / "job.json").read_text()), json.loads(cli.stdout)
    for doc in (ours, theirs):
        doc.pop("generated_at", None)
    assert ours == theirs


@pytest.mark.parametrize("scenario", ["clean", "crash"])
def test_the_rebuild_and_verify_jobs_allow_batch_cq_stores(scenario, tmp_path):
    """The Spark rebuild and verify follow BatchCQ as the CLI does (tests/jobs/test_batchcq_jobs.py): their checks
    before Spark starts let RocketMQ's BatchCQ stores through (they exit 2 on a refusal)."""
    from jobs import rebuild, verify
    store = str(GOLDEN / "batchcq-5.5.1" / scenario / "store")
    rebuild.check(["--store", store, "--output", str(tmp_path / "rebuilt")])
    verify.check(["--store", store])
    assert not (tmp_path / "rebuilt").exists()
