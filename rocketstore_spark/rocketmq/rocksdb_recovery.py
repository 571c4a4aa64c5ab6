"""What RocketMQ 5.5.1 does on its next start to a store whose ConsumeQueue is a RocksDB database
(``storeType=defaultRocksDB``; docs/format/rocksdb-queues.md "Recovery in RocksDB mode"), simulated without
writing anything (driver or CLI; the database is opened read-only, ``store.rocksdb``).

``RocksDBSimulation`` is the classic ``rocketmq.recovery.Simulation`` with RocksDB mode's rules where they
differ:

1. no queue is recovered from files: each queue's state is its ``offset`` column family entry, and
   ``dispatchFromPhyOffset`` is the database's dispatch checkpoint (``CHECKPOINT_TOPIC``);
2. the walk starts, on a normal and on a crash start alike, at the newest segment (``commitLogRecoverMaxNum``
   back at most) whose first record is valid, has a store time and a PHYSICALOFFSET <= the checkpoint
   (``RocksDBConsumeQueueStore.isMappedFileMatchedRecover``); the walk itself is the classic one;
3. dispatch during the walk: a crash start dispatches every record from the start segment, a normal start
   those whose PHYSICALOFFSET is greater than the checkpoint; a unit goes to its record's QUEUEOFFSET and the
   queue's "max" becomes the last dispatched record's QUEUEOFFSET (``putMessagePosition0``);
4. ``truncateDirty(processOffset)``: when the log now ends before the checkpoint, every queue whose "max"
   points at or beyond the end gets, by ``binarySearchInCQ``, the last unit below it (units stay);
5. min offsets: ``getMinCqOffset`` against the CommitLog's min offset over the units the restart leaves.

The IndexFiles and the CommitLog are cut as in the classic model (the same ``IndexService`` and walk).
"""
from __future__ import annotations

import numpy as np

from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.consumequeue import min_offset_by_search
from rocketstore_spark.rocketmq.recovery import QueueRecovery, RecoveryReport, Simulation
from rocketstore_spark.store import rocksdb


class RocksDBSimulation(Simulation):
    """One RocksDB-mode store's simulated restart (``run``); ``db``: its ConsumeQueue database."""

    def __init__(self, layout, settings, db):
        super().__init__(layout, settings)
        self.db = db
        with rocksdb.open_readonly(db) as rd:
            self.table = rocksdb.read_queue_table(rd, str(db))
            # the units the search rules read: the queues' own, fetched once per key as RocketMQ's gets would
            self._stored: dict[tuple[str, int], dict[int, int]] = {}
            for key, q in self.table.queues.items():
                if q.max is not None:
                    phy = {}
                    for offsets, units in rocksdb.read_units(rd, q.topic, q.queue_id, 0, None, path=str(db)):
                        phy.update(zip(offsets.tolist(), units["physical_offset"].tolist()))
                    self._stored[key] = phy
        self.dispatch_from = self.table.max_physical_offset or 0

    def start_segment(self, max_cq: int) -> tuple[int, str]:
        bound = self.dispatch_from
        return self._search(len(self.layout.segments),
                            lambda c: c.first_valid and c.first_store_timestamp != 0
                            and c.first_physical_offset is not None and c.first_physical_offset <= bound,
                            f"{'crash' if self.abnormal else 'normal start'} (RocksDB ConsumeQueue): the newest "
                            f"segment whose first record is valid with PHYSICALOFFSET <= the database's dispatch "
                            f"checkpoint {bound}")

    def _run(self) -> RecoveryReport:
        files, segs = self.layout.files, self.layout.segments
        queues = []
        for (topic, queue_id), q in sorted(self.table.queues.items()):
            if q.max is None:
                continue
            r = QueueRecovery(topic, queue_id, [])
            r.max_offset = q.max[1] + 1
            r.max_physical = q.max[0]
            queues.append(r)
        report = RecoveryReport("5.5.x RocksDB ConsumeQueue", "abnormal" if self.abnormal else "normal",
                                self.checkpoint, self.dispatch_from, queues)
        if not segs:
            report.shutdown_reason = "no CommitLog segment: the ConsumeQueue database would be destroyed"
            return report
        start, why = self.start_segment(self.dispatch_from)
        w = self.walk(start, why)
        report.walk = w
        po = w.process_offset
        report.commitlog_files_deleted = [files.relative(s.path) for s in segs if s.base_offset > po]
        self.index_files_deleted(report)
        lo = segs[start].base_offset if self.abnormal else max(self.dispatch_from + 1, segs[start].base_offset)
        units = {key: dict(phy) for key, phy in self._stored.items()}
        maxes = {key: (q.max[1], q.max[0]) for key, q in self.table.queues.items() if q.max is not None}
        by_key = {q.key: q for q in queues}
        checkpoint = self.dispatch_from
        for decoder, key, phy, qo, size in self._queued_windows(lo, po):
            checkpoint = int(phy[-1] + size[-1])
            for k in np.unique(key).tolist():
                rows = np.flatnonzero(key == k)
                t, queue_id = dispatch.queue_of(k)
                name = (decoder.topics[t], queue_id)
                q = by_key.get(name)
                if q is None:
                    q = by_key[name] = QueueRecovery(*name, [])
                    queues.append(q)
                units.setdefault(name, {}).update(zip(qo[rows].tolist(), phy[rows].tolist()))
                maxes[name] = (int(qo[rows[-1]]), int(phy[rows[-1]]))
                q.redispatched += len(rows)
                first = int(qo[rows].min())
                q.first_redispatched = first if q.first_redispatched < 0 else min(q.first_redispatched, first)
        report.dispatch_from, report.dispatch_to = min(lo, po), po
        if po < checkpoint:                              # truncateDirty: the queues' maxes back below the end
            for name, (max_cq, max_phy) in list(maxes.items()):
                if max_phy >= po:
                    cut = self._truncated_max(units.get(name, {}), name, max_cq, po)
                    maxes[name] = cut
                    by_key[name].cut_max_offset = cut[0] + 1
        log_min = segs[0].base_offset
        for q in queues:
            max_cq = maxes[q.key][0]
            q.final_max_offset = max_cq + 1
            stored = self.table.queues.get(q.key)
            q.final_min_offset = min_offset_by_search(
                units.get(q.key, {}).get, stored.min if stored is not None else None, maxes[q.key][::-1], log_min)
        report.queues = sorted(queues, key=lambda q: q.key)
        report.queue_end_after = po
        report.lost = self._lost(po, None)
        return report

    def _truncated_max(self, units: dict[int, int], name, max_cq: int, po: int) -> tuple[int, int]:
        """``RocksDBConsumeQueueOffsetTable.correctMaxCqOffset``: (queue offset, physical offset) of the new
        "max" — the ``binarySearchInCQ`` (max mode) result below ``po`` over [min, max], or the min when it
        finds none."""
        stored = self.table.queues.get(name)
        min_cq = min_offset_by_search(units.get, stored.min if stored is not None else None,
                                      (units.get(max_cq, -1), max_cq), self.layout.segments[0].base_offset)
        low, high, found = min_cq, max_cq, None
        while high >= low:
            mid = low + ((high - low) >> 1)
            phy = units.get(mid)
            if phy is None:
                low = mid + 1
                continue
            if phy == po:
                break
            if phy > po:
                high = mid - 1
            else:
                low, found = mid + 1, (mid, phy)
        if found is None:
            return min_cq, units.get(min_cq, -1)
        return found
