"""Incremental scrub benchmark (issue #28): the nightly scrub of an unchanged store against a full audit of the
same store, same process, same run (both warm: kernels compiled, page cache holding the store).

    .venv/bin/python bench/bench_scrub.py --gib 2 --segment-mib 128 --out /tmp/rs-bench     # 16 segments

The store: our encoder's (bench_read.build_store, 20 topics, queue offsets carried on as a broker numbers them)
with ConsumeQueues and IndexFiles written by ``rocketstore rebuild`` (bench_commands.with_queues). Steps, each
timed in this process (``report.audit.audit_stores``, ``report.scrub.scrub_stores``):

    audit               the full audit (every segment's CRC scan, the cross-checks, the recovery report), best of
                        --repeat
    scrub, first run    every segment new: the audit's work plus the state's digests
    scrub, unchanged    --rotation runs on the unchanged store (a full rotation): seconds of each, how many
                        segments each scanned; the share is the mean run against the audit (target <= 5 %)

Figures go to stdout and OUT/scrub-results.json.
"""
from __future__ import annotations

import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_commands import with_queues  # noqa: E402
from bench_read import build_store, store_arguments  # noqa: E402

from rocketstore_spark.report.audit import audit_stores  # noqa: E402
from rocketstore_spark.report.scrub import scrub_stores  # noqa: E402
from rocketstore_spark.store.discovery import discover  # noqa: E402


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def main(argv=None):
    p = store_arguments(__doc__, segment_mib=128)
    p.add_argument("--rotation", type=int, default=28)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args(argv)
    build_store(args.out, args.gib, args.segment_mib, queue_offsets=True)
    store = args.out / "store"
    with_queues(store, "5.5.1")
    layouts = lambda: discover(str(store))           # noqa: E731 — each run lists the store afresh, as a run does
    work = Path(tempfile.mkdtemp(prefix="rs-bench-scrub-"))
    state = str(work / "state.json")
    try:
        timed(lambda: audit_stores(layouts()))                           # warm-up: kernels, page cache
        audits = [timed(lambda: audit_stores(layouts()))[0] for _ in range(args.repeat)]
        audit = min(audits)
        first, _ = timed(lambda: scrub_stores(layouts(), state, rotation=args.rotation))
        runs = []
        for _ in range(args.rotation):
            seconds, r = timed(lambda: scrub_stores(layouts(), state, rotation=args.rotation))
            s = r.audit.docs[0]["scrub"]
            runs.append({"seconds": round(seconds, 4), "segments": len(s["checked"]),
                         "bytes": s["bytes_checked"], "cross_checks": s["cross_checks"]})
        segs = sorted((store / "commitlog").iterdir())
        total = sum(f.stat().st_size for f in segs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    mean = statistics.fmean(r["seconds"] for r in runs)
    with_scan = [r["seconds"] for r in runs if r["segments"]]
    without = [r["seconds"] for r in runs if not r["segments"]]
    result = {
        "store": {"gib": args.gib, "segment_mib": args.segment_mib, "segments": len(segs), "bytes": total},
        "audit_seconds": round(audit, 3), "audits": [round(a, 3) for a in audits],
        "scrub_first_seconds": round(first, 3),
        "rotation": args.rotation, "unchanged_runs": runs,
        "unchanged_mean_seconds": round(mean, 4), "unchanged_share_of_audit": round(mean / audit, 4),
        "runs_with_a_scan": len(with_scan), "mean_with_a_scan": round(statistics.fmean(with_scan), 4) if with_scan
        else None, "mean_without": round(statistics.fmean(without), 4) if without else None,
        "rotation_bytes_scanned": sum(r["bytes"] for r in runs),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "unchanged_runs"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scrub-results.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
