"""Incremental scrub benchmark (issue #28): the nightly scrub against a full audit of the same store, same process,
same run (both warm: kernels compiled, page cache holding the store) — on the unchanged store, and after about 1 %
of new data was appended as a broker appends it.

    .venv/bin/python bench/bench_scrub.py --gib 8 --segment-mib 64 --out OUT --after-repeat 5  # the issue's size
    .venv/bin/python bench/bench_scrub.py --gib 8 --segment-mib 1024 --cq-entries 300000 --index-num 20000000 \
        --out OUT --after-repeat 5                                       # RocketMQ's default geometry
    .venv/bin/python bench/bench_scrub.py --gib 2 --segment-mib 64 --out /tmp/rs-bench-scrub     # 32 segments

A broker's last segment is partly written: --tail-fill F (default 0.5) leaves in the store's last segment only
its records up to F of its size, zeros after (the queues and IndexFiles synced to it), before anything is timed;
``--tail-fill 1`` keeps the store as built (every segment full, the growth in a new one).

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
    growth              --grow of the store's bytes in records appended as a broker appends them: into the last
                        segment first (its next records: the same size, a new time), and when it is full (its
                        BLANK written) into a new segment (queue offsets carried on, zeros after them), and the
                        ConsumeQueue and IndexFile bytes our rebuild gives the grown store written where they
                        differ: the closed files keep their bytes and times, the files a broker appends to
                        change (not timed)
    read of the new     the new records read and checked (``store.segment_reader.SegmentReader`` from the first
                        new record with the segment scan's audit: CRC, properties CRC, store times), best of
                        --repeat
    scrub after growth  one run (target <= 5 % of the audit plus the read of the new), or the best of
                        --after-repeat runs each from the state before growth (the spread under load); then the
                        full audit of the grown store, whose findings it must equal, and the recovery report alone
                        (a part of both). ``--compare-whole``: as many runs again, interleaved, with resumed
                        segment scans off (``verify.scrub.RESUMABLE`` emptied: a segment that changed is scanned
                        whole, as before #28's resumed scans), which of the two first alternating — the same
                        run's A/B; and the scan of the segment it resumes alone, resumed and whole, alternating

As an operator runs them (unless --no-peak), each a fresh process (``rocketstore audit STORE [--scrub STATE]``,
``tests.peak_rss.cli_with_peak``: seconds with start-up, and the process's own peak resident memory): the
audit, a first scrub, a scrub of the unchanged store and the scrub after growth (from the state before it, what
the in-process runs resumed from).

The store is put back as it was afterwards (the new segment removed, the changed files restored, the last
segment's bytes put back). Figures go to
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
from dataclasses import replace
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
from rocketstore_spark.store.scan import segment_audit  # noqa: E402
from rocketstore_spark.store.segment_reader import SegmentReader  # noqa: E402
from rocketstore_spark.verify import scrub as verify_scrub  # noqa: E402
from rocketstore_spark.verify.store import store_root  # noqa: E402
from tests.builders import rebase_segment, synthetic_segment  # noqa: E402
from tests.peak_rss import cli_with_peak  # noqa: E402


def timed(fn):
    began = time.perf_counter()
    out = fn()
    return time.perf_counter() - began, out


def sync_queues(store: Path, conf: str, saved: dict | None = None) -> None:
    """The store's ConsumeQueues and IndexFiles as our rebuild (``--resync``) gives them, written only where they
    differ (a broker's closed files stay as they were) and as a broker leaves them (``write_as_broker``), those it
    does not give removed, and a checkpoint as of the newest IndexFile and record; ``saved``: path -> its bytes
    before (None: it was not there), to put back."""
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
        write_as_broker(dest, data)
    for sub in ("consumequeue", "index"):       # files of a longer log than this one (``--tail-fill``): gone
        for dest in sorted((store / sub).rglob("*")):
            if dest.is_file() and not (out / dest.relative_to(store)).exists():
                if saved is not None:
                    saved.setdefault(dest, dest.read_bytes())
                dest.unlink()
    shutil.rmtree(out)
    cp = store / "checkpoint"
    if saved is not None:
        saved.setdefault(cp, cp.read_bytes() if cp.exists() else None)
    index_ts = int(indexfile.decode_header(sorted((store / "index").iterdir())[-1].read_bytes()[:40])["end_timestamp"])
    cp.write_bytes(checkpoint.encode(physic_msg_timestamp=index_ts, logics_msg_timestamp=index_ts,
                                     index_msg_timestamp=index_ts))


def write_as_broker(path: Path, data: bytes) -> None:
    """``data`` at ``path`` as a broker leaves a file it maps: the bytes up to the last one that is not zero
    written, the rest a hole. RocketMQ maps each ConsumeQueue and IndexFile at its full size
    (``FileChannel.map`` extends the file: sparse) and writes entries as they come; a file written whole here
    would be 6 MB of real zeros a queue, which every reader of the file's end then reads (a store copied without
    its holes is like that: ``tar`` without ``-S``, ``rsync`` without ``-S``)."""
    write_upto(path, data, len(data.rstrip(b"\0")))


def record_ends(segment_mib: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(template, its record positions, each record's end) of every segment of the store (``build_store``'s copies
    of one template)."""
    template, positions = synthetic_segment(segment_mib << 20)
    ends = np.r_[positions[1:], positions[-1] + int.from_bytes(template[positions[-1]:positions[-1] + 4], "big")]
    return template, positions, ends


def keep(saved: dict, path: Path) -> None:
    """Remember ``path``'s bytes (None: not there) to put back, unless remembered already."""
    saved.setdefault(path, path.read_bytes() if path.exists() else None)


def write_upto(path: Path, original: bytes, end: int) -> None:
    """The segment holding ``original``'s first ``end`` bytes, zeros after as a hole (the size of the file kept): a
    broker's segment as RocketMQ creates it (``setLength``, without the optional warm-up that writes zeros)."""
    with open(path, "wb") as f:
        f.write(original[:end])
        f.truncate(len(original))


def tail_fill(store: Path, segment_mib: int, fill: float, saved: dict) -> int:
    """Leave the last segment with its records up to ``fill`` of its size, zeros after: where its data ends."""
    last = sorted((store / "commitlog").iterdir())[-1]
    _, positions, ends = record_ends(segment_mib)
    if fill >= 1:
        return len(last.read_bytes())            # full: with its BLANK
    end = int(ends[max(0, np.searchsorted(ends, int(fill * (segment_mib << 20)), side="right") - 1)])
    keep(saved, last)
    write_upto(last, saved[last], end)
    return end


def grow(store: Path, segment_mib: int, nbytes: int, fill_end: int, saved: dict) -> tuple[list, int]:
    """About ``nbytes`` of whole records appended as a broker appends them: the last segment's next records from
    ``fill_end`` (its own, as built), and when it is full, its BLANK and a new segment holding the rest (the
    template's records, queue offsets carried on from the last copy's), zeros after: ([(path, base offset, first
    new byte)], bytes of records written)."""
    files = sorted((store / "commitlog").iterdir())
    seg_size = segment_mib << 20
    template, positions, ends = record_ends(segment_mib)
    last = files[-1]
    grown, written = [], 0
    if fill_end < int(ends[-1]):
        keep(saved, last)
        want = fill_end + nbytes
        end = int(ends[np.searchsorted(ends, want, side="right") - 1]) if want < ends[-1] else seg_size
        write_upto(last, saved[last], end)                  # seg_size: the rest, its BLANK among it
        grown.append((last, int(last.name), fill_end))
        written = min(end, int(ends[-1])) - fill_end
        if end < seg_size:                                  # room left: no new segment
            return grown, written
        nbytes -= written
    k = len(files)
    data = rebase_segment(template, positions, k * seg_size, queue_offset_delta=k * queue_sizes(template, positions))
    end = int(ends[max(0, np.searchsorted(ends, nbytes, side="right") - 1)])
    path = store / "commitlog" / f"{k * seg_size:020d}"
    keep(saved, path)
    write_upto(path, data.tobytes(), end)
    grown.append((path, k * seg_size, 0))
    return grown, written + end


def read_from(path: Path, base: int, start: int) -> None:
    """The records of a segment from ``start`` (a record start) read and checked as a segment scan checks them."""
    for _ in SegmentReader(str(path), base, segment_audit(True, True, True), start=start, at_record=True):
        pass


def tail_scan_times(layout, state_before: str, args) -> dict | None:
    """The scan of the segment the run after growth resumes (``verify.scrub.check_segment``), resumed and whole,
    alternating, --after-repeat times each (ms): the part of the run the resumed scan changes, measured alone."""
    prev = verify_scrub.load_state(state_before)["stores"][os.path.abspath(layout.name)]
    plan = verify_scrub.plan_segments(layout, store_root(layout), prev, prev["run"] + 1, args.rotation)
    task = next((t for t in plan.tasks if t.resume), None)
    if task is None:
        return None
    times = {"segment": task.name, "resumed_from": task.resume["position"], "resumed": [], "whole": []}
    for k in range(args.after_repeat):
        for whole in (False, True) if k % 2 == 0 else (True, False):
            seconds, _ = timed(lambda: verify_scrub.check_segment(replace(task, resume=None) if whole else task, 0))
            times["whole" if whole else "resumed"].append(round(seconds * 1000, 1))
    return times


def as_operator(store: Path, conf: str, work: Path, name: str, state: str | None = None, rotation: int = 28) -> dict:
    """``rocketstore audit STORE`` (with ``--scrub STATE``: the nightly scrub) as an operator runs it, a fresh
    process: seconds (start-up and kernel cache loads included), its own peak RSS, and for the scrub what it
    scanned (from its ``--output`` document: the run is the in-process run's, not a start-over)."""
    out = work / f"{name}.json"
    argv = ["audit", store, "--broker-conf", conf, "--output", out]
    argv += ["--scrub", state, "--rotation", rotation] if state else []
    run = cli_with_peak(argv)
    scrub = json.loads(out.read_text())["stores"][0].get("scrub")
    if scrub:
        run.update(segments=len(scrub["checked"]), bytes_checked=scrub["bytes_checked"],
                   cross_checks=scrub["cross_checks"])
    return run


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
    p.add_argument("--tail-fill", type=float, default=0.5,
                   help="the last segment holds its records up to this share of its size (1: full, as built)")
    p.add_argument("--no-peak", action="store_true",
                   help="skip the fresh-process runs that take each command's peak memory")
    p.add_argument("--compare-whole", action="store_true",
                   help="also time the scrub after growth with resumed segment scans off, interleaved")
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
    try:
        fill_end = tail_fill(store, args.segment_mib, args.tail_fill, saved)
        if saved:
            sync_queues(store, conf, saved)
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
        peaks = {}
        if not args.no_peak:        # what an operator's process holds: the audit, a first and an unchanged scrub
            shutil.copy(state, state + ".kept")
            peaks["audit"] = as_operator(store, conf, work, "audit")
            peaks["scrub_first"] = as_operator(store, conf, work, "first", str(work / "fresh.json"), args.rotation)
            peaks["scrub_unchanged"] = as_operator(store, conf, work, "unchanged", state, args.rotation)
            shutil.copy(state + ".kept", state)                     # the rotation goes on from where it was
        # growth, as a broker appends
        current = lambda p: p.read_bytes() if p.exists() else None          # noqa: E731
        before = {p: current(p) for p in saved}                             # as the growth finds them
        grown, grown_bytes = grow(store, args.segment_mib, int(args.grow * total), fill_end, saved)
        sync_queues(store, conf, saved)
        changed = sorted(str(p.relative_to(store)) for p in saved if current(p) != before.get(p, saved[p]))
        read_new = min(timed(lambda: [read_from(*g) for g in grown])[0] for _ in range(args.repeat))
        shutil.copy(state, state + ".before")
        afters, wholes = [], []
        for k in range(args.after_repeat):      # each from the state before growth: the same run again
            # with --compare-whole, the same run with resumed segment scans off too, first every other time
            for whole in ((False, True) if k % 2 == 0 else (True, False)) if args.compare_whole else (False,):
                shutil.copy(state + ".before", state)
                resumable = verify_scrub.RESUMABLE
                verify_scrub.RESUMABLE = () if whole else resumable
                try:
                    (wholes if whole else afters).append(timed(scrub))
                finally:
                    verify_scrub.RESUMABLE = resumable
        after_s, after = min(afters, key=lambda a: a[0])
        if not args.no_peak:
            shutil.copy(state + ".before", state)
            peaks["scrub_after_growth"] = as_operator(store, conf, work, "after", state, args.rotation)
        tail_scans = tail_scan_times(layouts()[0], state + ".before", args) if args.compare_whole else None
        after_audit_s, after_audit = timed(audit)
        recovery_s, _ = timed(lambda: recovery_report(str(store), broker_conf=conf))
        s = after.audit.docs[0]["scrub"]
        same = findings_of(after) == findings_of(after_audit)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        for path, data in saved.items():
            if data is None:
                path.unlink()
            else:
                write_as_broker(path, data)
    mean = statistics.fmean(r["seconds"] for r in runs)
    with_scan = [r["seconds"] for r in runs if r["segments"]]
    without = [r["seconds"] for r in runs if not r["segments"]]
    result = {
        "store": {"gib": args.gib, "segment_mib": args.segment_mib, "segments": len(segs), "bytes": total,
                  "cq_entries": args.cq_entries, "index_num": args.index_num, "tail_fill": args.tail_fill,
                  "last_segment_data_end": fill_end},
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
        "after_growth_segments": [c["segment"].split("/")[-1] + " " + c["reason"]
                                  + (f" (resumed from {c['resumed_from']})" if "resumed_from" in c else "")
                                  for c in s["checked"]],
        "tail_segment_scan_ms": tail_scans,
        "after_growth_whole_scans_seconds": round(min(w[0] for w in wholes), 3) if wholes else None,
        "after_growth_whole_scans_runs": [round(w[0], 3) for w in wholes] if wholes else None,
        "after_growth_whole_scans_share_of_audit": round(min(w[0] for w in wholes) / best, 4) if wholes else None,
        "after_growth_whole_scans_bytes_scanned": wholes[0][1].audit.docs[0]["scrub"]["bytes_checked"] if wholes
        else None,
        "after_growth_bytes_scanned": s["bytes_checked"],
        "audit_of_grown_seconds": round(after_audit_s, 3), "findings_equal_the_audit": same,
        "findings": len(after_audit.docs[0]["findings"]),
        "recovery_report_seconds": round(recovery_s, 3),
        "fresh_process": peaks,
    }
    print(json.dumps({k: v for k, v in result.items() if k != "unchanged_runs"}, indent=1))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "scrub-results.json").write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
