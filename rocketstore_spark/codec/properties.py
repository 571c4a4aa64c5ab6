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
``rmq_sys_wheel_timer``. Pure and compiled; runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np

from rocketstore_spark.codec.commitlog import span_equals
from rocketstore_spark.codec.javahash import java_hash_span

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
SCHEDULE_TOPIC = np.frombuffer(b"SCHEDULE_TOPIC_XXXX", dtype=np.uint8).copy()
KEY_TAGS = np.frombuffer(b"TAGS", dtype=np.uint8).copy()
KEY_KEYS = np.frombuffer(b"KEYS", dtype=np.uint8).copy()
KEY_UNIQ = np.frombuffer(b"UNIQ_KEY", dtype=np.uint8).copy()
KEY_DELAY = np.frombuffer(b"DELAY", dtype=np.uint8).copy()
KEY_TIMER_OUT = np.frombuffer(b"TIMER_OUT_MS", dtype=np.uint8).copy()
TIMER_TOPIC = np.frombuffer(b"rmq_sys_wheel_timer", dtype=np.uint8).copy()
# columns of parse_properties' ``special``: the pair index of these names per record
SPECIAL_TAGS = 0
SPECIAL_KEYS = 1
SPECIAL_UNIQ_KEY = 2
SPECIAL_DELAY = 3
SPECIAL_TIMER_OUT = 4
NAME_SEPARATOR = 0x01
PROPERTY_SEPARATOR = 0x02
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(spec: str = DEFAULT_DELAY_LEVELS) -> np.ndarray:
    """RocketMQ's ``messageDelayLevel`` ("1s 5s ... 2h") as milliseconds per level (index = level - 1)."""
    try:
        return np.array([int(t[:-1]) * _UNITS[t[-1]] for t in spec.split()], dtype=np.int64)
    except (KeyError, ValueError, IndexError) as e:
        raise ValueError(f"invalid messageDelayLevel {spec!r}: expected tokens like 1s 5m 2h") from e


@numba.njit(cache=True, nogil=True)
def parse_properties(buf, props_pos, props_len, n):
    """Name/value spans of every record's properties, RocketMQ's rules (module docstring).

    Returns pair_offsets[n+1], key_pos, key_len, val_pos, val_len (per pair) and, per record, the pair index
    of TAGS, KEYS, UNIQ_KEY, DELAY and TIMER_OUT_MS (-1 when absent)."""
    cap = n
    for r in range(n):
        cap += props_len[r] // 3 + 1
    key_pos = np.empty(cap, dtype=np.int64)
    key_len = np.empty(cap, dtype=np.int64)
    val_pos = np.empty(cap, dtype=np.int64)
    val_len = np.empty(cap, dtype=np.int64)
    pair_offsets = np.zeros(n + 1, dtype=np.int32)
    special = np.full((n, 5), -1, dtype=np.int64)
    k = 0
    for r in range(n):
        start = props_pos[r]
        end_all = start + props_len[r]
        first = k
        index = start
        while index < end_all:
            end = index
            while end < end_all and buf[end] != PROPERTY_SEPARATOR:
                end += 1
            if end - index >= 3:
                kv = index
                while kv < end_all and buf[kv] != NAME_SEPARATOR:
                    kv += 1
                if index < kv and kv < end - 1:
                    # a later duplicate name overwrites the earlier value
                    slot = k
                    for j in range(first, k):
                        if key_len[j] == kv - index:
                            same = True
                            for b in range(kv - index):
                                if buf[key_pos[j] + b] != buf[index + b]:
                                    same = False
                                    break
                            if same:
                                slot = j
                                break
                    key_pos[slot] = index
                    key_len[slot] = kv - index
                    val_pos[slot] = kv + 1
                    val_len[slot] = end - kv - 1
                    if slot == k:
                        k += 1
            index = end + 1
        pair_offsets[r + 1] = k
        for j in range(first, k):
            if span_equals(buf, key_pos[j], key_len[j], KEY_TAGS):
                special[r, SPECIAL_TAGS] = j
            elif span_equals(buf, key_pos[j], key_len[j], KEY_KEYS):
                special[r, SPECIAL_KEYS] = j
            elif span_equals(buf, key_pos[j], key_len[j], KEY_UNIQ):
                special[r, SPECIAL_UNIQ_KEY] = j
            elif span_equals(buf, key_pos[j], key_len[j], KEY_DELAY):
                special[r, SPECIAL_DELAY] = j
            elif span_equals(buf, key_pos[j], key_len[j], KEY_TIMER_OUT):
                special[r, SPECIAL_TIMER_OUT] = j
    return pair_offsets, key_pos[:k], key_len[:k], val_pos[:k], val_len[:k], special


@numba.njit(cache=True, nogil=True)
def special_spans(special, which, val_pos, val_len, n):
    pos = np.zeros(n, dtype=np.int64)
    lens = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        j = special[r, which]
        if j >= 0:
            pos[r] = val_pos[j]
            lens[r] = val_len[j]
            valid[r] = True
    return pos, lens, valid


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
def _schedule_delivery(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp, delay_ms, r):
    """(due, when) of record r as a SCHEDULE_TOPIC_XXXX record: store time + its clamped DELAY level."""
    d = special[r, SPECIAL_DELAY]
    if d >= 0 and span_equals(buf, topic_pos[r], topic_len[r], SCHEDULE_TOPIC):
        ok, level = _java_parse(buf, val_pos[d], val_len[d], INT32_MAX)
        if ok:
            level = min(level, delay_ms.shape[0])
            if level > 0:
                return True, store_timestamp[r] + delay_ms[level - 1]
    return False, np.int64(0)


@numba.njit(cache=True, nogil=True)
def tags_codes(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp, delay_ms, n):
    out = np.zeros(n, dtype=np.int64)
    for r in range(n):
        j = special[r, SPECIAL_TAGS]
        if j >= 0 and val_len[j] > 0:
            out[r] = java_hash_span(buf, val_pos[j], val_len[j])      # int32, sign-extended
        due, when = _schedule_delivery(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp,
                                       delay_ms, r)
        if due:
            out[r] = when
    return out


@numba.njit(cache=True, nogil=True)
def deliver_times(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp, delay_ms, n):
    """(epoch ms, valid) per record: when a delayed or 5.x timer message is due (module docstring)."""
    out = np.zeros(n, dtype=np.int64)
    valid = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        due, when = _schedule_delivery(buf, special, val_pos, val_len, topic_pos, topic_len, store_timestamp,
                                       delay_ms, r)
        if due:
            out[r], valid[r] = when, True
        t = special[r, SPECIAL_TIMER_OUT]
        if t >= 0 and span_equals(buf, topic_pos[r], topic_len[r], TIMER_TOPIC):
            ok, when = _java_parse(buf, val_pos[t], val_len[t], INT64_MAX)
            if ok:
                out[r], valid[r] = when, True
    return out, valid


@numba.njit(cache=True, nogil=True)
def key_pieces(buf, special, val_pos, val_len, n):
    """KEYS split on single spaces, empty pieces dropped (IndexService.buildIndex)."""
    cap = n
    for r in range(n):
        j = special[r, SPECIAL_KEYS]
        if j >= 0:
            cap += val_len[j] // 2 + 1
    pos = np.empty(cap, dtype=np.int64)
    lens = np.empty(cap, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    k = 0
    for r in range(n):
        j = special[r, SPECIAL_KEYS]
        if j >= 0:
            s = val_pos[j]
            e = s + val_len[j]
            i = s
            while i <= e:
                if i == e or buf[i] == 0x20:        # space
                    if i > s:
                        pos[k] = s
                        lens[k] = i - s
                        k += 1
                    s = i + 1
                i += 1
        offsets[r + 1] = k
    return offsets, pos[:k], lens[:k]
