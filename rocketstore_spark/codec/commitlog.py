"""CommitLog records: walking record starts and decoding the fixed-width header (store-format.md §2, §3).

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

This module is pure (numpy buffers in, numpy arrays out) and compiled with numba. ``walk`` hops record to
record by TOTALSIZE and validates each header the way RocketMQ's ``checkMessageAndReturnSize`` does
structurally (magic, bounds, length formula; the CRC is a separate column, never a reason to stop);
``resync`` finds the next record start after damage or at an arbitrary split position.
"""
from __future__ import annotations

from enum import IntEnum, IntFlag

import numba
import numpy as np

from rocketstore_spark.codec import native

MAGIC_V1 = -626843481          # 0xDAA320A7
MAGIC_V2 = -626843477          # 0xDAA320AB
BLANK_MAGIC = -875286124       # 0xCBD43194
MIN_RECORD_SIZE = 91           # v1, IPv4 hosts, empty body/topic/properties
POS_MAGIC = 4
POS_BODY_CRC = 8
POS_QUEUE_ID = 12
POS_FLAG = 16
POS_QUEUE_OFFSET = 20
POS_PHYSICAL_OFFSET = 28
POS_SYS_FLAG = 36
POS_BORN_TIMESTAMP = 40
POS_BORN_HOST = 48


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


TRANSACTION_MASK = 0x00C
TRANSACTION_TYPES = ("NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK")   # index = (sys_flag & 0xC) >> 2


class Stop(IntEnum):
    """Why a walk stopped. Values < 10 are normal ends; >= 10 are damage (a finding)."""
    LIMIT = 0            # reached the split end or the batch budget: not an end of data
    NEED_MORE = 1        # the record runs past the bytes in the buffer: refill and continue
    BLANK = 2            # end-of-file BLANK record
    ZERO = 3             # zero bytes where a record would start: the end of the written log
    END_OF_FILE = 4      # fewer than 8 bytes left in the file
    BAD_MAGIC = 10       # neither a message magic nor BLANK
    BAD_LENGTH = 11      # TOTALSIZE below the minimum or beyond the end of the file
    LENGTH_MISMATCH = 12  # the inner lengths do not add up to TOTALSIZE (RocketMQ: "half message")

    @property
    def is_damage(self) -> bool:
        return self >= 10

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


@numba.njit(cache=True, nogil=True)
def layout(buf, p, total, magic):
    """Inner spans of the record at buffer index p: (body_pos, body_len, topic_pos, topic_len,
    props_pos, props_len), all relative to p, or body_len = -1 when the lengths do not add up."""
    sys_flag = be32(buf, p + POS_SYS_FLAG)
    bh = 20 if sys_flag & 0x10 else 8
    sh = 20 if sys_flag & 0x20 else 8
    body_pos = 72 + bh + sh
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
def _record(buf, buf_file_pos, buf_end, file_end, pos):
    """Check the record at file position ``pos`` the way RocketMQ does structurally: (stop, total) with
    stop = -1 for a valid record lying wholly in the buffer, else the Stop code."""
    if pos + 8 > file_end:
        return 4, 0
    if pos + 8 > buf_end:
        return 1, 0
    p = pos - buf_file_pos
    total = be32(buf, p)
    magic = be32(buf, p + 4)
    if magic == BLANK_MAGIC:
        return 2, 0
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        return (3 if total == 0 and magic == 0 else 10), 0
    if total < MIN_RECORD_SIZE or pos + total > file_end:
        return 11, 0
    if pos + total > buf_end:
        return 1, 0
    if layout(buf, p, total, magic)[1] < 0:
        return 12, 0
    return -1, total


@numba.njit(cache=True, nogil=True)
def walk(buf, buf_file_pos, file_end, start, limit, max_records, max_bytes, out_pos):
    """Hop from file position ``start`` by TOTALSIZE while the record start is < ``limit``, checking each
    record; the file positions of valid records go to ``out_pos`` (decode them with ``decode_header``).

    ``buf`` holds file bytes [buf_file_pos, buf_file_pos + len(buf)); ``file_end`` is the file size.
    Returns (count, next_position, Stop).
    """
    buf_end = buf_file_pos + buf.shape[0]
    pos = start
    count = 0
    used = 0
    while True:
        if pos >= limit or count >= max_records or (count > 0 and used >= max_bytes):
            return count, pos, 0
        stop, total = _record(buf, buf_file_pos, buf_end, file_end, pos)
        if stop >= 0:
            return count, pos, stop
        out_pos[count] = pos
        count += 1
        used += total
        pos += total


LANES = 4
LANE_MIN_BYTES = 1 << 20          # below this per lane, interleaving is not worth the resyncs
LANE_RESYNC_SCAN = 64 << 10       # how far a lane looks for its first record start


@numba.njit(cache=True, nogil=True)
def walk_lanes(buf, buf_file_pos, file_end, base_offset, start, limit, lanes, lane_rows, lane_counts, out_pos):
    """``walk`` over the rest of the buffer as ``lanes`` interleaved hops. A walk is bound by memory latency
    (each hop needs the TOTALSIZE it just loaded); independent lanes overlap those waits.

    Lane k starts at the first record start (``resync``) after the k-th equal cut of [start, region end)
    and must end exactly where lane k+1 starts; its positions go to out_pos[k * lane_rows:][:lane_counts[k]].
    Only a clean region takes this path: damage, a lane that overflows or does not meet the next lane's
    start, or a region too small return count -1, and the caller walks sequentially (which then reports
    whatever is wrong as usual). The last lane ends like ``walk``: LIMIT at ``limit``, NEED_MORE at the end
    of the buffer, or a normal end of segment (BLANK, zero fill, end of file). Returns (count, next_position,
    Stop)."""
    lane_counts[:] = 0
    buf_end = buf_file_pos + buf.shape[0]
    region_end = min(limit, buf_end)
    if region_end - start < lanes * LANE_MIN_BYTES:
        return -1, start, 0
    starts = np.empty(lanes + 1, dtype=np.int64)
    starts[0] = start
    for k in range(1, lanes):
        cut = start + (region_end - start) * k // lanes
        s = resync(buf, buf_file_pos, base_offset, cut, min(cut + LANE_RESYNC_SCAN, region_end))
        if s < 0:
            return -1, start, 0
        starts[k] = s
    starts[lanes] = region_end
    pos = starts.copy()
    active = lanes
    done = np.zeros(lanes, dtype=np.bool_)
    last_stop = 0
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
                return -1, start, 0
            stop, total = _record(buf, buf_file_pos, buf_end, file_end, q)
            if stop >= 0:
                if last and stop <= 4:          # NEED_MORE, BLANK, zero fill, end of file
                    last_stop = stop
                    done[k] = True
                    active -= 1
                    continue
                return -1, start, 0
            out_pos[k * lane_rows + lane_counts[k]] = q
            lane_counts[k] += 1
            pos[k] = q + total
    for k in range(lanes - 1):
        if pos[k] != starts[k + 1]:             # a lane start that was not a record start after all
            return -1, start, 0
    return lane_counts.sum(), pos[lanes - 1], last_stop


@numba.njit(cache=True, nogil=True)
def decode_header(buf, buf_file_pos, positions, n, fields,
                  total_size, magic_code, body_crc, queue_id, flag, queue_offset, stored_physical_offset,
                  sys_flag, born_timestamp, store_timestamp, reconsume_times, prepared_transaction_offset,
                  born_host_pos, store_host_pos, body_pos, body_len, topic_pos, topic_len, props_pos, props_len):
    """Row r of the header arrays (columns.HeaderColumns) from the walked record at ``positions[r]``: its
    fixed-width fields and the buffer spans (buffer indices, not file positions) of its variable parts;
    only the arrays whose bit is set in ``fields`` (bit k = k-th array): a header-only scan does not pay for
    stores nobody reads."""
    for r in range(n):
        p = positions[r] - buf_file_pos
        total = be32(buf, p)
        magic = be32(buf, p + 4)
        sf = be32(buf, p + POS_SYS_FLAG)
        bh = 20 if sf & 0x10 else 8
        sh = 20 if sf & 0x20 else 8
        if fields & 0x1:
            total_size[r] = total
        if fields & 0x2:
            magic_code[r] = magic
        if fields & 0x4:
            body_crc[r] = be32(buf, p + POS_BODY_CRC)
        if fields & 0x8:
            queue_id[r] = be32(buf, p + POS_QUEUE_ID)
        if fields & 0x10:
            flag[r] = be32(buf, p + POS_FLAG)
        if fields & 0x20:
            queue_offset[r] = be64(buf, p + POS_QUEUE_OFFSET)
        if fields & 0x40:
            stored_physical_offset[r] = be64(buf, p + POS_PHYSICAL_OFFSET)
        if fields & 0x80:
            sys_flag[r] = sf
        if fields & 0x100:
            born_timestamp[r] = be64(buf, p + POS_BORN_TIMESTAMP)
        if fields & 0x200:
            store_timestamp[r] = be64(buf, p + 48 + bh)
        if fields & 0x400:
            reconsume_times[r] = be32(buf, p + 56 + bh + sh)
        if fields & 0x800:
            prepared_transaction_offset[r] = be64(buf, p + 60 + bh + sh)
        if fields & 0x1000:
            born_host_pos[r] = p + POS_BORN_HOST
        if fields & 0x2000:
            store_host_pos[r] = p + 56 + bh
        if fields & 0xFC000:
            bp, bl, tp, tl, pp, pl = layout(buf, p, total, magic)
            if fields & 0x4000:
                body_pos[r] = p + bp
            if fields & 0x8000:
                body_len[r] = bl
            if fields & 0x10000:
                topic_pos[r] = p + tp
            if fields & 0x20000:
                topic_len[r] = tl
            if fields & 0x40000:
                props_pos[r] = p + pp
            if fields & 0x80000:
                props_len[r] = pl


@numba.njit(cache=True, nogil=True)
def resync(buf, buf_file_pos, base_offset, start, stop_at):
    """First file position p in [start, stop_at) where a record plausibly starts: a message magic at p+4
    and a stored PHYSICALOFFSET at p+28 equal to base_offset + p. Returns -1 if none in the buffer."""
    buf_end = buf_file_pos + buf.shape[0]
    last = min(stop_at, buf_end - 36)
    p = max(start, buf_file_pos)
    while p < last:
        i = p - buf_file_pos
        if buf[i + 4] == 0xDA and buf[i + 5] == 0xA3 and buf[i + 6] == 0x20 and (buf[i + 7] == 0xA7 or buf[i + 7] == 0xAB):
            if be64(buf, i + POS_PHYSICAL_OFFSET) == base_offset + p:
                total = be32(buf, i)
                if total >= MIN_RECORD_SIZE:
                    return p
        p += 1
    return -1
