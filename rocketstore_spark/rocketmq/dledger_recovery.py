"""What RocketMQ 5.5.1 (with dledger 0.3.3.4) does on its next start to a DLedger store
(``enableDLegerCommitLog=true``; docs/format/dledger.md "Recovery"), simulated without writing anything (driver
or CLI; the store read-only).

``DLedgerSimulation`` is the classic ``rocketmq.recovery.Simulation`` with the rules of a DLedger CommitLog:

1. the ConsumeQueues recover from their files as on a classic store (``recover_queue``); ``maxCQ`` likewise;
2. DLedger's own recovery (``DLedgerMmapFileStore.recover``, ``ledger_recover``): the walk starts at the data
   file three from the end (or the first) — or an older one when that file's first entry or its index unit does
   not check —, and goes entry by entry (``_ledger_walk``: pos, size, body length, magic, index = previous + 1,
   term >= previous; the record inside is not looked at, no CRC); a DLedger blank leads to the next file, a
   zero size or the first failure ends the ledger there (``write_pos``); data files after it are deleted, its
   index units after the last good entry truncated (and, from the first entry whose unit disagrees, rewritten);
   ``committedIndex`` comes from ``checkpoint``, capped to the ledger end; ``committedPos`` (RocketMQ's
   ``getMaxOffset``, what ``getMessage`` serves) is its entry's end;
3. ``DLedgerCommitLog.recoverNormally``: ConsumeQueues cut at ``write_pos`` when ``maxCQ`` reaches it;
   nothing is dispatched;
4. ``recoverAbnormally`` (abort file): from the newest data file whose first record ``isMmapFileMatchedRecover``
   accepts (its PHYSICALOFFSET <= the checkpoint's logicsPhysicalOffset, or, when that is 0, its store time <=
   logicsMsgTimestamp), every record is checked (``checkMessageAndReturnSize`` with ``checkCRCOnRecover``;
   ``_dispatch_walk``) and dispatched until one fails — over the whole mapped file, past DLedger's end: the
   entry headers are not looked at beyond a blank's magic. Its ``processOffset`` is the last file's base plus
   the records' sizes **without their 48-byte entry headers**, so it falls 48 bytes per record walked in that
   file short of where the walk ended; the ConsumeQueues are cut there when the checkpoint's logicsPhysicalOffset
   (what 5.5.1 passes as ``maxPhyOffsetOfConsumeQueue`` on a crash) reaches it. The entries of the last records
   are cut although the log keeps them (``unreachable``), and entries of records past DLedger's end below it
   are kept although the log no longer serves them (``past_log_end``);
5. the reput starts at ``getConfirmOffset()`` = ``committedPos``: nothing the recovery cut is dispatched again;
6. after a crash, IndexFiles newer than the checkpoint are deleted as on a classic store.

Not modelled: ``duplicationEnable`` (dispatch below the confirm offset only), another ``CommitLogDispatchStore``
lowering the dispatch offset (RocksDB index/timer stores), a store without data files yet (first start after the
switch: the old ``commitlog/`` is recovered the classic way — ``rocketmq.recovery.Simulation`` — and a BLANK
written at its end), and a record whose entry header fails our reader's check but whose record RocketMQ's
abnormal walk dispatches (our dispatch reads through ``store.segment_reader``, which resynchronises past it; the
queue's files usually hold its entry already).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numba
import numpy as np

from rocketstore_spark.codec.commitlog import (BLANK_MAGIC, DLEDGER_HEADER, MAGIC_V1, MAGIC_V2, NO_STOP,
                                               POS_BODY_CRC, POS_PHYSICAL_OFFSET, POS_STORE_TIMESTAMP_BH,
                                               POS_SYS_FLAG, STOP_BLANK, SysFlag, _check_plain, be32, be64)
from rocketstore_spark.codec.crc32 import body_crc_matches
from rocketstore_spark.rocketmq.recovery import (RecoveryReport, RestartDispatch, Simulation, Walk, add_pieces,
                                                 recover_queue, truncate_queue)
from rocketstore_spark.rocketmq.releases import NormalDispatch
from rocketstore_spark.store import dledger
from rocketstore_spark.store.layout import entry_frame

# _ledger_walk's and _dispatch_walk's ends
NEXT_FILE, MORE = 0, -1
CHUNK_ENTRIES = 1 << 16         # entries compared with their index units at once
_LEDGER_REASONS = {1: "zero size: the end of the written entries", 3: "the file ends (no blank before its end)",
                   4: "entry pos is not its position", 5: "entry size is not body length + 48",
                   6: "entry magic is not 1", 7: "entry index is not the previous one + 1",
                   8: "entry term is lower than the previous one's", 9: "entry size <= 44",
                   10: "entry runs past the end of the file"}


@numba.njit(cache=True, nogil=True)
def _ledger_walk(buf, base, start, last_index, last_term, out):
    """``DLedgerMmapFileStore.recover``'s walk over one data file (``buf``: the whole file, ``base``: its
    offset) from position ``start``: (entries, position where it stopped, code): code 0 a blank (next file),
    MORE when ``out`` is full (go on from there), else the reason it ends (``_LEDGER_REASONS``). ``out[k]``: pos,
    size, magic, index, term of entry k."""
    n = 0
    p = start
    size_all = buf.shape[0]
    while True:
        if n == out.shape[0]:
            return n, p, MORE
        if p + 4 > size_all:
            return n, p, 3
        magic = be32(buf, p)
        if magic == -1:
            return n, p, 0
        if p + 48 > size_all:
            return n, p, 3
        size = be32(buf, p + 4)
        if size == 0:
            return n, p, 1
        index = be64(buf, p + 8)
        term = be64(buf, p + 16)
        pos = be64(buf, p + 24)
        body = be32(buf, p + 44)
        if pos != base + p:
            return n, p, 4
        if body + 48 != size:
            return n, p, 5
        if p + size > size_all or size < 0:
            return n, p, 10
        if magic != 1:
            return n, p, 6
        if last_index != -1 and index != last_index + 1:
            return n, p, 7
        if term < last_term:
            return n, p, 8
        if size <= 44:
            return n, p, 9
        out[n, 0] = base + p
        out[n, 1] = size
        out[n, 2] = magic
        out[n, 3] = index
        out[n, 4] = term
        n += 1
        last_index = index
        last_term = term
        p += size


@numba.njit(cache=True, nogil=True)
def _dispatch_walk(buf, check_crc):
    """``DLedgerCommitLog.recoverAbnormally``'s walk over one data file (``buf``: the whole file, as its
    ``sliceByteBuffer``): (records, the sum of their msgSize, position where it stopped, code NEXT_FILE or
    FAILED). An entry whose size field is a message or BLANK magic is read as a classic record (the old log),
    a DLedger blank leads to the next file; else the record 48 bytes in is checked as
    ``checkMessageAndReturnSize`` does (a classic BLANK there: the next file too)."""
    n = 0
    total_sum = 0
    p = 0
    size_all = buf.shape[0]
    while True:
        if p + 8 > size_all:
            return n, total_sum, p, 2
        magic = be32(buf, p)
        old = be32(buf, p + 4)
        rec = p
        if old != BLANK_MAGIC and old != MAGIC_V1 and old != MAGIC_V2:
            if magic == -1:
                return n, total_sum, p, 0
            rec = p + 48
        stop, total, body_pos, body_len, _ = _check_plain(buf, 0, size_all, size_all, rec)
        if stop == STOP_BLANK:
            return n, total_sum, p, 0
        if stop != NO_STOP:
            return n, total_sum, p, 2
        if check_crc and not body_crc_matches(buf, rec + body_pos, body_len, be32(buf, rec + POS_BODY_CRC)):
            return n, total_sum, p, 2
        n += 1
        total_sum += total
        p = rec + total


def _map(path: str) -> np.ndarray:
    size = os.path.getsize(path)
    return np.memmap(path, dtype=np.uint8, mode="r", shape=(size,)) if size else np.zeros(0, np.uint8)


@dataclass
class LedgerRecovery:
    """What ``DLedgerMmapFileStore.recover`` does (step 2)."""
    directory: str                          # dledger-<selfId>
    start_file: str
    start_reason: str
    files_walked: list[str]
    write_pos: int                          # where the data is truncated (ledgerEndPos)
    stop_file: str
    stop_position: int
    stop_reason: str
    begin_index: int = -1
    end_index: int = -1
    end_term: int = -1
    committed_index: int = -1
    committed_pos: int = -1                 # -1: no committed index in the checkpoint (nothing readable yet)
    checkpoint: dict = field(default_factory=dict)
    data_files_deleted: list[str] = field(default_factory=list)
    entries_truncated: int = 0              # index units written after the last good entry
    bytes_truncated: int = 0                # entry bytes those units describe beyond write_pos
    index_rewritten_from: int | None = None     # the first entry index whose unit disagreed (then rewritten)
    exits: str = ""                         # the broker stops instead ("processOffset is too small", DISK_ERROR)

    def document(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}


def ledger_recover(data_files: list, directory: Path) -> LedgerRecovery:
    """Step 2 over ``data_files`` (``Segment``s of ``dledger-<selfId>/data``, in offset order)."""
    units = dledger.IndexUnits(directory)
    size = data_files[0].size

    def agree(e: np.ndarray) -> np.ndarray:         # e: rows of pos, size, magic, index, term
        u = units.get(e[:, 3])
        return (u["magic"] == e[:, 2]) & (u["pos"] == e[:, 0]) & (u["size"] == e[:, 1]) & (u["index"] == e[:, 3]) \
            & (u["term"] == e[:, 4]) & (e[:, 3] >= 0)

    names = [os.path.basename(s.path) for s in data_files]
    if any(b.base_offset - a.base_offset != size for a, b in zip(data_files, data_files[1:])):
        return LedgerRecovery(directory.name, names[0], "", [], data_files[0].base_offset, names[0], 0, "",
                              exits="the data files are not contiguous (checkSelf): DISK_ERROR, the broker "
                                    "does not start")
    third = k = max(0, len(data_files) - 3)
    why = "the third-last data file (or the first): its first entry and index unit check"
    for i in range(third, -1, -1):
        k = i
        head = _first_entry(data_files[i])
        if head is not None and agree(np.array([head], np.int64))[0]:
            break
        why = (f"the newest data file from {names[third]} (the third-last) back whose first entry and its index "
               f"unit check" if i else "no data file's first entry and index unit check from the third-last "
                                       "back: the first")
    led = LedgerRecovery(directory.name, names[k], why, [], 0, "", 0, "")
    last_index, last_term = -1, -1
    rewritten = None
    out = np.zeros((CHUNK_ENTRIES, 5), np.int64)
    while True:
        seg = data_files[k]
        buf = _map(seg.path)
        led.files_walked.append(names[k])
        code, p = MORE, 0
        while code == MORE:
            n, p, code = _ledger_walk(buf, seg.base_offset, p, last_index, last_term, out)
            if not n:
                continue
            e = out[:n]
            if rewritten is None:
                bad = np.flatnonzero(~agree(e))
                if len(bad):
                    rewritten = int(e[bad[0], 3])
            last_index, last_term = int(e[-1, 3]), int(e[-1, 4])
            led.end_index, led.end_term = last_index, last_term
        if code == NEXT_FILE and k + 1 < len(data_files):
            k += 1
            continue
        led.write_pos = seg.base_offset + (p if code != NEXT_FILE else seg.size)
        led.stop_file, led.stop_position = names[k], p
        led.stop_reason = "DLedger blank in the last data file: the end" if code == NEXT_FILE else \
            _LEDGER_REASONS.get(int(code), "")
        break
    last = data_files[-1]
    if last.base_offset - led.write_pos > size:
        led.exits = (f"processOffset {led.write_pos} is too small (more than a file before the last data file): "
                     "the broker exits (System.exit) rather than truncate")
    led.index_rewritten_from = rewritten
    led.data_files_deleted = [s for s in data_files if s.base_offset > led.write_pos]
    after = units.written_after(led.end_index)
    led.entries_truncated = len(after)
    led.bytes_truncated = max(0, int((after["pos"] + after["size"]).max()) - led.write_pos) if len(after) else 0
    if led.end_index >= 0:            # reviseLedgerBeginIndex: the first file's first entry's index
        head = _first_entry(data_files[0], check=False)
        led.begin_index = int(head[3]) if head is not None else -1
    props = dledger.read_properties(directory / "checkpoint") or {}
    led.checkpoint = props
    try:
        committed = int(str(props.get("committedIndex", "")).strip())
    except ValueError:
        committed = -1
    if committed >= 0 and led.end_index >= 0 and committed >= led.begin_index:
        led.committed_index = min(committed, led.end_index)
        u = units.get(np.array([led.committed_index]))[0]     # recovery leaves the units right to the end
        led.committed_pos = int(u["pos"]) + int(u["size"]) if int(u["index"]) == led.committed_index else -1
    return led


def _first_entry(seg, check: bool = True) -> tuple[int, int, int, int, int] | None:
    """(pos, size, magic, index, term) of a data file's first entry, None when it does not check as the start
    search checks it (magic 1, size > 44, pos = the file's base, size = body length + 48; ``check`` False:
    read as it is)."""
    head = bytes(_map(seg.path)[:DLEDGER_HEADER])
    if len(head) < DLEDGER_HEADER:
        return None
    be = lambda at, n: int.from_bytes(head[at:at + n], "big", signed=True)      # noqa: E731
    magic, size, index, term, pos, body = be(0, 4), be(4, 4), be(8, 8), be(16, 8), be(24, 8), be(44, 4)
    if check and (magic != 1 or size <= 44 or pos != seg.base_offset or body + DLEDGER_HEADER != size):
        return None
    return pos, size, magic, index, term


class DLedgerSimulation(Simulation):
    """One DLedger store's simulated restart (``run``): classic queues, DLedger's log (module docstring)."""

    def __init__(self, layout, settings):
        super().__init__(layout, settings)
        self.data = [s for s in layout.segments if entry_frame(s.path)]
        self.ledger: LedgerRecovery | None = None

    def _run(self) -> RecoveryReport:
        if not self.data:
            report = super()._run()
            report.release_family += " (DLedger, no data file yet: the old commitlog/ recovered the classic way)"
            return report
        files, segs = self.layout.files, self.layout.segments
        queues = [recover_queue(t, q, d) for t, q, d in files.queue_dirs()] if files.root is not None else []
        max_cq = max((q.max_physical for q in queues), default=-1)
        report = RecoveryReport("5.5.x DLedger CommitLog", "abnormal" if self.abnormal else "normal",
                                self.checkpoint, max_cq, queues)
        led = self.ledger = ledger_recover(self.data, Path(self.data[0].path).parent.parent)
        report.dledger = led
        if led.exits:
            report.shutdown_reason = led.exits
            return report
        end = led.write_pos
        committed = led.committed_pos if led.committed_pos >= 0 else end
        report.walk = Walk(led.start_file, led.start_reason, end, led.stop_file, led.stop_position, led.stop_reason,
                           list(led.files_walked))
        report.commitlog_files_deleted = [files.relative(s.path) for s in led.data_files_deleted]
        self.index_files_deleted(report)
        log_min = segs[0].base_offset
        file_size = self.settings.consume_queue_file_size
        if not self.abnormal:
            if max_cq >= end:
                for q in queues:
                    truncate_queue(q, end, file_size)
            lo = hi = end
            states = {q.key: q.state() for q in queues}
        else:
            lo, hi, walked = self._abnormal(report, queues, file_size)
            states = self.place(report.queues, lo, hi, {q.key: q.state() for q in queues})
            report.dledger_walk = walked
        for q in report.queues:
            q.final_max_offset = states[q.key].max_offset
            q.moved = states[q.key].moved
            q.final_min_offset = self._min_offset(q, log_min, NormalDispatch.DURING_WALK)
        report.dispatch_from, report.dispatch_to = lo, hi
        report.queue_end_after = max((st.max_physical for st in states.values()), default=-1)
        report.lost = self._lost(end, None)
        ends = {key: st.max_physical for key, st in states.items()}
        report.unreachable = self._unreachable(max(log_min, self.reachable_below or log_min), committed, ends)
        report.past_log_end = self._past_end(committed, ends)
        return report

    def _abnormal(self, report, queues, file_size) -> tuple[int, int, dict]:
        """Step 4: (dispatch from, dispatch to, the walk as a document); queues cut in place."""
        cp = self.checkpoint
        bound = cp["logics_physical_offset"]
        k = len(self.data) - 1
        for k in range(len(self.data) - 1, -1, -1):
            if self._matched(self.data[k], bound):
                break
        else:
            k = 0
        start = k
        records = 0
        while True:
            seg = self.data[k]
            n, msg_bytes, p, code = _dispatch_walk(_map(seg.path), self.check_crc)
            records += n
            if code == NEXT_FILE and k + 1 < len(self.data):
                k += 1
                continue
            break
        process_offset = seg.base_offset + msg_bytes
        walk_end = seg.base_offset + p
        cut = bound >= process_offset
        if cut:
            for q in queues:
                truncate_queue(q, process_offset, file_size)
        lo = self.data[start].base_offset
        walked = {"start_file": os.path.basename(self.data[start].path),
                  "start_reason": (f"the newest data file whose first record's PHYSICALOFFSET <= the checkpoint's "
                                   f"logicsPhysicalOffset {bound}" if bound > 0 else
                                   f"the newest data file whose first record was stored at or before the "
                                   f"checkpoint's logicsMsgTimestamp {cp['logics_msg_timestamp']}"),
                  "records": records, "first_physical_offset": lo + DLEDGER_HEADER if records else None,
                  "end_physical_offset": walk_end, "stop_file": os.path.basename(seg.path), "stop_position": p,
                  "process_offset": process_offset, "short_by": walk_end - process_offset,
                  "consumequeues_cut_at": process_offset if cut else None,
                  "cut_reason": (f"logicsPhysicalOffset {bound} >= processOffset {process_offset}" if cut else
                                 f"logicsPhysicalOffset {bound} < processOffset {process_offset}: no cut")}
        return lo, process_offset if cut else walk_end, walked

    def _matched(self, seg, bound: int) -> bool:
        """``isMmapFileMatchedRecover`` (recoverNormally false) of a data file's first record."""
        head = bytes(_map(seg.path)[:DLEDGER_HEADER + POS_STORE_TIMESTAMP_BH + 28])
        if len(head) < DLEDGER_HEADER + POS_STORE_TIMESTAMP_BH + 28:
            return False
        be = lambda at, n: int.from_bytes(head[DLEDGER_HEADER + at:DLEDGER_HEADER + at + n], "big", signed=True)  # noqa: E731
        if be(4, 4) not in (MAGIC_V1,):
            return False
        bh = 20 if be(POS_SYS_FLAG, 4) & SysFlag.BORNHOST_V6 else 8
        ts = be(POS_STORE_TIMESTAMP_BH + bh, 8)
        if ts == 0:
            return False
        if self.index_enable and self.index_safe and ts > self.checkpoint["index_msg_timestamp"]:
            return False
        if bound <= 0:
            return ts <= self.checkpoint["logics_msg_timestamp"]
        return be(POS_PHYSICAL_OFFSET, 8) <= bound

    def _past_end(self, committed: int, ends: dict) -> dict:
        """Queued records at or past ``committed`` (the end of what the log serves) whose entry their queue
        keeps: entries pointing where ``getMessage`` finds nothing."""
        top = max(ends.values(), default=-1)
        return self._unreachable(committed, top, ends, kept=True) if top > committed else {}


def dledger_dispatch(layout, settings, lazy: bool = False) -> RestartDispatch:
    """What the rebuild of a DLedger store writes (``rocketmq.recovery.restart_dispatch``'s counterpart; driver):
    the queue entries and index keys of every record of the log up to DLedger's committed end, in log order —
    what the broker's dispatch wrote while it ran (it reads through ``getData`` below ``committedPos``; no CRC).
    Not a restart without queue files: on 5.5.1 that dispatches nothing (the reput starts at ``committedPos``
    unless ``recheckReputOffsetFromCq``), or after a crash only from the matched data file on. Damage: as the
    reput, a segment's dispatch ends at its first BLANK, zero fill or damage (``Simulation.dispatch_end``)."""
    sim = Simulation(layout, settings, without_derived=True)
    data = [s for s in layout.segments if entry_frame(s.path)]
    report = RecoveryReport("5.5.x DLedger CommitLog", "abnormal" if sim.abnormal else "normal", sim.checkpoint, -1,
                            [])
    led = ledger_recover(data, Path(data[0].path).parent.parent)
    report.dledger = led
    if led.exits:
        report.shutdown_reason = led.exits
        return RestartDispatch(report, [], [], [])
    end = led.committed_pos if led.committed_pos >= 0 else led.write_pos
    report.walk = Walk(led.start_file, led.start_reason, end, led.stop_file, led.stop_position, led.stop_reason,
                       list(led.files_walked))
    out = RestartDispatch(report, [(layout.segments[0].base_offset, end, "reput")], [], [])
    return add_pieces(out, layout, sim, lazy)
