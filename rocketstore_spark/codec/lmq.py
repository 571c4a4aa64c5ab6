"""LMQ multi-dispatch (RocketMQ 4.9.3+, ``enableMultiDispatch`` with ``enableLmq``): the extra ConsumeQueue
entries a record's properties ask for, compiled (docs/format/consumequeue.md, "LMQ multi-dispatch").

A record carries two properties (parsed as ``MessageDecoder.string2messageProperties``: ``name 0x01 value
0x02`` pieces, a later duplicate name overwriting)::

    INNER_MULTI_DISPATCH      %LMQ%a,%LMQ%b,...    the queues, comma-separated (producer, or LiteTopic's broker)
    INNER_MULTI_QUEUE_OFFSET  17,4,...             each one's queue offset, assigned by the CommitLog on append

RocketMQ 5.5.1's ``ConsumeQueue.putMessagePositionInfoWrapper`` (4.9.x's the same) puts, after the record's own
entry, one more entry per name when ``MultiDispatchUtils.checkMultiDispatchQueue`` holds: enableMultiDispatch,
a topic not starting with ``%RETRY%`` or ``rmq_sys_`` and not ``SCHEDULE_TOPIC_XXXX``, both properties not
blank (``StringUtils.isBlank``: empty or all whitespace). ``multiDispatchLmqQueue`` then splits both on ``,``
as Java's ``String.split`` does (trailing empty pieces dropped); a different number of names and offsets puts
nothing (logged); each name containing ``/`` (``File.separator``) is passed over; each offset is
``Long.parseLong`` (an offset it cannot parse throws: the names after it are not dispatched); the queue id is 0
for a ``%LMQ%`` name with enableLmq, else the record's; the entry is the record's physical offset, size and
tagsCode at that queue offset, placed as any entry (``putMessagePositionInfo``).

``lmq_entries`` derives them for a window of records in two passes over the records' properties (find the two
values; then split and parse), with no string built: entries as (record row, name position and length in the
window, queue offset, queue id), anomalies as (record row, ``SKIP_*`` code). Pure; runs wherever records are
decoded, and only for stores that use LMQ (a store without it never calls it).
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec.commitlog import span_equals
from rocketstore_spark.codec.properties import INT64_MAX, NAME_SEPARATOR, PROPERTY_SEPARATOR, _java_parse

KEY_DISPATCH = np.frombuffer(b"INNER_MULTI_DISPATCH", dtype=np.uint8).copy()
KEY_OFFSET = np.frombuffer(b"INNER_MULTI_QUEUE_OFFSET", dtype=np.uint8).copy()
LMQ_NAME = "%LMQ%"
LMQ_PREFIX = np.frombuffer(LMQ_NAME.encode(), dtype=np.uint8).copy()
RETRY_PREFIX = np.frombuffer(b"%RETRY%", dtype=np.uint8).copy()
SYSTEM_PREFIX = np.frombuffer(b"rmq_sys_", dtype=np.uint8).copy()
SCHEDULE_TOPIC = np.frombuffer(b"SCHEDULE_TOPIC_XXXX", dtype=np.uint8).copy()
COMMA = 44
SLASH = 47
# anomalies: what RocketMQ does instead of dispatching
SKIP_COUNT = 1          # names and offsets differ in number: nothing dispatched for the record
SKIP_SLASH = 2          # a name with '/': that name passed over
SKIP_OFFSET = 3         # an offset Long.parseLong refuses: RocketMQ's dispatch throws there; no further name
SKIP_REASONS = {SKIP_COUNT: "INNER_MULTI_DISPATCH and INNER_MULTI_QUEUE_OFFSET name different numbers of queues: "
                            "RocketMQ dispatches none of them",
                SKIP_SLASH: "a queue name with '/' in INNER_MULTI_DISPATCH: RocketMQ passes it over (no path)",
                SKIP_OFFSET: "an INNER_MULTI_QUEUE_OFFSET piece is not a long: RocketMQ's dispatch throws there and "
                             "puts none of the names from it on"}


@numba.njit(cache=True, nogil=True, inline="always")
def _starts(buf, pos, length, prefix):
    return length >= prefix.shape[0] and span_equals(buf, pos, prefix.shape[0], prefix)


@numba.njit(cache=True, nogil=True, inline="always")
def _blank(buf, pos, length):
    for i in range(pos, pos + length):
        c = buf[i]
        if not (c == 32 or 9 <= c <= 13 or 28 <= c <= 31):
            return False
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _pieces(buf, pos, length):
    """Java ``value.split(",")``'s pieces: the end of the last non-empty piece (trailing empty ones dropped)
    and how many pieces lie before it."""
    end = pos + length
    while end > pos and buf[end - 1] == COMMA:
        end -= 1
    if end == pos:
        return end, 0
    count = 1
    for i in range(pos, end):
        if buf[i] == COMMA:
            count += 1
    return end, count


@numba.njit(cache=True, nogil=True)
def _values(buf, props_pos, props_len, r):
    """(dispatch pos, len, offset pos, len) of record r's two properties (-1 where absent); the last of a
    duplicated name wins, as string2messageProperties' map does."""
    dp, dl, op, ol = -1, 0, -1, 0
    i, end = props_pos[r], props_pos[r] + props_len[r]
    while i < end:
        j = i
        while j < end and buf[j] != PROPERTY_SEPARATOR:
            j += 1
        if j - i >= 3:
            k = i
            while k < j and buf[k] != NAME_SEPARATOR:
                k += 1
            if i < k < j - 1:
                if k - i == KEY_DISPATCH.shape[0] and span_equals(buf, i, k - i, KEY_DISPATCH):
                    dp, dl = k + 1, j - k - 1
                elif k - i == KEY_OFFSET.shape[0] and span_equals(buf, i, k - i, KEY_OFFSET):
                    op, ol = k + 1, j - k - 1
        i = j + 1
    return dp, dl, op, ol


@numba.njit(cache=True, nogil=True)
def lmq_entries(buf, props_pos, props_len, topic_pos, topic_len, queue_id, eligible, enable_lmq):
    """The multi-dispatch entries of a window's records (module docstring). ``eligible``: the records that get
    their own ConsumeQueue entry. Returns (entry record rows, name positions, name lengths, queue offsets, queue
    ids, anomaly record rows, anomaly codes), in dispatch order."""
    n = props_pos.shape[0]
    dpos = np.full(n, -1, np.int64)
    dlen = np.zeros(n, np.int64)
    opos = np.zeros(n, np.int64)
    olen = np.zeros(n, np.int64)
    total = 0
    for r in range(n):
        if not eligible[r] or props_len[r] < 3:
            continue
        p, m = topic_pos[r], topic_len[r]
        if _starts(buf, p, m, RETRY_PREFIX) or _starts(buf, p, m, SYSTEM_PREFIX) or (
                m == SCHEDULE_TOPIC.shape[0] and span_equals(buf, p, m, SCHEDULE_TOPIC)):
            continue
        dp, dl, op, ol = _values(buf, props_pos, props_len, r)
        if dp < 0 or op < 0 or _blank(buf, dp, dl) or _blank(buf, op, ol):
            continue
        dpos[r], dlen[r], opos[r], olen[r] = dp, dl, op, ol
        total += _pieces(buf, dp, dl)[1]
    rows = np.empty(total, np.int64)
    name_pos = np.empty(total, np.int64)
    name_len = np.empty(total, np.int64)
    offsets = np.empty(total, np.int64)
    qids = np.empty(total, np.int32)
    bad_rows = np.empty(total + n, np.int64)
    bad_codes = np.empty(total + n, np.int8)
    e, b = 0, 0
    for r in range(n):
        if dpos[r] < 0:
            continue
        dend, dcount = _pieces(buf, dpos[r], dlen[r])
        oend, ocount = _pieces(buf, opos[r], olen[r])
        if dcount != ocount:
            bad_rows[b], bad_codes[b] = r, SKIP_COUNT
            b += 1
            continue
        ni, oi = dpos[r], opos[r]
        for _ in range(dcount):
            nj = ni
            while nj < dend and buf[nj] != COMMA:
                nj += 1
            oj = oi
            while oj < oend and buf[oj] != COMMA:
                oj += 1
            slash = False
            for c in range(ni, nj):
                if buf[c] == SLASH:
                    slash = True
                    break
            if slash:
                bad_rows[b], bad_codes[b] = r, SKIP_SLASH
                b += 1
            else:
                ok, value = _java_parse(buf, oi, oj - oi, INT64_MAX)
                if not ok:
                    bad_rows[b], bad_codes[b] = r, SKIP_OFFSET
                    b += 1
                    break
                rows[e], name_pos[e], name_len[e], offsets[e] = r, ni, nj - ni, value
                qids[e] = 0 if enable_lmq and _starts(buf, ni, nj - ni, LMQ_PREFIX) else queue_id[r]
                e += 1
            ni, oi = nj + 1, oj + 1
    return rows[:e], name_pos[:e], name_len[:e], offsets[:e], qids[:e], bad_rows[:b], bad_codes[:b]
