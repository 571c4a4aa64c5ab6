"""Ingest benchmark: the first ingest of a store into Delta against the full-schema read of the same store, and
a re-run on the unchanged store, in the same session on local[2].

    .venv/bin/python bench/bench_ingest.py --gib 1 --segment-mib 128          # store and table in bench/out/

The store is bench_read's (our encoder, PHYSICALOFFSET patched per segment). Each step is timed as a whole,
planning and job start included, in one warm session (a small read and a small Delta write first: Python workers, numba caches, the JVM's JIT):

1. read: every column of ``rocketmq`` (bodies included) into Spark's ``noop`` sink;
2. first ingest (``spark.ingest.ingest_store`` with bodies, the job's per-store work: state, read, Delta
   write, the committed range; snapshots are timed apart);
3. re-run on the unchanged store (state, the watermark check, nothing to write);
4. the snapshots of one run (``_snapshots/``);
5. a first ingest without bodies into another table (the job's default).

Targets (issue #28): first ingest >= 0.6x the read's rate; re-run <= 5 % of the first ingest. The figures go to
stdout and bench/out/ingest.json.
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.bench_read import build_store, recache, store_arguments  # noqa: E402


def main() -> None:
    args = store_arguments(__doc__, segment_mib=128).parse_args()
    files = build_store(args.out, args.gib, args.segment_mib)
    store = str((args.out / "store").resolve())
    table = args.out / "ingest-table"
    size = sum(f.stat().st_size for f in files)
    recache(files)

    from rocketstore_spark.spark.ingest import ingest_store, open_table
    from rocketstore_spark.spark.session import get_spark
    from rocketstore_spark.spark.snapshots import append_snapshots, snapshot_frames
    from rocketstore_spark.store.discovery import discover
    spark = get_spark("bench-ingest", master="local[2]", conf={"spark.ui.showConsoleProgress": "false"})
    spark.read.format("rocketmq").option("splitSize", str(64 << 20)).load(store).limit(1000) \
        .write.format("noop").mode("overwrite").save()                  # warm-up: workers, numba
    warm = args.out / "ingest-warm-up"                                   # warm-up: Delta's code paths (JIT)
    shutil.rmtree(warm, ignore_errors=True)
    spark.read.format("rocketmq").option("splitSize", str(64 << 20)).load(store).limit(1000) \
        .write.format("delta").save(str(warm))
    spark.read.format("delta").load(str(warm)).groupBy("topic").count().collect()

    def timed(step):
        t = time.perf_counter()
        out = step()
        return time.perf_counter() - t, out

    read_s, _ = timed(lambda: spark.read.format("rocketmq").load(store).write.format("noop").mode("overwrite").save())
    shutil.rmtree(table, ignore_errors=True)
    layout = discover(store)[0]

    def ingest():
        open_table(spark, str(table), True)
        return ingest_store(spark, str(table), layout, True)
    first_s, first = timed(ingest)
    rerun_s, rerun = timed(ingest)
    bare = args.out / "ingest-table-no-bodies"
    shutil.rmtree(bare, ignore_errors=True)

    def ingest_without_bodies():
        open_table(spark, str(bare), False)
        return ingest_store(spark, str(bare), layout, False)
    bare_s, _ = timed(ingest_without_bodies)
    snap_s, _ = timed(lambda: append_snapshots(spark, str(table), snapshot_frames(
        spark, [layout], [rerun], "bench", dt.datetime.now(dt.timezone.utc))))
    files_written = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first().numFiles
    result = {
        "store_bytes": size, "messages": first.messages, "read_s": round(read_s, 2),
        "first_ingest_s": round(first_s, 2), "rerun_s": round(rerun_s, 2), "snapshots_s": round(snap_s, 2),
        "first_ingest_without_bodies_s": round(bare_s, 2),
        "ingest_vs_read": round(read_s / first_s, 3), "rerun_vs_first": round(rerun_s / first_s, 4),
        "read_gb_s": round(size / read_s / 1e9, 3), "ingest_gb_s": round(size / first_s / 1e9, 3),
        "rerun_status": rerun.status, "table_files": files_written,
    }
    print(json.dumps(result, indent=2))
    (args.out / "ingest.json").write_text(json.dumps(result, indent=2) + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
