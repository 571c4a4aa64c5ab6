"""SparkSession helper (driver): sources registered, Delta Lake configured from local JARs.

    from rocketstore_spark.spark.session import get_spark
    spark = get_spark("my-audit")

Under spark-submit the master and resources come from spark-submit (conf/*.properties); run directly
(Jupyter, tests) it builds a ``local[*]`` session. Delta's JARs are handed over with ``spark.jars`` from the
first of ``$ROCKETSTORE_JARS``, a checkout's ``jars/`` (filled by ``make setup``) and the per-user cache
(filled once by ``python -m rocketstore_spark.spark.jars fetch``, which runs Maven: the way after a ``pip install``);
nothing is downloaded at run time. ``get_spark(delta=False)`` needs none of them (no Delta Lake tables).
"""
from __future__ import annotations

import contextlib
import glob
import os
import sys
from pathlib import Path

from rocketstore_spark.datasource import REQUIRED_SETTINGS
from rocketstore_spark.spark.jars import cache_dir, checkout_jars

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
    # our tables are store-sized (topics, segments, findings): Delta's default of 50 partitions to rebuild a
    # table's snapshot makes every small read and write run ~100 tasks
    "spark.databricks.delta.snapshotPartitions": "8",
}


def delta_jars() -> list[str]:
    """The Delta Lake JARs for ``spark.jars``: those of the first folder holding a delta-spark JAR of
    ``$ROCKETSTORE_JARS`` (when set, the only one looked at), the checkout's ``jars/`` and the per-user cache
    (``rocketstore_spark.spark.jars``). Else RuntimeError, one line naming the three places and the ways out."""
    explicit = os.environ.get("ROCKETSTORE_JARS")
    checkout = checkout_jars()
    for folder in [Path(explicit)] if explicit else [d for d in (checkout, cache_dir()) if d]:
        jars = sorted(glob.glob(str(folder / "*.jar")))
        if any("delta-spark" in Path(j).name for j in jars):
            return jars
    if explicit:
        looked = (f"$ROCKETSTORE_JARS={explicit} (when set, neither a checkout's jars/ nor the cache "
                  f"{cache_dir()} is looked at)")
        command = f"python -m rocketstore_spark.spark.jars fetch {explicit}"
    else:
        looked = ("$ROCKETSTORE_JARS (not set), " + (f"the checkout's {checkout} (`make setup` fills it)" if checkout
                  else "a checkout's jars/ (not running from one)") + f" or the cache {cache_dir()}")
        command = "python -m rocketstore_spark.spark.jars fetch"
    raise RuntimeError(f"Delta Lake JARs not found in {looked}: fetch them there with Maven by `{command}`, set "
                       "ROCKETSTORE_JARS to a folder holding them, or call get_spark(delta=False) for a session "
                       "without Delta Lake")


def get_spark(app_name: str = "rocketstore-spark", master: str | None = None, delta: bool = True, conf=None,
              remote: str | None = None):
    """A session with the sources registered and SESSION_SETTINGS (and Delta, unless ``delta=False``) applied;
    ``conf`` adds or overrides settings. By default a classic session on ``master`` (else spark-submit's, else
    ``local[*]``).

    Spark Connect: ``remote`` (or PySpark's own ``SPARK_REMOTE`` environment variable) returns a Connect
    session instead; it excludes ``master``. ``remote="local[2]"`` starts a Connect server in this process,
    and every setting, Delta's ``spark.jars`` included, goes into that server's configuration at its start.
    ``remote="sc://host:15002"`` reaches a running server, whose static settings a client cannot change: only
    the runtime SQL settings take effect, and Delta (JARs, ``spark.sql.extensions``, the catalog) must be
    configured on the server (no local JARs are looked for), whose Python workers need this package. On Connect
    the store paths are opened by the server's Python workers, which run in a per-session directory: give
    absolute paths."""
    # the worker must run this interpreter (the .venv with numba, pyarrow, ...)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    remote = remote or os.environ.get("SPARK_REMOTE")
    if remote and master:
        raise ValueError(f"get_spark: master {master!r} and Spark Connect remote {remote!r} (remote= or "
                         "SPARK_REMOTE) exclude each other: a Connect server has its own master")
    submitted = None
    if "PYSPARK_GATEWAY_PORT" in os.environ and not remote:
        # launched by spark-submit: attach to its JVM to see its settings (master, --jars); they rule
        SparkContext._ensure_initialized()
        submitted = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if remote:
        builder = builder.remote(remote)
    elif master:
        builder = builder.master(master)
    elif submitted is None or not submitted.contains("spark.master"):
        builder = builder.master("local[*]")
    settings = dict(SESSION_SETTINGS)
    if delta and not (remote or "").startswith("sc://"):
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


@contextlib.contextmanager
def command_session(app_name: str, master: str = "local[*]"):
    """A session for one command of the ``rocketstore`` CLI (``ingest``, ``audit --history``): ``get_spark``'s,
    stopped at the end unless one was running already in this process (a notebook's, a test's: theirs to stop)."""
    from pyspark.sql import SparkSession
    running = SparkSession.getActiveSession()
    spark = running or get_spark(app_name, master=master)
    try:
        yield spark
    finally:
        if running is None:
            spark.stop()
