"""A user's own SparkSession (not get_spark): register() is all it takes, even where Spark's configured
worker Python ('python3' on the PATH) lacks the package (issue #8, item 2). Run in a child process: the
session's worker settings are fixed when it starts."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.golden.goldens import all_goldens

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]


def test_an_own_session_reads_after_register_even_when_python3_lacks_the_package(tmp_path):
    g = next(g for g in all_goldens() if g.id == "5.5.1/clean")
    script = textwrap.dedent(f"""
        import json
        from pyspark.sql import SparkSession
        from rocketstore_spark.datasource import register
        spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
        configured = spark.sparkContext.pythonExec
        register(spark)
        n = spark.read.format("rocketmq").load({str(g.store)!r}).where("topic = 'TopicTest'").count()
        print(json.dumps({{"count": n, "configured": configured, "after": spark.sparkContext.pythonExec}}))
        spark.stop()
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    env["PATH"] = "/usr/bin:/bin"               # 'python3' is the system's, without rocketstore-spark or numba
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"count": sum(m["topic"] == "TopicTest" for m in g.messages), "configured": "python3",
                   "after": "python3"}
    assert "rocketmq sources use" in proc.stderr and "Traceback" not in proc.stderr
