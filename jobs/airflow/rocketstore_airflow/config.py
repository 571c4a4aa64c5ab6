"""The DAG's settings made into paths and commands, in the Airflow worker (the ``plan`` and ``prepare`` tasks).

Each setting comes from the run's params when given (a manual run's configuration), else from an Airflow
Variable (what a scheduled run uses), else from a default:

==================  ==========================  ===============================================================
param               Variable                    default
==================  ==========================  ===============================================================
stores              rocketstore_stores (JSON)   none: a run without stores fails, saying so
rocketstore_home    rocketstore_home            $ROCKETSTORE_HOME: a rocketstore-spark checkout after
                                                ``make setup`` (its .venv, jars/, conf/ and jobs/)
rocketstore_venv    rocketstore_venv            <rocketstore_home>/.venv: the ``rocketstore`` command, the
                                                Python of the Spark driver and executors, and spark-submit
output_dir          rocketstore_output_dir      $AIRFLOW_HOME/rocketstore: the runs' documents and reports
==================  ==========================  ===============================================================

Plain Python: ``variable`` is Airflow's ``Variable.get`` in the DAG and a dict's ``get`` in the tests.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import zipfile
from pathlib import Path
from typing import Callable

Lookup = Callable[[str], "str | None"]


class SettingError(ValueError):
    """A setting that is missing or points nowhere; the message says which and how to give it."""


def _setting(params: dict, variable: Lookup, name: str, default: str | None = None) -> str | None:
    return params.get(name) or variable(name if name.startswith("rocketstore") else f"rocketstore_{name}") \
        or default


def home_and_venv(params: dict, variable: Lookup, env=os.environ) -> tuple[Path, Path]:
    """The rocketstore-spark checkout and the virtualenv our commands run from, both checked."""
    home = _setting(params, variable, "rocketstore_home", env.get("ROCKETSTORE_HOME"))
    if not home:
        raise SettingError("no rocketstore-spark checkout: give the rocketstore_home param, or set the Airflow "
                           "Variable rocketstore_home (or $ROCKETSTORE_HOME in the worker)")
    home = Path(home).expanduser().resolve()
    venv = Path(_setting(params, variable, "rocketstore_venv", str(home / ".venv"))).expanduser()
    for need in (home / "conf" / "spark-defaults.conf", home / "jobs" / "store_summary.py",
                 venv / "bin" / "rocketstore", venv / "bin" / "spark-submit"):
        if not need.exists():
            raise SettingError(f"{need} does not exist: rocketstore_home must be a rocketstore-spark checkout "
                               f"after `make setup`, and rocketstore_venv its .venv (or another with the package)")
    return home, venv


def stores(params: dict, variable: Lookup, home: Path) -> list[str]:
    """The stores to audit, absolute (a relative path is taken from the checkout, as the README's examples)."""
    given = params.get("stores") or json.loads(variable("rocketstore_stores") or "[]")
    if not given:
        raise SettingError("no stores: give the stores param (a list of store paths) or set the Airflow Variable "
                           "rocketstore_stores to a JSON list")
    return [str((home / s).resolve()) for s in dict.fromkeys(given)]


def output_dir(params: dict, variable: Lookup, env=os.environ) -> Path:
    default = str(Path(env.get("AIRFLOW_HOME", "~/airflow")).expanduser() / "rocketstore")
    return Path(_setting(params, variable, "output_dir", default)).expanduser().resolve()


def run_dir(output: Path, run_id: str) -> Path:
    """Where one run's documents go: a run id (``manual__2026-01-01T00:00:00+00:00``) made a file name."""
    return output / "runs" / re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id)


def store_slug(store: str) -> str:
    """A store's name among files: its last path parts, and a digest of the whole path (two stores may share
    their last parts: every golden store is called ``store``)."""
    tail = "_".join(Path(store).parts[-2:])
    return f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', tail)}-{hashlib.sha256(store.encode()).hexdigest()[:10]}"


def package_zip(home: Path, dest: Path) -> Path:
    """The package as a zip for ``--py-files``, so that it reaches Spark's executors (what spark-submit.sh
    does on every run: the checkout's code of today, never a stale copy)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted((home / "rocketstore_spark").rglob("*")):
            if f.is_file() and "__pycache__" not in f.parts:
                z.write(f, f.relative_to(home))
    os.replace(tmp, dest)
    return dest


def spark_submit(home: Path, venv: Path, py_zip: Path) -> dict:
    """SparkSubmitOperator's arguments that spark-submit.sh gives every job: the properties file, the JARs,
    the package, the Python of the driver and executors, and log4j's settings. ``PATH`` leads to the venv's
    spark-submit: the provider runs ``spark-submit`` from the PATH and no longer takes a Spark home."""
    python = str(venv / "bin" / "python")
    return {
        "properties_file": str(home / "conf" / "spark-defaults.conf"),
        "jars": ",".join(str(j) for j in sorted((home / "jars").glob("*.jar"))),
        "py_files": str(py_zip),
        "conf": {"spark.driver.extraJavaOptions": f"-Dlog4j.configurationFile=file:{home}/conf/log4j2.properties"},
        "env_vars": {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
                     "PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python},
    }
