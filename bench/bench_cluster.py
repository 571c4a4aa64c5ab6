"""The Spark verify job on a standalone cluster, one worker against two (issue #27): does it scale with
executors?

    .venv/bin/python bench/bench_cluster.py                  # bench_commands' 8 GiB store, 1 and 2 workers
    .venv/bin/python bench/bench_cluster.py --repeat 3 --workers 1,2

The cluster is the one tests/jobs/test_cluster_jobs.py starts (``Cluster``: a master and workers of one core
each, from the checkout's PySpark, on 127.0.0.1), here with one worker, then two, alternating round by round;
``./spark-submit.sh jobs/verify.py --store STORE --json FILE`` is submitted to it as a user would, and timed from
outside (wall seconds of the submit: the driver's start-up included, the cluster's not). The store is
bench_commands.py's (RocketMQ's default geometry: 1 GiB segments, its ConsumeQueues and IndexFile written by
``rocketstore rebuild``), built first where it is missing. The numba kernels come from the checkout's cache
(``seeded_cache``), so no executor compiles. Every run's seconds, the load average before and after it and the
machine go to stdout and bench/out/cluster-results.json.
"""
from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_commands import with_queues  # noqa: E402
from bench_read import build_store, store_arguments  # noqa: E402
from tests.jobs.test_cluster_jobs import Cluster, seeded_cache  # noqa: E402


def main(argv=None):
    p = store_arguments(__doc__, segment_mib=1024)
    p.set_defaults(gib=8.0)
    p.add_argument("--repeat", type=int, default=2, help="rounds (each: every worker count once)")
    p.add_argument("--workers", default="1,2", help="worker counts to compare, one core each")
    p.add_argument("--rocketmq-version", default="5.3.3", help="the release the store's queues follow")
    args = p.parse_args(argv)
    out = args.out / "commands"
    build_store(out, args.gib, args.segment_mib, queue_offsets=True)
    store = out / "store"
    with_queues(store, args.rocketmq_version)
    counts = [int(n) for n in args.workers.split(",")]
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
               "store": {"path": str(store), "gib": args.gib, "segment_mib": args.segment_mib},
               "command": "./spark-submit.sh jobs/verify.py --store STORE --json FILE", "runs": []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        cache = seeded_cache(Path(tmp))
        for round_ in range(args.repeat):
            for n in counts if round_ % 2 == 0 else counts[::-1]:       # alternating: drift falls on both
                work = Path(tmp) / f"r{round_}-w{n}"
                work.mkdir()
                cluster = Cluster(work, workers=n, worker_memory="2g")
                try:
                    cluster.wait()
                    load = os.getloadavg()
                    t = time.perf_counter()
                    run = cluster.submit("jobs/verify.py", "--store", str(store), "--json", str(work / "verify.json"),
                                         numba_cache=cache, executor_memory="1536m", timeout=1800)
                    seconds = time.perf_counter() - t
                    if run.returncode not in (0, 3):
                        raise RuntimeError(f"verify on {n} workers: exit {run.returncode}\n{run.stderr[-4000:]}")
                    doc = json.loads((work / "verify.json").read_text())
                    executors = {w: len(logs) for w, logs in cluster.executor_logs().items()}
                finally:
                    cluster.stop()
                r = {"workers": n, "seconds": round(seconds, 2), "exit": run.returncode, "load_before": load,
                     "load_after": os.getloadavg(), "executors_per_worker": executors,
                     "findings": sum(len(s.get("findings", [])) for s in doc.get("stores", []))}
                results["runs"].append(r)
                print(json.dumps(r), flush=True)
    best = {n: min(r["seconds"] for r in results["runs"] if r["workers"] == n) for n in counts}
    results["best"] = best
    print("best seconds per worker count:", best)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "cluster-results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
