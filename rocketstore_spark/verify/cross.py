"""The scrub's cross-checks resumed (driver, in-process): the ConsumeQueues, IndexFiles, checkpoint and consumer
offsets checked against what was written since the last run, with the findings a whole check
(``verify.store.verify_store``) gives on the same store — or, whenever that cannot be shown, a refusal that
sends the scrub to the whole check.

What a check leaves for the next one (``resume_state``, JSON in the scrub's state):

* ``end``, ``log_min``: the CommitLog's data end (P) and first offset when it ran; per segment below P its
  ``file_stat`` (size, modification and change times, inode), and a digest (xxh3, 128 bits) of the bytes below P of the
  segment that holds P (the one a live broker appends to; its times move);
* per queue: ``check_queue``'s resume (dispatch's state after the last record, the file walk after the last
  valid entry, the QUEUEOFFSET check's last record, what each closed file holds and, of those the bounds looked
  at, their ``rocketmq.consumequeue.file_summary``) if the queue had no finding,
  and its files as they were: each file's name and ``file_stat``, and a digest of the bytes up to the last valid
  entry of the file holding it (the file a broker appends to);
* per IndexFile: its ``file_stat``, header, whether it was the newest, its predecessor's end time, and its verdict;
  for the newest, when sound, the check's carry (``verify.index.IndexCarry``: where the match stood just before
  its newest physical offset) and a digest of its entries 1 .. its count then (``carry.digest``), and how it was
  checked (``checked``: resumed, or whole and why).

What is trusted without reading a byte: a file whose size, modification time, change time and inode are the
ones recorded. The change time moves with every write through the file system and with every ``utime`` —
no call sets it back — so a file rewritten in place with its modification time put back is not trusted
(tests/verify/test_scrub_resume.py). Not seen by it: bytes changed under the file system (a raw device write,
bit rot). In the CommitLog the segment rotation's whole scans find those; in a closed queue file or an old
IndexFile only a full audit (or a whole check, which any refusal runs) does. Until #28's second session old
IndexFiles also had a digest of 64 sampled 4 KiB blocks compared every run (0.06 % of a default 400 MB file;
a cost that grew with their number): dropped for the change time, which every in-place write moves.

A resumed run (``verify_resumed``) dispatches only the CommitLog from P (``store.spill.scan_range`` from a
record boundary), checks each queue on from its resume with those records (its closed files' entries are not
read again; every queue in one pass, ``verify.queues.check_resumed_queues``, ``check_queue`` for those it
cannot answer for), and checks again every IndexFile that is new, changed, the newest (its count of keys after its
end follows the log), was the newest, or follows one that changed; the others keep their verdict. The
checkpoint, abort and lock files, the consumer offsets and the queues' bounds are checked whole every run (a
few small files, the last files of each queue). A file digested up to the last run's point and then up to
this run's is read once (``PrefixDigests``). An IndexFile that grew (the newest, the one that was) whose
entries up to the last run's count have the recorded digest resumes from its carry: only its entries and the
records' keys from its end then matched, only its new entries' chains read (``verify.index``); any other is
checked whole. The keys of the records from P come from the dispatch's spill (``verify.index.split_keys``),
only those below P are dispatched again.

It refuses (returns why; the scrub then runs the whole check) when anything under a verified point changed or
cannot be told unchanged: another first segment (retention), a log that ends before P, a segment below P other
than P's whose ``file_stat`` changed, bytes below P of P's segment that differ, a queue with findings last time,
a queue file below its last valid entry whose name or ``file_stat`` changed (the file holding it: whose bytes up to
it differ), the state of another version. Never trusted: a file rewritten in place under the verified point.
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import asdict
from types import SimpleNamespace

from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.rocketmq.settings import BrokerSettings
from rocketstore_spark.store.digests import PrefixDigests
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.layout import StoreMap, relative_name, stat_once
from rocketstore_spark.store.rocksdb import queue_db
from rocketstore_spark.verify.index import IndexCarry, IndexVerdict, check_index_file, dispatched_keys, split_keys
from rocketstore_spark.verify.store import (THREADS, Dispatched, StoreVerdict, check_queues_of, conclude,
                                            index_views, log_bounds, relative, store_root)

RESUME_VERSION = 3                # 3: xxh3 digests (2: blake2b)


def scans_of(layout: StoreLayout, verdicts: dict[str, dict], root: str) -> list[tuple[int, SimpleNamespace]]:
    """(base offset, scan) of every segment from the scrub's segment verdicts (name relative to ``root``)."""
    return [(seg.base_offset, SimpleNamespace(**verdicts[relative_name(seg.path, root)]))
            for seg in layout.segments]


def file_stat(path: str) -> list[int]:
    """[size, modification time, change time (ns), inode]: what tells a file unchanged since the last run. The
    change time moves with every write and with every change of the modification time itself (``utime``): no
    call sets it back, so a file rewritten in place with its modification time put back still shows."""
    st = stat_once(path)
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _queue_key(topic: str, queue_id: int) -> str:
    return f"{topic}/{queue_id}"


def _queue_files_state(queue_dir: str | None, root: str, resume: dict, held: list, prefixes: PrefixDigests) -> list:
    """[name, stat (``file_stat``), digest, length] of the queue's files up to the one holding its last valid
    entry, in order: that file's digest is of its first ``length`` bytes (up to that entry), the others' None.
    ``held``: ``QueueVerdict.held``."""
    last = resume["walk"]["last"]
    if queue_dir is None or last < 0:
        return []
    held = {path: (base, count) for path, base, count in held}
    out = []
    for path, _ in StoreMap.queue_files(queue_dir):
        out.append([relative_name(path, root), file_stat(path), None, 0])
        base, count = held.get(path, (0, 0))
        if path in held and base + count > last:
            length = (last - base + 1) * ENTRY_SIZE
            out[-1][2:] = [prefixes.digest(path, length), length]
            break
    return out


def _entries_digest(view, entries: int, prefixes: PrefixDigests) -> str:
    """The digest of an IndexFile's entries 0 .. ``entries`` (the entry region, not the header or slot table,
    which every put changes)."""
    return prefixes.digest(view.path, indexfile.ENTRY_SIZE * (entries + 1), view.geometry.entries_start)


def _index_state(view, verdict: IndexVerdict, newest: bool, previous_end, root: str, prefixes: PrefixDigests) -> dict:
    carry = None
    if newest and verdict.carry is not None:        # the file the next run finds grown
        carry = {**asdict(verdict.carry), "digest": _entries_digest(view, verdict.carry.entries, prefixes)}
    return {"stat": file_stat(view.path), "header": view.header, "newest": newest,
            "previous_end": previous_end,
            "entries": verdict.entries, "keys_expected": verdict.keys_expected,
            "unindexed_after": verdict.unindexed_after,
            "findings": [relative(f, root).as_row() for f in verdict.findings],
            "carry": carry, "checked": verdict.how}


def _index_carry(old: dict | None, view, previous_end, prefixes: PrefixDigests) -> tuple[IndexCarry | None, str | None]:
    """The carry of the last run's check of an IndexFile (``_index_state``) when it still stands — the file's
    predecessor ends as it did and its entries up to the count then have the recorded digest —, else why not
    (None: a file without a carry, one the last run did not check as the newest)."""
    if old is None or not old["newest"]:
        return None, None
    if old.get("carry") is None:
        return None, "it had findings last run" if any(f["check"] != "index.lagging" for f in old["findings"]) \
            else "the last run left no carry (no entries, or only expired ones)"
    if old["previous_end"] != previous_end:
        return None, "the IndexFile before it ends at another time"
    carry = dict(old["carry"])
    digest = carry.pop("digest", None)
    if os.path.getsize(view.path) < view.geometry.entries_start + indexfile.ENTRY_SIZE * (carry["entries"] + 1) \
            or _entries_digest(view, carry["entries"], prefixes) != digest:
        return None, f"its entries 1 .. {carry['entries']} changed since the last run"
    try:
        return IndexCarry(**carry), None
    except TypeError:                   # another field set (a state from another build of this version)
        return None, "the last run's carry is not this build's"


def _check_index(*args, why: str | None = None, **kwargs) -> IndexVerdict:
    """``check_index_file``; ``why``: why the last run's carry could not be taken (said in the verdict)."""
    v = check_index_file(*args, **kwargs)
    if why is not None:
        v.how = f"whole: {why}"
    return v


def resume_state(layout: StoreLayout, verdict: StoreVerdict, known: list | None = None,
                 prefixes: PrefixDigests | None = None) -> dict | None:
    """What a check (whole or resumed) of ``layout`` leaves for the next resumed one (module docstring); None
    for a store the whole check always runs on (another engine's log, no queues checked, no CommitLog).
    ``known``: the IndexFiles of known geometry, when read already; ``prefixes``: the run's digests so far."""
    prefixes = prefixes or PrefixDigests()
    if layout.refused(Work.READ_COMMITLOG) or layout.refused(Work.CHECK_QUEUES) or not layout.segments:
        return None
    root = store_root(layout)
    end = verdict.log.end
    segments, tail = {}, None
    for (name, scan), seg in zip(verdict.segments, layout.segments):
        if seg.base_offset >= end and seg.base_offset != layout.segments[0].base_offset:
            continue
        if scan.records and seg.base_offset + scan.data_end == end and scan.valid_end != scan.data_end:
            return None                 # the log ends in damage: the next dispatch could not start at a record
        name = relative_name(seg.path, root)
        segments[name] = file_stat(seg.path)
        if tail is None and seg.base_offset <= end <= seg.base_offset + segments[name][0]:
            tail = [name, prefixes.digest(seg.path, end - seg.base_offset)]
    dirs = {(t, q): str(d) for t, q, d in layout.files.queue_dirs()}
    queues = {}
    for q in verdict.queues:
        clean = not q.findings and q.resume is not None
        files = _queue_files_state(dirs.get((q.topic, q.queue_id)), root, q.resume, q.held, prefixes) \
            if clean else None
        if clean:
            # what the closed files hold (the next run reads them again only if their size or time moved)
            held = {relative_name(path, root): count for path, _, count in q.held}
            q.resume["counts"] = {row[0]: held[row[0]] for row in files if row[2] is None and row[0] in held}
            # ... and what the bounds took from them (``verify.queues.check_queue``): trusted as the counts are
            q.resume["summaries"] = {n: x for n, x in q.resume.get("summaries", {}).items()
                                     if n in q.resume["counts"]}
        queues[_queue_key(q.topic, q.queue_id)] = {"resume": q.resume if clean else None, "files": files}
    if known is None:
        known = [v for v in index_views(layout, verdict.settings) if v.geometry is not None] \
            if not layout.refused(Work.READ_INDEX) else []
    by_name = {i.file: i for i in verdict.index}
    index = {}
    for k, view in enumerate(known):
        name = relative_name(view.path, root)
        if name in by_name:
            index[name] = _index_state(view, by_name[name], k == len(known) - 1,
                                       known[k - 1].header["end_timestamp"] if k else None, root, prefixes)
    return {"version": RESUME_VERSION, "end": end, "log_min": verdict.log.min_offset, "segments": segments,
            "tail": tail, "queues": queues, "index": index}


def refusal(layout: StoreLayout, prev: dict | None, verdicts: dict[str, dict],
            prefixes: PrefixDigests | None = None) -> str | None:
    """Why the cross-checks cannot resume from ``prev`` (None: they can; the module docstring's list), the
    segments' scans given by the scrub (``verdicts``: segment name -> verdict); ``prefixes``: the run's
    digests (this one's go on in ``resume_state``'s). When they can, every queued record below ``prev["end"]``
    has its entry in its queue (``rocketmq.recovery.Simulation``'s ``reachable_below``)."""
    prefixes = prefixes or PrefixDigests()
    if prev is None or prev.get("version") != RESUME_VERSION:
        return "no resumable state"
    if queue_db(layout.root) is not None:
        return "a RocksDB ConsumeQueue (its units are checked whole)"
    root = store_root(layout)
    log = log_bounds(layout, scans_of(layout, verdicts, root))
    if log.min_offset != prev["log_min"]:
        return f"the CommitLog's first offset moved ({prev['log_min']} -> {log.min_offset})"
    if log.end < prev["end"]:
        return f"the CommitLog ends at {log.end}, before the last run's end {prev['end']}"
    now = {relative_name(seg.path, root): seg.path for seg in layout.segments}
    for name, stat in prev["segments"].items():
        if name not in now:
            return f"{name} is gone"
        if file_stat(now[name]) == stat:
            continue
        tail = prev["tail"]
        if tail is None or tail[0] != name:
            return f"{name}, below the last run's end, changed (size or time)"
        seg_base = next(s.base_offset for s in layout.segments if s.path == now[name])
        if prefixes.digest(now[name], prev["end"] - seg_base) != tail[1]:
            return f"{name}: its bytes below the last run's end ({prev['end']}) changed"
    dirs = {_queue_key(t, q): str(d) for t, q, d in layout.files.queue_dirs()}
    for key, q in prev["queues"].items():
        if q["resume"] is None:
            return f"queue {key} had findings"
        for name, was, digest, length in q["files"]:
            path = os.path.join(root, name)
            try:
                stat = file_stat(path)
            except FileNotFoundError:
                return f"{name} is gone"
            if stat == was:
                continue
            if digest is None:
                return f"{name}, below its queue's last checked entry, changed (size, time or inode)"
            if stat[0] < length or prefixes.digest(path, length) != digest:
                return f"{name}: its entries up to the queue's last checked one changed"
        listed = [relative_name(p, root) for p, _ in StoreMap.queue_files(dirs[key])] if key in dirs else []
        if listed[:len(q["files"])] != [row[0] for row in q["files"]]:
            return f"queue {key}: its files below the last checked entry are not the same files"
    return None


def verify_resumed(layout: StoreLayout, settings: BrokerSettings, prev: dict, verdicts: dict[str, dict],
                   work_dir: str | None, prefixes: PrefixDigests | None = None,
                   queue_reads=None) -> tuple[StoreVerdict, dict]:
    """The cross-checks of ``layout`` resumed from ``prev`` (``resume_state``'s; ``refusal`` found nothing
    against it), the segments' scans given by the scrub (``verdicts``: segment name -> verdict): the verdict
    (its findings without the segment scans' findings, which the scrub keeps) and the state for the next
    run. ``queue_reads``: the recovery report's beside it (``verify.store.check_queues_of``)."""
    prefixes = prefixes or PrefixDigests()
    root = store_root(layout)
    scans = scans_of(layout, verdicts, root)
    log = log_bounds(layout, scans)
    views = index_views(layout, settings) if not layout.refused(Work.READ_INDEX) else []
    known = [v for v in views if v.geometry is not None]
    findings: list[Finding] = list(layout.findings)
    findings += [finding("index.unknown_geometry", v.path, None, v.problem or "unknown geometry")
                 for v in views if v.geometry is None]
    resume = {}
    for key, q in prev["queues"].items():
        topic, queue_id = key.rsplit("/", 1)
        resume[(topic, int(queue_id))] = q["resume"]
    with ExitStack() as stack, ThreadPoolExecutor(max_workers=THREADS, thread_name_prefix="cross") as pool:
        # the records written since dispatched on the pool (its tasks submitted first, so started first: an
        # IndexFile check waiting for their keys never holds a thread they need) while this thread digests
        # what the IndexFile checks resume from and the checks read their files' structure
        spill = stack.enter_context(Dispatched(layout, settings, work_dir, bool(known), pool, start=prev["end"]))
        # the keys of the records from the last run's end as the dispatch spills them (waited for when read), of
        # those before it dispatched again
        keys = split_keys(dispatched_keys(layout, settings.release, settings.message_delay_level, stop=prev["end"]),
                          spill.keys_when_dispatched(), prev["end"])
        checked = []
        for k, view in enumerate(known):
            name = relative_name(view.path, root)
            old = prev["index"].get(name)
            newest = k == len(known) - 1
            previous_end = known[k - 1].header["end_timestamp"] if k else None
            same = old is not None and not newest and not old["newest"] and old["previous_end"] == previous_end \
                and old["stat"] == file_stat(view.path) and old["header"] == view.header \
                and (not old["findings"] or log.end == prev["end"])
            if same:
                v = IndexVerdict(name, old["entries"], old["keys_expected"], old["unindexed_after"],
                                 [Finding.from_row(f) for f in old["findings"]], how="carried")
                checked.append(pool.submit(lambda v=v: v))
            else:
                # a file that grew since (the newest, the one that was) goes on from where its check stopped
                carry, why = _index_carry(old, view, previous_end, prefixes)
                checked.append(pool.submit(_check_index, layout, view, root, settings.geometry, settings.release,
                                           settings.message_delay_level, log, newest=newest,
                                           previous_end=previous_end, keys=keys, resume=carry, why=why))
        queues = check_queues_of(layout, settings, spill.wait(), log, pool, resume, queue_reads=queue_reads)
        index = [f.result() for f in checked]
    verdict = conclude(layout, settings, log, scans, queues, index, known, findings)
    return verdict, resume_state(layout, verdict, known, prefixes)
