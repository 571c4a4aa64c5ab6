"""Rebuild benchmark: our ConsumeQueue + IndexFile rebuild against RocketMQ rebuilding the same store itself,
measured in the same run on this machine.

    .venv/bin/python bench/bench_rebuild.py                       # 2 GiB store of 256 MiB segments
    .venv/bin/python bench/bench_rebuild.py --gib 4 --rocketmq 5.5.1

Builds the store with our encoder (the read benchmark's store: bench_read.build_store), warms the page cache,
then times, with RocketMQ's default broker settings (300,000-entry ConsumeQueue files, 5,000,000 x 20,000,000
IndexFiles):

1. ours on Spark, ``local[2]``: ``spark.rebuild.rebuild`` (one scan task per core into spill files, then
   one task per queue group and per IndexFile), planning and the diff included;
2. ours in one process: ``rebuild.output.rebuild_store``, timed on its second run (the first, also reported,
   includes loading the compiled kernels from numba's cache, as Spark's warm-up run does for Spark);
3. with ``--rocketmq VERSION``: RocketMQ's own store opening a copy of the store without ``consumequeue/``
   and ``index/`` and dispatching until it has caught up (the golden generator's ``rebuild`` command,
   tests/golden/), single-threaded as the broker does it.

The outputs of 1 and 2 are compared byte for byte (and with 3's where it ran: ConsumeQueues equal, IndexFiles
equal in name order). Figures go to stdout and bench/out/rebuild-results.json.
"""
from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_read import build_store, cat_seconds, store_arguments  # noqa: E402


def tree(root: Path) -> dict[str, bytes]:
    import hashlib
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def index_contents(root: Path) -> list[str]:
    return [v for _, v in sorted(tree(root / "index").items())]


def main(argv=None):
    p = store_arguments(__doc__)
    p.add_argument("--rocketmq", help="also time RocketMQ VERSION's own rebuild (needs a JDK and Maven)")
    args = p.parse_args(argv)

    files = build_store(args.out, args.gib, args.segment_mib)
    total = sum(f.stat().st_size for f in files)
    gb = total / 1e9
    cat_seconds(files)
    store = args.out / "store"
    results = {"store_bytes": total, "segments": len(files)}
    options = {"rocketmqVersion": args.rocketmq or "5.5.1"}

    from rocketstore_spark.rebuild.output import rebuild_store
    from rocketstore_spark.spark.session import get_spark
    from rocketstore_spark.spark.rebuild import rebuild

    work = args.out / "rebuild"
    shutil.rmtree(work, ignore_errors=True)
    spark = get_spark("bench-rebuild", master="local[2]", delta=False, conf={"spark.driver.memory": "8g"})
    rebuild(spark, str(store), work / "warmup", options)               # JIT, workers, numba caches
    t = time.perf_counter()
    rebuild(spark, str(store), work / "spark", options)
    results["ours_spark_local2_seconds"] = round(time.perf_counter() - t, 2)
    spark.stop()
    t = time.perf_counter()                       # the first run in this process loads the numba caches
    rebuild_store(str(store), work / "inprocess-first", options=options)
    results["ours_in_process_first_run_seconds"] = round(time.perf_counter() - t, 2)
    t = time.perf_counter()
    rebuild_store(str(store), work / "inprocess", options=options)
    results["ours_in_process_seconds"] = round(time.perf_counter() - t, 2)
    results["spark_equals_in_process"] = (tree(work / "spark" / "consumequeue") == tree(work / "inprocess" / "consumequeue")
                                          and index_contents(work / "spark") == index_contents(work / "inprocess"))
    if args.rocketmq:
        sys.path.insert(0, str(ROOT / "tests" / "golden"))
        from serve_check import rocketmq_rebuild          # tests/golden/serve_check.py
        report = rocketmq_rebuild(args.rocketmq, store, work / "rocketmq", settings={
            "mappedFileSizeCommitLog": args.segment_mib << 20, "mappedFileSizeConsumeQueue": 300_000 * 20,
            "maxHashSlotNum": 5_000_000, "maxIndexNum": 20_000_000})
        seconds = report["dispatch_seconds"]               # start-up until dispatch caught up, as a broker
        results["rocketmq_seconds"] = round(seconds, 2)
        results["rocketmq_equals_ours"] = (
            tree(work / "rocketmq" / "consumequeue") == tree(work / "spark" / "consumequeue")
            and index_contents(work / "rocketmq") == index_contents(work / "spark"))
        results["speedup_spark_vs_rocketmq"] = round(seconds / results["ours_spark_local2_seconds"], 2)
        results["speedup_in_process_vs_rocketmq"] = round(seconds / results["ours_in_process_seconds"], 2)
    for key in ("ours_spark_local2", "ours_in_process", "rocketmq"):
        if f"{key}_seconds" in results:
            results[f"{key}_GBps"] = round(gb / results[f"{key}_seconds"], 3)
    (args.out / "rebuild-results.json").write_text(json.dumps(results, indent=2))
    for k, v in results.items():
        print(f"{k:32s} {v}")


if __name__ == "__main__":
    main()
