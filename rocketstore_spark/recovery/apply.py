"""Carrying out a repair plan (``recovery.plan``): the repaired store is built whole under a staging name,
checked, then published with one rename, so a store is never a mix of old and new files (driver or CLI).

``apply_plan(plan_dir, output=DIR)`` — the default way — writes the repaired store to DIR, a new or empty
directory outside the store; the store itself is only read. ``apply_plan(plan_dir, in_place=True)`` replaces
the store: the repaired store is staged beside it (same parent directory, same filesystem; CommitLog segments
that do not change are hard links, so staging costs only what changes), then exchanged with it in one atomic
``renameat2(RENAME_EXCHANGE)``; the old store stays whole under the backup name (default
``NAME.before-repair-PLANID`` beside it) and ``rollback(plan_dir)`` exchanges it back.

The plan, the journal ``PLAN_DIR/apply.json`` and the receipt are ``recovery.documents``' typed documents; one
of another type or version is refused by name. The repaired store is built with the settings the plan records
(every value as resolved when it was made, the release and its family): nothing is resolved again. If the
broker.conf the plan was made from has changed (its sha256) or is gone, the apply is refused — the plan was
checked with the old settings and the broker will start with the new ones — unless asked to follow the plan's
own settings as they are (``follow_plan_settings``); make a new plan to follow the new file.

Steps, each recorded in the journal before it starts:

1. check    the plan's type and version; the broker.conf it was made from unchanged (above); its export
            present and unchanged (the messages a cut loses are safe first);
            no broker holding the store's ``lock``; every file the plan saw unchanged (size and mtime; the
            sha256 of those the actions change);
2. stage    the store's files copied (in place: segments hard-linked) except ``consumequeue/``, ``index/``,
            ``checkpoint``, ``abort`` and the segments the plan deletes; the cut segment copied up to the cut
            and zero-filled after it (as RocketMQ's own zero fill ends a log); the last segment always copied
            (the broker appends to it); ``consumequeue/`` and ``index/`` rebuilt from the staged CommitLog
            (``rebuild.output.write_rebuild``, the plan's settings: byte for byte what RocketMQ writes); the
            queues the plan keeps (``keep_queues``) get their own ConsumeQueue files back as the restart
            leaves them (entries from their max offset on zeroed); with a ``reset_offsets`` action,
            ``config/consumerOffset.json`` rewritten with the new offsets, the file before kept as
            ``consumerOffset.json.bak`` (ConfigManager.persist: 5.5.1 moves the file to .bak and writes the
            new one, 4.9.8's MixAll.string2File copies the previous content to .bak); the BatchConsumeQueues
            (copied, not rebuilt) cut as the plan's ``cut_batch_queues`` says (``_cut_batch_queues``); the
            timer files cut (``cut_timers``); a ``checkpoint`` whose times are the last kept record's; every
            file and directory fsynced;
3. gate     the recovery report of the staged store must say RocketMQ starts it normally, ends its log at the
            plan's ``process_offset``, and cuts, deletes and loses nothing; every queue the plan lists
            (``Plan.queues``: those the restart keeps as RocketMQ's files say) has the min and max offset the
            plan predicted — no queue renumbered; every BatchConsumeQueue the plan cuts the bounds it
            predicted; no reset consumer offset past its queue's end — otherwise nothing is published;
4. publish  a copy: staging renamed to OUTPUT. In place: staging and store exchanged, then the old store (now
            at the staging name) renamed to the backup name. Where the filesystem cannot exchange, two renames
            (store -> backup, staging -> store) with the journal saying which is done.

A run killed anywhere leaves the store whole (before the exchange) or repaired (after it) and OUTPUT absent or
complete; the next ``apply_plan`` removes a staging directory a killed run left, finishes a publication
interrupted after the exchange, and does nothing for a plan already applied. An error (no space left, an I/O
error) removes the staging directory and leaves everything as it was.
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import hashlib
import os
import shutil
import struct
import time
from pathlib import Path

from rocketstore_spark.codec import checkpoint as checkpoint_codec
from rocketstore_spark.codec import config_json
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.broker_conf import STORE_SETTINGS
from rocketstore_spark.documents import DocumentError
from rocketstore_spark.rebuild.output import write_rebuild
from rocketstore_spark.recovery.documents import Journal, Plan, Receipt, journal_path, plan_path
from rocketstore_spark.recovery.plan import NOT_COPIED, inventory, sha256
from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.rocketmq.settings import BrokerSettings, file_digest
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.durable import (fsync_dir, fsync_tree, publish, rename, temporary, write_json,
                                             write_text)
from rocketstore_spark.store.engines import UnsupportedStore, Work
from rocketstore_spark.store.files import read_checkpoint
from rocketstore_spark.store.layout import (StoreMap, offset_name, parse_offset_name, repair_backup, repair_kept,
                                            repair_staging)
from rocketstore_spark.store.outputs import OutputError, outside_stores
from rocketstore_spark.store.scan import scan_segment

CHUNK = 1 << 20
AT_FDCWD = -100
RENAME_EXCHANGE = 2


class ApplyRefused(ValueError):
    """The plan cannot be applied as asked (changed store, live broker, bad target): nothing was written."""


class ApplyFailed(RuntimeError):
    """Applying failed while staging or checking (no space, I/O error, a staged store RocketMQ would cut):
    the staging directory was removed and the store and target are as they were."""


def _reached(step: str) -> None:
    """Called after each step of an apply or rollback and after each staged file (``"file"``): the point
    where the fault-injection tests kill the process. Does nothing."""


# --------------------------------------------------------------------------------------------- durable I/O
# (store.durable: temporary name, fsync, rename, directory fsync)

def _copy_cut(src: str, dst: Path, at: int) -> None:
    """``src``'s first ``at`` bytes, then zeros to its full size (a segment keeps its preallocated size)."""
    size = os.path.getsize(src)
    with open(src, "rb") as fi, open(dst, "wb") as fo:
        left = at
        while left > 0:
            chunk = fi.read(min(CHUNK, left))
            if not chunk:
                break
            fo.write(chunk)
            left -= len(chunk)
        zeros = bytes(CHUNK)
        left = size - fo.tell()
        while left > 0:
            fo.write(zeros[:min(CHUNK, left)])
            left -= min(CHUNK, left)
        fo.flush()
        os.fsync(fo.fileno())
    shutil.copystat(src, dst)


def exchange(a: Path, b: Path) -> bool:
    """Swap the directory entries ``a`` and ``b`` in one atomic step (``renameat2(RENAME_EXCHANGE)``); False
    where the C library, kernel or filesystem cannot (then nothing happened)."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        fsync_dir(a.parent)
        if b.parent != a.parent:
            fsync_dir(b.parent)
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def broker_holds_lock(root: Path) -> bool:
    """Whether a process holds a POSIX lock on the store's ``lock`` file, as a running broker does
    (``FileChannel.tryLock``); asked with ``F_GETLK`` on a read-only descriptor, which takes no lock."""
    path = StoreMap.of_root(root).lock_path
    if not path.is_file():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        ask = struct.pack("hhqqi", fcntl.F_WRLCK, os.SEEK_SET, 0, 0, 0)
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, ask)
        return struct.unpack("hhqqi", answer)[0] != fcntl.F_UNLCK
    finally:
        os.close(fd)


def _ino(path: Path) -> int | None:
    try:
        return os.lstat(path).st_ino
    except FileNotFoundError:
        return None


# ------------------------------------------------------------------------------------------------- plan

def load_plan(plan_dir: Path) -> Plan:
    """The plan in ``plan_dir``; ApplyRefused when there is none, or it is not a plan of this version."""
    path = plan_path(plan_dir)
    if not path.is_file():
        raise ApplyRefused(f"{path}: no plan there (make one with `rocketstore recover plan STORE --output DIR`)")
    try:
        return Plan.load(path)
    except DocumentError as e:
        raise ApplyRefused(f"{e}: make a new plan") from None


def load_journal(path: Path) -> Journal | None:
    """The journal an earlier apply or rollback left at ``path``, or None; ApplyRefused when it is not a
    journal of this version."""
    if not path.is_file():
        return None
    try:
        return Journal.load(path)
    except DocumentError as e:
        raise ApplyRefused(f"{e}: finish or undo that run with the release that started it") from None


def plan_settings(plan: Plan) -> BrokerSettings:
    """The broker settings the plan was made and checked with, as it recorded them (nothing re-read)."""
    return BrokerSettings.from_json(plan.settings["resolved"])


def check_settings(plan: Plan, follow_plan_settings: bool) -> None:
    """The broker.conf the plan was made from must be as it was (its sha256): the repaired store is built
    with the plan's settings, and a broker started with other ones would treat it otherwise. ApplyRefused when
    it changed or is gone, unless ``follow_plan_settings`` says to build with the plan's settings anyway."""
    conf = plan.settings["resolved"].get("broker_conf")
    if conf is None or follow_plan_settings:
        return
    path = conf["path"]
    now = file_digest(path) if os.path.isfile(path) else None
    if now != conf["sha256"]:
        raise ApplyRefused(f"{path}: the broker.conf the plan was made from {'changed' if now else 'is gone'} since "
                           f"(sha256 {conf['sha256'][:12]}… then, {now[:12] + '…' if now else 'no file'} now); the "
                           "plan was checked with the settings it records, not with the new file: make a new plan "
                           "to follow the new settings, or apply with the plan's own settings as they are "
                           "(follow_plan_settings)")


def check_store(plan: Plan, plan_dir: Path) -> None:
    """Step 1 (module docstring): ApplyRefused naming what is wrong."""
    store = Path(plan.store)
    if not store.is_dir():
        raise ApplyRefused(f"{store}: the plan's store is not there")
    export = plan_dir / plan.export["file"]
    if not export.is_file() or sha256(export) != plan.export["sha256"]:
        raise ApplyRefused(f"{export}: the export of the messages the repair loses is missing or changed; it is "
                           "what makes the cut safe: make a new plan")
    try:
        discover(str(store))[0].refuse(Work.REPAIR)        # an engine written since the plan, or not classic at all
    except UnsupportedStore as e:
        raise ApplyRefused(str(e)) from None
    if broker_holds_lock(store):
        raise ApplyRefused(f"{StoreMap.of_root(store).lock_path}: a process holds the store's lock — a broker is "
                           "running on it; stop it first")
    now = inventory(store)
    seen = plan.inventory
    changed = sorted(set(now) ^ set(seen)) + sorted(p for p in set(now) & set(seen) if now[p] != seen[p])
    if changed:
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        raise ApplyRefused(f"{store}: the store changed since the plan was made ({', '.join(changed[:3])}{more}): "
                           "make a new plan")
    for rel, digest in plan.checksums.items():
        if sha256(store / rel) != digest:
            raise ApplyRefused(f"{store / rel}: its content changed since the plan was made: make a new plan")


# ---------------------------------------------------------------------------------------------- staging

def stage(plan: Plan, staging: Path, settings: BrokerSettings, link: bool) -> dict:
    """Step 2 into ``staging`` (which must not exist): what was staged."""
    store = Path(plan.store)
    report = plan.report
    deleted = set((plan.action("delete") or {"files": []})["files"])
    cut = plan.action("cut")
    layout = discover(str(store))[0]
    kept = [layout.files.relative(s.path) for s in layout.segments if layout.files.relative(s.path) not in deleted]
    appended_to = kept[-1] if kept else None
    staging.mkdir()
    counts = {"copied": 0, "linked": 0, "cut": 0}
    for dirpath, dirnames, filenames in os.walk(store):
        rel_dir = os.path.relpath(dirpath, store)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in NOT_COPIED]
        dirnames.sort()
        for d in dirnames:
            (staging / rel_dir / d).mkdir()
            shutil.copystat(os.path.join(dirpath, d), staging / rel_dir / d)
        for name in sorted(filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in NOT_COPIED or rel in deleted:
                continue
            src, dst = os.path.join(dirpath, name), staging / rel
            if os.path.islink(src):
                os.symlink(os.readlink(src), dst)
            elif cut is not None and rel == cut["file"]:
                _copy_cut(src, dst, cut["at"])
                counts["cut"] += 1
            elif link and rel in kept and rel != appended_to and _link(src, dst):
                counts["linked"] += 1
            else:
                shutil.copy2(src, dst)
                counts["copied"] += 1
            _reached("file")
    staged = discover(str(staging))[0]
    # the BatchConsumeQueues are the store's own, cut as the restart cuts them (_cut_batch_queues), not rebuilt
    queues, index_files, _, findings = write_rebuild(staged, staging, settings, batch_queues=False)
    counts |= {"consumequeues": len(queues), "index_files": len(index_files),
               "rebuild_findings": [f.as_row() for f in findings if f.severity != "info"],
               "kept_queues": _keep_queues(plan, store, staging),
               "offsets_reset": _reset_offsets(plan, store, staging),
               "timer_slots_rewritten": _cut_timers(plan, staging),
               "batch_queues_cut": _cut_batch_queues(plan, staging, staged, settings)}
    last_ms = _last_store_time(staged)
    original = read_checkpoint(layout.files).checkpoint
    index_ms = _newest_index_end(staged.files, index_files)
    staged.files.checkpoint_path.write_bytes(_checkpoint(original, last_ms, index_ms, plan.process_offset or 0,
                                                     report))
    fsync_tree(staging)
    return counts


def _keep_queues(plan: Plan, store: Path, staging: Path) -> int:
    """The plan's ``keep_queues``: each queue's own ConsumeQueue files in place of what the rebuild wrote for
    it, as the restart leaves them — the files it keeps, entries from the queue's max offset on zeroed (each
    file keeps its size); how many queues."""
    keep = plan.action("keep_queues")
    for q in keep["queues"] if keep else ():
        shutil.rmtree(staging / q["queue"], ignore_errors=True)
        (staging / q["queue"]).mkdir(parents=True)
        for name in q["files"]:
            src = store / q["queue"] / name
            _copy_cut(str(src), staging / q["queue"] / name,
                      max(0, q["max_offset"] * ENTRY_SIZE - parse_offset_name(name)))
    return len(keep["queues"]) if keep else 0


def _reset_offsets(plan: Plan, store: Path, staging: Path) -> int:
    """The plan's ``reset_offsets``: the consumer offsets file the broker would load, with the offsets past
    their queue's end set to it, written in place of the staged ``consumerOffset.json``, whose content before
    goes to ``consumerOffset.json.bak`` (ConfigManager.persist); how many offsets."""
    reset = plan.action("reset_offsets")
    if reset is None:
        return 0
    text = (store / reset["read_from"]).read_bytes().decode("utf-8", "replace")
    offsets = {(o["topic"], o["consumer_group"], o["queue_id"]): o["after"] for o in reset["offsets"]}
    main, bak = staging / reset["file"], staging / reset["backup"]
    if main.is_file():
        tmp = temporary(bak)
        shutil.copyfile(main, tmp)
        publish(tmp, bak)
    write_text(main, config_json.with_consumer_offsets(text, offsets))
    return len(offsets)


def _cut_timers(plan: Plan, staging: Path) -> int:
    """The plan's ``cut_timers`` on the staged copies of the timer files: the TimerLog files past its new end
    removed, the one holding it zero-filled from there, the wheel slots rewritten (32 bytes each, big-endian),
    timercheck's fields rewritten in place; how many slots."""
    act = plan.action("cut_timers")
    if act is None:
        return 0
    for rel in act["timerlog_deleted"]:
        (staging / rel).unlink(missing_ok=True)
    if act["timerlog_cut"]:
        path = staging / act["timerlog_cut"]["file"]
        tmp = temporary(path)
        _copy_cut(str(path), tmp, act["timerlog_cut"]["at"])
        publish(tmp, path)
    if act["wheel"]:
        with open(staging / act["wheel"], "r+b") as f:
            for index, *values in act["wheel_slots"]:
                f.seek(index * 32)
                f.write(struct.pack(">qqqii", *values))
            f.flush()
            os.fsync(f.fileno())
    if act["timercheck"]:
        at = {"last_read_time_ms": 0, "last_timerlog_flush_pos": 8, "last_timer_queue_offset": 16,
              "master_timer_queue_offset": 24}
        with open(staging / act["timercheck"], "r+b") as f:
            for name, value in act["timercheck_fields"].items():
                f.seek(at[name])
                f.write(struct.pack(">q", value))
            f.flush()
            os.fsync(f.fileno())
    return len(act["wheel_slots"])


def _cut_batch_queues(plan: Plan, staging: Path, staged: StoreLayout, settings: BrokerSettings) -> int:
    """The plan's ``cut_batch_queues`` on the staged copies of the BatchConsumeQueue files: the files the restart
    deletes removed, units from each queue's kept end on zeroed, and the units the restart's dispatch appends
    written from the staged (cut) log — regenerated by ``rocketmq.batch_queues`` and checked against the plan's
    sha256 (ApplyFailed otherwise) —, files created full size as the dispatch creates them; how many queues."""
    from rocketstore_spark.rocketmq.batch_queues import batch_file_size, dispatched_records, expected_queues
    act = plan.action("cut_batch_queues")
    if act is None:
        return 0
    size = batch_file_size(staged.files, settings)
    for q in act["queues"]:
        qdir = staging / q["queue"]
        for name in q["files_deleted"]:
            (qdir / name).unlink(missing_ok=True)
        for cut in q["cut"]:
            path = qdir / cut["file"]
            tmp = temporary(path)
            _copy_cut(str(path), tmp, cut["at"])
            publish(tmp, path)
        d = q["dispatch"]
        if d is None:
            continue
        topic = frozenset({q["topic"]})
        records = dispatched_records(staged, topic, None, settings.message_delay_level, d["first_physical_offset"],
                                     d["to_physical_offset"])
        units = next((b.units for b in expected_queues(records, topic) if b.queue_id == q["queue_id"]), None)
        data = b"" if units is None else units[:d["units"]].tobytes()
        if hashlib.sha256(data).hexdigest() != d["sha256"]:
            raise ApplyFailed(f"{qdir}: the units the restart dispatches from the kept log are not those the plan "
                              "saw (the staged log differs from the store's below the cut); nothing was published")
        qdir.mkdir(parents=True, exist_ok=True)
        at = d["at"]
        while data:
            offset = at - at % size
            path = qdir / offset_name(offset)
            if not path.exists():
                with open(path, "wb") as f:
                    f.truncate(size)
            n = min(len(data), offset + size - at)
            with open(path, "r+b") as f:
                f.seek(at - offset)
                f.write(data[:n])
                f.flush()
                os.fsync(f.fileno())
            data, at = data[n:], at + n
    return len(act["queues"])


def _link(src: str, dst: Path) -> bool:
    try:
        os.link(src, dst)
        return True
    except OSError as e:
        if e.errno in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            return False                     # a filesystem without hard links here: copied instead
        raise


def _last_store_time(layout: StoreLayout) -> int:
    """The store time of the last record of the staged (cut) CommitLog; 0 when it holds none."""
    for k in range(len(layout.segments) - 1, -1, -1):
        seg = layout.segments[k]
        s = scan_segment(seg.path, seg.base_offset, check_crc=False, followed=layout.followed(k))
        if s.records and s.last_store_timestamp is not None:
            return s.last_store_timestamp
    return 0


def _newest_index_end(files: StoreMap, names: list[str]) -> int:
    """The end timestamp of the newest rebuilt IndexFile (0 without one)."""
    if not names:
        return 0
    with open(files.index_path(sorted(names)[-1]), "rb") as f:
        return int(indexfile.decode_header(f.read(indexfile.HEADER_SIZE))["end_timestamp"])


def _checkpoint(original: dict | None, last_ms: int, index_ms: int, process_offset: int, report: dict) -> bytes:
    """The staged store's checkpoint: everything up to the last kept record is in the CommitLog and the
    ConsumeQueues, so their times are that record's; the index time is the newest IndexFile's end timestamp,
    as the broker sets it when it flushes an IndexFile (the last records may have no keys). 5.x offsets are
    kept, bounded by the new end of the log (the 5.5.x logics offset becomes that end: dispatch is complete);
    a 4.x checkpoint keeps its 5.x bytes zero (they tell a 5.x store)."""
    fields = {"physic_msg_timestamp": last_ms, "logics_msg_timestamp": last_ms, "index_msg_timestamp": index_ms}
    if original and report["rocketmq_version"] != "4.9.x":
        for name in ("master_flushed_offset", "confirm_phy_offset"):
            fields[name] = min(original[name], process_offset)
        if original["logics_physical_offset"] > 0:
            fields["logics_physical_offset"] = process_offset
    return checkpoint_codec.encode(**fields)


def gate(plan: Plan, staging: Path, settings: BrokerSettings) -> dict:
    """Step 3: the staged store's recovery report, or ApplyFailed saying what RocketMQ would still do."""
    options = {k: settings.values[k] for k in STORE_SETTINGS} | {"rocketmqVersion": str(settings.release)}
    doc, _ = recovery_report(str(staging), options=options, release_family=plan.settings["release_family"])
    problems = []
    if doc["shutdown"] != "normal":
        problems.append("it would start as after a crash")
    if doc["process_offset"] != plan.process_offset:
        problems.append(f"its log would end at {doc['process_offset']}, not {plan.process_offset} "
                        f"({doc['stop']['file']} at {doc['stop']['file_position']}: {doc['stop']['reason']})")
    if harmful(doc) or doc["index_files_deleted"]:
        problems.append(f"it would still cut or lose data (lost {doc['lost']['messages']} messages, "
                        f"{doc['commitlog_bytes_cut']} CommitLog bytes cut, IndexFiles deleted "
                        f"{doc['index_files_deleted']})")
    got = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]}
    moved = [f"{q['topic']}/{q['queue_id']} {q['min_offset']}..{q['max_offset']} -> "
             f"{'..'.join(map(str, got.get((q['topic'], q['queue_id']), (0, 0))))}"
             for q in plan.queues
             if got.get((q["topic"], q["queue_id"]), (0, 0)) != (q["min_offset"], q["max_offset"])]
    if moved:
        problems.append(f"it would renumber {len(moved)} queue(s) ({'; '.join(moved[:3])}"
                        f"{' ...' if len(moved) > 3 else ''})")
    batch = plan.action("cut_batch_queues")
    got_batch = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["batchconsumequeues"]}
    moved_batch = [f"{q['queue']} {q['min_offset']}..{q['max_offset']} -> "
                   f"{'..'.join(map(str, got_batch.get((q['topic'], q['queue_id']), (-1, 0))))}"
                   for q in (batch["queues"] if batch else ())
                   if got_batch.get((q["topic"], q["queue_id"]), (-1, 0)) != (q["min_offset"], q["max_offset"])]
    if moved_batch:
        problems.append(f"{len(moved_batch)} BatchConsumeQueue(s) would not have the bounds the plan predicted "
                        f"({'; '.join(moved_batch[:3])}{' ...' if len(moved_batch) > 3 else ''})")
    if plan.action("reset_offsets") and doc["consumer_offsets_past_end"]:
        problems.append(f"{len(doc['consumer_offsets_past_end'])} consumer offsets still past their queue's end")
    if problems:
        raise ApplyFailed(f"the repaired store was not published: RocketMQ would not start it cleanly: "
                          f"{'; '.join(problems)}")
    return doc


# ---------------------------------------------------------------------------------------------- apply

def apply_plan(plan_dir: str | os.PathLike, *, output: str | os.PathLike | None = None, in_place: bool = False,
               backup: str | os.PathLike | None = None, follow_plan_settings: bool = False) -> dict:
    """Apply the plan in ``plan_dir`` (module docstring): into ``output`` (a new or empty directory outside
    the store), or with ``in_place`` onto the store itself keeping the old one at ``backup``. The repaired store
    is built with the settings the plan records; a broker.conf changed since the plan refuses the apply unless
    ``follow_plan_settings`` (``check_settings``). Returns the receipt (``Receipt.to_json()``; the journal is
    in ``plan_dir/apply.json``). Raises ApplyRefused or ApplyFailed with one-line reasons."""
    started = time.monotonic()
    plan_dir = Path(os.path.abspath(plan_dir))
    plan = load_plan(plan_dir)
    store = Path(plan.store)
    if in_place == (output is not None):
        raise ApplyRefused("give either an output directory (a repaired copy) or in-place, not both or neither")
    pid = plan.plan_id
    if in_place:
        target = store
        backup = Path(os.path.abspath(backup)) if backup else repair_backup(store, pid)
    else:
        try:
            target = outside_stores(output, [store], "repaired store's directory")
        except OutputError as e:
            raise ApplyRefused(str(e)) from None
        backup = None
    staging = repair_staging(target, pid)
    path = journal_path(plan_dir)
    journal = load_journal(path)

    if journal is not None and journal.phase != "staging" and journal.target != str(target):
        raise ApplyRefused(f"{path}: this plan was applied into {journal.target} already; make a new "
                           "plan to repair the store elsewhere")
    if journal is not None:
        done = _resume(journal, path)
        if done is not None:
            return done.to_json()
    _check_target(plan, target, staging, backup, in_place)
    check_settings(plan, follow_plan_settings)
    check_store(plan, plan_dir)
    settings = plan_settings(plan)
    journal = Journal(phase="staging", mode="in-place" if in_place else "copy", plan_id=pid, store=str(store),
                      target=str(target), staging=str(staging), backup=backup and str(backup),
                      settings=plan.settings["resolved"])
    write_json(path, journal.to_json())
    try:
        staged = stage(plan, staging, settings, link=in_place)
        _reached("staged")
        after = gate(plan, staging, settings)
        _reached("checked")
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        path.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise ApplyFailed(f"{e.filename or staging}: {e.strerror or e} while building the repaired store; "
                              f"nothing was changed and the staging directory was removed") from e
        raise
    journal.phase, journal.staging_ino, journal.store_ino = "staged", _ino(staging), _ino(store)
    journal.staged, journal.process_offset, journal.lost_messages = staged, plan.process_offset, plan.export["messages"]
    journal.recovery_after = {k: after[k] for k in ("shutdown", "start_file", "process_offset", "stop")}
    write_json(path, journal.to_json())
    _reached("journaled")
    receipt = _publish(journal, path).receipt(seconds=round(time.monotonic() - started, 3))
    return receipt.to_json()


def _check_target(plan: Plan, target: Path, staging: Path, backup: Path | None, in_place: bool) -> None:
    store = Path(plan.store)
    if in_place:
        parent = store.parent
        if os.stat(store).st_dev != os.stat(parent).st_dev:
            raise ApplyRefused(f"{store} is a mount point: an in-place repair swaps the store directory with its "
                               "repaired copy in one rename, which a mount point cannot take; apply into a copy "
                               "(--output DIR) and move it yourself")
        if not os.access(parent, os.W_OK):
            raise ApplyRefused(f"{parent}: not writable: an in-place repair stages the repaired store there")
        if backup.exists():
            raise ApplyRefused(f"{backup}: the backup's place is taken: give another one")
        if backup.parent != store.parent and os.stat(backup.parent).st_dev != os.stat(store.parent).st_dev:
            raise ApplyRefused(f"{backup}: the backup must be on the store's filesystem (the old store is moved "
                               "there, not copied)")
        try:
            outside_stores(backup, [store], "backup")
        except OutputError as e:
            raise ApplyRefused(str(e)) from None
    elif target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ApplyRefused(f"{target}: exists and is not an empty directory: give a new one")
    if staging.exists():                     # a killed run's leftovers (its journal said so, or was lost)
        shutil.rmtree(staging)


def _publish(journal: Journal, path: Path) -> Journal:
    """Step 4 from a staged journal; also finishes one interrupted part-way (the inodes say how far)."""
    staging, target = Path(journal.staging), Path(journal.target)
    new_ino, old_ino = journal.staging_ino, journal.store_ino
    if journal.mode == "copy":
        if _ino(target) != new_ino:
            if target.is_dir() and not any(target.iterdir()):
                target.rmdir()
            rename(staging, target)
    else:
        backup = Path(journal.backup)
        if _ino(target) == old_ino and _ino(staging) == new_ino:
            if broker_holds_lock(target):
                raise ApplyRefused(f"{StoreMap.of_root(target).lock_path}: a broker started on the store meanwhile; "
                                   "stop it first")
            if exchange(staging, target):
                _reached("exchanged")
            else:
                journal.exchange = "two renames (the filesystem cannot exchange)"
                rename(target, backup)
                _reached("moved-old")
        if _ino(target) is None and _ino(backup) == old_ino:
            rename(staging, target)             # the second of the two renames
        if _ino(target) == new_ino and _ino(staging) == old_ino:
            rename(staging, backup)
        if not (_ino(target) == new_ino and _ino(backup) == old_ino):
            raise ApplyFailed(f"{target}: neither the store nor its repaired copy is where the journal "
                              f"{path} says; nothing more was done (look at {staging} and {backup})")
    journal.phase = "applied"
    journal.applied_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    write_json(path, journal.to_json())
    _reached("applied")
    return journal


def _resume(journal: Journal, path: Path) -> Receipt | None:
    """What a journal left by an earlier run means: the receipt of a finished apply, a finished publication,
    or None (start again: a staging a killed run left is removed)."""
    if journal.phase == "applied":
        if _ino(Path(journal.target)) == journal.staging_ino:
            return journal.receipt(already_applied=True)
        raise ApplyRefused(f"{path}: this plan was applied, but {journal.target} is no longer the "
                           "store it made: make a new plan")
    if journal.phase in ("rolled-back", "rolling-back"):
        raise ApplyRefused(f"{path}: this plan was applied and rolled back: make a new plan")
    if journal.phase == "staged":
        return _publish(journal, path).receipt()
    shutil.rmtree(journal.staging, ignore_errors=True)        # "staging": killed while staging or checking
    path.unlink(missing_ok=True)
    return None


def rollback(plan_dir: str | os.PathLike) -> dict:
    """Undo an in-place apply: the old store (at the backup name) goes back in place, the repaired one is kept
    as ``NAME.repaired-PLANID`` beside it. Anything a broker wrote to the repaired store since stays there.
    Returns the receipt (``Receipt.to_json()``)."""
    plan_dir = Path(os.path.abspath(plan_dir))
    path = journal_path(plan_dir)
    journal = load_journal(path)
    if journal is None:
        raise ApplyRefused(f"{plan_dir}: this plan was never applied")
    if journal.mode != "in-place":
        raise ApplyRefused(f"{plan_dir}: this plan was applied into a copy ({journal.target}); the store "
                           "itself was never changed: delete the copy if it is not wanted")
    target, backup = Path(journal.target), Path(journal.backup)
    kept = repair_kept(target, journal.plan_id)
    new_ino, old_ino = journal.staging_ino, journal.store_ino
    if journal.phase == "applied":
        if _ino(target) != new_ino or _ino(backup) != old_ino:
            raise ApplyRefused(f"{target}: the repaired store or the backup {backup} was moved since the apply; "
                               "nothing was done")
    elif journal.phase != "rolling-back":
        raise ApplyRefused(f"{plan_dir}: nothing to roll back (the apply is {journal.phase})")
    if _ino(target) == new_ino and _ino(backup) == old_ino:
        if broker_holds_lock(target):
            raise ApplyRefused(f"{StoreMap.of_root(target).lock_path}: a broker is running on the store; stop it "
                               "first")
        journal.phase, journal.repaired_kept = "rolling-back", str(kept)
        write_json(path, journal.to_json())
        if exchange(backup, target):
            _reached("exchanged-back")
        else:
            rename(target, kept)
            _reached("moved-repaired")
    if _ino(target) is None and _ino(kept) == new_ino:
        rename(backup, target)
    if _ino(target) == old_ino and _ino(backup) == new_ino:
        rename(backup, kept)
    if not (_ino(target) == old_ino and _ino(kept) == new_ino):
        raise ApplyFailed(f"{target}: the stores are not where the journal {path} says; nothing more "
                          "was done")
    journal.phase = "rolled-back"
    write_json(path, journal.to_json())
    return journal.receipt().to_json()
