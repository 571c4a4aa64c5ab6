"""Recovery-report benchmark: our simulation of a crashed store's restart against RocketMQ restarting a copy
of the same store, measured in the same run on this machine (issue #12).

    .venv/bin/python bench/bench_recovery.py --rocketmq 5.5.1              # 2 GiB of 256 MiB segments
    .venv/bin/python bench/bench_recovery.py --gib 4 --rocketmq 4.9.8

The store: the read benchmark's CommitLog (bench_read.build_store, our encoder; segments hard-linked, the last
one copied) made into a crashed store — an ``abort`` file, a checkpoint older than every record (so the
abnormal recovery walks, CRC-checks and dispatches the whole log, as after a crash with a stale checkpoint),
no ConsumeQueues or IndexFiles, and the last record torn in half. Timed, page cache warm:

1. ours: ``recovery.report.recovery_report`` in this process (no JVM): the walk with every BODYCRC, the
   dispatch of every record into its queue, what is lost;
2. with ``--rocketmq VERSION``: RocketMQ's DefaultMessageStore opening a copy (the golden generator's
   ``serve-check``): load() — the abnormal recovery — then start() until dispatch caught up, single-threaded
   as a broker does it (``restart_seconds``; ``load_seconds`` alone too).

RocketMQ's end of the log and every queue's max offset must equal the report's. Figures go to stdout and
bench/out/recovery-results.json.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_read import build_store, cat_seconds, store_arguments  # noqa: E402

SETTINGS = {"mappedFileSizeConsumeQueue": 300_000 * 20, "maxHashSlotNum": 5_000_000, "maxIndexNum": 20_000_000}


def crashed_store(out: Path, segments: list[Path]) -> Path:
    """The crashed store described in the module docstring, built beside the read benchmark's store."""
    from rocketstore_spark.codec import checkpoint
    from rocketstore_spark.codec.commitlog import MAGIC_V1, MAGIC_V2

    store = out / "recovery-store"
    shutil.rmtree(store, ignore_errors=True)
    (store / "commitlog").mkdir(parents=True)
    for seg in segments[:-1]:
        os.link(seg, store / "commitlog" / seg.name)
    last = store / "commitlog" / segments[-1].name
    data = bytearray(segments[-1].read_bytes())
    # tear the last record: zero its second half (and the BLANK after it)
    pos, torn = 0, 0
    while pos + 8 <= len(data) and int.from_bytes(data[pos + 4:pos + 8], "big", signed=True) in (MAGIC_V1, MAGIC_V2):
        torn, pos = pos, pos + int.from_bytes(data[pos:pos + 4], "big")
    size = int.from_bytes(data[torn:torn + 4], "big")
    data[torn + size // 2:] = bytes(len(data) - torn - size // 2)
    last.write_bytes(data)
    (store / "abort").write_bytes(b"")
    (store / "checkpoint").write_bytes(checkpoint.encode(physic_msg_timestamp=1, logics_msg_timestamp=1,
                                                         index_msg_timestamp=1))
    return store


def main(argv=None):
    p = store_arguments(__doc__)
    p.add_argument("--rocketmq", help="also time RocketMQ VERSION's own restart (needs a JDK and Maven)")
    args = p.parse_args(argv)

    from rocketstore_spark.recovery.report import recovery_report

    segments = build_store(args.out, args.gib, args.segment_mib)
    store = crashed_store(args.out, segments)
    total = sum(f.stat().st_size for f in (store / "commitlog").iterdir())
    cat_seconds(sorted((store / "commitlog").iterdir()))
    options = SETTINGS | {"rocketmqVersion": args.rocketmq or "5.5.1"}
    results = {"store_bytes": total, "segments": len(segments)}

    recovery_report(str(ROOT / "tests/golden/rocketmq-4.9.8/crash/store"))          # numba caches, imports
    t = time.perf_counter()
    doc, _ = recovery_report(str(store), options=options)
    results["ours_seconds"] = round(time.perf_counter() - t, 2)
    results["ours_process_offset"] = doc["process_offset"]
    results["ours_lost_messages"] = doc["lost"]["messages"]
    if args.rocketmq:
        sys.path.insert(0, str(ROOT / "tests" / "golden"))
        from serve_check import serve                        # tests/golden/serve_check.py
        answers = serve(args.rocketmq, store, [], settings=SETTINGS | {
            "mappedFileSizeCommitLog": args.segment_mib << 20})
        results["rocketmq_load_seconds"] = round(answers["load_seconds"], 2)
        results["rocketmq_seconds"] = round(answers["restart_seconds"], 2)
        results["rocketmq_process_offset"] = answers["commitlog_max_offset"]
        theirs = {(q["topic"], q["queue_id"]): q["max_offset"] for q in answers["queues"]}
        ours = {(q["topic"], q["queue_id"]): q["max_offset"] for q in doc["consumequeues"]}
        results["rocketmq_equals_ours"] = (answers["commitlog_max_offset"] == doc["process_offset"]
                                           and theirs == ours)
        results["speedup_vs_rocketmq"] = round(results["rocketmq_seconds"] / results["ours_seconds"], 2)
    for key in ("ours", "rocketmq"):
        if f"{key}_seconds" in results:
            results[f"{key}_GBps"] = round(total / 1e9 / results[f"{key}_seconds"], 3)
    (args.out / "recovery-results.json").write_text(json.dumps(results, indent=2))
    for k, v in results.items():
        print(f"{k:28s} {v}")


if __name__ == "__main__":
    main()
