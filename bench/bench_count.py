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

from bench.bench_read import drop_cache  # noqa: E402


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.is_file())


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("store", type=Path)
    p.add_argument("--table", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    store = str(args.store.resolve())
    table = str(args.table.resolve())

    from pyspark.sql import functions as F

    from rocketstore_spark.spark.ingest import ingest_store, open_table
    from rocketstore_spark.spark.session import get_spark
    from rocketstore_spark.store.discovery import discover
    spark = get_spark("bench-count", master="local[2]", conf={"spark.ui.showConsoleProgress": "false"})

    def timed(step):
        t = time.perf_counter()
        out = step()
        return round(time.perf_counter() - t, 2), out

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
    for query, _ in queries.values():                                    # warm-up: JIT, workers, numba, snapshot
        query()
    rounds = []
    for _ in range(args.rounds):
        one = {"load_average": [round(v, 1) for v in os.getloadavg()]}
        answers = {}
        for name, (query, files) in queries.items():
            drop_cache(files)
            one[f"{name}_cold_s"], answers[name] = timed(query)
            one[f"{name}_warm_s"], _ = timed(query)
        if answers["delta"] != answers["source_two_columns"]:
            raise SystemExit("the Delta table and the source disagree on the counts: the table is not this store's")
        rounds.append(one)
        print(json.dumps(one), file=sys.stderr)

    def best(key):
        return min(r[key] for r in rounds)
    result = {
        "store": store, "commitlog_bytes": sum(f.stat().st_size for f in files_under(args.store / "commitlog")),
        "table_bytes": sum(f.stat().st_size for f in files_under(args.table)), "ingest_s": ingest_s,
        "rounds": rounds, "groups": len(answers["delta"]),
        "best": {k: best(k) for k in rounds[0] if k.endswith("_s")},
        "delta_vs_source_cold": round(best("source_two_columns_cold_s") / best("delta_cold_s"), 1),
        "delta_vs_source_warm": round(best("source_two_columns_warm_s") / best("delta_warm_s"), 1),
    }
    print(json.dumps(result, indent=2))
    spark.stop()


if __name__ == "__main__":
    main()
