"""The incremental scrub of stores (driver; ``rocketstore audit --scrub``, ``jobs/scrub.py``): the audit's
answer — every check and the recovery report, per store, as ``report.audit``'s document — at the cost of what
changed since the last run rather than of the store's size.

Segments: ``verify.scrub.plan_segments`` says which are scanned again (new, grown, modified, bytes changed, and
a rotating 1/N share of the rest; the module docstring there) and which of them resume where their last scan
ended; the others' verdicts and findings are carried over from the state. One ``store.digests.PrefixDigests`` a
run serves the plan (a resumed segment's prefix), the scanned segments' records and the cross-checks: the last
segment's prefix is read once. The scans run through ``scan`` (default: on THREADS threads here; ``spark.scrub`` runs
them on executors).

Cross-checks — ConsumeQueues, IndexFiles, checkpoint and shutdown state, consumer offsets, the store's
layout (``verify.store.verify_store`` without its BODYCRC scans, which the segment scans above stand for) and
the recovery report — are carried over when no file of the store changed (a digest of every file's name, size,
times and inode), no segment's bytes changed, no segment's scan found other findings than last time, and the
settings are the same. Else they run: resumed (``verify.cross``: the CommitLog written since the last run dispatched,
each queue checked on from its state, new, changed and newest IndexFiles checked again) when the state shows
that gives the whole check's findings, else whole (``verify_store``); the recovery report runs whole either
way, but of the closed ConsumeQueue files (not their queue's last) it looked at last run it takes the summary
kept in the state (``rocketmq.recovery.QueueFileReads``) when the file's size, modification and change times
and inode are the recorded ones (``verify.cross.file_stat``: a file rewritten in place is read again), and of
every segment it takes the scrub's scan (``QueueFeed.offer_scans``, as the audit hands it verify's) — this
run's, or the one the state carries for a segment trusted unchanged (the same trust the scrub's answer rests
on) — rather than scanning the last segments again. The
settings are resolved again likewise, each older IndexFile's inferred slot count taken from the state by the
same rule (``store.indexes.SlotCounts``). On a live broker, whose queues, checkpoint and offsets change all
the time, that is every night: resumed.

The entry of each store is ``report.audit.audit_entry``'s plus ``scrub``: the segments scanned, why and from
where (``resumed_from``: a segment resumed where its last scan ended, ``verify.scrub``), the bytes scanned, how
the cross-checks ran (``run`` whole, ``resumed``, ``carried``) and why whole (``cross_checks_whole_because``:
what could not be resumed), the rotation.
"""
from __future__ import annotations

import gc
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

from rocketstore_spark.documents import json_text
from rocketstore_spark.findings import Finding
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.report.audit import Audit, audit_entry
from rocketstore_spark.rocketmq.recovery import QueueFeed, QueueFileReads
from rocketstore_spark.rocketmq.settings import BrokerSettings, resolve, with_layout_dirs
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import UnsupportedStore, Work
from rocketstore_spark.store.indexes import SlotCounts
from rocketstore_spark.store.layout import listed_once, relative_name
from rocketstore_spark.store.outputs import outside_stores, store_roots
from rocketstore_spark.store.digests import PrefixDigests
from rocketstore_spark.verify.cross import file_stat, refusal, resume_state, verify_resumed
from rocketstore_spark.verify.queues import LogBounds
from rocketstore_spark.verify.scrub import (ROTATION, SegmentTask, check_segment, files_signature, load_state,
                                            plan_segments, record_prefix, save_state, segment_summary)
from rocketstore_spark.verify.store import StoreVerdict, relative, store_root, verify_store

THREADS = 2
CROSS_WORDS = {"run": "run again whole", "resumed": "resumed on what was written since", "carried": "carried over"}


def scan_here(tasks: list[SegmentTask], run: dict[str, int]) -> list[dict]:
    """The segment scans on THREADS threads of this process (their compiled kernels release the GIL);
    ``run``: the run number of each task's store (by root)."""
    with ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="scrub") as pool:
        return list(pool.map(lambda t: check_segment(t, run[t.root]), tasks))


@dataclass
class ScrubRun:
    audit: Audit                                      # the audit's entries (each with its ``scrub`` part)
    state: dict = field(default_factory=dict)         # the new state document (saved)


_NEXT_RUN_ONLY = ("resume", "queue_files", "index_slots")     # the cross-checks' parts no entry shows


def _as_json(obj):
    return json.loads(json_text(obj, indent=None))


def _settings_key(options: dict | None, broker_conf: str | None) -> str:
    """What the state of a store is kept under: the settings given (an option given as None is not given: the
    CLI and the Spark job pass ``rocketmqVersion: None`` when no --rocketmq-version was given, a library call
    passes no options, and the three share one state) and the broker.conf's path, size and time."""
    options = {k: v for k, v in (options or {}).items() if v is not None}
    conf = None
    if broker_conf:
        st = os.stat(broker_conf)
        conf = [os.path.abspath(broker_conf), st.st_size, st.st_mtime_ns]
    return json.dumps([options, conf], sort_keys=True, default=str)


def _cross_checks(layout: StoreLayout, settings: BrokerSettings, options, broker_conf, work_dir,
                  resume: dict | None, segments: dict[str, dict], queue_files: dict | None,
                  scans: dict[int, object] | None = None, prefixes: PrefixDigests | None = None) -> dict:
    """Everything but the segment scans, beside the recovery report as the audit runs them: resumed from the
    last run's ``resume`` when ``verify.cross`` can show the result is the whole check's, else
    ``verify_store`` without BODYCRC (its segment findings left out: the scrub's segment scans stand for
    them). ``segments``: this run's segment verdicts by name; ``queue_files``: the last run's summaries of
    the closed ConsumeQueue files its recovery report looked at (name -> [``verify.cross.file_stat``, summary]:
    ``rocketmq.recovery.QueueFileReads``; a file whose size, times or inode moved is read again); ``scans``: every
    segment's scan, this run's or carried (base offset -> ``store.scan.SegmentSummary``, BODYCRC checked), which
    the recovery report takes rather than scanning them again (``QueueFeed.offer_scans``, as the audit's);
    ``prefixes``: the run's digests (the segment plan's and records' too: the tail segment's prefix read once)."""
    root = store_root(layout)
    reads = QueueFileReads({os.path.join(root, n): v for n, v in (queue_files or {}).items()}, identity=file_stat)
    verdicts = {n: r["verdict"] for n, r in segments.items()}
    prefixes = prefixes or PrefixDigests()    # the files digested up to the last run's point go on to this run's
    why = refusal(layout, resume, verdicts, prefixes)
    feed = None
    if scans:
        # only the scans: the feed closed incomplete, the simulation counts the unreachable records itself
        feed = QueueFeed()
        feed.offer_scans(True, scans)
        feed.close(complete=False)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="scrub-recovery") as side:
        # resumable: every queued record below the last run's end is in its queue (``verify.cross.refusal``)
        report = side.submit(recovery_report, layout.name, options=options, broker_conf=broker_conf,
                             reachable_below=resume["end"] if why is None else None, resolved=(layout, settings),
                             queue_reads=reads, queue_feed=feed) \
            if layout.files.root is not None else None
        if why is not None:
            how = "run"
            v = verify_store(layout.name, options=options, broker_conf=broker_conf, check_crc=False,
                             work_dir=work_dir)
            after = resume_state(layout, v, prefixes=prefixes)
        else:
            how = "resumed"
            # each queue's last file summarized once between the queue check and the report (``reads``)
            v, after = verify_resumed(layout, settings, resume, verdicts, work_dir, prefixes, reads)
        rec, refused = None, None
        if report is not None:
            try:
                rec = report.result()[0]
            except UnsupportedStore as e:
                refused = str(e)
    rest = list(v.findings)
    for f in (relative(x, root) for _, s in v.segments for x in getattr(s, "findings", [])):
        rest.remove(f)                                   # each segment finding once (verdict.findings holds it)
    return {"findings": [f.as_row() for f in rest], "recovery": rec, "recovery_refused": refused,
            "log": [v.log.min_offset, v.log.end], "how": how,
            "why": why, "resume": after, "settings": settings.to_json(),
            "queue_files": {relative_name(p, root): v for p, v in reads.found.items()}}


def scrub_stores(layouts: list[StoreLayout], state_path: str, *, rotation: int = ROTATION,
                 options: dict | None = None, broker_conf: str | None = None, work_dir: str | None = None,
                 scan=scan_here) -> ScrubRun:
    """Scrub each store against the state at ``state_path`` (created when missing; never under a store) and
    save the new state; ``scan(tasks, runs)``: how the segment scans run (default ``scan_here``). Each queue
    directory is listed once a run (``store.layout.listed_once``)."""
    with listed_once(), _heap_frozen() as freeze, ExitStack() as run:
        return _scrub_stores(layouts, state_path, rotation, options, broker_conf, work_dir, scan, freeze, run)


@contextmanager
def _heap_frozen():
    """The objects alive when the run starts (modules, compiled kernels, Spark's and numpy's) kept out of the
    garbage collector's full passes for the run (``gc.freeze``), and out again what the yielded call is made
    after (the state just loaded). Why: a full pass walks every object; with those loaded it takes about 90 ms
    here, and the allocations of a run over thousands of queue files trigger one every few runs: about 30 ms a
    run on average on the bench, an eighth of a nightly scrub's cost there. The young generations are still
    collected; the end of the run gives the objects back (``gc.unfreeze``). A process that froze its own heap
    already (``gc.get_freeze_count()``: a forking server's habit) is left as it is: unfreezing at the end would
    undo its freeze."""
    if gc.get_freeze_count():
        yield lambda: None
        return
    gc.freeze()
    try:
        yield gc.freeze
    finally:
        gc.unfreeze()


def _prefetchable(state: dict, layouts: list[StoreLayout]) -> list:
    """What the last run digested (``store.digests.PrefixDigests.asked``, kept in the state) of files under the
    stores of this run: a state file edited by hand, or moved to other stores, makes no other file read."""
    roots = tuple(os.path.join(os.path.abspath(r), "") for r in store_roots(layouts))
    return [a for a in state.get("digested") or []
            if isinstance(a, list) and len(a) == 4 and isinstance(a[0], str) and isinstance(a[1], int)
            and isinstance(a[2], int) and a[1] >= 0 and a[2] >= 0 and os.path.abspath(a[0]).startswith(roots)]


def _digested_next(previous: list, asked: list) -> list:
    """What the next run will check of the files digested so far: of each prefix start of a file, the longest
    this run asked for (the length it recorded, where the next run checks it), else the one kept from before (a
    file no run since has had to digest: unchanged). ``previous``: the last run's, of this run's stores
    (``_prefetchable``); files gone are dropped."""
    longest: dict[tuple, list] = {}
    for a in previous:
        if os.path.exists(a[0]):
            longest[(a[0], a[2])] = a
    now: dict[tuple, list] = {}
    for a in asked:
        if (a[0], a[2]) not in now or a[1] > now[(a[0], a[2])][1]:
            now[(a[0], a[2])] = a
    return sorted((longest | now).values(), key=lambda a: (a[0], a[2]))      # in file order, whatever the threads


def _scrub_stores(layouts, state_path, rotation, options, broker_conf, work_dir, scan, freeze, run) -> ScrubRun:
    if rotation < 1:
        raise ValueError(f"--rotation {rotation}: must be 1 or more (runs per full rotation)")
    outside_stores(state_path, store_roots(layouts), "scrub state")
    state = load_state(state_path)
    freeze()                # the state lives as long as the run
    key = _settings_key(options, broker_conf)
    out = ScrubRun(Audit(), state)
    plans, previous, runs, started = {}, {}, {}, time.perf_counter()
    # one a run: the segment plan, the records and the cross-checks share it; what the last run recorded of the
    # files a broker appends to read beside the run (``PrefixDigests.prefetching``)
    prefixes = run.enter_context(PrefixDigests().prefetching(_prefetchable(state, layouts)))
    for layout in layouts:
        root = store_root(layout)
        prev = state["stores"].get(os.path.abspath(layout.name))      # the same store however it was spelled
        if prev is not None and prev.get("settings") != key:
            prev = None                                 # other settings: nothing carried over
        previous[layout.name] = prev
        runs[root] = (prev or {}).get("run", 0) + 1
        if not layout.refused(Work.READ_COMMITLOG):
            plans[layout.name] = plan_segments(layout, root, prev, runs[root], rotation, prefixes)
    # every store's segment scans at once (one Spark job, or one pool)
    tasks = [t for p in plans.values() for t in p.tasks]
    # as the state will hold them (JSON), so that what is carried over compares equal to what is found again
    scanned = {(t.root, t.name): _as_json(r) for t, r in zip(tasks, scan(tasks, runs))} if tasks else {}
    for t in tasks:
        record_prefix(scanned[(t.root, t.name)], t.path, prefixes)
    scan_seconds = time.perf_counter() - started
    for layout in layouts:
        clock = time.perf_counter()
        root, prev, plan = store_root(layout), previous[layout.name], plans.get(layout.name)
        opts = with_layout_dirs(layout, options)
        segments: dict[str, dict] = {}
        differs = False
        for name in (plan.order if plan else []):
            rec = plan.carried.get(name) or scanned[(root, name)]
            old = ((prev or {}).get("segments") or {}).get(name)
            differs |= old is not None and name not in plan.carried and old["findings"] != rec["findings"]
            segments[name] = rec
        signature = files_signature(layout)
        rerun = prev is None or prev.get("files") != signature or differs or bool(plan and plan.changed)
        resumable = prev is not None and not (plan and plan.changed)     # verify.cross checks the log itself
        if rerun:
            known = (prev or {}).get("cross", {})
            # the older IndexFiles' slot counts as the last run inferred them, of files unchanged since
            slots = SlotCounts({os.path.join(root, n): v for n, v in known.get("index_slots", {}).items()},
                               identity=file_stat)
            settings = resolve(layout, opts, broker_conf, slot_counts=slots)
            cross = _cross_checks(layout, settings, opts, broker_conf, work_dir,
                                  known.get("resume") if resumable else None, segments, known.get("queue_files"),
                                  # every segment's scan, this run's or carried (trusted as the scrub trusts it)
                                  {seg.base_offset: segment_summary(segments[name]) for seg in layout.segments
                                   if (name := relative_name(seg.path, root)) in segments}, prefixes)
            cross["index_slots"] = {relative_name(p, root): v for p, v in slots.found.items()}
            # what this run's entry shows, as a carried run shows it (JSON); what only the next run reads (the
            # resume, the file summaries: lists, dicts, ints and strings already) goes to the state file as it is
            cross = {k: v if k in _NEXT_RUN_ONLY else _as_json(v) for k, v in cross.items()}
        else:       # no file changed, nor the options: the settings resolve as they did
            cross = prev["cross"]
            settings = BrokerSettings.from_json(cross["settings"]) if "settings" in cross else \
                resolve(layout, opts, broker_conf)
        findings = [Finding.from_row(f) for name in segments for f in segments[name]["findings"]]
        findings += (plan.changed if plan else []) + [Finding.from_row(f) for f in cross["findings"]]
        verdict = StoreVerdict(layout.name, settings, LogBounds(*cross["log"]),
                               [], [], [], None, findings)
        entry = audit_entry(verdict, cross["recovery"], cross["recovery_refused"])
        checked = plan.tasks if plan else []
        entry["scrub"] = {
            "run": runs[root], "rotation": rotation, "segments": len(segments),
            # resumed_from: where a segment's scan resumed (where its last one ended); absent when scanned whole
            "checked": [{"segment": t.name, "reason": t.reason}
                        | ({} if segments[t.name]["resumed_from"] is None
                           else {"resumed_from": segments[t.name]["resumed_from"]}) for t in checked],
            "bytes_checked": sum(segments[t.name]["size"] - (segments[t.name]["resumed_from"] or 0)
                                 for t in checked),
            "bytes": sum(r["size"] for r in segments.values()),
            "cross_checks": cross["how"] if rerun else "carried",
            "cross_checks_whole_because": cross["why"] if rerun else None,
            # this store's own part, plus the segment scans of every store of the run (run together)
            "seconds": round(time.perf_counter() - clock + scan_seconds, 3)}
        out.audit.docs.append(entry)
        out.audit.at_risk |= entry["at_risk"]
        for rec in segments.values():
            rec.pop("reason", None)
            rec.pop("resumed_from", None)
        state["stores"][os.path.abspath(layout.name)] = {"settings": key, "run": runs[root], "rotation": rotation,
                                        "files": signature, "credit": plan.credit if plan else 0,
                                        "segments": segments, "cross": cross}
    state["digested"] = _digested_next(_prefetchable(state, layouts), prefixes.asked)
    save_state(state_path, state)
    return out


def scrub_lines(entry: dict) -> list[str]:
    """What a scrub did for one store, in words (the CLI and the job print it)."""
    s = entry["scrub"]
    reasons: dict[str, int] = {}
    for c in s["checked"]:
        reason = c["reason"] if c.get("resumed_from") is None else f"{c['reason']} (resumed)"
        reasons[reason] = reasons.get(reason, 0) + 1
    why = ", ".join(f"{n} {r}" for r, n in reasons.items()) or "none due"
    counts = {sev: sum(1 for f in entry["findings"] if f["severity"] == sev) for sev in ("error", "warning", "info")}
    return [f"{entry['store']}: {'PROBLEMS FOUND' if entry['at_risk'] else 'healthy'} (scrub run {s['run']}, "
            f"rotation {s['rotation']} runs)",
            f"  segments scanned: {len(s['checked'])} of {s['segments']} ({why}), {s['bytes_checked']:,} of "
            f"{s['bytes']:,} bytes; cross-checks {CROSS_WORDS[s['cross_checks']]}"
            + (f" ({s['cross_checks_whole_because']})" if s.get("cross_checks_whole_because") else ""),
            f"  findings: {counts['error']} error(s), {counts['warning']} warning(s), {counts['info']} info; "
            f"{s['seconds']} s"]
