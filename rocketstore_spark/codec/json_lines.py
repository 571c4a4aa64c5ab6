"""Arrow tables as JSON lines, built column by column: compiled passes escape strings, encode base64 and ISO
times and assemble the rows, Arrow compute joins maps and lists — no Python per row (runs where an export is
written: the CLI, the repair plan).

Each row becomes one JSON object, its members in column order; a line ends with ``\\n``:

    integers            numbers
    booleans            true / false
    timestamps          ISO 8601 strings in UTC with microseconds, "2026-11-25T09:32:31.123000+00:00"
    strings             JSON strings; non-ASCII characters as they are (UTF-8), quotes, backslashes and control
                        characters escaped as Python's ``json.dumps`` escapes them
    binary              base64 strings (RFC 4648, padded)
    list<string>        arrays of strings
    map<string,string>  objects
    null                null

Types outside these raise ValueError: the export decides its columns, a new one must say how it is written.
"""
from __future__ import annotations

import json
from typing import BinaryIO

import numba
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_ALPHABET = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)
_NULL = pa.scalar("null", pa.large_string())


def _lit(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _concat(*parts) -> pa.Array:
    """Element-wise concatenation of arrays and literal texts (null where any part is null)."""
    return pc.binary_join_element_wise(*(_lit(p) if isinstance(p, str) else p for p in parts), _lit(""))


def write_table(table: pa.Table, out: BinaryIO) -> None:
    """Write every row of ``table`` to ``out`` (binary) as one line of JSON."""
    n = table.num_rows
    if not n:
        return
    done: dict[tuple, tuple] = {}            # columns that share every buffer (an uncompressed body twice)
    texts = []
    for name in table.column_names:
        values = table[name].combine_chunks()
        key = (str(values.type), values.offset, len(values), *(b.address if b is not None else 0
                                                               for b in values.buffers()))
        if key not in done:               # the array is kept with its text: no later column reuses its memory
            done[key] = (values, _value(values))
        texts.append(done[key][1])
    heads = [np.frombuffer((("{" if k == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":").encode(),
                           dtype=np.uint8) for k, name in enumerate(table.column_names)]
    spans = [_spans(text) for text in texts]
    row_length = sum(len(head) + np.diff(offsets) for head, (offsets, _) in zip(heads, spans)) + 2   # "}\n"
    cursor = np.r_[0, np.cumsum(row_length)[:-1]].astype(np.int64)
    rows = np.empty(int(row_length.sum()), dtype=np.uint8)
    for head, (offsets, data) in zip(heads, spans):
        _append(rows, cursor, head, offsets, data)
    _end_rows(rows, cursor)
    out.write(memoryview(rows))


def _spans(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(n + 1 int64 offsets, bytes) of a large_string array."""
    offsets = np.frombuffer(text.buffers()[1], dtype=np.int64)[text.offset:text.offset + len(text) + 1]
    data = text.buffers()[2]
    return offsets, np.frombuffer(data, dtype=np.uint8) if data is not None else np.zeros(0, np.uint8)


@numba.njit(cache=True, nogil=True)
def _append(rows, cursor, head, offsets, data):
    """Row i gets ``head`` then value i (data[offsets[i]:offsets[i + 1]]) at cursor[i], which moves on."""
    for i in range(cursor.shape[0]):
        c = cursor[i]
        for k in range(head.shape[0]):
            rows[c + k] = head[k]
        c += head.shape[0]
        s, e = offsets[i], offsets[i + 1]
        rows[c:c + e - s] = data[s:e]
        cursor[i] = c + e - s


@numba.njit(cache=True, nogil=True)
def _end_rows(rows, cursor):
    for i in range(cursor.shape[0]):
        rows[cursor[i]] = 125          # '}'
        rows[cursor[i] + 1] = 10       # '\n'


def _value(a: pa.Array) -> pa.Array:
    """The JSON text of every value of ``a`` (large_string, never null)."""
    t = a.type
    if pa.types.is_integer(t):
        text = pc.cast(a, pa.large_string())
    elif pa.types.is_boolean(t):
        text = pc.if_else(a, _lit("true"), _lit("false"))
    elif pa.types.is_timestamp(t):
        text = _iso_strings(a)
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        text = _strings(a)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        text = _base64_strings(a)
    elif pa.types.is_map(t):
        entries = a.values                 # every map's entries (the array's offsets index into them)
        pairs = _concat(_strings(entries.field(0)), ":", pc.fill_null(_strings(entries.field(1)), _NULL))
        text = _joined(a, pairs, "{", "}")
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and \
            (pa.types.is_string(t.value_type) or pa.types.is_large_string(t.value_type)):
        text = _joined(a, pc.fill_null(_strings(a.values), _NULL), "[", "]")
    else:
        raise ValueError(f"no JSON form for Arrow type {t}")
    return pc.fill_null(text, _NULL)


def _strings(a: pa.Array) -> pa.Array:
    """JSON string literals (null stays null), escaped as ``json.dumps(..., ensure_ascii=False)`` escapes."""
    a = pc.cast(a, pa.large_string())
    offsets, data = _spans(a)
    out_offsets, out = _quoted(offsets, data)
    return pa.Array.from_buffers(pa.large_string(), len(a), [_validity(a), pa.py_buffer(out_offsets),
                                                             pa.py_buffer(out)])


def _validity(a: pa.Array):
    """``a``'s validity bitmap as a buffer starting at its first value (None without nulls)."""
    if not a.null_count:
        return None
    if not a.offset:
        return a.buffers()[0]
    return pa.py_buffer(np.packbits(a.is_valid().to_numpy(zero_copy_only=False), bitorder="little"))


# per byte: 0 copied as is; otherwise the character after the backslash ('u': \u00XX)
_ESCAPE = np.zeros(256, dtype=np.uint8)
_ESCAPE[:0x20] = ord("u")
for _byte, _letter in ((0x22, '"'), (0x5C, "\\"), (0x0A, "n"), (0x0D, "r"), (0x09, "t"), (0x08, "b"), (0x0C, "f")):
    _ESCAPE[_byte] = ord(_letter)
_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


@numba.njit(cache=True, nogil=True)
def _quoted(offsets, data):
    """(offsets, bytes) of each UTF-8 value quoted and escaped for JSON (non-ASCII kept)."""
    n = offsets.shape[0] - 1
    out_offsets = np.empty(n + 1, dtype=np.int64)
    out_offsets[0] = 0
    for i in range(n):
        length = 2
        for b in range(offsets[i], offsets[i + 1]):
            e = _ESCAPE[data[b]]
            length += 1 if e == 0 else (6 if e == 117 else 2)
        out_offsets[i + 1] = out_offsets[i] + length
    out = np.empty(out_offsets[n], dtype=np.uint8)
    for i in range(n):
        o = out_offsets[i]
        out[o] = 34
        o += 1
        for b in range(offsets[i], offsets[i + 1]):
            c = data[b]
            e = _ESCAPE[c]
            if e == 0:
                out[o] = c
                o += 1
            elif e == 117:                               # \u00XX
                out[o] = 92
                out[o + 1] = 117
                out[o + 2] = 48
                out[o + 3] = 48
                out[o + 4] = _HEX[c >> 4]
                out[o + 5] = _HEX[c & 15]
                o += 6
            else:
                out[o] = 92
                out[o + 1] = e
                o += 2
        out[o] = 34
    return out_offsets, out


def _joined(lists: pa.Array, items: pa.Array, opening: str, closing: str) -> pa.Array:
    """``opening`` + the list's ``items`` (one text per child value) joined by commas + ``closing``, per list."""
    offsets = lists.offsets
    joined = pc.binary_join(pa.LargeListArray.from_arrays(pc.cast(offsets, pa.int64()), items,
                                                          mask=lists.is_null()), _lit(","))
    return _concat(opening, joined, closing)


def _base64_strings(a: pa.Array) -> pa.Array:
    """Base64 text of every value, quoted (null stays null)."""
    a = pc.cast(a, pa.large_binary())
    n = len(a)
    offsets = np.frombuffer(a.buffers()[1], dtype=np.int64)[a.offset:a.offset + n + 1]
    data = np.frombuffer(a.buffers()[2], dtype=np.uint8) if a.buffers()[2] is not None else np.zeros(0, np.uint8)
    out_offsets, out = _base64(offsets, data, n, _ALPHABET)
    return pa.Array.from_buffers(pa.large_string(), n, [_validity(a), pa.py_buffer(out_offsets), pa.py_buffer(out)])


def _iso_strings(a: pa.Array) -> pa.Array:
    """Quoted ISO 8601 UTC texts of a timestamp array (null stays null)."""
    us = pc.cast(pc.cast(a, pa.timestamp("us", tz="UTC")), pa.int64()).fill_null(0).to_numpy()
    offsets, out = _iso(us)
    return pa.Array.from_buffers(pa.large_string(), len(a), [_validity(a), pa.py_buffer(offsets), pa.py_buffer(out)])


ISO_LENGTH = 34               # "YYYY-MM-DDTHH:MM:SS.ffffff+00:00", quoted


@numba.njit(cache=True, nogil=True)
def _iso(us):
    """(offsets, text) of ``"YYYY-MM-DDTHH:MM:SS.ffffff+00:00"`` for microseconds since the epoch (years 1-9999,
    as TIMESTAMP holds): days to a civil date by Howard Hinnant's algorithm."""
    n = us.shape[0]
    offsets = np.arange(n + 1, dtype=np.int64) * ISO_LENGTH
    out = np.empty(n * ISO_LENGTH, dtype=np.uint8)
    for i in range(n):
        v = us[i]
        days = v // 86_400_000_000
        rest = v - days * 86_400_000_000
        z = days + 719468
        era = z // 146097
        doe = z - era * 146097
        yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
        doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
        mp = (5 * doy + 2) // 153
        day = doy - (153 * mp + 2) // 5 + 1
        month = mp + 3 if mp < 10 else mp - 9
        year = yoe + era * 400 + (1 if month <= 2 else 0)
        o = i * ISO_LENGTH
        out[o] = 34                                             # '"'
        _digits(out, o + 1, year, 4)
        out[o + 5] = 45                                         # '-'
        _digits(out, o + 6, month, 2)
        out[o + 8] = 45
        _digits(out, o + 9, day, 2)
        out[o + 11] = 84                                        # 'T'
        _digits(out, o + 12, rest // 3_600_000_000, 2)
        out[o + 14] = 58                                        # ':'
        _digits(out, o + 15, rest // 60_000_000 % 60, 2)
        out[o + 17] = 58
        _digits(out, o + 18, rest // 1_000_000 % 60, 2)
        out[o + 20] = 46                                        # '.'
        _digits(out, o + 21, rest % 1_000_000, 6)
        for k, c in enumerate((43, 48, 48, 58, 48, 48, 34)):     # '+00:00"'
            out[o + 27 + k] = c
    return offsets, out


@numba.njit(cache=True, nogil=True, inline="always")
def _digits(out, at, value, width):
    for k in range(width - 1, -1, -1):
        out[at + k] = 48 + value % 10
        value //= 10


@numba.njit(cache=True, nogil=True)
def _base64(offsets, data, n, alphabet):
    """(int64 offsets, ASCII bytes) of the quoted, padded base64 text of each of the n values at
    data[offsets[i]:offsets[i + 1]]."""
    out_offsets = np.empty(n + 1, dtype=np.int64)
    out_offsets[0] = 0
    for i in range(n):
        out_offsets[i + 1] = out_offsets[i] + (offsets[i + 1] - offsets[i] + 2) // 3 * 4 + 2
    out = np.empty(out_offsets[n], dtype=np.uint8)
    for i in range(n):
        s, e, o = offsets[i], offsets[i + 1], out_offsets[i]
        out[o] = 34                    # '"'
        out[out_offsets[i + 1] - 1] = 34
        o += 1
        while s + 3 <= e:
            v = (np.uint32(data[s]) << 16) | (np.uint32(data[s + 1]) << 8) | np.uint32(data[s + 2])
            out[o] = alphabet[(v >> 18) & 63]
            out[o + 1] = alphabet[(v >> 12) & 63]
            out[o + 2] = alphabet[(v >> 6) & 63]
            out[o + 3] = alphabet[v & 63]
            s += 3
            o += 4
        rest = e - s
        if rest:
            v = np.uint32(data[s]) << 16
            if rest == 2:
                v |= np.uint32(data[s + 1]) << 8
            out[o] = alphabet[(v >> 18) & 63]
            out[o + 1] = alphabet[(v >> 12) & 63]
            out[o + 2] = alphabet[(v >> 6) & 63] if rest == 2 else 61       # '='
            out[o + 3] = 61
    return out_offsets, out
