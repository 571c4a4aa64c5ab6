"""The incremental scrub's segment state: what a scrub knows of each CommitLog segment from its last full scan,
which segments a run scans again, and one segment's scan (the plan on the driver; ``check_segment`` wherever
the segment is read: a thread of the CLI, or a Spark executor). ``report.scrub`` runs a scrub in-process,
``spark.scrub`` with the segment scans on executors.

Per segment the state keeps its size, modification time (ns), whether a later segment followed it, a digest of
sampled blocks of its bytes (``sample_digest``: SAMPLE_BLOCKS blocks of BLOCK bytes spread evenly over the
file, 256 KiB of a 1 GiB segment; every digest of the scrub is ``store.digests.new_hash``'s), the run that last
scanned it whole, the scan's verdict (records, where the valid data ends and why, CRC failures, store times) and
its findings (rows of the findings schema, files relative to the store root). A run scans again (whole, unless
resumed: below), with BODYCRC, the 5.x ``__CRC32#`` property and store-time checks
(``store.scan.scan_segment``, as the audit does):

* ``new``: a segment the state does not know;
* ``grown`` / ``resized``, ``modified``, ``followed``: its size, modification time, or whether a later segment
  exists changed — RocketMQ appends to a segment through its mapping (the time moves) until retention deletes
  it, so a live broker's last segment is scanned every run: *resumed*, when it can be, from where its last scan
  ended (below);
* ``bytes changed``: its sampled bytes differ while size and time did not — not the broker's doing
  (``scrub.segment_changed``, a warning);
* ``rotation``: of the rest, a rotating share. Each run earns credit worth 1/N of the unchanged segments'
  bytes and spends it on whole segments, the one scanned longest ago first; whatever a run does not spend
  carries to the next. So a run scans on average exactly 1/N of the old bytes (a store of 15 equal segments
  and N = 28: one segment in 15 runs of every 28, none in the others — never one a run, which would be 1/15),
  and every segment is scanned again within N runs (one whose last scan is N runs old is scanned whatever the
  credit). N = 28 (``ROTATION``) by default: with a nightly run, a full rotation takes four weeks.

Resumed scans. A broker appends to its last segment, preallocated and zero-filled (its size stays, its time
moves), and closes it with a BLANK when the next record does not fit. A segment's record keeps ``resume`` when
its scan may go on later where it ended (``store.scan.Carried``): the segment had no later one, the scan stopped
at a clean end a broker leaves while it appends or rolls (``store.scan.CLEAN_ENDS``: zero fill, a BLANK, the
file's end) with nothing valid after it, found nothing before it but BODYCRC failures (no damage, no misplaced
records) and no implausible store time (those are judged against the clock). It holds the position (that valid
end, a record boundary), the audit's state there (``codec.audit``'s slots: counts, first failures, the last
store time, the scan's clock), the first ``__CRC32#`` failures, how many of the findings lead the record's list
(the BODYCRC failures kept in full), the failures past the cap (``findings.FindingCap``: the first, the last,
how many), and the digest (``store.digests.PrefixDigests``: xxh3 of the bytes up to the position, then the
length) the driver adds after the scan. A later run whose reason is ``grown``, ``modified`` or ``followed`` (not
``resized``, ``bytes changed``, ``new``, ``rotation``), whose file is not shorter than the position and whose
bytes below it have that digest, scans only from the position on with that state carried (the task takes it to
wherever the scan runs, the scan starts its reader and audit from it): verdict and findings are exactly the
whole scan's — a time step across the position, the caps, the end and what follows it (BLANK or not, a later
segment or not) included — and the record the whole scan's (``checked_run`` this run: the digest vouches the
bytes below the position are those scanned). Anything else is scanned whole; a record without ``resume`` (an
older state's, a followed segment's, a DLedger one's) too. A scan whose clock is behind the carried one's is
made whole. The scrub's entry names a resumed segment's position (``resumed_from``) and counts the bytes from
there to the file's end as scanned.

The state file is one JSON document (type rocketstore-spark/scrub-state, version 2) for any number of stores,
keyed by the store's path, written atomically (``store.durable``) and never under a store. It is a cache: a state
an older release wrote (a lower version, whose digests this one cannot compare) is started over, as a first run.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from rocketstore_spark.codec.commitlog import Stop
from rocketstore_spark.documents import DocumentError, check, header, json_text
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.digests import PrefixDigests, new_hash
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.durable import write_text
from rocketstore_spark.store.scan import Carried, SegmentSummary, scan_segment
from rocketstore_spark.verify.store import relative

DOCUMENT_TYPE = "rocketstore-spark/scrub-state"
DOCUMENT_VERSION = 2            # 2: xxh3 digests (1: blake2b)
ROTATION = 28                   # runs per full rotation: four weeks of nightly runs
SAMPLE_BLOCKS = 64
BLOCK = 4096
VERDICT_FIELDS = ("records", "first_position", "valid_end", "data_end", "stop_reason", "stop_position",
                  "crc_failures", "first_crc_failure", "properties_crc_failures", "first_store_timestamp",
                  "last_store_timestamp")


def sample_digest(path: str, size: int) -> str:
    """The digest (``new_hash``) of the size and SAMPLE_BLOCKS blocks of BLOCK bytes at evenly spaced positions of the
    file (its first and last block among them), read with pread from a read-only descriptor."""
    h = new_hash()
    h.update(size.to_bytes(8, "big"))
    fd = os.open(path, os.O_RDONLY)
    try:
        last = max(0, size - BLOCK)
        for k in range(SAMPLE_BLOCKS):
            h.update(os.pread(fd, BLOCK, last * k // (SAMPLE_BLOCKS - 1)))
    finally:
        os.close(fd)
    return h.hexdigest()


@dataclass(frozen=True)
class SegmentTask:
    """One segment to scan again (small and picklable: it travels to a Spark task)."""
    root: str              # the directory findings name files relative to (``verify.store.store_root``)
    name: str              # the segment's file relative to ``root``
    path: str
    base_offset: int
    followed: bool         # a later segment exists
    reason: str            # why it is scanned (module docstring)
    next_path: str | None = None   # where the next segment lies when not beside it (a multi-path CommitLog)
    resume: dict | None = None     # resumed: what the last scan carries (``carried_task``), JSON as the state's


def check_segment(task: SegmentTask, run: int) -> dict:
    """Scan one segment (BODYCRC, ``__CRC32#``, store times) — whole, or resumed from ``task.resume`` — and record
    it as the state keeps it: size and time taken before the scan (bytes the broker appends meanwhile make the
    next run scan it again), the digest, the verdict and the findings, the whole scan's either way, and what a
    later scan may resume with (``resume``, without its prefix digest: the driver adds it). Runs where the
    segment is read (a thread, or a Spark executor): the merge with what is carried is the scan's own (the
    reader and the audit start from the carried state), so only the task's few hundred bytes travel."""
    st = os.stat(task.path)
    s = scan_segment(task.path, task.base_offset, check_crc=True, followed=task.followed,
                     check_properties_crc=True, check_times=True, next_path=task.next_path,
                     carried=_carried(task.resume) if task.resume else None)
    rec = {"name": task.name, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "followed": task.followed,
           "digest": sample_digest(task.path, st.st_size), "checked_run": run, "reason": task.reason,
           "resumed_from": s.resumed_from, "verdict": {k: getattr(s, k) for k in VERDICT_FIELDS},
           "findings": [relative(f, task.root).as_row() for f in s.findings]}
    if s.carry is not None and not task.followed:
        c = s.carry
        rec["resume"] = {"position": c.position, "state": list(c.state), "prop_failures": list(c.prop_failures),
                         "kept": len(c.findings),
                         "over": [[check, relative(first, task.root).as_row(), relative(last, task.root).as_row(),
                                   count] for check, first, last, count in c.over]}
    return rec


def carried_task(record: dict) -> dict:
    """What a task resuming a segment takes of the segment's record in the state (``check_segment``'s): its
    ``resume`` part, the verdict's counts, and the findings kept in full before the resume position."""
    r, v = record["resume"], record["verdict"]
    return {"position": r["position"], "records": v["records"], "first_position": v["first_position"],
            "state": r["state"], "prop_failures": r["prop_failures"], "over": r["over"],
            "findings": record["findings"][:r["kept"]]}


def _carried(resume: dict) -> Carried:
    return Carried(resume["position"], resume["records"], resume["first_position"], tuple(resume["state"]),
                   tuple(resume["prop_failures"]), tuple(Finding.from_row(f) for f in resume["findings"]),
                   tuple((check, Finding.from_row(first), Finding.from_row(last), count)
                         for check, first, last, count in resume["over"]))


def record_prefix(record: dict, path: str, prefixes) -> None:
    """Complete a scanned segment's record with the digest (``prefixes.digest``, ``store.digests.PrefixDigests``)
    of its bytes up to the resume position, what trusts them next run (driver). A run's digests go on from the
    lengths digested already: the plan's of the last position, the cross-checks' of the log's end."""
    if "resume" in record:
        record["resume"]["digest"] = prefixes.digest(path, record["resume"]["position"])


_STOPS = {stop.describe: stop for stop in Stop}


def segment_summary(record: dict) -> SegmentSummary:
    """The scan a segment's record (``check_segment``'s, as the state keeps it: JSON) stands for, without its
    findings (the record keeps those): what the recovery report's simulation reads of a scan (where the valid
    data ends and why, the first CRC failure), so that it does not scan again a segment the scrub just
    scanned (``rocketmq.recovery.QueueFeed.offer_scans``, as the audit hands it verify's)."""
    verdict = record["verdict"]
    return SegmentSummary(**{k: verdict[k] for k in VERDICT_FIELDS}, stop=_STOPS[verdict["stop_reason"]])


@dataclass
class SegmentPlan:
    """What a run does with one store's segments."""
    tasks: list[SegmentTask]          # to scan again, in segment order
    carried: dict[str, dict]          # name -> the state's record, for the segments not scanned
    changed: list[Finding]            # scrub.segment_changed
    credit: int                       # rotation credit (byte-runs: bytes x rotation) left for the next run
    order: list[str]                  # every segment's name, in CommitLog order


RESUMABLE = ("grown", "modified", "followed")


def plan_segments(layout: StoreLayout, root: str, previous: dict | None, run: int, rotation: int,
                  prefixes=None) -> SegmentPlan:
    """Which of the store's segments this run (number ``run`` of the store) scans again and why, from the
    store's previous state (``previous``: its ``segments`` and ``credit``; None for none), and from where: a
    segment with a ``resume`` record, grown, modified or followed, whose bytes up to its resume position have the
    recorded digest (``prefixes``: the run's ``store.digests.PrefixDigests``, shared with the cross-checks), is
    resumed there. Reads each unchanged segment's sampled blocks, and those prefixes; nothing else."""
    if prefixes is None:
        prefixes = PrefixDigests()
    known = (previous or {}).get("segments", {})
    tasks: list[SegmentTask] = []
    carried: dict[str, dict] = {}
    changed: list[Finding] = []
    candidates = []                                   # (last scanned run, k, task, record): rotation's choice
    order = []
    for k, seg in enumerate(layout.segments):
        name = os.path.relpath(seg.path, root)
        order.append(name)
        followed = layout.followed(k)
        st = os.stat(seg.path)
        old = known.get(name)
        reason = None
        if old is None:
            reason = "new"
        elif old["size"] != st.st_size:
            reason = "grown" if st.st_size > old["size"] else "resized"
        elif old["mtime_ns"] != st.st_mtime_ns:
            reason = "modified"
        elif old["followed"] != followed:
            reason = "followed"
        elif sample_digest(seg.path, st.st_size) != old["digest"]:
            reason = "bytes changed"
            changed.append(finding(
                "scrub.segment_changed", name, None,
                f"sampled bytes differ from the scrub's record of run {old['checked_run']} while the size "
                f"({st.st_size:,}) and modification time are the same: not written by the broker; scanned again",
                recorded_digest=old["digest"]))
        resume = None
        if reason in RESUMABLE and "digest" in (old.get("resume") or {}) \
                and st.st_size >= old["resume"]["position"] \
                and prefixes.digest(seg.path, old["resume"]["position"]) == old["resume"]["digest"]:
            resume = carried_task(old)
        task = SegmentTask(root, name, seg.path, seg.base_offset, followed, reason or "rotation", layout.next_path(k),
                           resume)
        if reason is None:
            candidates.append((old["checked_run"], k, task, old))
        else:
            tasks.append(task)
    # credit in byte-runs (bytes x rotation), whole numbers: a run earns the unchanged bytes, a segment scanned
    # costs its size times the rotation — exactly 1/N of the unchanged bytes a run, no rounding
    old_bytes = sum(rec["size"] for *_, rec in candidates)
    earned = (previous or {}).get("credit", 0) if (previous or {}).get("rotation") == rotation else 0
    credit = int(earned) + old_bytes
    waiting = False                                   # the oldest one did not fit: the younger ones wait too
    for last, _, task, rec in sorted(candidates, key=lambda c: c[:2]):
        cost = rec["size"] * rotation
        if run - last >= rotation or (cost <= credit and not waiting):
            tasks.append(task)
            credit = max(0, credit - cost)
        else:
            waiting = True
            carried[task.name] = rec
    # bounded: a store whose segments all changed for a while does not bank a rotation's worth of scans
    credit = min(credit, old_bytes * rotation)
    rank = {name: k for k, name in enumerate(order)}
    tasks.sort(key=lambda t: rank[t.name])
    return SegmentPlan(tasks, carried, changed, credit, order)


def files_signature(layout: StoreLayout) -> str:
    """A digest of every file's name, size, modification and change times and inode under the store (its root,
    or a bare CommitLog directory): what decides whether the cross-checks (queues, IndexFiles, offsets,
    checkpoint, the recovery report) run again or are carried over. The change time is what shows a file
    rewritten in place with its modification time put back (no call sets it back; ``verify.cross.file_stat``
    trusts files by the same four)."""
    top = str(layout.files.root or layout.files.commitlog_dir)
    h = new_hash()

    def walk(directory: str, rel: str) -> None:
        """The files of ``directory`` in name order, then its directories (not followed when links), as
        ``os.walk`` visits them; names relative to ``top`` without ``relpath`` (thousands of files a run)."""
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:                         # gone or unreadable since it was listed
            return
        subdirs = []
        for e in entries:
            try:
                if e.is_dir():
                    if not e.is_symlink():
                        subdirs.append(e)
                    continue
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:       # deleted while we walked (retention): a change all the same
                h.update(b"gone")
                continue
            h.update(f"{rel}{e.name}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_ino}\n"
                     .encode("utf-8", "surrogateescape"))
        for e in subdirs:
            walk(e.path, f"{rel}{e.name}{os.sep}")

    walk(top, "")
    return h.hexdigest()


def load_state(path: str) -> dict:
    """The state document at ``path``: an empty one when there is no file yet or it is a scrub state of an older
    version (a cache: started over); DocumentError when the file is something else, or a newer release's."""
    import json
    p = Path(path)
    if not p.exists():
        return header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {"stores": {}}
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise DocumentError(f"{path}: not a scrub state ({e})") from e
    if isinstance(obj, dict) and obj.get("document_type") == DOCUMENT_TYPE \
            and isinstance(obj.get("document_version"), int) and obj["document_version"] < DOCUMENT_VERSION:
        return header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {"stores": {}}
    return check(obj, DOCUMENT_TYPE, DOCUMENT_VERSION, path)


def save_state(path: str, state: dict) -> None:
    """The state document, atomically and durably (a crash leaves the old state or the new one), as compact
    JSON (json's C encoder: indented, a state of thousands of files costs a run tens of milliseconds); its
    directory is made when missing."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_text(Path(path), json_text(state, indent=None) + "\n")
