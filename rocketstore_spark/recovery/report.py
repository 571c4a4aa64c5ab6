"""The recovery report: what RocketMQ would do to a store on its next start, as one versioned JSON-ready
document (driver or CLI; reads the store read-only, writes nothing).

``recovery_report(path)`` runs ``rocketmq.recovery`` with the settings ``rocketmq.settings.resolve`` gives
(options > broker.conf > what the files show > RocketMQ's defaults) and returns the document; its top level
(``documents.header``: type rocketstore-spark/recovery-report, ``DOCUMENT_VERSION`` 1):

    rocketmq_version        the release family mirrored (4.9.x, 5.0-5.3.1, 5.3.2-5.3.x, 5.5.x) and why
    shutdown                "normal" or "abnormal" (the abort file), with the checkpoint and its minimum
    start_file, walk        the segment the CommitLog walk starts at and why; the segments it reads
    process_offset          where the CommitLog will end
    stop                    file, file_position and reason the walk stops
    commitlog_files_deleted, commitlog_bytes_cut
    batchconsumequeues      per BatchConsumeQueue (5.x queue.type=BatchCQ; rocketmq.batch_recovery): max_offset and
                            min_offset after the restart, max_offset_on_disk (its recovery alone),
                            max_physical_offset (maxMsgPhyOffsetInCommitLog), units (held after it),
                            units_cut, files_deleted,
                            units_dispatched
    consumequeues           per queue: max_offset and min_offset after recovery (getMaxOffsetInQueue,
                            getMinOffsetInQueue), the max before it, entries cut, files deleted, entries
                            dispatched again, entries_moved (dispatched at another queue offset than their
                            QUEUEOFFSET: the restart renumbers them)
    index_files_deleted
    dispatch                the physical offset range dispatched again
    lost                    valid, CRC-correct messages at or after process_offset: count, offsets, store
                            times, per topic and per queue (a BatchCQ topic's queue also ``inner_messages``: the
                            messages its lost records hold, an inner batch's INNER_NUM each)
    unreachable             messages the log keeps that no queue reaches after the restart (their queue's files
                            are gone or end before them, and the restart does not dispatch them again): count,
                            physical offsets, per queue, and the remedy
    consumer_offsets_past_end   committed offsets beyond their queue's end after recovery
    later_starts            the clean starts after this one that would cut the log further, in order (a
                            crash recovery that skipped damage a clean start walks again): each one's
                            start_file, start_reason, walk, process_offset, stop, commitlog_files_deleted,
                            commitlog_bytes_cut and lost, as above

A DLedger store (``rocketmq.dledger_recovery``; ``store_type`` "dledger") adds: ``dledger`` (DLedger's own
recovery: begin/end/committed index, write and committed pos, where and why the ledger ends, index units
truncated and the first rewritten, data files deleted), ``dledger_crash_walk`` (DLedgerCommitLog's walk after a
crash: records dispatched, its short processOffset, whether the queues are cut there) and
``queue_entries_past_log_end`` (entries the queues keep beyond what the log serves); ``start_file``, ``walk``,
``process_offset`` and ``stop`` are DLedger's walk, ``commitlog_bytes_cut`` the bytes of the entries it drops.
"""
from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow.compute as pc

from rocketstore_spark.documents import header
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.recovery import QueueFeed, QueueFileReads, RecoveryReport, Simulation
from rocketstore_spark.rocketmq.dledger_recovery import DLedgerSimulation
from rocketstore_spark.rocketmq.releases import family_named
from rocketstore_spark.rocketmq.rocksdb_recovery import RocksDBSimulation
from rocketstore_spark.rocketmq.settings import BrokerSettings, resolve
from rocketstore_spark.store.discovery import StoreLayout, StorePathError, discover
from rocketstore_spark.store.engines import BATCH_ENGINE, LMQ_ENGINE, Work
from rocketstore_spark.store.files import read_consumer_offsets
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.rocksdb import queue_db

DLEDGER_REMEDY = ("rocketstore-spark does not rebuild or repair DLedger stores yet: start the broker once with "
                  "recheckReputOffsetFromCq=true, which dispatches the log again from the queues' end")
DOCUMENT_TYPE = "rocketstore-spark/recovery-report"
DOCUMENT_VERSION = 1


def _iso(ms) -> str | None:
    return None if ms is None else dt.datetime.fromtimestamp(int(ms) / 1000, dt.timezone.utc).isoformat()


def recovery_report(path: str, *, options: dict | None = None, broker_conf: str | None = None,
                    release_family: str | None = None, reachable_below: int | None = None,
                    queue_feed: QueueFeed | None = None,
                    resolved: tuple[StoreLayout, BrokerSettings] | None = None,
                    queue_reads: QueueFileReads | None = None) -> tuple[dict, RecoveryReport]:
    """(the report document, the simulation's result) for the one store at ``path``. ``options``: broker
    settings and ``rocketmqVersion``; ``release_family``: one of ``rocketmq.releases.FAMILY_NAMES`` (overrides the
    release's family); ``reachable_below``: ``rocketmq.recovery.Simulation``'s (the scrub's); ``queue_feed``: the
    unreachable records counted from another pass's queue records (``rocketmq.recovery.QueueFeed``: the audit's
    verify) rather than a dispatch of the log of its own; ``resolved``: the store's layout and the settings
    ``rocketmq.settings.resolve`` gave it with these options and broker.conf, when the caller has them already
    (the scrub's: the store is not listed nor its settings resolved again); ``queue_reads``: the ConsumeQueue
    files' summaries known from an earlier run (``rocketmq.recovery.QueueFileReads``: the scrub's)."""
    if resolved is not None:
        layout, settings = resolved
    else:
        layouts = discover(path)
        if len(layouts) != 1:
            raise StorePathError(f"{path}: names {len(layouts)} stores; a recovery report takes one")
        layout = layouts[0]
        settings = resolve(layout, options, broker_conf)
    # another engine recovers otherwise: no verdict rather than a wrong one (LMQ: its queues are followed here)
    layout.refuse(Work.RECOVER, RECOVERED)
    if release_family is not None:
        family_named(release_family)            # a ValueError naming the choices before anything is read
    db = queue_db(layout.root)
    # a RocksDB ConsumeQueue recovers by its own rules (rocketmq.rocksdb_recovery); the database read-only
    if db is not None:
        sim = RocksDBSimulation(layout, settings, db)
    elif layout.engines is not None and any(e.name == "DLedger CommitLog" for e in layout.engines.engines):
        sim = DLedgerSimulation(layout, settings)      # DLedger's recovery, then DLedgerCommitLog's
    else:
        sim = Simulation(layout, settings, release_family, reachable_below=reachable_below, queue_feed=queue_feed,
                         queue_reads=queue_reads)
    r = sim.run()
    w = r.walk
    data_end = max((c.base_offset + c.scan.data_end for c in sim._checks.values() if c.scan and c.scan.records),
                   default=w.process_offset if w else 0)
    queues = []
    for q in sorted(r.queues, key=lambda q: (q.topic, q.queue_id)):
        before = q.max_offset
        cut = q.cut_max_offset
        queues.append({"topic": q.topic, "queue_id": q.queue_id, "max_offset": q.final_max_offset,
                       "min_offset": q.final_min_offset, "max_offset_on_disk": before,
                       "entries_cut": max(0, before - cut) if cut is not None else 0,
                       "files_deleted": [layout.files.relative(p) for p in q.files_deleted],
                       "entries_dispatched": q.redispatched, "entries_moved": q.moved})
    doc = header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {
        "store": layout.name,
        "rocketmq_version": r.release_family,
        "release": {"detected_or_given": str(settings.release), "source": settings.sources.get("rocketmqVersion"),
                    "family_overridden": release_family is not None},
        "settings": {k: settings.values.get(k) for k in ("checkCRCOnRecover", "messageIndexEnable",
                                                         "messageIndexSafe", "duplicationEnable",
                                                         "commitLogRecoverMaxNum")}
        | {"mappedFileSizeConsumeQueue": settings.consume_queue_file_size},
        "store_type": "defaultRocksDB" if db is not None else "default",
        "shutdown": r.shutdown,
        "shutdown_reason": r.shutdown_reason or ("the abort file is present: the broker did not shut down cleanly"
                                                 if r.shutdown == "abnormal" else "no abort file: a clean shutdown"),
        "checkpoint": {k: v for k, v in r.checkpoint.items()},
        "max_cq": r.max_cq,
        "start_file": w.start_file if w else None,
        "start_reason": w.start_reason if w else None,
        "walk": w.segments_walked if w else [],
        "process_offset": w.process_offset if w else None,
        "stop": {"file": layout.files.relative(layout.files.segment_path(int(w.stop_file))) if w and w.stop_file
                 else None,
                 "file_position": w.stop_position if w else None, "reason": w.stop_reason if w else None},
        "commitlog_files_deleted": r.commitlog_files_deleted,
        "commitlog_bytes_cut": max(0, data_end - w.process_offset) if w else 0,
        "consumequeues": queues,
        "batchconsumequeues": [_batch_queue(layout.files, b) for b in r.batch_queues],
        "index_files_deleted": r.index_files_deleted,
        "dispatch": {"from": r.dispatch_from, "to": r.dispatch_to},
        "lost": _lost(r.lost, r.lost_lmq),
        "unreachable": _unreachable(r.unreachable),
        "consumer_offsets_past_end": _offsets_past_end(layout, r),
        "later_starts": _later_starts(layout.files, r, w.process_offset if w else None),
    }
    if r.dledger is not None:
        doc |= _dledger(layout, r)
    return doc, r


def _dledger(layout, r: RecoveryReport) -> dict:
    """The parts of a DLedger store's report (``rocketmq.dledger_recovery``): its data file names in ``stop``
    and ``start_file``, DLedger's own recovery, the crash walk of ``DLedgerCommitLog``, and the queue entries
    that point past the end of what the log serves."""
    led = r.dledger
    data = f"{led.directory}/data/"
    out = {"store_type": "dledger",
           "dledger": led.document() | {"stop_file": data + led.stop_file if led.stop_file else None,
                                        "data_files_deleted": r.commitlog_files_deleted},
           "dledger_crash_walk": r.dledger_walk,
           "queue_entries_past_log_end": _unreachable(r.past_log_end) | {"remedy": None}}
    if r.unreachable:               # no rebuild or repair of DLedger stores yet
        out["unreachable"] = _unreachable(r.unreachable) | {"remedy": DLEDGER_REMEDY}
    if r.walk is not None:
        out["stop"] = {"file": data + led.stop_file, "file_position": led.stop_position, "reason": led.stop_reason}
        out["commitlog_bytes_cut"] = led.bytes_truncated    # the entries DLedger's index units describe past it
    return out


def _later_starts(files: StoreMap, r: RecoveryReport, process_offset: int | None) -> list[dict]:
    out = []
    for later in r.later_starts:
        w = later.walk
        out.append({"start_file": w.start_file, "start_reason": w.start_reason, "walk": w.segments_walked,
                    "process_offset": w.process_offset,
                    "stop": {"file": files.relative(files.segment_path(int(w.stop_file))), "file_position": w.stop_position,
                             "reason": w.stop_reason},
                    "commitlog_files_deleted": later.commitlog_files_deleted,
                    "commitlog_bytes_cut": process_offset - w.process_offset, "lost": _lost(later.lost)})
        process_offset = w.process_offset
    return out


def final_process_offset(doc: dict) -> int | None:
    """Where the log ends once the clean starts after this one are done cutting (``later_starts``)."""
    return doc["later_starts"][-1]["process_offset"] if doc["later_starts"] else doc["process_offset"]


def harmful(doc: dict) -> bool:
    """Whether the restart the report describes, or a clean start after it, loses or cuts anything (messages,
    CommitLog bytes or files, ConsumeQueue entries or files)."""
    no_log = doc["process_offset"] is None and any(q["max_offset_on_disk"] for q in doc["consumequeues"])
    return bool(no_log or doc["lost"]["messages"] or doc["unreachable"]["messages"] or doc["commitlog_bytes_cut"]
                or doc["commitlog_files_deleted"]
                or any(q["entries_cut"] or q["files_deleted"] for q in doc["consumequeues"])
                or any(q["units_cut"] or q["files_deleted"] for q in doc.get("batchconsumequeues", ()))
                or doc["later_starts"])


#: engines whose restart this report follows: LMQ multi-dispatch (its queues truncated, dispatched and lost as
#: the records' INNER_MULTI_DISPATCH names them; rocketmq.recovery)
LMQ_RECOVERED = frozenset({LMQ_ENGINE})
#: and BatchConsumeQueues (5.x queue.type=BatchCQ: recovered, dispatched, cut and bounded as BatchConsumeQueue
#: does; rocketmq.batch_recovery)
BATCH_RECOVERED = frozenset({BATCH_ENGINE})
#: every engine this report follows (what jobs/recovery_report.py allows before Spark starts, too)
RECOVERED = LMQ_RECOVERED | BATCH_RECOVERED


def _batch_queue(files: StoreMap, b) -> dict:
    """One BatchConsumeQueue's restart (``rocketmq.batch_recovery.BatchQueueRecovery``) in the report."""
    return {"topic": b.topic, "queue_id": b.queue_id, "max_offset": b.max_offset, "min_offset": b.min_offset,
            "max_offset_on_disk": b.max_offset_on_disk, "max_physical_offset": b.max_physical,
            "units": b.units, "units_cut": b.units_cut, "files_deleted": [files.relative(p) for p in b.files_deleted],
            "units_dispatched": b.units_dispatched}


def _lost(t, lmq: dict | None = None) -> dict:
    """The lost records ``t``: counted per topic, and per queue — their own, and (``lmq``: ``RecoveryReport.
    lost_lmq``) each LMQ multi-dispatch queue they are in (a record counts once in ``messages``)."""
    if t is None or not t.num_rows:
        return {"messages": 0, "first_physical_offset": None, "last_physical_offset": None,
                "first_store_time": None, "last_store_time": None, "topics": {}, "queues": []}
    phy = t["physical_offset"].to_numpy()
    # a store time outside years 1-9999 decodes to null: left out of the time range
    stamps = pc.min_max(pc.cast(t["store_timestamp"], "int64"))
    first_ms, last_ms = (None if v is None else v // 1000 for v in (stamps["min"].as_py(), stamps["max"].as_py()))
    # PREPARED and ROLLBACK records sit in a queue without an entry (their QUEUEOFFSET means nothing): counted,
    # but only queued records give the range of queue offsets lost
    per_queue: dict[tuple, list] = {}
    for topic, qid, qo, kind in zip(t["topic"].to_pylist(), t["queue_id"].to_pylist(), t["queue_offset"].to_pylist(),
                                    t["transaction_type"].to_pylist()):
        per_queue.setdefault((topic, qid), []).append(qo if kind in dispatch.QUEUED_TYPES else None)
    # a BatchCQ topic's queue: the inner messages its lost records hold (what a consumer would have received)
    inner: dict[tuple, int] = {}
    if "inner_messages" in t.column_names:
        for topic, qid, n in zip(t["topic"].to_pylist(), t["queue_id"].to_pylist(), t["inner_messages"].to_pylist()):
            if n is not None:
                inner[(topic, qid)] = inner.get((topic, qid), 0) + n
    return {"messages": t.num_rows, "first_physical_offset": int(phy.min()), "last_physical_offset": int(phy.max()),
            "first_store_time": _iso(first_ms), "last_store_time": _iso(last_ms),
            "topics": dict(sorted(Counter(t["topic"].to_pylist()).items())),
            "queues": sorted([_lost_queue(k, v) | ({"inner_messages": inner[k]} if k in inner else {})
                              for k, v in per_queue.items()] + [
                {"topic": topic, "queue_id": queue_id, "messages": n, "first_queue_offset": lo, "last_queue_offset": hi}
                for (topic, queue_id), (n, lo, hi, _, _) in (lmq or {}).items()],
                key=lambda q: (q["topic"], q["queue_id"]))}


REMEDY = ("rebuild the ConsumeQueues from the whole CommitLog before the broker starts (rocketstore rebuild STORE "
          "--output DIR --resync writes an entry for every record; a plain rebuild writes what RocketMQ's own "
          "restart without queue files would, which after a crash dispatches only from the checkpoint's segment on; "
          "rocketstore recover plan / apply puts them in place), or on RocketMQ 5.x start it once with "
          "recheckReputOffsetFromCq=true, which dispatches the log again from the queues' end")


def _unreachable(per_queue: dict) -> dict:
    queues = [{"topic": t, "queue_id": q, "messages": n, "first_queue_offset": qo0, "last_queue_offset": qo1,
               "first_physical_offset": p0, "last_physical_offset": p1}
              for (t, q), (n, qo0, qo1, p0, p1) in sorted(per_queue.items())]
    topics = Counter()
    for q in queues:
        topics[q["topic"]] += q["messages"]
    total = sum(topics.values())
    return {"messages": total,
            "first_physical_offset": min((q["first_physical_offset"] for q in queues), default=None),
            "last_physical_offset": max((q["last_physical_offset"] for q in queues), default=None),
            "topics": dict(sorted(topics.items())), "queues": queues, "remedy": REMEDY if total else None}


def _lost_queue(key: tuple, queue_offsets: list) -> dict:
    queued = [o for o in queue_offsets if o is not None]
    return {"topic": key[0], "queue_id": key[1], "messages": len(queue_offsets),
            "first_queue_offset": min(queued) if queued else None, "last_queue_offset": max(queued) if queued else None}


def _offsets_past_end(layout, r: RecoveryReport) -> list[dict]:
    if layout.files.root is None:
        return []
    ends = {(q.topic, q.queue_id): q.final_max_offset for q in r.queues} | {
        (b.topic, b.queue_id): b.max_offset for b in r.batch_queues}
    out = []
    for topic, group, queue_id, offset in read_consumer_offsets(layout.files).rows:
        end = ends.get((topic, queue_id))
        if end is not None and offset > end:
            out.append({"consumer_group": group, "topic": topic, "queue_id": queue_id, "committed_offset": offset,
                        "max_offset_after_recovery": end})
    return out
