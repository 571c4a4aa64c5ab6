"""The repair plan: what to do, in order, so that a crashed store restarts without losing more than it must —
and, first, the export of every message the restart would lose (driver or CLI; reads the store read-only and
writes only into an output directory outside it).

``make_plan(store, output)`` writes ``OUTPUT/lost-messages.parquet`` (every column of the ``rocketmq`` source
for each valid, CRC-correct record at or after the recovery report's ``process_offset``: enough to publish
them again) and ``OUTPUT/plan.json``, a ``recovery.documents.Plan`` (its fields are described there). Its
actions, in order: export, cut the CommitLog where RocketMQ would, delete the later segments, rebuild
ConsumeQueues and IndexFiles from the cut log (``rebuild.output``), write a checkpoint that matches it, remove
``abort``. The plan carries the settings as resolved (every value, where it came from, the release and its
family, the broker.conf's sha256): ``apply`` follows them and re-reads nothing; it refuses a changed export.

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
from rocketstore_spark.lookup.export import Slice, export
from rocketstore_spark.recovery.documents import EXPORT, Plan, plan_path
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import StorePathError, discover
from rocketstore_spark.store.durable import write_json
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.files import uncopyable_entries
from rocketstore_spark.store.layout import ABORT, CHECKPOINT, CONSUMEQUEUE, INDEX
from rocketstore_spark.store.outputs import OutputError, outside_stores, store_roots


# the store's entries that are rebuilt, rewritten or removed by the apply, not copied
NOT_COPIED = (CONSUMEQUEUE, INDEX, CHECKPOINT, ABORT)

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


def make_plan(store: str, output: str | os.PathLike, *, options: dict | None = None,
              broker_conf: str | None = None, release_family: str | None = None) -> dict:
    """Export what a restart would lose and write the plan (module docstring) into ``output``; returns the
    plan document (``Plan.to_json()``). ``output`` must be outside the store and must not hold a plan yet."""
    layouts = discover(store)
    if len(layouts) != 1:
        raise StorePathError(f"{store}: names {len(layouts)} stores; a plan takes one")
    layout = layouts[0]
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
    out = outside_stores(output, store_roots(layouts), "plan directory")
    if plan_path(out).exists():
        raise OutputError(f"{plan_path(out)} already exists: give an empty or new directory")
    out.mkdir(parents=True, exist_ok=True)
    doc, _ = recovery_report(store, options=options, broker_conf=broker_conf, release_family=release_family)
    root = layout.files.base
    # the clean starts after this one would cut further (damage this start's walk skipped): the repair cuts
    # where the last of them would, so the repaired store starts cleanly every time, not only the next time
    end = doc["later_starts"][-1] if doc["later_starts"] else doc
    po = end["process_offset"]
    deleted = [f for start in (doc, *doc["later_starts"]) for f in start["commitlog_files_deleted"]]
    actions, touched, alternatives = [], [], []
    lost_file = out / EXPORT
    settings = resolve(layout, options, broker_conf)
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
                checksums={layout.files.relative(p): sha256(p) for p in touched if p.is_file()},
                actions=actions, alternatives=alternatives, report=doc)
    document = plan.to_json()
    write_json(plan_path(out), document)
    return document
