"""CommitLog records: walking record starts and decoding the fixed-width header (docs/format/commitlog.md).

Layout of one record (all integers big-endian, signed; ``bh``/``sh`` = born/store host length, 8 for IPv4
and 20 for IPv6, chosen by SYSFLAG bits 0x10 / 0x20)::

     0  TOTALSIZE  int32      whole record, this field included
     4  MAGICCODE  int32      0xDAA320A7 (v1) | 0xDAA320AB (v2, 5.x) | 0xCBD43194 BLANK (end of file)
     8  BODYCRC    int32      crc32(body) & 0x7FFFFFFF
    12  QUEUEID    int32
    16  FLAG       int32
    20  QUEUEOFFSET int64     logical offset in (topic, queue)
    28  PHYSICALOFFSET int64  the record's own physical offset
    36  SYSFLAG    int32
    40  BORNTIMESTAMP int64   ms
    48  BORNHOST   bh         address + int32 port
 48+bh  STORETIMESTAMP int64  ms
 56+bh  STOREHOST  sh
 56+bh+sh RECONSUMETIMES int32
 60+bh+sh PREPAREDTRANSACTIONOFFSET int64
 68+bh+sh BODYLENGTH int32 = B
 72+bh+sh BODY       B bytes
          TOPICLENGTH int8 (v1) | int16 (v2) = T, then TOPIC (UTF-8)
          PROPERTIESLENGTH int16 = P, then PROPERTIES (name 0x01 value 0x02 ..., see properties.py)

    TOTALSIZE = 72 + bh + sh + B + (1|2) + T + 2 + P

A BLANK record writes only TOTALSIZE (= bytes to the end of the file) and the magic; the rest of the file
is undefined. Records never span files.

A DLedger CommitLog (``dledger-<selfId>/data/``, docs/format/dledger.md) frames every record in a 48-byte entry
header: magic 1, size (= 48 + record), index, term, pos (the entry's own physical offset), channel, chain CRC,
body CRC (both written 0), body length; a record's PHYSICALOFFSET is its entry's pos + 48. Its end-of-file
blank is magic -1 and the bytes left. The walk takes such a segment with ``frame`` = 48 (0: a classic one):
it checks each entry header as DLedger's recovery does, then the record inside it as RocketMQ does, returns
the *record's* position and hops by the entry's size.

This module is pure (numpy buffers in, numpy arrays out) and compiled with numba. ``walk`` hops record to
record by TOTALSIZE and validates each header the way RocketMQ's ``checkMessageAndReturnSize`` does
structurally (magic, bounds, length formula; the CRC is a separate column, never a reason to stop);
``resync`` finds the next record start after damage or at an arbitrary split position.
"""
from __future__ import annotations

import functools

from enum import IntEnum, IntFlag

import numba
import numpy as np

from rocketstore_spark.codec import native

MAX_SEGMENT_SIZE = 2**31 - 1   # mappedFileSizeCommitLog is a Java int: no larger segment is RocketMQ's
MAGIC_V1 = -626843481          # 0xDAA320A7
MAGIC_V2 = -626843477          # 0xDAA320AB
BLANK_MAGIC = -875286124       # 0xCBD43194
MIN_RECORD_SIZE = 91           # v1, IPv4 hosts, empty body/topic/properties
DLEDGER_HEADER = 48            # DLedgerEntry.BODY_OFFSET: the entry header before the record (frame)
DLEDGER_MAGIC = 1              # DLedgerMmapFileStore.CURRENT_MAGIC
DLEDGER_BLANK_MAGIC = -1       # MmapFileList.BLANK_MAGIC_CODE: the rest of the data file is unused
DLEDGER_POS = 24               # DLedgerEntry.POS_OFFSET: the entry's own physical offset (int64)
DLEDGER_BODY_LENGTH = 44       # int32: size - 48
HOST_V4 = 8                    # 4-byte address + int32 port
HOST_V6 = 20                   # 16-byte address + int32 port
# fixed positions inside a record
POS_MAGIC = 4
POS_BODY_CRC = 8
POS_QUEUE_ID = 12
POS_FLAG = 16
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_BORN_TIMESTAMP = 40
POS_BORN_HOST = 48
# positions after the hosts: base + born host length (bh) [+ store host length (sh)]
POS_STORE_TIMESTAMP_BH = 48          # + bh
POS_STORE_HOST_BH = 56               # + bh
POS_RECONSUME_TIMES_BH_SH = 56       # + bh + sh
POS_PREPARED_OFFSET_BH_SH = 60       # + bh + sh
POS_BODY_LENGTH_BH_SH = 68           # + bh + sh
POS_BODY_BH_SH = 72                  # + bh + sh
# SYSFLAG bits the walk and the decoder test (SysFlag below names them all)
FLAG_BORNHOST_V6 = 0x010
FLAG_STOREHOST_V6 = 0x020
TRANSACTION_MASK = 0x00C
TRANSACTION_PREPARED = 0x004
TRANSACTION_ROLLBACK = 0x00C


class SysFlag(IntFlag):
    COMPRESSED = 0x001
    MULTI_TAGS = 0x002
    TRANSACTION_PREPARED = 0x004
    TRANSACTION_COMMIT = 0x008
    TRANSACTION_ROLLBACK = 0x00C
    BORNHOST_V6 = 0x010
    STOREHOST_V6 = 0x020
    NEED_UNWRAP = 0x040
    INNER_BATCH = 0x080
    COMPRESSION_TYPE = 0x700


TRANSACTION_TYPES = ("NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK")   # index = (sys_flag & 0xC) >> 2


# why a walk stopped, as plain ints for compiled code (Stop names them); < STOP_DAMAGE: a normal end
STOP_LIMIT = 0
STOP_NEED_MORE = 1
STOP_BLANK = 2
STOP_ZERO = 3
STOP_END_OF_FILE = 4
STOP_DAMAGE = 10
STOP_BAD_MAGIC = 10
STOP_BAD_LENGTH = 11
STOP_LENGTH_MISMATCH = 12
STOP_BAD_ENTRY = 13            # a DLedger entry header that does not frame its record
NO_STOP = -1                   # check_record: a valid record


class Stop(IntEnum):
    """Why a walk stopped. Values < 10 are normal ends; >= 10 are damage (a finding)."""
    LIMIT = STOP_LIMIT                  # reached the split end or the batch budget: not an end of data
    NEED_MORE = STOP_NEED_MORE          # the record runs past the bytes in the buffer: refill and continue
    BLANK = STOP_BLANK                  # end-of-file BLANK record
    ZERO = STOP_ZERO                    # zero bytes where a record would start: the end of the written log
    END_OF_FILE = STOP_END_OF_FILE      # fewer than 8 bytes left in the file
    BAD_MAGIC = STOP_BAD_MAGIC          # neither a message magic nor BLANK
    BAD_LENGTH = STOP_BAD_LENGTH        # TOTALSIZE below the minimum or beyond the end of the file
    LENGTH_MISMATCH = STOP_LENGTH_MISMATCH  # the inner lengths do not add up to TOTALSIZE ("half message")
    BAD_ENTRY = STOP_BAD_ENTRY          # DLedger: entry size, body length, pos or the record inside disagree

    @property
    def is_damage(self) -> bool:
        return self >= STOP_DAMAGE

    @property
    def check(self) -> str:
        """The catalogued check id of a damage stop (checks.CATALOGUE)."""
        return f"commitlog.{self.name.lower()}"

    @property
    def describe(self) -> str:
        return _DESCRIPTIONS[self]


_DESCRIPTIONS = {
    Stop.LIMIT: "split end",
    Stop.NEED_MORE: "record continues past the buffer",
    Stop.BLANK: "BLANK end-of-file record",
    Stop.ZERO: "zero fill (end of the written log)",
    Stop.END_OF_FILE: "end of file",
    Stop.BAD_MAGIC: "bad magic code",
    Stop.BAD_LENGTH: "impossible TOTALSIZE",
    Stop.LENGTH_MISMATCH: "field lengths do not add up to TOTALSIZE (truncated or corrupt record)",
    Stop.BAD_ENTRY: "DLedger entry header does not frame its record (size, body length or pos)",
}


@numba.njit(cache=True, nogil=True, inline="always")
def be32(buf, i):
    return np.int64(native.load_be32(buf, i))


@numba.njit(cache=True, nogil=True, inline="always")
def be16(buf, i):
    return np.int64(native.load_be16(buf, i))


@numba.njit(cache=True, nogil=True, inline="always")
def be64(buf, i):
    return native.load_be64(buf, i)


@numba.njit(cache=True, nogil=True, inline="always")
def span_equals(buf, pos, length, word):
    """Does buf[pos:pos+length] equal the byte array ``word``?"""
    if length != word.shape[0]:
        return False
    for i in range(length):
        if buf[pos + i] != word[i]:
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def host_lengths(sys_flag):
    """(born host length, store host length) from SYSFLAG."""
    return (HOST_V6 if sys_flag & FLAG_BORNHOST_V6 else HOST_V4), (HOST_V6 if sys_flag & FLAG_STOREHOST_V6 else HOST_V4)


@numba.njit(cache=True, nogil=True)
def layout(buf, p, total, magic):
    """Inner spans of the record at buffer index p: (body_pos, body_len, topic_pos, topic_len,
    props_pos, props_len), all relative to p, or body_len = -1 when the lengths do not add up."""
    bh, sh = host_lengths(be32(buf, p + POS_SYS_FLAG))
    body_pos = POS_BODY_BH_SH + bh + sh
    if body_pos > total:
        return body_pos, -1, 0, 0, 0, 0
    body_len = be32(buf, p + body_pos - 4)
    tl_size = 1 if magic == MAGIC_V1 else 2
    tl_pos = body_pos + body_len
    if body_len < 0 or tl_pos + tl_size + 2 > total:
        return body_pos, -1, 0, 0, 0, 0
    if tl_size == 1:
        topic_len = np.int64(buf[p + tl_pos])
        if topic_len >= 128:
            topic_len -= 256          # Java reads the byte signed
    else:
        topic_len = be16(buf, p + tl_pos)
    topic_pos = tl_pos + tl_size
    pl_pos = topic_pos + topic_len
    if topic_len < 0 or pl_pos + 2 > total:
        return body_pos, -1, 0, 0, 0, 0
    props_len = be16(buf, p + pl_pos)
    props_pos = pl_pos + 2
    if props_len < 0 or props_pos + props_len != total:
        return body_pos, -1, 0, 0, 0, 0
    return body_pos, body_len, topic_pos, topic_len, props_pos, props_len


@numba.njit(cache=True, nogil=True, inline="always")
def check_record(buf, buf_file_pos, buf_end, file_end, pos, frame):
    """Check the record at file position ``pos`` the way RocketMQ does structurally: (stop, total, body_pos,
    body_len, props_len) with stop = NO_STOP for a valid record lying wholly in the buffer (spans relative to
    its start, as ``layout``), else the Stop code and zeros. ``frame`` > 0 (DLedger): ``pos`` is an entry,
    checked as DLedger's recovery checks it (``check_entry``), whose record at ``pos + frame`` must fill it;
    the spans are then relative to the record and the entry's size is ``total + frame``."""
    if frame == 0:
        return _check_plain(buf, buf_file_pos, buf_end, file_end, pos)
    stop, size = check_entry(buf, buf_file_pos, buf_end, file_end, pos)
    if stop != NO_STOP:
        return stop, 0, 0, 0, 0
    stop, total, body_pos, body_len, props_len = _check_plain(buf, buf_file_pos, buf_end, pos + size, pos + frame)
    if stop == STOP_NEED_MORE:
        return stop, 0, 0, 0, 0
    p = pos - buf_file_pos
    if stop != NO_STOP or total + frame != size or \
            be64(buf, p + DLEDGER_POS) + frame != be64(buf, p + frame + POS_PHYSICAL_OFFSET):
        return STOP_BAD_ENTRY, 0, 0, 0, 0
    return NO_STOP, total, body_pos, body_len, props_len


@numba.njit(cache=True, nogil=True, inline="always")
def check_entry(buf, buf_file_pos, buf_end, file_end, pos):
    """The DLedger entry header at file position ``pos``, as ``DLedgerMmapFileStore.recover`` reads it: (stop,
    size). Magic -1 is the data file's blank (its end), a zero size the end of the written data; else the magic
    must be 1, the size more than the 48-byte header and within the file, and the body length size - 48."""
    if pos + 8 > file_end:
        return STOP_END_OF_FILE, 0
    if pos + 8 > buf_end:
        return STOP_NEED_MORE, 0
    p = pos - buf_file_pos
    magic = be32(buf, p)
    size = be32(buf, p + 4)
    if magic == DLEDGER_BLANK_MAGIC:
        return STOP_BLANK, 0
    if size == 0:
        return (STOP_ZERO if magic == 0 else STOP_BAD_ENTRY), 0
    if magic != DLEDGER_MAGIC:
        return STOP_BAD_MAGIC, 0
    if size <= DLEDGER_HEADER or pos + size > file_end:
        return STOP_BAD_LENGTH, 0
    if pos + DLEDGER_HEADER > buf_end:
        return STOP_NEED_MORE, 0
    if be32(buf, p + DLEDGER_BODY_LENGTH) + DLEDGER_HEADER != size:
        return STOP_BAD_ENTRY, 0
    return NO_STOP, size


@numba.njit(cache=True, nogil=True, inline="always")
def _check_plain(buf, buf_file_pos, buf_end, file_end, pos):
    """``check_record`` of a classic record (no entry frame)."""
    if pos + 8 > file_end:
        return STOP_END_OF_FILE, 0, 0, 0, 0
    if pos + 8 > buf_end:
        return STOP_NEED_MORE, 0, 0, 0, 0
    p = pos - buf_file_pos
    total = be32(buf, p)
    magic = be32(buf, p + POS_MAGIC)
    if magic == BLANK_MAGIC:
        return STOP_BLANK, 0, 0, 0, 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return (STOP_ZERO if total == 0 and magic == 0 else STOP_BAD_MAGIC), 0, 0, 0, 0
    if total < MIN_RECORD_SIZE or pos + total > file_end:
        return STOP_BAD_LENGTH, 0, 0, 0, 0
    if pos + total > buf_end:
        return STOP_NEED_MORE, 0, 0, 0, 0
    body_pos, body_len, _, _, _, props_len = layout(buf, p, total, magic)
    if body_len < 0:
        return STOP_LENGTH_MISMATCH, 0, 0, 0, 0
    return NO_STOP, total, body_pos, body_len, props_len


@numba.njit(cache=True, nogil=True, inline="always")
def _record(buf, buf_file_pos, buf_end, file_end, pos, frame):
    """``check_record`` without the spans: (stop, bytes to the next record or entry)."""
    stop, total, _, _, _ = check_record(buf, buf_file_pos, buf_end, file_end, pos, frame)
    return stop, total + frame


@numba.njit(cache=True, nogil=True)
def check_records(buf, buf_file_pos, file_end, positions, out_stop):
    """``check_record`` at each of the file ``positions`` (records named from elsewhere, e.g. by a ConsumeQueue,
    rather than walked to): ``out_stop[i]`` is NO_STOP for a valid record lying wholly in the buffer, else its
    Stop code (NEED_MORE for one that starts before the buffer or runs past it). Returns how many failed."""
    buf_end = buf_file_pos + buf.shape[0]
    failed = 0
    for i in range(positions.shape[0]):
        pos = positions[i]
        stop = STOP_NEED_MORE
        if pos >= buf_file_pos:
            stop, _ = _record(buf, buf_file_pos, buf_end, file_end, pos, 0)
        out_stop[i] = stop
        if stop != NO_STOP:
            failed += 1
    return failed


TILE_FULL = -2                 # walk_span: it walked as many records, or bytes, as the tile takes


@numba.njit(cache=True, nogil=True, inline="always")
def walk_span(buf, buf_file_pos, buf_end, file_end, pos, limit, count, stop_count, used, max_bytes, stop_used, out_pos,
              stream, fetched, frame):
    """The walk itself (``walk``), from ``pos`` with ``count`` records walked and ``used`` bytes so far, until
    ``count`` reaches ``stop_count`` or ``used`` reaches ``stop_used`` (then stop = TILE_FULL). ``frame``: the
    DLedger entry header before each record (0: none); ``out_pos`` gets record positions, the walk hops by
    entries. Returns (count, next_position, stop, used, fetched)."""
    while True:
        if pos >= limit or (count > 0 and used >= max_bytes):
            return count, pos, STOP_LIMIT, used, fetched
        if count >= stop_count or used >= stop_used:
            return count, pos, TILE_FULL, used, fetched
        if stream > 0:
            ahead = min(pos + stream, buf_end) - buf_file_pos
            while fetched < ahead:
                native.prefetch(buf, fetched)
                fetched += 64
        stop, total = _record(buf, buf_file_pos, buf_end, file_end, pos, frame)
        if stop != NO_STOP:
            return count, pos, stop, used, fetched
        out_pos[count] = pos + frame
        count += 1
        used += total
        pos += total


@numba.njit(cache=True, nogil=True)
def walk(buf, buf_file_pos, file_end, start, limit, max_records, max_bytes, out_pos, stream=0, frame=0):
    """Hop from file position ``start`` by TOTALSIZE while the record start is < ``limit``, checking each
    record; the file positions of valid records go to ``out_pos`` (decode them with ``decode_header``, or
    walk with ``tiles.walk_tiles``).

    ``buf`` holds file bytes [buf_file_pos, buf_file_pos + len(buf)); ``file_end`` is the file size. At most
    ``max_records`` records, and none after ``max_bytes`` of them. ``stream`` > 0: keep every cache line up
    to that many bytes ahead of the walk prefetched — for callers that will read whole records (bodies,
    properties) anyway; a hop then does not wait for memory (each needs the TOTALSIZE it just loaded, so
    hops cannot overlap their misses otherwise). Returns (count, next_position, Stop).
    """
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    count, pos, stop, _, _ = walk_span(buf, buf_file_pos, buf_file_pos + buf.shape[0], file_end, start, limit, 0,
                                        max_records, 0, max_bytes, 1 << 62, out_pos, stream, start - buf_file_pos,
                                        frame)
    return count, pos, (STOP_LIMIT if stop == TILE_FULL else stop)


LANES = 4
LANE_MIN_BYTES = 1 << 20          # below this per lane, interleaving is not worth the resyncs
LANE_RESYNC_SCAN = 64 << 10       # how far a lane looks for its first record start


@numba.njit(cache=True, nogil=True)
def walk_lanes(buf, buf_file_pos, file_end, base_offset, start, limit, lanes, lane_rows, lane_counts, out_pos, frame=0):
    """``walk`` over the rest of the buffer as ``lanes`` interleaved hops. A walk is bound by memory latency
    (each hop needs the TOTALSIZE it just loaded); independent lanes overlap those waits.

    Lane k starts at the first record start (``resync``) after the k-th equal cut of [start, region end)
    and must end exactly where lane k+1 starts; its positions go to out_pos[k * lane_rows:][:lane_counts[k]].
    Only a clean region takes this path: damage, a lane that overflows or does not meet the next lane's
    start, or a region too small return count -1, and the caller walks sequentially (which then reports
    whatever is wrong as usual). The last lane ends like ``walk``: LIMIT at ``limit``, NEED_MORE at the end
    of the buffer, or a normal end of segment (BLANK, zero fill, end of file). Returns (count, next_position,
    Stop)."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    lane_counts[:] = 0
    buf_end = buf_file_pos + buf.shape[0]
    region_end = min(limit, buf_end)
    if region_end - start < lanes * LANE_MIN_BYTES:
        return -1, start, STOP_LIMIT
    starts = np.empty(lanes + 1, dtype=np.int64)
    starts[0] = start
    for k in range(1, lanes):
        cut = start + (region_end - start) * k // lanes
        s = resync(buf, buf_file_pos, base_offset, cut, min(cut + LANE_RESYNC_SCAN, region_end), frame)
        if s < 0:
            return -1, start, STOP_LIMIT
        starts[k] = s
    starts[lanes] = region_end
    pos = starts.copy()
    active = lanes
    done = np.zeros(lanes, dtype=np.bool_)
    last_stop = STOP_LIMIT
    while active > 0:
        for k in range(lanes):
            if done[k]:
                continue
            q = pos[k]
            last = k == lanes - 1
            if (q >= limit) if last else (q >= starts[k + 1]):
                done[k] = True
                active -= 1
                continue
            if lane_counts[k] >= lane_rows:
                return -1, start, STOP_LIMIT
            stop, total = _record(buf, buf_file_pos, buf_end, file_end, q, frame)
            if stop != NO_STOP:
                if last and stop < STOP_DAMAGE:      # NEED_MORE, BLANK, zero fill, end of file
                    last_stop = stop
                    done[k] = True
                    active -= 1
                    continue
                return -1, start, STOP_LIMIT
            out_pos[k * lane_rows + lane_counts[k]] = q + frame
            lane_counts[k] += 1
            pos[k] = q + total
    for k in range(lanes - 1):
        if pos[k] != starts[k + 1]:             # a lane start that was not a record start after all
            return -1, start, STOP_LIMIT
    return lane_counts.sum(), pos[lanes - 1], last_stop


# Header fields: index into decode_header's ``want`` and ``out`` (HEADER_FIELDS names them in this order, from these). The *_pos
# fields are buffer indices of a record's parts (valid only with the buffer they were decoded from).
H_TOTAL_SIZE = 0
H_MAGIC_CODE = 1
H_BODY_CRC = 2
H_QUEUE_ID = 3
H_FLAG = 4
H_QUEUE_OFFSET = 5
H_STORED_PHYSICAL_OFFSET = 6
H_SYS_FLAG = 7
H_BORN_TIMESTAMP = 8
H_STORE_TIMESTAMP = 9
H_RECONSUME_TIMES = 10
H_PREPARED_TRANSACTION_OFFSET = 11
H_BORN_HOST_POS = 12
H_STORE_HOST_POS = 13
H_BODY_POS = 14
H_BODY_LEN = 15
H_TOPIC_POS = 16
H_TOPIC_LEN = 17
H_PROPS_POS = 18
H_PROPS_LEN = 19
HEADER_FIELDS = tuple(name[2:].lower() for name, _ in sorted(
    ((name, value) for name, value in globals().items() if name.startswith("H_")), key=lambda item: item[1]))
# int32 where the record stores an int32 (half the bytes to write; Arrow takes them as they are)
HEADER_DTYPES = tuple(np.dtype(np.int32) if name in ("total_size", "magic_code", "body_crc", "queue_id", "flag",
                                                     "sys_flag", "reconsume_times") else np.dtype(np.int64)
                      for name in HEADER_FIELDS)


@numba.njit(cache=True, nogil=True)
def decode_header(buf, buf_file_pos, positions, first, n, want, out):
    """Header fields of the walked records at ``positions[first:n]``: field f (an H_* index) of record r goes
    to ``out[f][r]`` when ``want[f]``; ``out`` is a tuple of typed arrays (HEADER_DTYPES), empty for the fields
    nobody asked for, which are not decoded (a header-only scan does not pay for layout() or stores nobody
    reads)."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    w_total, w_magic, w_crc, w_qid = want[H_TOTAL_SIZE], want[H_MAGIC_CODE], want[H_BODY_CRC], want[H_QUEUE_ID]
    w_flag, w_qoff, w_phys = want[H_FLAG], want[H_QUEUE_OFFSET], want[H_STORED_PHYSICAL_OFFSET]
    w_sys, w_born, w_store = want[H_SYS_FLAG], want[H_BORN_TIMESTAMP], want[H_STORE_TIMESTAMP]
    w_recon, w_prep = want[H_RECONSUME_TIMES], want[H_PREPARED_TRANSACTION_OFFSET]
    w_bhost, w_shost = want[H_BORN_HOST_POS], want[H_STORE_HOST_POS]
    w_bpos, w_blen, w_tpos, w_tlen = want[H_BODY_POS], want[H_BODY_LEN], want[H_TOPIC_POS], want[H_TOPIC_LEN]
    w_ppos, w_plen = want[H_PROPS_POS], want[H_PROPS_LEN]
    spans = w_bpos or w_blen or w_tpos or w_tlen or w_ppos or w_plen
    o_total, o_magic, o_crc, o_qid = out[H_TOTAL_SIZE], out[H_MAGIC_CODE], out[H_BODY_CRC], out[H_QUEUE_ID]
    o_flag, o_qoff, o_phys = out[H_FLAG], out[H_QUEUE_OFFSET], out[H_STORED_PHYSICAL_OFFSET]
    o_sys, o_born, o_store = out[H_SYS_FLAG], out[H_BORN_TIMESTAMP], out[H_STORE_TIMESTAMP]
    o_recon, o_prep = out[H_RECONSUME_TIMES], out[H_PREPARED_TRANSACTION_OFFSET]
    o_bhost, o_shost = out[H_BORN_HOST_POS], out[H_STORE_HOST_POS]
    o_bpos, o_blen, o_tpos, o_tlen = out[H_BODY_POS], out[H_BODY_LEN], out[H_TOPIC_POS], out[H_TOPIC_LEN]
    o_ppos, o_plen = out[H_PROPS_POS], out[H_PROPS_LEN]
    for r in range(first, n):
        p = positions[r] - buf_file_pos
        total = be32(buf, p)
        magic = be32(buf, p + POS_MAGIC)
        sf = be32(buf, p + POS_SYS_FLAG)
        bh, sh = host_lengths(sf)
        if w_total:
            o_total[r] = total
        if w_magic:
            o_magic[r] = magic
        if w_crc:
            o_crc[r] = be32(buf, p + POS_BODY_CRC)
        if w_qid:
            o_qid[r] = be32(buf, p + POS_QUEUE_ID)
        if w_flag:
            o_flag[r] = be32(buf, p + POS_FLAG)
        if w_qoff:
            o_qoff[r] = be64(buf, p + POS_QUEUE_OFFSET)
        if w_phys:
            o_phys[r] = be64(buf, p + POS_PHYSICAL_OFFSET)
        if w_sys:
            o_sys[r] = sf
        if w_born:
            o_born[r] = be64(buf, p + POS_BORN_TIMESTAMP)
        if w_store:
            o_store[r] = be64(buf, p + POS_STORE_TIMESTAMP_BH + bh)
        if w_recon:
            o_recon[r] = be32(buf, p + POS_RECONSUME_TIMES_BH_SH + bh + sh)
        if w_prep:
            o_prep[r] = be64(buf, p + POS_PREPARED_OFFSET_BH_SH + bh + sh)
        if w_bhost:
            o_bhost[r] = p + POS_BORN_HOST
        if w_shost:
            o_shost[r] = p + POS_STORE_HOST_BH + bh
        if spans:
            bp, bl, tp, tl, pp, pl = layout(buf, p, total, magic)
            if w_bpos:
                o_bpos[r] = p + bp
            if w_blen:
                o_blen[r] = bl
            if w_tpos:
                o_tpos[r] = p + tp
            if w_tlen:
                o_tlen[r] = tl
            if w_ppos:
                o_ppos[r] = p + pp
            if w_plen:
                o_plen[r] = pl


@functools.lru_cache(maxsize=64)
def _header_layout(fields: frozenset[str]) -> tuple:
    """(fields, decode_header's want flags, the slots decoded with their dtypes and names, every slot's array
    for a batch that decodes nothing there) of a set of header fields, worked out once per set (a decoder
    asks for the same set every batch)."""
    unknown = set(fields) - set(HEADER_FIELDS)
    if unknown:
        raise ValueError(f"unknown header fields {sorted(unknown)}")
    want = np.array([name in fields for name in HEADER_FIELDS], dtype=np.bool_)
    want.flags.writeable = False
    slots = tuple((k, dtype, name) for k, (name, dtype) in enumerate(zip(HEADER_FIELDS, HEADER_DTYPES)) if want[k])
    # a field nobody asked for is an empty array (decode_header takes every slot and never writes those)
    empty = tuple(np.empty(0, dtype=dtype) for dtype in HEADER_DTYPES)
    return fields, want, slots, empty


class HeaderColumns:
    """Header fields of n decoded records (typed numpy arrays filled by decode_header). Only the requested
    fields exist; reading another raises AttributeError, so code that uses a field nobody decoded fails
    loudly. Runs wherever records are decoded."""

    def __init__(self, n: int, fields: frozenset[str]):
        self.n = n
        self.fields, self.want, self._slots, empty = _header_layout(frozenset(fields))
        arrays = list(empty)
        for k, dtype, _ in self._slots:
            arrays[k] = np.empty(n, dtype=dtype)
        self._set_arrays(arrays)

    def _set_arrays(self, arrays: list) -> None:
        self.arrays = tuple(arrays)
        self._by_name = {name: arrays[k] for k, _, name in self._slots}
        self.__dict__.update(self._by_name)         # plain attributes: __getattr__ only sees missing fields

    def __getattr__(self, name: str) -> np.ndarray:
        by_name = self.__dict__.get("_by_name", {})
        raise AttributeError(f"header field {name!r} was not decoded (decoded: {sorted(by_name)})")

    def take(self, mask: np.ndarray) -> "HeaderColumns":
        """The rows where ``mask`` is true (copies)."""
        out = HeaderColumns.__new__(HeaderColumns)
        out.n = int(mask.sum())
        out.fields = self.fields
        out.want = self.want
        out._slots = self._slots
        out._set_arrays([a[mask] if len(a) else a for a in self.arrays])
        return out

    def decode(self, buf, buf_file_pos: int, positions: np.ndarray) -> "HeaderColumns":
        decode_header(buf, buf_file_pos, positions, 0, self.n, self.want, self.arrays)
        return self

    def cut(self, n: int) -> "HeaderColumns":
        """The first ``n`` rows (views): columns allocated for a whole batch, of which fewer were walked."""
        self.n = n
        arrays = list(self.arrays)
        for k, _, _ in self._slots:
            arrays[k] = arrays[k][:n]
        self._set_arrays(arrays)
        return self


@numba.njit(cache=True, nogil=True)
def resync(buf, buf_file_pos, base_offset, start, stop_at, frame=0):
    """First file position p in [start, stop_at) where a record plausibly starts: a message magic at p+4
    and a stored PHYSICALOFFSET at p+28 equal to base_offset + p. Returns -1 if none in the buffer.
    ``frame`` > 0 (DLedger): p is an entry start instead — its record at p + frame found so, and the entry's
    magic and pos (= base_offset + p) in front of it.

    Candidates are found with memchr on the magic's first byte (0xDA, shared by both message magics), so
    zero fill and other data without that byte are skipped at memory speed."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    buf_end = buf_file_pos + buf.shape[0]
    last = min(stop_at + frame, buf_end - 36)
    p = max(start, buf_file_pos) + frame
    data = buf.ctypes.data
    while p < last:
        i = p - buf_file_pos
        found = native.memchr(data + i + POS_MAGIC, 0xDA, last - p)
        if found == 0:
            return -1
        i = found - data - POS_MAGIC
        p = buf_file_pos + i
        if buf[i + 5] == 0xA3 and buf[i + 6] == 0x20 and (buf[i + 7] == 0xA7 or buf[i + 7] == 0xAB):
            if be64(buf, i + POS_PHYSICAL_OFFSET) == base_offset + p:
                total = be32(buf, i)
                if total >= MIN_RECORD_SIZE:
                    if frame == 0:
                        return p
                    e = i - frame
                    if be32(buf, e) == DLEDGER_MAGIC and be64(buf, e + DLEDGER_POS) == base_offset + p - frame \
                            and be32(buf, e + 4) == total + frame:
                        return p - frame
        p += 1
    return -1
