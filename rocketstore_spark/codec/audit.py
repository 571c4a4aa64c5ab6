"""The whole-segment audit as one compiled pass: walk, structural check, placement, BODYCRC and the optional
``__CRC32#`` and store-time checks, record by record, with no per-record columns.

Sans-I/O like ``codec.decoder.RecordDecoder``, and called the same way (``AuditDecoder.decode`` with a
window of a segment file), so ``store.segment_reader.SegmentReader`` drives it unchanged: it gets back where
and why the walk stopped, how many records were read, the positions of the bodies that fail BODYCRC and of
the records left out as misplaced. What a segment scan reports beyond that (first and last store time, the
properties-CRC failures, the store-time anomalies) accumulates in ``AuditDecoder.state`` over the segment.

One ``audit_walk`` call hops from record to record by TOTALSIZE exactly as ``commitlog.walk`` does (the same
``commitlog.check_record``: magic, TOTALSIZE bounds, inner lengths against TOTALSIZE as RocketMQ's
``checkMessageAndReturnSize``), and for each valid record checks its stored PHYSICALOFFSET and its body's CRC
through libdeflate (``crc32.body_crc_matches``) while the record is in cache. Without BODYCRC nothing streams
the bytes ahead of the hops and each hop waits on memory: there, clean regions are walked as interleaved lanes
(``commitlog.walk_lanes``, as the header-only decoder does) and ``audit_positions`` audits the records found;
both loops share ``_audit_record``. ``audit_tiles`` does the same audit inside another decoder's walk (the
dispatch's, ``codec.dispatch_kernel.DispatchDecoder`` with ``audit``): ``tiles.walk_tiles``' walk and header
decode a tile at a time, each tile's records audited right behind it while they are in cache, so the audit's
verdicts come from the one pass that also decodes the headers. The GIL is released throughout.
Runs wherever a segment is scanned (Spark's Python workers for ``rocketmq_segments``, the CLI, tests).
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from rocketstore_spark.codec import commitlog, native
from rocketstore_spark.codec.commitlog import (NO_STOP, POS_BODY_CRC, POS_PHYSICAL_OFFSET, POS_STORE_TIMESTAMP_BH,
                                               POS_SYS_FLAG, STOP_LIMIT, TILE_FULL, Stop, be32, be64, host_lengths)
from rocketstore_spark.codec.crc32 import body_crc_matches, prop_crc_verdict
from rocketstore_spark.codec.decoder import Decoded
from rocketstore_spark.codec.tiles import walk_tile

EARLIEST_PLAUSIBLE_MS = 1_325_376_000_000      # 2012-01-01: before RocketMQ (MetaQ 3) existed
FUTURE_SLACK_MS = 86_400_000                   # a day after the scan: clocks of copies and hosts differ

# AuditDecoder.state: one int64 slot each, over the records of a segment in walk order (misplaced ones left out)
S_NOW = 0                  # input: the scan's clock, ms (store times after S_NOW + FUTURE_SLACK_MS are implausible)
S_RECORDS = 1
S_FIRST_TS = 2             # store time of the first record
S_LAST_TS = 3              # ... and of the last (the previous one, for the next record's step)
S_PROP_FAILURES = 4        # records whose __CRC32# property is present and wrong (first ones: prop_failures)
S_BACK = 5                 # records stored earlier than the record before them
S_FIRST_BACK_POS = 6
S_FIRST_BACK_STEP = 7      # ms
S_LARGEST_STEP = 8
S_ODD = 9                  # records with a store time before 2012 or after tomorrow
S_FIRST_ODD_POS = 10
S_FIRST_ODD_TS = 11
S_CRC_FAILURES = 12        # bodies failing BODYCRC (each one's position also goes to the reader: O_CRC)
S_FIRST_CRC_POS = 13
STATE_SLOTS = 14

# out: file positions per call, as many as OUT_ROWS (a full column ends the call with LIMIT; the reader goes on)
OUT_ROWS = 4096
O_CRC = 0                  # bodies failing BODYCRC
O_MISPLACED = 1            # records whose stored PHYSICALOFFSET (O_STORED) is not base offset + position
O_STORED = 2
O_KEEP = 3                 # placed records that bound runs of misplaced ones: the first and the last of the
                           # call, and each one right after a misplaced record
# counts: how many of each O_* row one call filled, and the call's own bookkeeping
C_RECORDS = 4              # placed records
C_LAST_PLACED = 5
C_AFTER_MISPLACED = 6      # 1 when the previous record was misplaced (or none was seen yet)
COUNT_SLOTS = 7
# without BODYCRC the walk is bound by memory latency: there, commitlog.walk_lanes walks regions of at most
# LANE_REGION bytes as interleaved lanes and audit_positions audits what they found
LANE_REGION = 8 << 20
LANE_ROWS = 1 << 16


@numba.njit(cache=True, nogil=True)
def audit_walk(buf, buf_file_pos, file_end, base_offset, start, limit, check_crc, check_props, check_times,
               state, out, counts, prop_failures, frame=0):
    """Audit the records from file position ``start`` while the record start is < ``limit``, hopping by
    TOTALSIZE. ``buf`` holds file bytes [buf_file_pos, buf_file_pos + len(buf)), ``file_end`` is the file
    size. Each valid record goes through ``_audit_record``. Returns (records, next_position, Stop) as
    ``commitlog.walk``; a full ``out`` row ends the call with LIMIT. ``frame``: a DLedger segment's entry header
    (``commitlog.check_record``): records are audited at their own positions, the walk hops by entries."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    buf_end = buf_file_pos + buf.shape[0]
    _start_call(counts)
    cap = out.shape[1]
    pos = start
    while pos < limit and counts[O_CRC] < cap and counts[O_MISPLACED] < cap and counts[O_KEEP] < cap - 1:
        stop, total, body_pos, body_len, props_len = commitlog.check_record(buf, buf_file_pos, buf_end, file_end, pos,
                                                                            frame)
        if stop != NO_STOP:
            _keep_last(out, counts)
            return counts[C_RECORDS], pos, stop
        record = pos + frame
        _audit_record(buf, record - buf_file_pos, record, base_offset, total, body_pos, body_len, props_len,
                      check_crc, check_props, check_times, state, out, counts, prop_failures)
        pos = record + total
    _keep_last(out, counts)
    return counts[C_RECORDS], pos, STOP_LIMIT


@numba.njit(cache=True, nogil=True)
def audit_positions(buf, buf_file_pos, base_offset, positions, n, check_props, check_times, state, out, counts,
                    prop_failures):
    """``_audit_record`` (no BODYCRC) of the n records at file ``positions``, already walked and found valid
    (``commitlog.walk_lanes``); ``out`` holds at least n + 1 columns. Returns the placed records."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    buf_end = buf_file_pos + buf.shape[0]
    _start_call(counts)
    for i in range(n):
        pos = positions[i]
        _, total, body_pos, body_len, props_len = commitlog.check_record(buf, buf_file_pos, buf_end, buf_end, pos, 0)
        _audit_record(buf, pos - buf_file_pos, pos, base_offset, total, body_pos, body_len, props_len, False,
                      check_props, check_times, state, out, counts, prop_failures)
    _keep_last(out, counts)
    return counts[C_RECORDS]


@numba.njit(cache=True, nogil=True)
def audit_tiles(buf, buf_file_pos, file_end, base_offset, start, limit, max_records, max_bytes, out_pos, stream, want,
                header, check_crc, check_props, check_times, state, out, counts, prop_failures, frame=0):
    """``tiles.walk_tiles``' walk (``tiles.walk_tile`` after tile, at most ``max_records`` records and none after
    ``max_bytes`` of them; their positions into ``out_pos``, their header fields ``want`` into ``header``) with each tile's records audited (``_audit_record``: placement, BODYCRC with
    ``check_crc``, ``__CRC32#``, store times) right after its headers are decoded, while the tile is in cache.
    ``out`` holds at least max_records + 1 columns (it never fills). Returns (count, next_position, Stop)."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    buf_end = buf_file_pos + buf.shape[0]
    _start_call(counts)
    pos = start
    count = 0
    used = 0
    fetched = start - buf_file_pos
    while True:
        first = count
        count, pos, stop, used, fetched = walk_tile(buf, buf_file_pos, buf_end, file_end, pos, limit, count,
                                                     max_records, used, max_bytes, out_pos, stream, fetched, frame,
                                                     want, header)
        if count > first:
            for i in range(first, count):
                record = out_pos[i]         # a record the walk found valid (a DLedger entry's: checked as one)
                _, total, body_pos, body_len, props_len = commitlog.check_record(buf, buf_file_pos, buf_end, buf_end,
                                                                                 record, 0)
                _audit_record(buf, record - buf_file_pos, record, base_offset, total, body_pos, body_len, props_len,
                              check_crc, check_props, check_times, state, out, counts, prop_failures)
        if stop != TILE_FULL:
            break
        if count >= max_records:
            stop = STOP_LIMIT
            break
    _keep_last(out, counts)
    return count, pos, stop


@numba.njit(cache=True, nogil=True, inline="always")
def _start_call(counts):
    counts[:] = 0
    counts[C_LAST_PLACED] = -1
    counts[C_AFTER_MISPLACED] = 1       # the first placed record of the call is kept


@numba.njit(cache=True, nogil=True, inline="always")
def _audit_record(buf, p, pos, base_offset, total, body_pos, body_len, props_len, check_crc, check_props,
                  check_times, state, out, counts, prop_failures):
    """One valid record at buffer index p (file position pos): placement, BODYCRC (``check_crc``),
    ``__CRC32#`` (``check_props``; the first len(prop_failures) failing positions go there), store times
    (``check_times``) into ``state``; failing positions into ``out`` (rows O_*, ``counts`` of each)."""
    stored = be64(buf, p + POS_PHYSICAL_OFFSET)
    if stored != base_offset + pos:
        out[O_MISPLACED, counts[O_MISPLACED]] = pos
        out[O_STORED, counts[O_MISPLACED]] = stored
        counts[O_MISPLACED] += 1
        counts[C_AFTER_MISPLACED] = 1
        return
    if counts[C_AFTER_MISPLACED]:
        out[O_KEEP, counts[O_KEEP]] = pos
        counts[O_KEEP] += 1
        counts[C_AFTER_MISPLACED] = 0
    counts[C_LAST_PLACED] = pos
    counts[C_RECORDS] += 1
    if check_crc and not body_crc_matches(buf, p + body_pos, body_len, be32(buf, p + POS_BODY_CRC)):
        out[O_CRC, counts[O_CRC]] = pos
        counts[O_CRC] += 1
        if state[S_CRC_FAILURES] == 0:
            state[S_FIRST_CRC_POS] = pos
        state[S_CRC_FAILURES] += 1
    if check_props:
        ok, present = prop_crc_verdict(buf, p, total, props_len)
        if present and not ok:
            if state[S_PROP_FAILURES] < prop_failures.shape[0]:
                prop_failures[state[S_PROP_FAILURES]] = pos
            state[S_PROP_FAILURES] += 1
    bh, _ = host_lengths(be32(buf, p + POS_SYS_FLAG))
    ts = be64(buf, p + POS_STORE_TIMESTAMP_BH + bh)
    if state[S_RECORDS] == 0:
        state[S_FIRST_TS] = ts
    elif check_times:
        _time_step(state, pos, state[S_LAST_TS] - ts)
    if check_times and (ts < EARLIEST_PLAUSIBLE_MS or ts > state[S_NOW] + FUTURE_SLACK_MS):
        if state[S_ODD] == 0:
            state[S_FIRST_ODD_POS] = pos
            state[S_FIRST_ODD_TS] = ts
        state[S_ODD] += 1
    state[S_LAST_TS] = ts
    state[S_RECORDS] += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _time_step(state, pos, step):
    """A record stored ``step`` ms earlier than the one before it (a step back when > 0)."""
    if step > 0:
        if state[S_BACK] == 0:
            state[S_FIRST_BACK_POS] = pos
            state[S_FIRST_BACK_STEP] = step
        state[S_BACK] += 1
        state[S_LARGEST_STEP] = max(state[S_LARGEST_STEP], step)


@numba.njit(cache=True, nogil=True, inline="always")
def _keep_last(out, counts):
    k, last = counts[O_KEEP], counts[C_LAST_PLACED]
    if last >= 0 and (k == 0 or out[O_KEEP, k - 1] != last):
        out[O_KEEP, k] = last
        counts[O_KEEP] += 1


@dataclass(frozen=True)
class Audited(Decoded):
    """One ``AuditDecoder.decode`` call, shaped as ``Decoded`` for the reader: ``records`` valid records read
    (``n``); no batch, no header. ``positions`` holds only the placed records the reader's bookkeeping needs
    (the first and last of the call and each one right after a misplaced record), not all of them."""
    records: int = 0

    @property
    def n(self) -> int:
        return self.records


class AuditDecoder:
    """Drop-in for ``RecordDecoder`` where no column is wanted: a segment scan's verdicts and counts (see the
    module docstring). ``reset`` (the reader calls it when a range starts) clears ``state`` and
    ``prop_failures``; read them after the reader is exhausted. ``prop_failure_limit``: how many failing
    ``__CRC32#`` positions to keep (all are counted). With ``check_crc`` every call is one ``audit_walk``;
    without it, clean regions are walked as interleaved lanes (``commitlog.walk_lanes``) first."""

    #: bytes of DLedger entry header before each record of the segment being read (0: a classic segment); set by
    #: ``store.segment_reader.SegmentReader`` for each range it reads (``commitlog.check_record``)
    frame = 0

    def __init__(self, *, check_crc: bool = True, check_properties_crc: bool = False, check_times: bool = False,
                 prop_failure_limit: int = 20, now_ms: int = 0):
        self.check_crc, self.check_props, self.check_times = check_crc, check_properties_crc, check_times
        self.now_ms = now_ms
        self.state = np.zeros(STATE_SLOTS, dtype=np.int64)
        self._prop_failures = np.zeros(prop_failure_limit, dtype=np.int64)
        self._out = np.empty((4, OUT_ROWS if check_crc else LANE_ROWS + 1), dtype=np.int64)
        self._counts = np.zeros(COUNT_SLOTS, dtype=np.int64)
        self._tile_out = None               # ``audit_tiles``' out rows, sized on its callers' batches
        if not check_crc:
            self._positions = np.empty(LANE_ROWS, dtype=np.int64)
            self._lane_counts = np.zeros(commitlog.LANES, dtype=np.int64)
        self.reset()

    @property
    def reads_every_byte(self) -> bool:
        """With BODYCRC every body is read, and the ``__CRC32#`` check reads every whole record
        (``RecordDecoder.reads_every_byte``)."""
        return self.check_crc or self.check_props

    def reset(self) -> None:
        self.state[:] = 0
        self.state[S_NOW] = self.now_ms
        self.lanes = not self.check_crc

    @property
    def prop_failures(self) -> np.ndarray:
        """File positions of the first records failing ``__CRC32#`` (``state[S_PROP_FAILURES]`` counts all)."""
        return self._prop_failures[:min(int(self.state[S_PROP_FAILURES]), len(self._prop_failures))].copy()

    def decode(self, window: np.ndarray, window_position: int, file_size: int, base_offset: int,
               start: int, limit: int) -> Audited:
        """As ``RecordDecoder.decode``: audit from file position ``start`` while record starts are < ``limit``."""
        out, counts = self._out, self._counts
        walked = -1
        if self.lanes:
            walked, next_pos, stop = self._walk_lanes(window, window_position, file_size, base_offset, start, limit)
        if walked >= 0:
            n = audit_positions(window, window_position, base_offset, self._positions, walked, self.check_props,
                                self.check_times, self.state, out, counts, self._prop_failures)
        else:
            n, next_pos, stop = audit_walk(window, window_position, file_size, base_offset, start, limit,
                                           self.check_crc, self.check_props, self.check_times, self.state, out,
                                           counts, self._prop_failures, self.frame)
        c_crc, c_mis, c_keep = int(counts[O_CRC]), int(counts[O_MISPLACED]), int(counts[O_KEEP])
        return Audited(None, out[O_KEEP, :c_keep].copy(), None, int(next_pos), Stop(stop),
                       out[O_MISPLACED, :c_mis].copy(), out[O_STORED, :c_mis].copy(), out[O_CRC, :c_crc].copy(),
                       records=int(n))

    def audit_tiles(self, window: np.ndarray, window_position: int, file_size: int, base_offset: int, start: int,
                    limit: int, max_records: int, max_bytes: int, positions: np.ndarray, stream: int, header,
                    frame: int) -> tuple[int, int, int, np.ndarray]:
        """``audit_tiles`` with this decoder's checks and state, for a decoder that walks for its own output (the
        dispatch's): the walked records' positions go to ``positions``, their header fields to ``header``
        (``commitlog.HeaderColumns``). Returns (count, next_position, stop, positions of the bodies failing
        BODYCRC)."""
        if self._tile_out is None or self._tile_out.shape[1] <= max_records:
            self._tile_out = np.empty((4, max_records + 1), dtype=np.int64)
        out, counts = self._tile_out, self._counts
        count, next_pos, stop = audit_tiles(window, window_position, file_size, base_offset, start, limit, max_records,
                                            max_bytes, positions, stream, header.want, header.arrays, self.check_crc,
                                            self.check_props, self.check_times, self.state, out, counts,
                                            self._prop_failures, frame)
        return int(count), int(next_pos), int(stop), out[O_CRC, :int(counts[O_CRC])].copy()

    def _walk_lanes(self, window, window_position, file_size, base_offset, start, limit):
        """Record starts of a clean region of at most LANE_REGION bytes into ``_positions``, in order: (count,
        next_position, stop); count -1 where lanes do not apply (damage, a small region: walk sequentially)."""
        lanes, rows, lane_counts = commitlog.LANES, LANE_ROWS // commitlog.LANES, self._lane_counts
        found = self._positions
        count, next_pos, stop = commitlog.walk_lanes(window, window_position, file_size, base_offset, start,
                                                     min(limit, start + LANE_REGION), lanes, rows, lane_counts, found,
                                                     self.frame)
        if count < 0:
            if lane_counts.max() >= rows:
                self.lanes = False              # records this small: lanes are not worth retrying in this range
            return -1, start, STOP_LIMIT
        if count:
            self._positions = np.concatenate([found[k * rows:k * rows + c] for k, c in enumerate(lane_counts)]
                                             + [found[count:]])
        return count, next_pos, stop
