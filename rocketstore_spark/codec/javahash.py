"""Java ``String.hashCode`` computed straight from UTF-8 bytes, and the hashes RocketMQ derives from it.

RocketMQ hashes Java strings (UTF-16 code units): the ConsumeQueue tagsCode is ``TAGS.hashCode()``
sign-extended to 64 bits, and IndexFile keys use ``abs(hashCode)`` with ``Integer.MIN_VALUE -> 0``
(docs/format/consumequeue.md, docs/format/indexfile.md). The bytes on disk are UTF-8, so this decodes UTF-8 to UTF-16 code units on
the fly (supplementary characters become surrogate pairs; a malformed byte counts as U+FFFD, as Java's
decoder replaces it). Pure and compiled; runs wherever it is called.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def java_hash_span(buf, start, length):
    """``new String(buf[start:start+length], UTF_8).hashCode()`` as int32."""
    h = np.int64(0)          # kept in [0, 2^32): Java's int overflow, made explicit
    i = start
    end = start + length
    while i < end:
        b0 = np.int64(buf[i])
        cp = np.int64(0xFFFD)
        n = 1
        if b0 < 0x80:
            cp = b0
        elif b0 >= 0xC2 and b0 < 0xE0 and i + 1 < end and (buf[i + 1] & 0xC0) == 0x80:
            cp = ((b0 & 0x1F) << 6) | (buf[i + 1] & 0x3F)
            n = 2
        elif b0 >= 0xE0 and b0 < 0xF0 and i + 2 < end and (buf[i + 1] & 0xC0) == 0x80 \
                and (buf[i + 2] & 0xC0) == 0x80:
            cp = ((b0 & 0x0F) << 12) | ((np.int64(buf[i + 1]) & 0x3F) << 6) | (buf[i + 2] & 0x3F)
            n = 3
            if cp < 0x800 or (cp >= 0xD800 and cp < 0xE000):
                cp = 0xFFFD
                n = 1
        elif b0 >= 0xF0 and b0 < 0xF5 and i + 3 < end and (buf[i + 1] & 0xC0) == 0x80 \
                and (buf[i + 2] & 0xC0) == 0x80 and (buf[i + 3] & 0xC0) == 0x80:
            cp = (((b0 & 0x07) << 18) | ((np.int64(buf[i + 1]) & 0x3F) << 12)
                  | ((np.int64(buf[i + 2]) & 0x3F) << 6) | (buf[i + 3] & 0x3F))
            n = 4
            if cp < 0x10000 or cp > 0x10FFFF:
                cp = 0xFFFD
                n = 1
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
