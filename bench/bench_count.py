"""The per-topic, per-hour count over the ingest's Delta table against the same query over the ``rocketmq``
source, on an existing store of any size (issue #28's third speed target), on ``local[2]``.

    .venv/bin/python bench/bench_count.py STORE --table DIR [--rounds 3]

``STORE`` is a broker store directory (e.g. bench_commands' default-geometry store); ``DIR`` is where its
ingest table (no bodies, the job's default) is made when it is not there yet (the ingest is timed, apart).
Each round, for each query: every file the query reads dropped from the page cache first (the store's
CommitLog for the source, the table's Parquet files and log for Delta), then the query timed as a whole,
planning and its job included. The source query is the fast way to write it: only the two columns it needs
(``.schema("topic STRING, store_timestamp TIMESTAMP")``), so it decodes record headers only. A store larger
than RAM is where the difference is: the source has to read the CommitLog, the table holds the two columns in
a few hundred MB. A warm repeat of each query follows in the same round (page cache as the cold run left it).

``--compare DIR`` (repeatable) times the same query over other existing tables of the same store in the same
round (e.g. one the ingest wrote with ``--writer spark`` against one of its default writer), each keyed by its directory
name; ``--conf KEY=VALUE`` sets a session setting for every query. Each query's CPU seconds (the bench, its JVM
and Python workers: ``bench_read.tree_cpu_seconds``) are given beside the wall time: on a shared host they
move far less than wall time does.

Target (#28): the count over Delta >= 10x faster than over the source. Figures to stdout as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_read import drop_cache, tree_cpu_seconds  # noqa: E402


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", type=Path)
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--compare", type=Path, action="append", default=[],
                   help="another existing table of the same store, timed the same way")
    p.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a session setting")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    store = str(args.store.resolve())
    table = str(args.table.resolve())

    from pyspark.sql import functions as F

    from rocketstore_spark.spark.ingest import ingest_store, open_table
    from rocketstore_spark.spark.session import get_spark
    from rocketstore_spark.store.discovery import discover
    conf = {"spark.ui.showConsoleProgress": "false", **dict(kv.split("=", 1) for kv in args.conf)}
    spark = get_spark("bench-count", master="local[2]", conf=conf)

    def timed(step):
        t = time.perf_counter()
        out = step()
        return round(time.perf_counter() - t, 2), out

    def cpu_timed(step):
        c = tree_cpu_seconds(os.getpid())
        s, out = timed(step)
        return s, round(tree_cpu_seconds(os.getpid()) - c, 2), out

    ingest_s = None
    if not (args.table / "_delta_log").is_dir():
        open_table(spark, table, False)
        ingest_s, run = timed(lambda: ingest_store(spark, table, discover(store)[0], False))
        print(f"ingest (no bodies): {ingest_s} s, {run.messages} messages, status {run.status}", file=sys.stderr)

    def by_hour(df):
        return sorted(tuple(r) for r in
                      df.groupBy("topic", F.date_trunc("hour", "store_timestamp").alias("hour")).count().collect())

    queries = {
        "delta": (lambda: by_hour(spark.read.format("delta").load(table)), files_under(args.table)),
        "source_two_columns": (lambda: by_hour(spark.read.format("rocketmq")
                                               .schema("topic STRING, store_timestamp TIMESTAMP").load(store)),
                               files_under(args.store / "commitlog")),
    }
    for other in args.compare:
        path = str(other.resolve())
        queries[f"delta_{other.name}"] = (lambda path=path: by_hour(spark.read.format("delta").load(path)),
                                          files_under(other))
    for query, _ in queries.values():                                    # warm-up: JIT, workers, numba, snapshot
        query()
    rounds = []
    for _ in range(args.rounds):
        one = {"load_average": [round(v, 1) for v in os.getloadavg()]}
        answers = {}
        for name, (query, files) in queries.items():
            drop_cache(files)
            one[f"{name}_cold_s"], one[f"{name}_cold_cpu_s"], answers[name] = cpu_timed(query)
            one[f"{name}_warm_s"], one[f"{name}_warm_cpu_s"], _ = cpu_timed(query)
        if any(answer != answers["source_two_columns"] for answer in answers.values()):
            raise SystemExit("a Delta table and the source disagree on the counts: the table is not this store's")
        rounds.append(one)
        print(json.dumps(one), file=sys.stderr)

    def best(key):
        return min(r[key] for r in rounds)
    result = {
        "store": store, "commitlog_bytes": sum(f.stat().st_size for f in files_under(args.store / "commitlog")),
        "table_bytes": sum(f.stat().st_size for f in files_under(args.table)), "ingest_s": ingest_s,
        "rounds": rounds, "groups": len(answers["delta"]),
        "best": {k: best(k) for k in rounds[0] if k.endswith("_s")},
        "load_average_end": [round(v, 1) for v in os.getloadavg()],
        "delta_vs_source_cold": round(best("source_two_columns_cold_s") / best("delta_cold_s"), 1),
        "delta_vs_source_warm": round(best("source_two_columns_warm_s") / best("delta_warm_s"), 1),
        **{f"{name}_vs_source_cold": round(best("source_two_columns_cold_s") / best(f"{name}_cold_s"), 1)
           for name in queries if name.startswith("delta_")},
        "conf": conf,
    }
    print(json.dumps(result, indent=2))
    spark.stop()


if __name__ == "__main__":
    main()
