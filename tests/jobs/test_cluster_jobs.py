"""The ingest and scrub jobs on a real Spark standalone cluster: a master and two workers (one core each) started
with the checkout's PySpark (``spark-class``) on 127.0.0.1 for this module and stopped after it, the jobs
submitted through ./spark-submit.sh (SPARK_MASTER=spark://127.0.0.1:PORT) as a user would: the package reaches
the executors as spark-submit.sh's zip, its compiled dependencies from the workers' Python. The tables they
write equal those of the same jobs run on a local session."""
from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from jobs import ingest as ingest_job
from jobs import scrub as scrub_job
from rocketstore_spark.codec.audit import S_NOW
from rocketstore_spark.codec.encode import Message, SegmentWriter
from tests.builders import write_segments
from tests.jobs.test_installed_package import Cluster as InstalledCluster
from tests.jobs.test_installed_package import clean_env, free_port

pytestmark = [pytest.mark.spark, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = 256 << 10


def small_store(root: Path) -> Path:
    """Four segments of our encoder's messages, the last one open (a broker's store in miniature)."""
    w = SegmentWriter(SEGMENT)
    i, offset = 0, 0
    while offset < 3 * SEGMENT + SEGMENT // 2:
        offset, _ = w.append(Message(topic=f"T{i % 5}", body=bytes([i % 251]) * (100 + i % 900), queue_id=i % 3,
                         store_timestamp=1_795_000_000_000 + i * 1000, born_timestamp=1_795_000_000_000 + i * 1000 - 3,
                         properties={"TAGS": "ABC"[i % 3], "KEYS": f"k{i}", "UNIQ_KEY": f"{i:032X}"}))
        i += 1
    write_segments(w, root / "commitlog")
    return root


class Cluster(InstalledCluster):
    """A standalone master and two workers (``workers``) of one core each, from the checkout's PySpark, in process
    groups of their own (stopping one stops its executors and Python workers too). Also bench/bench_cluster.py's."""

    def __init__(self, tmp: Path, workers: int = 2, worker_memory: str = "1g"):
        import pyspark
        home = Path(pyspark.__file__).parent
        self.log_dir = tmp
        (tmp / "conf").mkdir()
        self.env = clean_env(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_CONF_DIR=str(tmp / "conf"))
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self.names = ["master", *(f"worker{k}" for k in range(1, workers + 1))]
        self.procs = [self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                  "--port", str(port), "--webui-port", str(free_port()))]
        for name in self.names[1:]:
            (tmp / name).mkdir()
            self.procs.append(self._start(name, "org.apache.spark.deploy.worker.Worker", self.url, "--host",
                                          "127.0.0.1", "--cores", "1", "--memory", worker_memory,
                                          "--webui-port", str(free_port()), "--work-dir", str(tmp / name)))

    def wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not all("Successfully registered with master" in self.log(n) for n in self.names[1:]):
            for proc, name in zip(self.procs, self.names):
                assert proc.poll() is None, f"the {name} exited:\n{self.log(name)[-3000:]}"
            assert time.monotonic() < deadline, "\n".join(self.log(n)[-1500:] for n in self.names)
            time.sleep(0.2)

    def submit(self, *args, numba_cache: Path, executor_memory: str = "768m",
               timeout: float = 300) -> subprocess.CompletedProcess:
        """./spark-submit.sh with this master (the checkout's .venv Python on driver and executors), numba's
        cache of the kernels imported from the zip in ``numba_cache`` on both."""
        env = clean_env(SPARK_MASTER=self.url, SPARK_LOCAL_IP="127.0.0.1", NUMBA_CACHE_DIR=str(numba_cache),
                        SPARK_SUBMIT_OPTS_EXTRA=f"--conf spark.executor.memory={executor_memory} "
                                                f"--conf spark.executorEnv.NUMBA_CACHE_DIR={numba_cache}")
        return subprocess.run([str(ROOT / "spark-submit.sh"), *args], cwd=ROOT, env=env, capture_output=True,
                              text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def executor_logs(self) -> dict[str, list[Path]]:
        """Per worker, the stderr of every executor it ran."""
        return {n: sorted((self.log_dir / n).glob("app-*/*/stderr")) for n in self.names[1:]}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("standalone"))
    try:
        yield c
    finally:
        c.stop()


def table(path: Path, drop=()) -> list[str]:
    """The rows of a Delta table that was only ever appended to (checked: no file was removed in its log), as
    sorted JSON lines, read from its Parquet files by pyarrow (a Spark read replays the log in 8 tasks: seconds
    each, and six reads here)."""
    import pyarrow.dataset as ds
    for commit in (path / "_delta_log").glob("*.json"):
        assert '{"remove"' not in commit.read_text(), commit
    # every column is in the files (the ingest table's partition values too): the directories are not read
    t = ds.dataset(str(path), format="parquet").to_table()
    return sorted(json.dumps({k: v for k, v in row.items() if k not in drop}, sort_keys=True, default=str)
                  for row in t.to_pylist())


def seeded_cache(tmp: Path) -> Path:
    """A numba cache holding the checkout's compiled kernels where the package imported from a zip looks for
    them (codec.kernel_cache: the stamp is the sources' content, the same in the zip): the executors load them
    rather than compile every kernel again (60-100 s of CPU on 2 cores). A kernel not compiled yet just
    compiles."""
    cache = tmp / "numba"
    for cached in (ROOT / "rocketstore_spark").glob("**/__pycache__/*.nb[ic]"):
        inside = cached.parent.parent.relative_to(ROOT).as_posix().replace("/", "_")
        target = cache / f"zip_{inside}" / cached.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(cached.read_bytes())
    return cache


def test_ingest_and_scrub_on_a_standalone_cluster_equal_a_local_run(cluster, spark, tmp_path):
    store = small_store(tmp_path / "store")
    on, here = tmp_path / "cluster", tmp_path / "local"
    # the local run first (its kernels compiled in the checkout, then handed to the cluster's cache)
    ingest_code = ingest_job.main(spark, ["--store", str(store), "--table", str(here / "table"), "--no-snapshots"])
    assert ingest_code == 0
    scrub_code = scrub_job.main(spark, ["--store", str(store), "--state", str(here / "state.json"),
                                        "--history", str(here / "history"), "--json", str(here / "scrub.json")])
    cache = seeded_cache(tmp_path)
    cluster.wait()
    ingest = cluster.submit("jobs/ingest.py", "--store", str(store), "--table", str(on / "table"), "--no-snapshots",
                            numba_cache=cache)
    assert ingest.returncode == ingest_code, ingest.stdout[-3000:] + ingest.stderr[-5000:]
    scrub = cluster.submit("jobs/scrub.py", "--store", str(store), "--state", str(on / "state.json"),
                           "--history", str(on / "history"), "--json", str(on / "scrub.json"), numba_cache=cache)
    assert scrub.returncode == scrub_code, scrub.stdout[-3000:] + scrub.stderr[-5000:]
    assert "segments scanned: 4 of 4 (4 new)" in scrub.stdout

    # both workers ran executors of both applications: the reads and the segment scans ran there
    logs = cluster.executor_logs()
    assert all(len(paths) == 2 for paths in logs.values()), logs

    assert table(on / "table") == table(here / "table")
    assert len(table(on / "table")) > 1000
    assert table(on / "history" / "findings", ["run_id", "run_time"]) == \
        table(here / "history" / "findings", ["run_id", "run_time"])
    assert table(on / "history" / "audit_runs", ["run_id", "run_time", "seconds"]) == \
        table(here / "history" / "audit_runs", ["run_id", "run_time", "seconds"])
    assert len(table(here / "history" / "audit_runs")) == 1
    states = [json.loads((d / "state.json").read_text())["stores"] for d in (on, here)]
    for state in states:                              # each scan's clock (what a resumed scan judges times by)
        for rec in (r for store_state in state.values() for r in store_state["segments"].values()):
            if "resume" in rec:
                rec["resume"]["state"][S_NOW] = None
    assert states[0] == states[1]                     # segment records (digests, verdicts) and cross-checks
