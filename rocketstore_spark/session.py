"""SparkSession helper (driver): sources registered, Delta Lake configured, JARs from the project's jars/.

    from rocketstore_spark.session import get_spark
    spark = get_spark("my-audit")

Under spark-submit the master and resources come from spark-submit (conf/*.properties); run directly
(Jupyter, tests) it builds a ``local[*]`` session. Delta's JARs are handed over with ``spark.jars`` from
``jars/`` (filled by ``make setup``) or ``$ROCKETSTORE_JARS``; nothing is downloaded at run time.
"""
from __future__ import annotations

import glob
import os
import sys
from pathlib import Path

from rocketstore_spark.datasource import REQUIRED_SETTINGS

JARS_DIR = Path(os.environ.get("ROCKETSTORE_JARS", Path(__file__).resolve().parents[1] / "jars"))

# The one place for the Spark settings the sources rely on (conf/spark-defaults.conf holds only deployment
# settings): Python filter pushdown, UTC timestamps, a small shuffle for store-sized aggregations.
SESSION_SETTINGS = {
    **REQUIRED_SETTINGS,
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "8",
}
DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def delta_jars() -> list[str]:
    jars = sorted(glob.glob(str(JARS_DIR / "*.jar")))
    if not any("delta-spark" in Path(j).name for j in jars):
        raise RuntimeError(f"Delta Lake JARs not found in {JARS_DIR}: in a checkout run `make setup` (Maven fetches "
                           "them into jars/); elsewhere set ROCKETSTORE_JARS to a directory holding the "
                           "delta-spark_2.13 and delta-storage JARs, or call get_spark(delta=False)")
    return jars


def get_spark(app_name: str = "rocketstore-spark", master: str | None = None, delta: bool = True, conf=None):
    # the worker must run this interpreter (the .venv with numba, pyarrow, ...)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    submitted = None
    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # launched by spark-submit: attach to its JVM to see its settings (master, --jars); they rule
        SparkContext._ensure_initialized()
        submitted = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif submitted is None or not submitted.contains("spark.master"):
        builder = builder.master("local[*]")
    settings = dict(SESSION_SETTINGS)
    if delta:
        existing = [j for j in (submitted.get("spark.jars", "") if submitted else "").split(",") if j]
        if not any("delta-spark" in j for j in existing):
            settings["spark.jars"] = ",".join(existing + delta_jars())
        settings.update(DELTA_SETTINGS)
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    from rocketstore_spark.datasource import register
    register(spark)
    return spark
