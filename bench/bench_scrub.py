"""Incremental scrub benchmark (issue #28): the nightly scrub against a full audit of the same store, same process,
same run (both warm: kernels compiled, page cache holding the store) — on the unchanged store, and after about 1 %
of new data was appended as a broker appends it.

    .venv/bin/python bench/bench_scrub.py --gib 2 --segment-mib 64 --out /tmp/rs-bench-scrub     # 32 segments

The store: our encoder's (bench_read.build_store, 20 topics x 8 queues, queue offsets carried on as a broker
numbers them) with ConsumeQueues and IndexFiles from our rebuild (``--resync``: every record; byte-identical to
RocketMQ's) and a checkpoint as of the last record. Its geometry is scaled to its size (``broker.conf`` in
OUT): ConsumeQueue files of --cq-entries entries and IndexFiles of --index-num entries, so each queue has a
few files and the store a few dozen IndexFiles, as a broker of terabytes has with RocketMQ's defaults (300,000
entries a file, 20 M keys an IndexFile) — with the defaults, 160 six-MB queue files and one IndexFile would
outweigh a store this small. Steps, each timed in this process (``report.audit.audit_stores``,
``report.scrub.scrub_stores``):

    audit               the full audit (every segment's CRC scan, the cross-checks, the recovery report), best of
                        --repeat
    scrub, first run    every segment new: the audit's work plus the state
    scrub, unchanged    --rotation runs on the unchanged store (a full rotation): seconds of each, how many
                        segments each scanned; the share is the mean run against the audit (target <= 5 %)
    growth              a new segment holding --grow of the store's bytes in records (queue offsets carried on,
                        zeros after them, as a broker leaves the segment it writes), and the ConsumeQueue and
                        IndexFile bytes our rebuild gives the grown store written where they differ: the closed
                        files keep their bytes and times, the files a broker appends to change (not timed)
    read of the new     the new records read and checked (``store.scan.scan_segment`` of the new segment: CRC,
                        properties CRC, store times), best of --repeat
    scrub after growth  one run (target <= 5 % of the audit plus the read of the new), or the best of
                        --after-repeat runs each from the state before growth (the spread under load); then the
                        full audit of the grown store, whose findings it must equal, and the recovery report alone
                        (a part of both)

The store is put back as it was afterwards (the new segment removed, the changed files restored). Figures go to
stdout and OUT/scrub-results.json.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_read import build_store, queue_sizes, store_arguments  # noqa: E402

from rocketstore_spark.codec import checkpoint, indexfile  # noqa: E402
from rocketstore_spark.rebuild.output import rebuild_store  # noqa: E402
from rocketstore_spark.recovery.report import recovery_report  # noqa: E402
from rocketstore_spark.report.audit import audit_stores  # noqa: E402
from rocketstore_spark.report.scrub import scrub_stores  # noqa: E402
from rocketstore_spark.store.discovery import discover  # noqa: E402
from rocketstore_spark.store.scan import scan_segment  # noqa: E402
from tests.builders import rebase_segment, synthetic_segment  # noqa: E402


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def sync_queues(store: Path, conf: str, saved: dict | None = None) -> None:
    """The store's ConsumeQueues and IndexFiles as our rebuild (``--resync``) gives them, written only where they
    differ (a broker's closed files stay as they were), and a checkpoint as of the newest IndexFile and record;
    ``saved``: path -> its bytes before (None: it was not there), to put back."""
    out = store.parent / "rebuilt"
    shutil.rmtree(out, ignore_errors=True)
    rebuild_store(str(store), str(out), broker_conf=conf, resync=True,
                  options={"rocketmqVersion": "5.5.1"})
    for f in sorted(out.rglob("*")):
        if not f.is_file():
            continue
        dest = store / f.relative_to(out)
        data = f.read_bytes()
        if dest.exists() and dest.read_bytes() == data:
            continue
        if saved is not None:
            saved.setdefault(dest, dest.read_bytes() if dest.exists() else None)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    shutil.rmtree(out)
    cp = store / "checkpoint"
    if saved is not None:
        saved.setdefault(cp, cp.read_bytes() if cp.exists() else None)
    index_ts = int(indexfile.decode_header(sorted((store / "index").iterdir())[-1].read_bytes()[:40])["end_timestamp"])
    cp.write_bytes(checkpoint.encode(physic_msg_timestamp=index_ts, logics_msg_timestamp=index_ts,
                                     index_msg_timestamp=index_ts))


def grow(store: Path, segment_mib: int, fraction: float) -> tuple[Path, int]:
    """A new segment after the last, holding about ``fraction`` of the store's bytes in whole records of the
    template (queue offsets carried on from the last copy's), zeros after them: (its path, bytes of records)."""
    files = sorted((store / "commitlog").iterdir())
    seg_size = segment_mib << 20
    template, positions = synthetic_segment(seg_size)
    k = len(files)
    data = rebase_segment(template, positions, k * seg_size, queue_offset_delta=k * queue_sizes(template, positions))
    ends = np.r_[positions[1:], positions[-1] + int.from_bytes(template[positions[-1]:positions[-1] + 4], "big")]
    written = int(ends[np.searchsorted(ends, int(fraction * seg_size * k), side="right") - 1])
    data[written:] = 0
    path = store / "commitlog" / f"{k * seg_size:020d}"
    path.write_bytes(data.tobytes())
    return path, written


def findings_of(run) -> Counter:
    return Counter(json.dumps(f, sort_keys=True) for f in run.audit.docs[0]["findings"]) if hasattr(run, "audit") \
        else Counter(json.dumps(f, sort_keys=True) for f in run.docs[0]["findings"])


def main(argv=None):
    p = store_arguments(__doc__, segment_mib=64)
    p.add_argument("--rotation", type=int, default=28)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--cq-entries", type=int, default=1500)
    p.add_argument("--index-num", type=int, default=40000)
    p.add_argument("--grow", type=float, default=0.01)
    p.add_argument("--after-repeat", type=int, default=1,
                   help="runs of the scrub after growth, each from the state before it (best reported)")
    args = p.parse_args(argv)
    build_store(args.out, args.gib, args.segment_mib, queue_offsets=True)
    store = args.out / "store"
    conf = args.out / "broker.conf"
    geometry = f"mappedFileSizeConsumeQueue={20 * args.cq_entries}\nmaxHashSlotNum={args.index_num // 4}\n" \
               f"maxIndexNum={args.index_num}\n"
    if not conf.exists() or conf.read_text() != geometry or not (store / "index").is_dir():
        conf.write_text(geometry)
        for sub in ("consumequeue", "index"):
            shutil.rmtree(store / sub, ignore_errors=True)
        sync_queues(store, str(conf))
    conf = str(conf)
    layouts = lambda: discover(str(store))           # noqa: E731 — each run lists the store afresh, as a run does
    audit = lambda: audit_stores(layouts(), broker_conf=conf)                                   # noqa: E731
    work = Path(tempfile.mkdtemp(prefix="rs-bench-scrub-"))
    state = str(work / "state.json")
    scrub = lambda: scrub_stores(layouts(), state, rotation=args.rotation, broker_conf=conf)   # noqa: E731
    saved: dict = {}
    grown = None
    try:
        timed(audit)                                                     # warm-up: kernels, page cache
        audits = [timed(audit)[0] for _ in range(args.repeat)]
        best = min(audits)
        first, _ = timed(scrub)
        runs = []
        for _ in range(args.rotation):
            seconds, r = timed(scrub)
            s = r.audit.docs[0]["scrub"]
            runs.append({"seconds": round(seconds, 4), "segments": len(s["checked"]),
                         "bytes": s["bytes_checked"], "cross_checks": s["cross_checks"]})
        segs = sorted((store / "commitlog").iterdir())
        total = sum(f.stat().st_size for f in segs)
        # growth, as a broker appends
        grown, grown_bytes = grow(store, args.segment_mib, args.grow)
        sync_queues(store, conf, saved)
        changed = sorted(str(p.relative_to(store)) for p in saved)
        base = int(grown.name)
        read_new = min(timed(lambda: scan_segment(str(grown), base, check_crc=True, followed=False,
                                                  check_properties_crc=True, check_times=True))[0]
                       for _ in range(args.repeat))
        shutil.copy(state, state + ".before")
        afters = []
        for _ in range(args.after_repeat):      # each from the state before growth: the same run again
            shutil.copy(state + ".before", state)
            afters.append(timed(scrub))
        after_s, after = min(afters, key=lambda a: a[0])
        after_audit_s, after_audit = timed(audit)
        recovery_s, _ = timed(lambda: recovery_report(str(store), broker_conf=conf))
        s = after.audit.docs[0]["scrub"]
        same = findings_of(after) == findings_of(after_audit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if grown is not None:
            grown.unlink()
        for path, data in saved.items():
            if data is None:
                path.unlink()
            else:
                path.write_bytes(data)
    mean = statistics.fmean(r["seconds"] for r in runs)
    with_scan = [r["seconds"] for r in runs if r["segments"]]
    without = [r["seconds"] for r in runs if not r["segments"]]
    result = {
        "store": {"gib": args.gib, "segment_mib": args.segment_mib, "segments": len(segs), "bytes": total,
                  "cq_entries": args.cq_entries, "index_num": args.index_num},
        "load_average": os.getloadavg(),
        "audit_seconds": round(best, 3), "audits": [round(a, 3) for a in audits],
        "scrub_first_seconds": round(first, 3),
        "rotation": args.rotation, "unchanged_runs": runs,
        "unchanged_mean_seconds": round(mean, 4), "unchanged_share_of_audit": round(mean / best, 4),
        "runs_with_a_scan": len(with_scan), "mean_with_a_scan": round(statistics.fmean(with_scan), 4) if with_scan
        else None, "mean_without": round(statistics.fmean(without), 4) if without else None,
        "rotation_bytes_scanned": sum(r["bytes"] for r in runs),
        "grown_bytes": grown_bytes, "grown_share": round(grown_bytes / total, 4), "files_changed_by_growth": len(changed),
        "read_new_seconds": round(read_new, 4),
        "after_growth_seconds": round(after_s, 3), "after_growth_share_of_audit": round(after_s / best, 4),
        "after_growth_runs": [round(a[0], 3) for a in afters],
        "after_growth_target_seconds": round(0.05 * best + read_new, 3),
        "after_growth_cross_checks": s["cross_checks"], "after_growth_whole_because": s.get("cross_checks_whole_because"),
        "after_growth_segments": [c["segment"].split("/")[-1] + " " + c["reason"] for c in s["checked"]],
        "after_growth_bytes_scanned": s["bytes_checked"],
        "audit_of_grown_seconds": round(after_audit_s, 3), "findings_equal_the_audit": same,
        "findings": len(after_audit.docs[0]["findings"]),
        "recovery_report_seconds": round(recovery_s, 3),
    }
    print(json.dumps({k: v for k, v in result.items() if k != "unchanged_runs"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scrub-results.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
