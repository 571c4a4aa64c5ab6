"""The package as a pip user gets it (a wheel in a fresh virtualenv, run outside the checkout), and the main job
on a real Spark standalone cluster (a master and a worker started from that virtualenv's pyspark).

The fresh virtualenv takes its third-party dependencies (pyspark, numba, ...) from the checkout's .venv through
a .pth line naming that site-packages, so nothing is downloaded but the wheel's build backend. A plain path
line does not run the .pth files of the directory it names, so the checkout's editable-install hook is not
installed there: ``rocketstore_spark`` comes from the wheel (checked).
"""
from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
CLEAN = BY_ID["5.5.1/clean"]
RELATIVE_STORE = "tests/golden/rocketmq-5.5.1/clean/store"
# short-lived JVMs: the client compiler only and one GC thread start faster on a 2-core machine
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def clean_env(**extra) -> dict:
    """This process's environment less anything that points Spark or Python at the checkout."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SPARK_", "PYSPARK_", "ROCKETSTORE_")) and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["JAVA_TOOL_OPTIONS"] = JVM_OPTIONS
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Venv:
    def __init__(self, root: Path):
        self.root = root
        self.python = root / "bin" / "python"
        self.site = Path(sysconfig.get_path("purelib", vars={"base": str(root), "platbase": str(root)}))

    def start(self, code: str, cwd: Path, **env) -> "Run":
        """Starts ``code`` in this virtualenv from ``cwd``; its last stdout line is JSON."""
        return Run([str(self.python), "-c", code], cwd=cwd, env=clean_env(**env))

    def run(self, code: str, cwd: Path, **env):
        return self.start(code, cwd, **env).result()

    @property
    def pyspark(self) -> Path:
        return Path(self.run("import json, os, pyspark; print(json.dumps(os.path.dirname(pyspark.__file__)))",
                             cwd=self.root))


class Run:
    """A command started now (in a process group of its own) and collected later."""

    def __init__(self, args, **kwargs):
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True, **kwargs)
        self.done: subprocess.CompletedProcess | None = None

    def finished(self) -> subprocess.CompletedProcess:
        if self.done is None:
            out, err = self.proc.communicate(timeout=300)
            self.done = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, err)
        return self.done

    def result(self):
        """The JSON of the last line of a successful run's output."""
        done = self.finished()
        assert done.returncode == 0, done.stdout + done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()


class Cluster:
    """A standalone master and one worker (1 core, 1 GiB), started at once; ``wait()`` polls the logs."""

    def __init__(self, venv: Venv, tmp: Path):
        spark_home = venv.pyspark
        self.log_dir = tmp
        (tmp / "conf").mkdir()
        self.env = clean_env(SPARK_HOME=str(spark_home), SPARK_LOCAL_IP="127.0.0.1",
                             SPARK_CONF_DIR=str(tmp / "conf"), SPARK_WORKER_DIR=str(tmp / "work"),
                             PYSPARK_PYTHON=str(venv.python), PYSPARK_DRIVER_PYTHON=str(venv.python))
        self.spark_submit = spark_home / "bin" / "spark-submit"
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        self.procs = []
        self.procs.append(self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                      "--port", str(port), "--webui-port", str(free_port())))
        self.procs.append(self._start("worker", "org.apache.spark.deploy.worker.Worker", self.url, "--cores", "1",
                                      "--memory", "1g", "--webui-port", str(free_port()),
                                      "--work-dir", str(tmp / "work")))
        self.ready = False

    def _start(self, name, *args):
        with open(self.log_dir / f"{name}.log", "w") as log:
            # a process group each: stopping it stops the JVM and what it started (executors, Python workers)
            return subprocess.Popen([str(Path(self.env["SPARK_HOME"]) / "bin" / "spark-class"), *args],
                                    env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self, name: str) -> str:
        return (self.log_dir / f"{name}.log").read_text(errors="replace")

    def wait(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready:
            if "Successfully registered with master" in self.log("worker"):
                self.ready = True
                return
            for proc, name in zip(self.procs, ("master", "worker")):
                assert proc.poll() is None, f"the {name} exited:\n{self.log(name)[-3000:]}"
            assert time.monotonic() < deadline, \
                f"no worker registered in {timeout} s:\n{self.log('master')[-2000:]}\n{self.log('worker')[-2000:]}"
            time.sleep(0.2)

    def submit(self, *args) -> Run:
        """spark-submit from the checkout's root with the Delta JARs of jars/ (the cluster has one core:
        applications submitted together run one after the other, their drivers start meanwhile)."""
        self.wait()
        jars = ",".join(sorted(glob.glob(str(ROOT / "jars" / "*.jar"))))
        return Run([str(self.spark_submit), "--master", self.url, "--jars", jars, *args], cwd=ROOT, env=self.env)

    def stop(self) -> None:
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


@pytest.fixture(scope="session")
def venv(tmp_path_factory) -> Venv:
    """An empty virtualenv outside the checkout whose third-party packages are the checkout's .venv's."""
    root = tmp_path_factory.mktemp("installed") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    v = Venv(root)
    deps = Path(sysconfig.get_path("purelib"))       # this interpreter's site-packages: the checkout's .venv
    assert deps != v.site
    (v.site / "_rocketstore_test_deps.pth").write_text(f"{deps}\n")
    return v


@pytest.fixture(scope="session")
def cluster(venv, tmp_path_factory):
    c = Cluster(venv, tmp_path_factory.mktemp("cluster"))
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def installed(venv, cluster, tmp_path_factory) -> Venv:
    """The wheel of the package, built from a copy of the sources and installed into ``venv``. Asks for the
    cluster only so that its JVMs start while the wheel is built."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    (src / "jars").mkdir()
    shutil.copy(ROOT / "jars" / "pom.xml", src / "jars" / "pom.xml")
    shutil.copytree(ROOT / "rocketstore_spark", src / "rocketstore_spark", symlinks=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(src)],
                   check=True, cwd=tmp)
    wheel, = (tmp / "dist").glob("rocketstore_spark-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "install", "-q", "--no-deps",
                    str(wheel)], check=True, cwd=tmp)
    # numba's cache is keyed by the source's content: the checkout's compiled kernels serve the same sources
    # installed (a kernel whose source differs just compiles). Saves 20 s of compiling on 2 cores.
    package = venv.site / "rocketstore_spark"
    for cached in (ROOT / "rocketstore_spark").glob("**/__pycache__/*.nb[ic]"):
        target = package / cached.relative_to(ROOT / "rocketstore_spark")
        if target.parent.parent.is_dir():
            target.parent.mkdir(exist_ok=True)
            shutil.copy(cached, target)
    found = venv.run("import json, rocketstore_spark, rocketstore_spark.spark.jars as j; "
                     "print(json.dumps([rocketstore_spark.__file__, j.POM.read_text()]))", cwd=tmp)
    assert Path(found[0]).is_relative_to(venv.site), found[0]
    assert found[1] == (ROOT / "jars" / "pom.xml").read_text()      # the pom ships as package data
    assert (venv.root / "bin" / "rocketstore-spark-jars").exists()
    return venv


def expected_topics() -> Counter:
    return Counter(m["topic"] for m in CLEAN.messages)


# ------------------------------------------------------------------------------------------- pip install

WITHOUT_JARS = """
import json
from rocketstore_spark.spark.session import get_spark
try:
    get_spark()
    message = None
except RuntimeError as e:
    message = str(e)
spark = get_spark(master="local[1]", delta=False)
counts = {r.topic: r["count"] for r in spark.read.format("rocketmq").load(STORE).groupBy("topic").count().collect()}
extensions = spark.conf.get("spark.sql.extensions", None)
spark.stop()
print(json.dumps([message, counts, extensions]))
"""

WITH_JARS = """
import json
from rocketstore_spark.spark.session import get_spark
spark = get_spark(master="local[1]", conf={"spark.databricks.delta.snapshotPartitions": "1"})  # not 50 tasks
spark.range(5).write.format("delta").save(TABLE)
rows = sorted(r.id for r in spark.read.format("delta").load(TABLE).collect())
spark.stop()
print(json.dumps(rows))
"""


@pytest.fixture(scope="session")
def pip_runs(installed, tmp_path_factory):
    """Both pip-user sessions, started together (each a JVM start: on 2 cores they overlap well), from a
    directory outside the checkout, with no JAR cache."""
    tmp = tmp_path_factory.mktemp("pip")
    cache = tmp / "cache"
    runs = {
        "without": installed.start(f"STORE = {str(CLEAN.store)!r}\n" + WITHOUT_JARS, cwd=tmp,
                                   XDG_CACHE_HOME=str(cache)),
        "with": installed.start(f"TABLE = {str(tmp / 'table')!r}\n" + WITH_JARS, cwd=tmp,
                                XDG_CACHE_HOME=str(cache), ROCKETSTORE_JARS=str(ROOT / "jars")),
    }
    yield {**runs, "cache": cache, "table": tmp / "table"}
    for run in runs.values():
        run.kill()


def test_pip_without_jars_names_the_ways_out_and_reads_without_delta(pip_runs):
    message, counts, extensions = pip_runs["without"].result()
    assert message == (
        "Delta Lake JARs not found in $ROCKETSTORE_JARS (not set), a checkout's jars/ (not running from one) or "
        f"the cache {pip_runs['cache']}/rocketstore-spark/jars: fetch them there with Maven by `python -m "
        "rocketstore_spark.spark.jars fetch`, set ROCKETSTORE_JARS to a folder holding them, or call "
        "get_spark(delta=False) for a session without Delta Lake")
    assert counts == expected_topics()
    assert extensions is None


def test_pip_with_rocketstore_jars_writes_and_reads_delta(pip_runs):
    assert pip_runs["with"].result() == [0, 1, 2, 3, 4]
    assert (pip_runs["table"] / "_delta_log").is_dir()


# ------------------------------------------------------------------------------------ standalone cluster


def topic_table(out: str) -> dict[str, int]:
    """The job's "Topics" table: shown topic name (long ones elided in the middle) -> messages."""
    lines = out.splitlines()
    start = lines.index("Topics") + 3                     # the title, the header and its rule
    rows = {}
    for line in lines[start:]:
        if not line.strip():
            break
        topic, messages = re.split(r"\s{2,}", line.strip())[:2]
        rows[topic] = int(messages.replace(",", ""))
    return rows


def shown_as(topic: str, shown: set[str]) -> str:
    for s in shown:
        head, _, tail = s.partition("…")
        if s == topic or (_ and topic.startswith(head) and topic.endswith(tail)):
            return s
    return topic


# /proc/self/cwd is the driver's working directory (the checkout) on the driver and the executor's own (the
# worker's work directory, without the store) on the executor: a store the executor's node does not have, as
# with a disk mounted on the driver only. Discovery must keep such a path as given (absolute, not resolved).
UNREADABLE_ON_EXECUTORS = f"/proc/self/cwd/{RELATIVE_STORE}"


@pytest.fixture(scope="session")
def cluster_runs(installed, cluster):
    runs = {"relative": cluster.submit("jobs/store_summary.py", "--store", RELATIVE_STORE),
            "unreadable": cluster.submit("jobs/store_summary.py", "--store", UNREADABLE_ON_EXECUTORS)}
    yield runs
    for run in runs.values():
        run.kill()


def test_store_summary_on_a_cluster_with_a_relative_store_path(cluster_runs):
    proc = cluster_runs["relative"].finished()
    assert proc.returncode == 0, proc.stdout + proc.stderr[-5000:]
    shown = topic_table(proc.stdout)
    assert shown == {shown_as(t, set(shown)): n for t, n in expected_topics().items()}, proc.stdout
    assert "1 store(s), 4 segment(s) scanned, 0 with damage or CRC failures" in proc.stdout


def test_a_segment_the_driver_listed_but_an_executor_cannot_open_fails_the_job(cluster_runs):
    proc = cluster_runs["unreadable"].finished()
    assert proc.returncode == 1, proc.stdout
    # one line naming the finding, not the Py4J and Python tracebacks around it (spark-submit passes the Python
    # driver's stderr on through its own stdout)
    assert re.search(rf"^store_summary: \[error\] commitlog\.unreadable: {re.escape(UNREADABLE_ON_EXECUTORS)}/"
                     r"commitlog/\d{20}: cannot open: No such file or directory$", proc.stdout, re.M), \
        proc.stdout[-5000:] + proc.stderr[-5000:]
    assert "Py4JJavaError" not in proc.stdout + proc.stderr
