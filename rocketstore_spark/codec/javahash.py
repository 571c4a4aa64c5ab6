"""Java ``String.hashCode`` computed straight from UTF-8 bytes, and the hashes RocketMQ derives from it.

RocketMQ hashes Java strings (UTF-16 code units): the ConsumeQueue tagsCode is ``TAGS.hashCode()``
sign-extended to 64 bits, and IndexFile keys use ``abs(hashCode)`` with ``Integer.MIN_VALUE -> 0``
(docs/format/consumequeue.md, docs/format/indexfile.md). The bytes on disk are UTF-8, so this decodes UTF-8
to UTF-16 code units on the fly (supplementary characters become surrogate pairs; malformed input counts as
one U+FFFD per maximal invalid subpart, as Java's decoder replaces it). Pure and compiled; runs wherever it is called.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _code_point(buf, i, end):
    """(code point, bytes used) of the UTF-8 sequence at buf[i]. A malformed sequence is one U+FFFD over its
    maximal valid prefix (at least one byte): how Java's UTF-8 decoder (and Python's) replaces it."""
    b0 = np.int64(buf[i])
    if b0 < 0x80:
        return b0, 1
    lo, hi = 0x80, 0xBF                      # the range of the second byte; later ones are always 80..BF
    if 0xC2 <= b0 <= 0xDF:
        need, cp = 1, b0 & 0x1F
    elif 0xE0 <= b0 <= 0xEF:
        need, cp = 2, b0 & 0x0F
        if b0 == 0xE0:
            lo = 0xA0                        # no overlong forms
        elif b0 == 0xED:
            hi = 0x9F                        # no surrogates
    elif 0xF0 <= b0 <= 0xF4:
        need, cp = 3, b0 & 0x07
        if b0 == 0xF0:
            lo = 0x90
        elif b0 == 0xF4:
            hi = 0x8F                        # nothing above U+10FFFF
    else:
        return np.int64(0xFFFD), 1
    j = i + 1
    for k in range(need):
        if j >= end:
            return np.int64(0xFFFD), j - i
        b = np.int64(buf[j])
        if (k == 0 and (b < lo or b > hi)) or (k > 0 and (b < 0x80 or b > 0xBF)):
            return np.int64(0xFFFD), j - i
        cp = (cp << 6) | (b & 0x3F)
        j += 1
    return cp, j - i


@numba.njit(cache=True, nogil=True, inline="always")
def java_hash_span(buf, start, length):
    """``new String(buf[start:start+length], UTF_8).hashCode()`` as int32. Inlined where it is called: ASCII
    (one UTF-16 unit per byte) is hashed in place, anything else by ``_java_hash_utf8``. A call per short
    string (a TAGS value) cost ten times its hashing inside the property pass."""
    h = np.uint32(0)         # Java's int overflow: uint32 arithmetic wraps the same way
    for i in range(start, start + length):
        c = buf[i]
        if c >= 0x80:
            return _java_hash_utf8(buf, start, length)
        h = h * np.uint32(31) + np.uint32(c)
    return np.int32(h)


@numba.njit(cache=True, nogil=True)
def _java_hash_utf8(buf, start, length):
    """``java_hash_span`` of any bytes: UTF-8 decoded to UTF-16 code units as Java does (module docstring)."""
    h = np.int64(0)          # kept in [0, 2^32): Java's int overflow, made explicit
    i = start
    end = start + length
    while i < end:
        cp, n = _code_point(buf, i, end)
        if cp >= 0x10000:
            v = cp - 0x10000
            h = (31 * h + 0xD800 + (v >> 10)) & 0xFFFFFFFF
            h = (31 * h + 0xDC00 + (v & 0x3FF)) & 0xFFFFFFFF
        else:
            h = (31 * h + cp) & 0xFFFFFFFF
        i += n
    return np.int32(h - 0x100000000 if h >= 0x80000000 else h)


@numba.njit(cache=True, nogil=True)
def index_hash_from_java(h):
    """IndexFile.indexKeyHashMethod: abs(hashCode), with Integer.MIN_VALUE (still negative) mapped to 0."""
    if h == -2147483648:
        return np.int32(0)
    return np.int32(h if h >= 0 else -h)


def java_hash(s: str) -> int:
    data = np.frombuffer(s.encode("utf-8"), dtype=np.uint8)
    return int(java_hash_span(data, 0, len(data)))


def index_hash(key: str) -> int:
    return int(index_hash_from_java(np.int32(java_hash(key))))
