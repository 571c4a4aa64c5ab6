"""Which Python runs the sources' workers (driver, at registration).

The sources' planning and ``read`` run in Python worker processes that Spark starts with its configured
interpreter (``spark.pyspark.python``, else ``PYSPARK_PYTHON``, else ``python3`` on the PATH), captured
when a source is registered — not necessarily the interpreter running the driver. A worker without
rocketstore-spark or its compiled dependencies would fail every read with a ModuleNotFoundError buried in a
Java stack trace.

On a local master the workers run on this machine: if the configured interpreter cannot import what the
sources need, the sources are registered with the driver's own interpreter instead (it has the package:
it is running it), and a note says so; other Python code of the session keeps the configured one. On a
cluster the workers are elsewhere and nothing can be tried from here: the package must be installed in
their Python, or shipped with ``--py-files`` (as ``spark-submit.sh`` does) next to installed dependencies.
"""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager

NEEDED = "import rocketstore_spark.codec.decoder, numba, pyarrow"
log = logging.getLogger(__name__)


def local_worker_python(sc) -> str:
    """The interpreter the sources' workers should run on the master of ``sc`` (module docstring)."""
    exe = sc.pythonExec
    if not sc.master.startswith("local"):
        return exe
    resolved = shutil.which(exe) or exe
    if os.path.realpath(resolved) == os.path.realpath(sys.executable):
        return exe
    try:       # the workers inherit this environment (PYTHONPATH included) and working directory
        ok = subprocess.run([resolved, "-c", NEEDED], capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if ok:
        return exe
    log.warning("Spark's Python workers run %s, which cannot import rocketstore-spark and its dependencies: the "
                "rocketmq sources use %s (this driver's Python) instead; set PYSPARK_PYTHON to silence this",
                exe, sys.executable)
    return sys.executable


@contextmanager
def worker_python(sc):
    """Within this block, Python functions registered with ``sc`` (data sources, UDFs) run on
    ``local_worker_python``."""
    configured = sc.pythonExec
    sc.pythonExec = local_worker_python(sc)
    try:
        yield sc.pythonExec
    finally:
        sc.pythonExec = configured
