"""The repair plan: what to do, in order, so that a crashed store restarts without losing more than it must —
and, first, the export of every message the restart would lose (driver or CLI; reads the store read-only and
writes only into an output directory outside it).

``make_plan(store, output)`` writes ``OUTPUT/lost-messages.parquet`` (every column of the ``rocketmq`` source
for each valid, CRC-correct record at or after the recovery report's ``process_offset``: enough to publish
them again) and ``OUTPUT/plan.json``, a ``recovery.documents.Plan`` (its fields are described there). Its
actions, in order: export, cut the CommitLog where RocketMQ would, delete the later segments, rebuild
ConsumeQueues and IndexFiles from the cut log (``rebuild.output``), keep the store's own ConsumeQueue files of
the queues the rebuild would renumber (``keep_queues``: ``_repaired_queues``), with ``reset_offsets_past_end``
rewrite the committed consumer offsets past their queue's new end to that end (``config/consumerOffset.json``,
the old file kept as ``.bak`` as the broker's ConfigManager.persist keeps it), cut the BatchConsumeQueues
(``batchconsumequeue/``, 5.x ``queue.type=BatchCQ``) as RocketMQ 5.5.1's restart cuts them and say what each
loses, inner messages too (``cut_batch_queues``: ``_cut_batch_queues``), cut the timer files
(``cut_timers``), write a checkpoint that matches it, remove ``abort``.

A repair must not renumber a queue: every queue the restart keeps as RocketMQ's own files say (no entry
dispatched at another offset than its QUEUEOFFSET, no message left unreachable) keeps its min and max offset
(``kept_queues``). The plan places the kept log from scratch as the rebuild will (``rebuilt_queue_bounds``);
a queue that would come out with other offsets keeps RocketMQ's own files (a queue whose messages all
expired with their segments: no record of the log is its; records whose QUEUEOFFSET the files do not hold:
a header the body CRC does not cover), as the restart keeps them, or, when the restart also dispatches into
it, the plan refuses (``RepairRefused``, exit 2) rather than promise what the apply's gate would refuse. The
plan records every kept queue's offsets (``queues``) and the gate checks them.

The plan carries the settings as resolved (every value, where it came from, the release and its family, the
broker.conf's sha256): ``apply`` follows them and re-reads nothing; it refuses a changed export.

``recovery.apply`` carries it out (into a copy, or in place on request) and refuses a store whose inventory or
checksums changed since. Nothing here changes the store.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import os
from pathlib import Path

import numpy as np

from rocketstore_spark.codec.commitlog import MAX_SEGMENT_SIZE
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.lookup.export import Slice, export
from rocketstore_spark.recovery.documents import EXPORT, LOST_TIMERS, Plan, plan_path
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.rocketmq.recovery import Simulation, first_entry_at_or_above
from rocketstore_spark.rocketmq.releases import Family, family_named
from rocketstore_spark.rocketmq.settings import BrokerSettings, resolve
from rocketstore_spark.store.discovery import StoreLayout, StorePathError, discover
from rocketstore_spark.store.durable import write_json
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.files import read_consumer_offsets, uncopyable_entries
from rocketstore_spark.store.layout import ABORT, CHECKPOINT, CONSUMEQUEUE, INDEX, StoreMap, safe_component
from rocketstore_spark.store.outputs import OutputError, outside_stores, store_roots


# the store's entries that are rebuilt, rewritten or removed by the apply, not copied
NOT_COPIED = (CONSUMEQUEUE, INDEX, CHECKPOINT, ABORT)

class RepairRefused(ValueError):
    """A repair the plan cannot promise (it would renumber a queue): nothing was planned (exit 2)."""


def sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def inventory(root: Path) -> dict[str, list[int]]:
    """Every regular file under ``root``: relative path -> [size, mtime_ns] (symlinks are not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            out[os.path.relpath(path, root)] = [st.st_size, st.st_mtime_ns]
    return out


def dirty_after(path: Path, position: int) -> bool:
    """Whether segment ``path`` holds a non-zero byte at or after ``position`` (a torn record, damage, records
    past the end): such a tail is zero-filled by the cut, as a log RocketMQ ends cleanly is."""
    size = os.path.getsize(path)
    if position >= size:
        return False
    data = np.memmap(path, dtype=np.uint8, mode="r")
    step = 1 << 24
    return any(data[at:min(at + step, size)].any() for at in range(position, size, step))


Bounds = dict[tuple[str, int], tuple[int, int]]          # (topic, queue id) -> (min offset, max offset)


def rebuilt_queue_bounds(layout: StoreLayout, settings: BrokerSettings, end: int | None) -> Bounds:
    """The (min, max) offset of every queue the repair's rebuild writes from the records below ``end`` (the
    repaired log's end; None: none), as RocketMQ will load them: every entry placed from the log's start as the
    rebuild places them (``Simulation.place`` from no state: ``rocketmq.consumequeue.place_many``), nothing
    written (driver). The min is the first entry's offset — the first filler's where the log starts at 0
    (RocketMQ's correctMinOffset takes a filler, physical offset 0, for an entry then). A topic no directory
    can hold is not rebuilt (rebuild.unsafe_topic)."""
    if end is None or not layout.segments:
        return {}
    log_min = layout.segments[0].base_offset
    states = Simulation(layout, settings).place([], log_min, end, {})
    return {key: (st.file_start // ENTRY_SIZE if log_min <= 0 else st.first, st.max_offset)
            for key, st in states.items() if st.end >= 0 and safe_component(key[0])}


def kept_queues(doc: dict) -> Bounds:
    """The queues a recovery report says the restart keeps as RocketMQ's own files say — none of its entries
    dispatched at another offset than their QUEUEOFFSET, no message of it left unreachable (those the restart
    itself renumbers or loses; the repair places them at their QUEUEOFFSETs) — with their (min, max) offset
    after it; where a clean start after it cuts the log further (``later_starts``), the max ends at that
    start's first lost queue offset (``_repaired_queues`` also ends it at the first entry of the queue's files
    pointing at or past that cut: a record whose body fails its CRC is not counted lost)."""
    unreachable = {(q["topic"], q["queue_id"]) for q in doc["unreachable"]["queues"]}
    out = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]
           if not q["entries_moved"] and (q["topic"], q["queue_id"]) not in unreachable}
    for later in doc["later_starts"]:
        for q in later["lost"]["queues"]:
            key = (q["topic"], q["queue_id"])
            if key in out and q["first_queue_offset"] is not None:
                hi = min(out[key][1], q["first_queue_offset"])
                out[key] = (min(out[key][0], hi), hi)
    return out


def _repaired_queues(layout: StoreLayout, settings: BrokerSettings, doc: dict, end: int | None
                     ) -> tuple[Bounds, Bounds, list[dict]]:
    """(the queues the restart keeps as RocketMQ's files say, with their offsets; every queue of the repaired
    store with its offsets; the queues whose own files the repair keeps): ``RepairRefused`` naming the queues
    the repair would renumber.

    A kept queue the rebuild would give other offsets keeps RocketMQ's own files, as the restart leaves them
    (the files it does not delete, entries from its max offset on zeroed), when the restart dispatches nothing
    into it: every entry expired with its segment (no record of the log is the queue's), or records of the log
    carry QUEUEOFFSETs the files do not hold (a damaged header the body CRC does not cover) — RocketMQ keeps
    its entries there and serves by them. A queue the restart also dispatches into cannot be kept so."""
    kept = kept_queues(doc)
    rebuilt = rebuilt_queue_bounds(layout, settings, end)
    dispatched = {(q["topic"], q["queue_id"]): q["entries_dispatched"] for q in doc["consumequeues"]}
    deleted = {f for q in doc["consumequeues"] for f in q["files_deleted"]}

    def own_files(key) -> tuple[Path | None, list[tuple[str, int]]]:
        queue_dir = layout.files.queue_dir(*key) if layout.files.root is not None else None
        if queue_dir is None or not safe_component(key[0]) or not queue_dir.is_dir():
            return queue_dir, []
        return queue_dir, [(p, o) for p, o in StoreMap.queue_files(queue_dir) if layout.files.relative(p) not in deleted]

    if doc["later_starts"] and end is not None:
        for key, (lo, hi) in kept.items():
            cut = first_entry_at_or_above(own_files(key)[1], hi, end)
            if cut is not None and cut < hi:
                kept[key] = (min(lo, cut), cut)
    repaired, own, renumbered = dict(rebuilt), [], []
    for key, (lo, hi) in sorted(kept.items()):
        got = rebuilt.get(key, (0, 0))
        if got == (lo, hi) or not safe_component(key[0]):
            continue                    # (a topic no directory can hold: the rebuild says so, rebuild.unsafe_topic)
        queue_dir, paths = own_files(key)
        if key not in rebuilt and (queue_dir is None or not queue_dir.is_dir()):
            # a directory whose name is no UTF-8 (the report names it as displayed): nothing can write it under
            # that name, and RocketMQ reads it under another one; the repaired copy has no such queue
            del kept[key]
            continue
        files = [os.path.basename(p) for p, _ in paths]
        # RocketMQ loads no ConsumeQueue file of another size (MappedFileQueue.load): such a queue is not kept
        whole = all(os.path.getsize(queue_dir / f) == settings.consume_queue_file_size for f in files)
        if files and whole and not dispatched.get(key):
            own.append({"queue": layout.files.relative(queue_dir), "files": files, "max_offset": hi,
                        "rebuilt": None if key not in rebuilt else list(got)})
            repaired[key] = (lo, hi)
        else:
            renumbered.append(f"{key[0]}/{key[1]}: {lo}..{hi} after a restart, {got[0]}..{got[1]} rebuilt")
    if renumbered:
        more = f" (and {len(renumbered) - 3} more)" if len(renumbered) > 3 else ""
        raise RepairRefused(
            f"{layout.files.base}: a repair would renumber {len(renumbered)} queue(s) ({'; '.join(renumbered[:3])}"
            f"{more}): records of the log carry QUEUEOFFSETs their ConsumeQueue does not hold, and the restart "
            "dispatches records into the queue, so neither the rebuilt queue nor RocketMQ's own files keep its "
            "offsets; committed consumer offsets would point at other messages (`rocketstore recover report` says "
            "what a restart does)")
    return kept, repaired, own


def _offsets_past_end(layout: StoreLayout, repaired: Bounds) -> tuple[str | None, list[dict]]:
    """(the consumerOffset.json the broker would load, relative; every committed offset past its queue's end
    in the repaired store, with that end)."""
    if layout.files.root is None:
        return None, []
    read = read_consumer_offsets(layout.files)
    out = [{"consumer_group": group, "topic": topic, "queue_id": queue_id, "before": offset,
            "after": repaired[(topic, queue_id)][1]}
           for topic, group, queue_id, offset in read.rows
           if (topic, queue_id) in repaired and offset > repaired[(topic, queue_id)][1]]
    return (layout.files.relative(read.source) if read.source else None), out


def _cut_timers(layout: StoreLayout, settings: BrokerSettings, end: int | None, repaired: Bounds,
                out: Path) -> dict | None:
    """The ``cut_timers`` action (None when the store has no timer files or they need no change): the TimerLog
    and timer wheel cut to the CommitLog's new ``end`` (``rocketmq.timers.cut``: docs/format/timers.md says
    what RocketMQ does with them otherwise), and ``OUTPUT/lost-timers.parquet``: the timers a restart would
    have delivered whose message the cut loses (``lookup.timers``: due time, real topic and queue, uniq key)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from rocketstore_spark.lookup.timers import timers
    from rocketstore_spark.rocketmq.timers import cut
    from rocketstore_spark.store.timers import TIMER_TOPIC, read_wheel_slots
    files = layout.files
    if files.root is None or end is None or not (files.timerlog_files() or files.timerwheel_path.is_file()
                                                 or files.timercheck_path.is_file()):
        return None
    t = timers(layout)
    plan = cut(t.timerlog, read_wheel_slots(files.timerwheel_path), t.check, end,
               repaired.get((TIMER_TOPIC, 0), (0, 0))[1])
    lost = t.pending.filter(pc.greater(pc.add(t.pending["physical_offset"], pc.cast(t.pending["size"], "int64")), end))
    if not plan.changes and not lost.num_rows:
        return None
    lost_file = out / LOST_TIMERS
    pq.write_table(lost, lost_file)
    touched = [files.relative(files.timerlog_dir / name) for name in
               [*plan.files_deleted, *([plan.file_cut[0]] if plan.file_cut else [])]]
    if plan.slots:
        touched.append(files.relative(files.timerwheel_path))
    if plan.timercheck:
        touched.append(files.relative(files.timercheck_path))
    return {"action": "cut_timers", "timerlog_end": plan.end,
            "timerlog_cut": None if plan.file_cut is None else {
                "file": files.relative(files.timerlog_dir / plan.file_cut[0]), "at": plan.file_cut[1]},
            "timerlog_deleted": [files.relative(files.timerlog_dir / n) for n in plan.files_deleted],
            "units_dropped": int(len(plan.dropped)),
            "wheel": files.relative(files.timerwheel_path) if plan.slots else None,
            "wheel_slots": [list(s) for s in plan.slots],
            "timercheck": files.relative(files.timercheck_path) if plan.timercheck else None,
            "timercheck_fields": plan.timercheck,
            "lost_timers": {"file": LOST_TIMERS, "timers": lost.num_rows, "sha256": sha256(lost_file)},
            "touched": touched,
            "why": "TimerLog units past the cut point into a log that will be rewritten: RocketMQ's restart keeps "
                   "them (it never compares a unit with the CommitLog), and once the broker writes past the cut "
                   "it reads whatever lies there when their slot falls due; units whose message is gone are "
                   "dropped, the wheel slots that referred to them rewritten from the units kept, timercheck "
                   "brought within the new ends"}


def _batch_lost(lost_file: Path, topics: frozenset[str]) -> dict[tuple[str, int], np.ndarray]:
    """The units (``batchconsumequeue.UNIT_DTYPE``) RocketMQ's dispatch writes for the exported records
    (``lost_file``: what the cut loses that can be read), per BatchConsumeQueue (``rocketmq.batch_queues``)."""
    import pyarrow.parquet as pq

    from rocketstore_spark.rocketmq.batch_queues import UNIT_COLUMNS, expected_queues
    if not topics:
        return {}
    t = pq.read_table(lost_file, columns=list(UNIT_COLUMNS))
    return {(q.topic, q.queue_id): q.units for q in expected_queues(t, topics)}


def queue_loss(cut: np.ndarray, exported: np.ndarray | None) -> dict:
    """What one BatchConsumeQueue loses: the units its files lose (``cut``) and those of the exported records past
    its new end (``exported``: records the queue's files did not hold yet are lost too), one per base offset —
    outer records (``units``), the inner messages they hold (what a consumer receives: each unit's batch size)
    and their queue offsets; ``exported``: how many of them can be published again, ``unreadable``: how many
    are not in the export (a damaged record: its unit is all that is left of it)."""
    exported = exported if exported is not None else cut[:0]
    base = np.concatenate([cut["base_offset"], exported["base_offset"]]).astype(np.int64)
    size = np.concatenate([cut["batch_size"], exported["batch_size"]]).astype(np.int64)
    base, first = np.unique(base, return_index=True)
    size = size[first]
    if not len(base):
        return {"units": 0, "inner_messages": 0, "first_queue_offset": None, "last_queue_offset": None,
                "exported": 0, "unreadable": 0}
    return {"units": len(base), "inner_messages": int(size.sum()), "first_queue_offset": int(base[0]),
            "last_queue_offset": int((base + size).max()) - 1, "exported": len(exported),
            "unreadable": int((~np.isin(base, exported["base_offset"].astype(np.int64))).sum())}


def _cut_batch_queues(layout: StoreLayout, batch: list, po: int | None, later: bool, lost_file: Path
                      ) -> dict | None:
    """The ``cut_batch_queues`` action (None without BatchConsumeQueues): each queue's own files as RocketMQ
    5.5.1's restart leaves them (``rocketmq.batch_recovery``, the report's simulation ``batch``: recover,
    dispatch, ``truncateDirtyLogicFiles`` at the log's end, ``correctMinOffset``) — the files it deletes, its
    units from the end of those it keeps on zeroed (the restart only moves its write position there: a later
    restart would find and cut them again), the units its dispatch appends regenerated from the kept log by the
    apply and checked against the plan's sha256 — with the bounds it gives and what each queue loses (inner
    messages too). ``later``: a clean start after this one cuts the log further, at ``po``: the queues are cut
    there too, as that start does."""
    from rocketstore_spark.rocketmq.batch_queues import batch_topics
    from rocketstore_spark.rocketmq.batch_recovery import UNIT
    files = layout.files
    if files.root is None or not batch or po is None:
        return None
    log_min = layout.segments[0].base_offset if layout.segments else 0
    lost = _batch_lost(lost_file, batch_topics(files))
    queues, touched = [], []
    for b in batch:
        if later:
            b.truncate(po)
            b.bounds(log_min)
        kept_end = b.end if b.dispatch_at < 0 else min(b.end, b.dispatch_at)
        cuts = []
        for path, offset in b.files:
            if path is not None and offset + os.path.getsize(path) > kept_end:
                at = max(0, kept_end - offset)
                if dirty_after(Path(path), at):
                    cuts.append({"file": os.path.basename(path), "at": at})
                    touched.append(files.relative(path))
        dispatched = None
        if b.dispatch_at >= 0 and b.end > b.dispatch_at:
            units = b.unit_bytes(b.dispatch_at, b.end)
            dispatched = {"at": b.dispatch_at, "units": len(units) // UNIT,
                          "first_physical_offset": int(np.frombuffer(units[:8], ">i8")[0]), "to_physical_offset": po,
                          "sha256": hashlib.sha256(units).hexdigest()}
        deleted = [os.path.basename(p) for p in b.files_deleted]
        touched += [files.relative(p) for p in b.files_deleted]
        queue_lost = queue_loss(b.cut_units, lost.get(b.key))
        if not (cuts or dispatched or deleted or queue_lost["units"]):
            continue
        queues.append({"queue": files.relative(files.batch_queue_dir(*b.key)), "topic": b.topic,
                       "queue_id": b.queue_id, "files_deleted": deleted, "cut": cuts, "dispatch": dispatched,
                       "units_cut": b.units_cut, "max_offset_before": b.max_offset_on_disk,
                       "min_offset": b.min_offset, "max_offset": b.max_offset, "lost": queue_lost})
    if not queues:
        return None
    return {"action": "cut_batch_queues", "queues": queues, "touched": touched,
            "why": "BatchConsumeQueue units at or past the log's new end: RocketMQ 5.5.1's restart "
                   "(BatchConsumeQueue.truncateDirtyLogicFiles) deletes the files whose first unit points there and "
                   "ends each queue at its first unit that does; the repair leaves them as that restart does, the "
                   "units past the end zeroed, so the repaired store restarts without cutting anything. lost: the "
                   "outer records (units) and the inner messages a consumer would have received"}


def _refuse_mismatched_queue_types(layout: StoreLayout, family: Family) -> None:
    """``RepairRefused`` for a store with a queue directory of the other kind than its topic's queue.type
    (``verify.batch_queues.queue_type_mismatches``: a ``batchconsumequeue/`` queue of a topic the config does not
    give ``queue.type=BatchCQ``, ``batchcq.not_batch_topic``; a ``consumequeue/`` queue of one it does,
    ``batchcq.classic_queue_of_batch_topic``): RocketMQ 5.x does not load such a store, repaired or not, and the
    repair would carry the directory over."""
    from rocketstore_spark.verify.batch_queues import queue_type_mismatches
    found = queue_type_mismatches(layout.files, family)
    if not found:
        return
    fixes = {
        "batchcq.not_batch_topic": (
            "a BatchConsumeQueue of a topic config/topics.json does not give queue.type=BatchCQ; RocketMQ 5.x does "
            "not load such a store (ConsumeQueueStore.load: \"The queue type of topic ... should be BatchCQ, but is "
            "SimpleCQ\"): give the topic queue.type=BatchCQ, or move the directory out of the store"),
        "batchcq.classic_queue_of_batch_topic": (
            "a ConsumeQueue of a topic config/topics.json gives queue.type=BatchCQ; RocketMQ 5.x does not load "
            "such a store (ConsumeQueueStore.load: \"The queue type of topic ... should be SimpleCQ, but is "
            "BatchCQ\"): move the directory out of the store (the topic's queues are its batchconsumequeue/ "
            "ones), or, if the topic is meant to be SimpleCQ, remove its queue.type=BatchCQ")}
    parts = []
    for check, fix in fixes.items():
        dirs = [f.file for f in found if f.check == check]
        if dirs:
            parts.append(f"{', '.join(dirs[:3])}{' ...' if len(dirs) > 3 else ''}: {fix}")
    raise RepairRefused(f"{layout.files.base}: {'; '.join(parts)}; and plan again (`rocketstore verify`: "
                        f"{', '.join(c for c in fixes if any(f.check == c for f in found))})")


def make_plan(store: str, output: str | os.PathLike, *, options: dict | None = None,
              broker_conf: str | None = None, release_family: str | None = None,
              reset_offsets_past_end: bool = False) -> dict:
    """Export what a restart would lose and write the plan (module docstring) into ``output``; returns the
    plan document (``Plan.to_json()``). ``output`` must be outside the store and must not hold a plan yet.
    ``reset_offsets_past_end``: rewrite the committed consumer offsets beyond their queue's end in the repaired
    store to that end (without it they are only listed, in the plan's alternatives)."""
    layouts = discover(store)
    if len(layouts) != 1:
        raise StorePathError(f"{store}: names {len(layouts)} stores; a plan takes one")
    layout = layouts[0]
    settings = resolve(layout, options, broker_conf)    # broker.conf's engines (a multi-path CommitLog) first
    layout.refuse(Work.REPAIR)
    odd = uncopyable_entries(layout.root, NOT_COPIED) if layout.root is not None else []
    if odd:
        # decided here, not half-way through staging: the apply copies every entry but these names
        more = f" (and {len(odd) - 3} more)" if len(odd) > 3 else ""
        raise StorePathError("; ".join(f"{layout.root / rel}: {why}" for rel, why in odd[:3]) + more +
                             ": a repaired copy cannot hold it; move it out of the store (or replace the link by "
                             "what it points to) and plan again")
    giant = next((s for s in layout.segments if s.size > MAX_SEGMENT_SIZE), None)
    if giant is not None:
        # RocketMQ cannot load such a store, and checksumming a sparse file of that size has no bound
        raise StorePathError(f"{giant.path}: {giant.size} bytes, larger than any CommitLog segment RocketMQ writes "
                             "(mappedFileSizeCommitLog is a Java int): move it out of the store before planning a "
                             "repair")
    _refuse_mismatched_queue_types(layout, family_named(release_family) if release_family
                                   else settings.release.family)
    out = outside_stores(output, store_roots(layouts), "plan directory")
    if plan_path(out).exists():
        raise OutputError(f"{plan_path(out)} already exists: give an empty or new directory")
    doc, sim = recovery_report(store, options=options, broker_conf=broker_conf, release_family=release_family)
    end = doc["later_starts"][-1] if doc["later_starts"] else doc
    kept, repaired, own = _repaired_queues(layout, settings, doc, end["process_offset"])
    out.mkdir(parents=True, exist_ok=True)
    root = layout.files.base
    # the clean starts after this one would cut further (damage this start's walk skipped): the repair cuts
    # where the last of them would, so the repaired store starts cleanly every time, not only the next time
    po = end["process_offset"]
    deleted = [f for start in (doc, *doc["later_starts"]) for f in start["commitlog_files_deleted"]]
    actions, touched, alternatives = [], [], []
    lost_file = out / EXPORT
    # every valid, CRC-correct record from the end of the log on (no log at all: nothing)
    exported = export([layout], lost_file, Slice(from_offset=po or 0, crc_ok_only=True),
                      delay_levels=settings.message_delay_level)
    actions.append({"action": "export", "what": "every valid, CRC-correct message the restart would lose",
                    "file": str(lost_file), "messages": exported})
    if po is not None and end["stop"]["file"]:
        stop = root / end["stop"]["file"]
        if end["commitlog_bytes_cut"] or end["lost"]["messages"] or dirty_after(stop, end["stop"]["file_position"]):
            why = end["stop"]["reason"]
            if end is not doc:
                why = (f"{why}; the next start ends the log at {doc['process_offset']}, but a clean start after it "
                       f"walks from {end['start_file']} ({end['start_reason']}) and ends it here")
            actions.append({"action": "cut", "file": end["stop"]["file"], "at": end["stop"]["file_position"],
                            "why": why, "how": "zero the bytes from this position to the end of the segment"})
            if "BODYCRC" in (end["stop"]["reason"] or ""):
                alternatives.append(
                    "The log ends at a record whose body fails its CRC. Cutting there loses the valid messages "
                    "after it (exported). To keep them in the log instead, run the broker with "
                    "checkCRCOnRecover=false for as long as that record lies in the segments a start walks (a "
                    "clean start walks the last three): RocketMQ then reads on past the damaged record and serves "
                    "its corrupt body as it is; run `rocketstore recover report` with that setting first.")
            touched.append(stop)
    if deleted:
        actions.append({"action": "delete", "files": deleted,
                        "why": "segments after the end of the log, which RocketMQ deletes"})
        touched += [root / f for f in deleted]
    actions.append({"action": "rebuild", "what": "consumequeue/ and index/ from the cut CommitLog",
                    "how": "rocketstore rebuild (byte for byte what RocketMQ writes), then swap directories"})
    if own:
        actions.append({"action": "keep_queues", "queues": own,
                        "why": "ConsumeQueues rebuilt from the log would renumber these queues (their messages "
                               "expired with their segments, or records carry QUEUEOFFSETs their files do not "
                               "hold): RocketMQ's own files are kept as the restart leaves them (entries from "
                               "max_offset on zeroed), keeping every offset a consumer committed"})
        touched += [root / q["queue"] / name for q in own for name in q["files"]]
    source, past_end = _offsets_past_end(layout, repaired)
    if past_end and reset_offsets_past_end:
        # the file the broker loads is the one rewritten: with enableLmq, lmqConsumerOffset.json (both tables)
        lmq = layout.files.lmq_consumer_offsets_paths()
        main = layout.files.relative((lmq if source in {layout.files.relative(p) for p in lmq}
                                      else layout.files.consumer_offsets_paths())[0])
        actions.append({"action": "reset_offsets", "file": main, "read_from": source, "backup": main + ".bak",
                        "offsets": past_end,
                        "why": "committed offsets past their queue's end in the repaired store: rewritten to that "
                               "end (the max offset), the file before kept as .bak as the broker keeps it"})
        touched += [root / source] + [p for p in (*layout.files.consumer_offsets_paths(), *lmq) if p.is_file()]
    elif past_end:
        named = "; ".join(f"{o['consumer_group']} {o['topic']}/{o['queue_id']} at {o['before']}, the end "
                          f"{o['after']}" for o in past_end[:3])
        alternatives.append(
            f"{len(past_end)} committed consumer offsets in {source} point past their queue's end in the repaired "
            f"store ({named}{' ...' if len(past_end) > 3 else ''}): those consumers would skip the messages that "
            "will take the offsets between. Make the plan with --reset-offsets-past-end to rewrite them to the new "
            "max offset (the file before kept as .bak, as the broker keeps it).")
    batch_action = _cut_batch_queues(layout, sim.batch_queues, po, end is not doc, lost_file)
    if batch_action is not None:
        actions.append(batch_action)
        touched += [root / f for f in batch_action["touched"]]
    timers_action = _cut_timers(layout, settings, po, repaired, out)
    if timers_action is not None:
        actions.append(timers_action)
        touched += [root / f for f in timers_action["touched"]]
    for path in (layout.files.checkpoint_path, layout.files.abort_path):
        if path is not None and path.exists():
            touched.append(path)
    actions.append({"action": "write_checkpoint", "what": "physic/logics/index timestamps of the last record kept"})
    if doc["shutdown"] == "abnormal":
        actions.append({"action": "remove", "file": layout.files.relative(layout.files.abort_path),
                        "when": "after every other step succeeded"})
    made_at = dt.datetime.now(dt.timezone.utc)
    plan = Plan(plan_id=made_at.strftime("%Y%m%dT%H%M%S%fZ"), store=str(root), made_at=made_at.isoformat(),
                rocketmq_version=doc["rocketmq_version"], process_offset=po,
                settings={"options": dict(options or {}), "broker_conf": broker_conf and os.path.abspath(broker_conf),
                          "release_family": release_family, "resolved": settings.to_json()},
                export={"file": lost_file.name, "messages": exported, "sha256": sha256(lost_file)},
                inventory=inventory(root),
                checksums={layout.files.relative(p): sha256(p) for p in dict.fromkeys(touched) if p.is_file()},
                actions=actions, alternatives=alternatives,
                queues=[{"topic": t, "queue_id": q, "min_offset": lo, "max_offset": hi}
                        for (t, q), (lo, hi) in sorted(kept.items())],
                report=doc)
    document = plan.to_json()
    write_json(plan_path(out), document)
    return document
