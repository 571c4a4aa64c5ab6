"""The queues of a RocksDB ConsumeQueue (``storeType=defaultRocksDB``) against the CommitLog's dispatch (driver
or CLI, inside ``verify.store``; the database opened read-only, ``store.rocksdb``).

RocketMQ 5.5.1 writes a record's unit at the key of its own QUEUEOFFSET (docs/format/rocksdb-queues.md), so
the unit expected at each queue offset is the last record of the queue carrying that QUEUEOFFSET, in CommitLog
order: its (physical offset, size, tagsCode). For every queue of the ``offset`` column family and every queue
the log dispatches to, over the queue offsets [0, the queue's "max"]:

* ``consumequeue.entry_mismatch``: a unit that differs from the one the dispatch writes there;
* ``consumequeue.missing_entry``: no unit for a record the database had dispatched (it ends at or before the
  dispatch checkpoint) below the queue's max;
* ``consumequeue.entry_past_end``: a unit pointing at or beyond the end of the log's valid data;
* ``consumequeue.extra_entry``: a unit where the dispatch writes none, inside the log;
* ``consumequeue.lagging``: records of the queue after its max, or not yet dispatched (after the checkpoint):
  a crash start dispatches them again.

Units above a queue's max are not looked at (RocketMQ never serves them). A queue's units are held whole
(one queue at a time): memory follows the largest queue, unlike the classic check's parts.
"""
from __future__ import annotations

import numpy as np

from rocketstore_spark.findings import Finding, FindingCap, finding
from rocketstore_spark.rocketmq.consumequeue import min_offset_by_search
from rocketstore_spark.store import rocksdb
from rocketstore_spark.verify.queues import LogBounds, QueueVerdict

_FIELDS = ("physical_offset", "size", "tags_code")


def _records(cols) -> dict[str, np.ndarray]:
    """A queue's dispatched records as one set of columns (``Dispatched.queue_groups`` gives a dict, or chunks
    of one for a split group)."""
    if isinstance(cols, dict):
        return cols
    parts = list(cols)
    return {c: np.concatenate([p[c] for p in parts]) if parts else np.zeros(0, np.int64)
            for c in ("queue_offset", *_FIELDS)}


def check_rocksdb_queue(rd, db_name: str, topic: str, queue_id: int, stored: rocksdb.QueueOffsets | None,
                        cols, log: LogBounds, checkpoint: int) -> QueueVerdict:
    """One queue's verdict: its units (``rd``: the opened database, ``db_name`` how findings name it) against
    ``cols`` (its records that get a unit, in CommitLog order: queue_offset, physical_offset, size, tags_code);
    ``checkpoint``: the database's dispatch checkpoint."""
    rec = _records(cols)
    v = QueueVerdict(topic, queue_id, files=0)
    cap = FindingCap()
    where = dict(topic=topic, queue_id=queue_id)
    max_cq = stored.max[1] if stored is not None and stored.max is not None else -1
    offs, units = [], []
    if max_cq >= 0:
        for o, u in rocksdb.read_units(rd, topic, queue_id, 0, max_cq + 1, path=db_name):
            offs.append(o)
            units.append(u)
    u_off = np.concatenate(offs) if offs else np.zeros(0, np.int64)
    u_phy = np.concatenate([u["physical_offset"] for u in units]).astype(np.int64) if units else np.zeros(0, np.int64)
    u_size = np.concatenate([u["size"] for u in units]).astype(np.int64) if units else np.zeros(0, np.int64)
    u_tags = np.concatenate([u["tags_code"] for u in units]).astype(np.int64) if units else np.zeros(0, np.int64)
    v.entries = len(u_off)
    v.max_offset = max_cq + 1
    v.records = len(rec["queue_offset"])
    get = dict(zip(u_off.tolist(), u_phy.tolist())).get
    v.min_offset = min_offset_by_search(get, stored.min if stored is not None else None,
                                        stored.max if stored is not None else None, log.min_offset)
    v.expired = int(np.count_nonzero(u_phy < log.min_offset))
    # the unit RocketMQ's dispatch leaves at each queue offset: the last record carrying it
    qo = rec["queue_offset"].astype(np.int64)
    if len(qo):
        last = len(qo) - 1 - np.unique(qo[::-1], return_index=True)[1]
        e_off = qo[last]
        e = {c: rec[c].astype(np.int64)[last] for c in _FIELDS}
        v.dispatch_max_offset = int(qo.max()) + 1
    else:
        e_off = np.zeros(0, np.int64)
        e = {c: np.zeros(0, np.int64) for c in _FIELDS}
    # units against the records at the same queue offset
    both, ui, ei = np.intersect1d(u_off, e_off, assume_unique=True, return_indices=True)
    differ = (u_phy[ui] != e["physical_offset"][ei]) | (u_size[ui] != e["size"][ei]) | \
             (u_tags[ui] != e["tags_code"][ei])
    for k in np.flatnonzero(differ).tolist():
        i, j = ui[k], ei[k]
        cap.add(finding("consumequeue.entry_mismatch", db_name, None,
                        f"{topic}/{queue_id} unit {int(both[k])} is (physical offset {int(u_phy[i])}, size "
                        f"{int(u_size[i])}, tagsCode {int(u_tags[i])}); the dispatch writes ({int(e['physical_offset'][j])}, "
                        f"{int(e['size'][j])}, {int(e['tags_code'][j])})",
                        **where, queue_offset=int(both[k]), physical_offset=int(u_phy[i]),
                        expected_physical_offset=int(e["physical_offset"][j]), expected_size=int(e["size"][j]),
                        expected_tags_code=int(e["tags_code"][j])))
    # units without a record: past the log's end, or extra
    alone = np.flatnonzero(~np.isin(u_off, e_off))
    for i in alone.tolist():
        past = u_phy[i] >= log.end
        if u_phy[i] < log.min_offset:
            continue                                     # expired: the log no longer holds its record
        cap.add(finding("consumequeue.entry_past_end" if past else "consumequeue.extra_entry", db_name, None,
                        f"{topic}/{queue_id} unit {int(u_off[i])} points at physical offset {int(u_phy[i])}, "
                        + (f"at or beyond the end of the CommitLog's valid data {log.end}" if past else
                           "where the dispatch writes no unit of this queue"),
                        **where, queue_offset=int(u_off[i]), physical_offset=int(u_phy[i])))
    # records without a unit: holes below the max (dispatched ones), lagging above it or after the checkpoint
    lonely = ~np.isin(e_off, u_off)
    dispatched = e["physical_offset"] + e["size"] <= checkpoint
    holes = np.flatnonzero(lonely & (e_off <= max_cq) & dispatched & (e["physical_offset"] >= log.min_offset))
    for j in holes.tolist():
        cap.add(finding("consumequeue.missing_entry", db_name, None,
                        f"{topic}/{queue_id} has no unit {int(e_off[j])} for the record at physical offset "
                        f"{int(e['physical_offset'][j])}, which the database had dispatched (checkpoint {checkpoint})",
                        **where, queue_offset=int(e_off[j]), physical_offset=int(e["physical_offset"][j])))
    behind = np.flatnonzero(lonely & ((e_off > max_cq) | ~dispatched) & ~np.isin(np.arange(len(e_off)), holes))
    if len(behind):
        j = int(behind[np.argmin(e_off[behind])])
        cap.add(finding("consumequeue.lagging", db_name, None,
                        f"{len(behind)} record(s) of {topic}/{queue_id} have no unit (the first at physical offset "
                        f"{int(e['physical_offset'][j])}, queue offset {int(e_off[j])}); the queue's max is "
                        f"{max_cq + 1}, the database's dispatch checkpoint {checkpoint}; dispatching the whole "
                        f"CommitLog ends the queue at {v.dispatch_max_offset}",
                        **where, queue_offset=int(e_off[j]), physical_offset=int(e["physical_offset"][j]),
                        records=len(behind), queue_end=max_cq + 1, dispatch_end=v.dispatch_max_offset))
    v.findings = cap.findings()
    return v


def check_rocksdb_queues(db, groups, log: LogBounds, root: str) -> tuple[list[QueueVerdict], list[Finding]]:
    """Every queue of the database at ``db`` and of ``groups`` (``Dispatched.queue_groups``) checked
    (``check_rocksdb_queue``); a database that cannot be read is one ``rocksdb.unreadable`` finding and no
    verdicts (the dispatch is still consumed)."""
    import os
    name = os.path.relpath(db, root)
    try:
        with rocksdb.open_readonly(db) as rd:
            table = rocksdb.read_queue_table(rd, name)
            checkpoint = table.max_physical_offset or 0
            out, seen = [], set()
            for group in groups:
                for topic, queue_id, cols in group:
                    seen.add((topic, queue_id))
                    out.append(check_rocksdb_queue(rd, name, topic, queue_id, table.queues.get((topic, queue_id)),
                                                   cols, log, checkpoint))
            empty = {c: np.zeros(0, np.int64) for c in ("queue_offset", *_FIELDS)}
            for key, q in table.queues.items():
                if key not in seen and q.max is not None:
                    out.append(check_rocksdb_queue(rd, name, *key, q, empty, log, checkpoint))
    except rocksdb.RocksDBUnreadable as e:
        for _ in groups:
            pass
        return [], [finding("rocksdb.unreadable", name, None, e.why)]
    return sorted(out, key=lambda q: (q.topic, q.queue_id)), []
