"""Message properties and the values RocketMQ derives from them (docs/format/commitlog.md, "Properties").

Properties string: ``name 0x01 value 0x02`` repeated, the final 0x02 optional (RocketMQ 4.9.8 omits it,
5.x writes it). Parsed exactly as ``MessageDecoder.string2messageProperties``: split on 0x02; a piece
shorter than 3 is ignored; the first 0x01 at or after the piece start separates name and value and must
leave both non-empty (so a value may contain 0x01); a later duplicate name overwrites the earlier value.

Derived values, as RocketMQ derives them: ``tags_code`` = ``TAGS.hashCode()`` sign-extended (0 without
TAGS), or for ``SCHEDULE_TOPIC_XXXX`` records with ``DELAY`` (parsed like Java's ``Integer.parseInt``:
a sign, digits, int32) above 0 the delivery time ``store_timestamp + delay(min(level, max_level))``; ``keys`` = non-empty pieces of ``KEYS`` split on single
spaces (``IndexService.buildIndex``); ``deliver_time`` = when a delayed message is due: that same delivery
time for ``SCHEDULE_TOPIC_XXXX`` records, ``TIMER_OUT_MS`` (``Long.parseLong``) for 5.x timer records in
``rmq_sys_wheel_timer``. Pure and compiled: ``property_columns`` derives every one of them in a single pass per
record (the Arrow buffers of the map, TAGS, KEYS, UNIQ_KEY, tagsCode and delivery time), so a record's
properties are read from memory once; runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec import native
from rocketstore_spark.codec.checked import CHECKED
from rocketstore_spark.codec.native import PREFETCH_AHEAD, byte_at, copy_at, load_le64, prefetch
from rocketstore_spark.codec.commitlog import span_equals
from rocketstore_spark.codec.javahash import java_hash_span
from rocketstore_spark.codec.record_schema import BY_NAME

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
SCHEDULE_TOPIC = np.frombuffer(b"SCHEDULE_TOPIC_XXXX", dtype=np.uint8).copy()
KEY_TAGS = np.frombuffer(b"TAGS", dtype=np.uint8).copy()
KEY_KEYS = np.frombuffer(b"KEYS", dtype=np.uint8).copy()
KEY_UNIQ = np.frombuffer(b"UNIQ_KEY", dtype=np.uint8).copy()
KEY_DELAY = np.frombuffer(b"DELAY", dtype=np.uint8).copy()
KEY_TIMER_OUT = np.frombuffer(b"TIMER_OUT_MS", dtype=np.uint8).copy()
TIMER_TOPIC = np.frombuffer(b"rmq_sys_wheel_timer", dtype=np.uint8).copy()
# what property_columns builds: its ``want`` flags, one per PROPERTY column of record_schema (its ``want``)
WANT_MAP, WANT_TAGS, WANT_KEYS, WANT_UNIQ_KEY, WANT_TAGS_CODE, WANT_DELIVER_TIME = (
    BY_NAME[name].want for name in ("properties", "tags", "keys", "uniq_key", "tags_code", "deliver_time"))
NAME_SEPARATOR = 0x01
PROPERTY_SEPARATOR = 0x02
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str = DEFAULT_DELAY_LEVELS) -> np.ndarray:
    """RocketMQ's ``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (index = level - 1)."""
    try:
        return np.array([int(t[:-1]) * _UNITS[t[-1]] for t in spec.split()], dtype=np.int64)
    except (KeyError, ValueError, IndexError) as e:
        raise ValueError(f"invalid messageDelayLevel {spec!r}: expected tokens like 1s 5m 2h") from e


@numba.njit(cache=True, nogil=True, inline="always")
def _java_parse(buf, pos, length, max_value):
    """(ok, value) of Java's ``Integer.parseInt`` (``max_value`` 2^31 - 1) or ``Long.parseLong`` (2^63 - 1)
    over buf[pos:pos+length]: an optional sign, decimal digits, within [-max_value - 1, max_value]. Java's
    own algorithm (accumulating negatively, so the minimum fits). RocketMQ parses DELAY as an int (a value
    it cannot parse makes it reject the record) and TIMER_OUT_MS as a long."""
    i, negative = 0, False
    if length > 0 and (buf[pos] == 43 or buf[pos] == 45):          # + or -
        negative = buf[pos] == 45
        i = 1
    if i >= length:
        return False, np.int64(0)
    limit = -max_value - 1 if negative else -max_value
    multmin = limit // 10
    if limit % 10 != 0:
        multmin += 1                                                # Java divides toward zero
    result = np.int64(0)
    while i < length:
        digit = buf[pos + i] - 48
        if digit < 0 or digit > 9 or result < multmin:
            return False, np.int64(0)
        result *= 10
        if result < limit + digit:
            return False, np.int64(0)
        result -= digit
        i += 1
    return True, result if negative else -result


INT32_MAX = np.int64((1 << 31) - 1)
INT64_MAX = np.int64((1 << 63) - 1)


@numba.njit(cache=True, nogil=True, inline="always")
def _schedule_delivery(buf, delay_pos, delay_len, topic_pos, topic_len, store_timestamp, delay_ms):
    """(due, when) of a SCHEDULE_TOPIC_XXXX record with a DELAY value at buf[delay_pos:][:delay_len]: store
    time + its clamped delay level."""
    if span_equals(buf, topic_pos, topic_len, SCHEDULE_TOPIC):
        ok, level = _java_parse(buf, delay_pos, delay_len, INT32_MAX)
        if ok:
            level = min(level, delay_ms.shape[0])
            if level > 0:
                return True, store_timestamp + delay_ms[level - 1]
    return False, np.int64(0)


_ONES = np.uint64(0x0101010101010101)
_HIGH_BITS = np.uint64(0x8080808080808080)
_BYTE_INDEX = np.uint64(0x0001020304050607)


@numba.njit(cache=True, nogil=True, inline="always")
def _separator(buf, i, end, or_name, seen):
    """(first index in [i, end) holding 0x02 — or 0x01 too with ``or_name`` — else ``end``; ``seen`` OR-ed
    with the bytes looked at). Eight bytes at a time: a byte equal to c shows as the high bit of
    (x - ONES) & ~x & HIGH_BITS with x = word ^ (c * ONES); bits can be wrong only above the lowest true one."""
    while i + 8 <= end:
        word = load_le64(buf, i)
        seen |= word
        x = word ^ (_ONES * np.uint64(PROPERTY_SEPARATOR))
        hits = (x - _ONES) & ~x & _HIGH_BITS
        if or_name:
            y = word ^ _ONES                                # NAME_SEPARATOR = 0x01
            hits |= (y - _ONES) & ~y & _HIGH_BITS
        if hits:
            # the lowest hit is 1 << (8k + 7) for byte k; the multiply puts k in the top byte
            lowest = hits & (~hits + np.uint64(1))
            return i + np.int64(((lowest >> np.uint64(7)) * _BYTE_INDEX) >> np.uint64(56)), seen
        i += 8
    while i < end:
        c = byte_at(buf, i)
        seen |= np.uint64(c)
        if c == PROPERTY_SEPARATOR or (or_name and c == NAME_SEPARATOR):
            return i, seen
        i += 1
    return end, seen


def _word(name: bytes) -> np.uint64:
    return np.uint64(int.from_bytes(name[:8].ljust(8, b"\0"), "little"))


_WORD_TAGS, _WORD_KEYS, _WORD_UNIQ, _WORD_DELAY = (_word(bytes(k)) for k in (KEY_TAGS, KEY_KEYS, KEY_UNIQ, KEY_DELAY))


@numba.njit(cache=True, nogil=True, inline="always")
def _name_word(buf, i, length, end):
    """The first min(length, 8) bytes at ``i`` as a little-endian word, zero above them; ``end``: where
    readable bytes end (one 8-byte load where it fits, else byte by byte)."""
    if i + 8 <= end:
        word = load_le64(buf, i)
    else:
        word = np.uint64(0)
        for b in range(min(end - i, 8)):
            word |= np.uint64(byte_at(buf, i + b)) << np.uint64(8 * b)
    if length < 8:
        word &= (np.uint64(1) << np.uint64(8 * length)) - np.uint64(1)
    return word


@numba.njit(cache=True, nogil=True, inline="always")
def _space(buf, i, end):
    """First index in [i, end) holding a space (KEYS' separator), else ``end``; eight bytes at a time as
    ``_separator``."""
    while i + 8 <= end:
        x = load_le64(buf, i) ^ (_ONES * np.uint64(0x20))
        hits = (x - _ONES) & ~x & _HIGH_BITS
        if hits:
            lowest = hits & (~hits + np.uint64(1))
            return i + np.int64(((lowest >> np.uint64(7)) * _BYTE_INDEX) >> np.uint64(56))
        i += 8
    while i < end:
        if byte_at(buf, i) == 0x20:
            return i
        i += 1
    return end


@numba.njit(cache=True, nogil=True)
def property_capacity(props_len, n):
    """(data, pairs, record): room enough, for n records of these properties lengths, for any one output's
    bytes (the data of all properties), for the map's entries, and for one record's pairs."""
    data_cap = 0
    pairs_cap = 0
    record_cap = 1
    for r in range(n):
        data_cap += max(props_len[r], 0)
        room = max(props_len[r], 0) // 3 + 1
        pairs_cap += room
        record_cap = max(record_cap, room)
    return data_cap, pairs_cap, record_cap


@numba.njit(cache=True, nogil=True)
def property_columns(buf, props_pos, props_len, topic_pos, topic_len, store_timestamp, delay_ms, n, want):
    """Every property-derived column of n records in one pass over each record's properties (RocketMQ's
    rules, module docstring): ``property_columns_into`` buffers of their own. ``want`` (WANT_* flags) says which
    outputs to fill; the others come back empty. Returns ``(pair_offsets, key_offsets, key_data, value_offsets,
    value_data,`` — the properties map — ``tags_offsets, tags_data, tags_valid, uniq_offsets, uniq_data,
    uniq_valid,`` — TAGS and UNIQ_KEY, valid where present — ``keys_list_offsets, keys_offsets, keys_data,`` —
    KEYS split on single spaces, empty pieces dropped (IndexService.buildIndex) — ``tags_code, deliver_time,
    deliver_valid, ascii)``; ``ascii``: every properties byte is below 0x80, so every string built is valid
    UTF-8 (no validation needed)."""
    w_map, w_tags, w_keys, w_uniq = want[WANT_MAP], want[WANT_TAGS], want[WANT_KEYS], want[WANT_UNIQ_KEY]
    w_code, w_deliver = want[WANT_TAGS_CODE], want[WANT_DELIVER_TIME]
    data_cap, pairs_cap, record_cap = property_capacity(props_len, n)
    spare = native.SPARE
    pair_offsets = np.empty(n + 1 if w_map else 1, dtype=np.int32)
    key_offsets = np.empty(pairs_cap + 1 if w_map else 1, dtype=np.int32)
    value_offsets = np.empty(pairs_cap + 1 if w_map else 1, dtype=np.int32)
    key_data = np.empty(data_cap + spare if w_map else 0, dtype=np.uint8)
    value_data = np.empty(data_cap + spare if w_map else 0, dtype=np.uint8)
    tags_offsets = np.empty(n + 1 if w_tags else 1, dtype=np.int32)
    tags_data = np.empty(data_cap + spare if w_tags else 0, dtype=np.uint8)
    tags_valid = np.empty(n if w_tags else 0, dtype=np.bool_)
    uniq_offsets = np.empty(n + 1 if w_uniq else 1, dtype=np.int32)
    uniq_data = np.empty(data_cap + spare if w_uniq else 0, dtype=np.uint8)
    uniq_valid = np.empty(n if w_uniq else 0, dtype=np.bool_)
    keys_list_offsets = np.empty(n + 1 if w_keys else 1, dtype=np.int32)
    keys_offsets = np.empty(data_cap // 2 + n + 1 if w_keys else 1, dtype=np.int32)
    keys_data = np.empty(data_cap + spare if w_keys else 0, dtype=np.uint8)
    tags_code = np.empty(n if w_code else 0, dtype=np.int64)
    deliver_time = np.empty(n if w_deliver else 0, dtype=np.int64)
    deliver_valid = np.empty(n if w_deliver else 0, dtype=np.bool_)
    pairs, ko, vo, to, uo, pieces, kdo, ascii = property_columns_into(
        buf, (props_pos, props_len, topic_pos, topic_len, store_timestamp), delay_ms, n, want, record_cap,
        (pair_offsets, key_offsets, key_data, value_offsets, value_data), (tags_offsets, tags_data, tags_valid),
        (uniq_offsets, uniq_data, uniq_valid), (keys_list_offsets, keys_offsets, keys_data),
        (tags_code, deliver_time, deliver_valid))
    return (pair_offsets, key_offsets[:pairs + 1], key_data[:ko], value_offsets[:pairs + 1], value_data[:vo],
            tags_offsets, tags_data[:to], tags_valid, uniq_offsets, uniq_data[:uo], uniq_valid,
            keys_list_offsets, keys_offsets[:pieces + 1], keys_data[:kdo], tags_code, deliver_time, deliver_valid,
            ascii)


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def property_columns_into(buf, record, delay_ms, n, want, record_cap, map_out, tags_out, uniq_out, keys_out,
                          derived_out):
    """``property_columns`` into the caller's buffers, for wanted outputs only, at least as large as
    ``property_capacity`` says: ``record`` = (props_pos, props_len, topic_pos, topic_len, store_timestamp) of the
    n records (the last three read only for tags_code and deliver_time); ``map_out`` = (pair_offsets: n + 1,
    key_offsets: pairs + 1, key_data: data + SPARE, value_offsets, value_data: alike); ``tags_out`` and
    ``uniq_out`` = (offsets: n + 1, data: data + SPARE, valid: n); ``keys_out`` = (list_offsets: n + 1, offsets:
    data // 2 + n + 1, data: data + SPARE); ``derived_out`` = (tags_code, deliver_time, deliver_valid: n each).
    Returns (map entries, bytes of key_data, value_data, tags_data, uniq_data, KEYS pieces, bytes of keys_data,
    ascii).

    The bytes of a record are read once, while they are in cache, and written straight into Arrow-layout
    buffers (int32 offsets + UTF-8 bytes), no per-pair spans in between."""
    buf = native.unowned(buf)           # no reference counting in the loop (native.unowned)
    props_pos, props_len, topic_pos, topic_len, store_timestamp = record
    pair_offsets, key_offsets, key_data, value_offsets, value_data = map_out
    tags_offsets, tags_data, tags_valid = tags_out
    uniq_offsets, uniq_data, uniq_valid = uniq_out
    keys_list_offsets, keys_offsets, keys_data = keys_out
    tags_code, deliver_time, deliver_valid = derived_out
    w_map, w_tags, w_keys, w_uniq = want[WANT_MAP], want[WANT_TAGS], want[WANT_KEYS], want[WANT_UNIQ_KEY]
    w_code, w_deliver = want[WANT_TAGS_CODE], want[WANT_DELIVER_TIME]
    # one record's pairs (name/value spans), before duplicates are resolved
    kp = np.empty(record_cap, dtype=np.int64)
    kl = np.empty(record_cap, dtype=np.int64)
    kh = np.empty(record_cap, dtype=np.uint64)
    vp = np.empty(record_cap, dtype=np.int64)
    vl = np.empty(record_cap, dtype=np.int64)
    # addresses for copy_at (arrays would cost reference counting in this loop), and the room behind them
    buf_at = np.intp(buf.ctypes.data)      # signed: uintp + int64 would be a float
    readable = buf.shape[0]               # copy_at's src_room: bytes readable from an index
    key_data_at, value_data_at = np.intp(key_data.ctypes.data), np.intp(value_data.ctypes.data)
    tags_data_at, uniq_data_at = np.intp(tags_data.ctypes.data), np.intp(uniq_data.ctypes.data)
    keys_data_at = np.intp(keys_data.ctypes.data)
    key_room, value_room, tags_room = key_data.shape[0], value_data.shape[0], tags_data.shape[0]
    uniq_room, keys_room = uniq_data.shape[0], keys_data.shape[0]
    pair_offsets[0] = key_offsets[0] = value_offsets[0] = tags_offsets[0] = uniq_offsets[0] = 0
    keys_list_offsets[0] = keys_offsets[0] = 0
    pairs = 0              # map entries so far
    ko = 0                 # bytes written to key_data, value_data, tags_data, uniq_data, keys_data
    vo = 0
    to = 0
    uo = 0
    kdo = 0
    pieces = 0
    seen = np.uint64(0)    # every properties byte OR-ed: no 0x80 bit means all ASCII, so every string is UTF-8
    for r in range(n):
        if r + PREFETCH_AHEAD < n:
            ahead = props_pos[r + PREFETCH_AHEAD]
            prefetch(buf, ahead)
            prefetch(buf, ahead + 64)
        # split on 0x02; a piece of >= 3 bytes whose first 0x01 leaves a non-empty name and value is a pair
        m = 0
        end_all = props_pos[r] + props_len[r]
        index = props_pos[r]
        # map entries are written as pairs are found (their bytes are in cache); a duplicate name makes the
        # record's entries be rewritten from the resolved spans afterwards (rare)
        duplicate = False
        pairs_at, ko_at, vo_at = pairs, ko, vo
        tags = keys = uniq = delay = timer = -1        # the slots of the names RocketMQ derives values from
        while index < end_all:
            end, seen = _separator(buf, index, end_all, True, seen)
            kv = -1
            if end < end_all and byte_at(buf, end) == NAME_SEPARATOR:
                kv = end
                end, seen = _separator(buf, kv + 1, end_all, False, seen)
            if end - index >= 3 and index < kv and kv < end - 1:
                length = kv - index
                # the name's first 8 bytes as one word (zero past its end): names are told apart by length and
                # word, bytes compared one by one only for longer names
                head = _name_word(buf, index, length, end_all)
                slot = m                       # a later duplicate name overwrites the earlier value
                for j in range(m):
                    if kl[j] == length and kh[j] == head:
                        same = True
                        for b in range(8, length):
                            if byte_at(buf, kp[j] + b) != byte_at(buf, index + b):
                                same = False
                                break
                        if same:
                            slot = j
                            break
                kp[slot] = index
                kl[slot] = length
                kh[slot] = head
                vp[slot] = kv + 1
                vl[slot] = end - kv - 1
                if slot == m:
                    # a new name: which one it is, found while its bytes are in cache (a duplicate keeps the slot)
                    if length == 4 and head == _WORD_TAGS:
                        tags = m
                    elif length == 4 and head == _WORD_KEYS:
                        keys = m
                    elif length == 8 and head == _WORD_UNIQ:
                        uniq = m
                    elif length == 5 and head == _WORD_DELAY:
                        delay = m
                    elif span_equals(buf, index, length, KEY_TIMER_OUT):
                        timer = m
                    m += 1
                    if w_map and not duplicate:
                        ko += copy_at(key_data_at + ko, buf_at + index, kv - index, readable - index, key_room - ko)
                        vo += copy_at(value_data_at + vo, buf_at + kv + 1, end - kv - 1, readable - (kv + 1),
                                      value_room - vo)
                        pairs += 1
                        key_offsets[pairs] = ko
                        value_offsets[pairs] = vo
                else:
                    duplicate = True
            index = end + 1
        if w_map:
            if duplicate:
                pairs, ko, vo = pairs_at, ko_at, vo_at
                for j in range(m):
                    ko += copy_at(key_data_at + ko, buf_at + kp[j], kl[j], readable - kp[j], key_room - ko)
                    vo += copy_at(value_data_at + vo, buf_at + vp[j], vl[j], readable - vp[j], value_room - vo)
                    pairs += 1
                    key_offsets[pairs] = ko
                    value_offsets[pairs] = vo
            pair_offsets[r + 1] = pairs
        if w_tags:
            if tags >= 0:
                to += copy_at(tags_data_at + to, buf_at + vp[tags], vl[tags], readable - vp[tags], tags_room - to)
            tags_valid[r] = tags >= 0
            tags_offsets[r + 1] = to
        if w_uniq:
            if uniq >= 0:
                uo += copy_at(uniq_data_at + uo, buf_at + vp[uniq], vl[uniq], readable - vp[uniq], uniq_room - uo)
            uniq_valid[r] = uniq >= 0
            uniq_offsets[r + 1] = uo
        if w_keys:
            if keys >= 0:
                s = vp[keys]
                e = s + vl[keys]
                while s <= e:
                    i = _space(buf, s, e)
                    if i > s:
                        kdo += copy_at(keys_data_at + kdo, buf_at + s, i - s, readable - s, keys_room - kdo)
                        pieces += 1
                        keys_offsets[pieces] = kdo
                    s = i + 1
            keys_list_offsets[r + 1] = pieces
        if w_code or w_deliver:
            due, when = False, np.int64(0)
            if delay >= 0:
                due, when = _schedule_delivery(buf, vp[delay], vl[delay], topic_pos[r], topic_len[r],
                                               store_timestamp[r], delay_ms)
            if w_code:
                if due:
                    tags_code[r] = when
                elif tags >= 0 and vl[tags] > 0:
                    tags_code[r] = java_hash_span(buf, vp[tags], vl[tags])      # int32, sign-extended
                else:
                    tags_code[r] = 0
            if w_deliver:
                deliver_time[r], deliver_valid[r] = (when, True) if due else (np.int64(0), False)
                if timer >= 0 and span_equals(buf, topic_pos[r], topic_len[r], TIMER_TOPIC):
                    ok, timer_at = _java_parse(buf, vp[timer], vl[timer], INT64_MAX)
                    if ok:
                        deliver_time[r], deliver_valid[r] = timer_at, True
    return pairs, ko, vo, to, uo, pieces, kdo, (seen & _HIGH_BITS) == 0
