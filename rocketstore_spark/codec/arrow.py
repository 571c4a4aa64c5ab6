"""Arrow arrays from decoded buffers: zero-copy fixed-width columns, and strings/binaries gathered from spans
of a window by one compiled pass (no per-value Python). Pure; runs wherever records are decoded.
"""
from __future__ import annotations

import numba
import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import native
from rocketstore_spark.codec.checked import CHECKED
from rocketstore_spark.codec.native import copy_at, load_le64

TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
# epoch milliseconds a timestamp column holds: years 1 to 9999 (Python's datetime, hence collect(), and
# Spark's date functions); a corrupt value outside becomes null
MIN_TIMESTAMP_MS = -62135596800000
MAX_TIMESTAMP_MS = 253402300799999


@numba.njit(cache=True, nogil=True, inline="always")
def copy_span(buf, pos, length, data, at):
    """buf[pos:pos+length] to data[at:] (memcpy; checked in the bounds-checked mode: ``checked``)."""
    # the walk keeps every span inside its record and window; memcpy must never be the one to find out
    if length and (pos < 0 or pos + length > buf.shape[0]):
        raise IndexError("span outside the buffer")
    native.check_write(at, length, data.shape[0])
    native.memcpy(data.ctypes.data + at, buf.ctypes.data + pos, length)


@numba.njit(cache=True, nogil=True, inline="always")
def spans_size(lens, n):
    """The bytes of n spans of these lengths (a negative length counts as empty)."""
    size = 0
    for r in range(n):
        size += max(lens[r], 0)
    return size


@numba.njit(cache=True, nogil=True)
def gather(buf, pos, lens, n):
    """(int32 offsets, bytes) of the n spans buf[pos[i]:pos[i]+lens[i]] back to back (``gather_into``)."""
    size = spans_size(lens, n)
    offsets = np.empty(n + 1, dtype=np.int32)
    data = np.empty(size + native.SPARE, dtype=np.uint8)
    gather_into(buf, pos, lens, n, data, offsets)
    return offsets, data[:size]


@numba.njit(cache=True, nogil=True, boundscheck=CHECKED)
def gather_into(buf, pos, lens, n, data, offsets):
    """The n spans buf[pos[i]:pos[i]+lens[i]] (a negative length counts as empty) back to back into ``data``,
    which needs native.SPARE spare bytes after them (short ones are copied 8 bytes at a time:
    ``native.copy_at``), their ends into offsets[1:] (offsets[0] = 0). Returns the bytes written."""
    offsets[0] = 0
    src, dst, room, data_room = np.intp(buf.ctypes.data), np.intp(data.ctypes.data), buf.shape[0], data.shape[0]
    o = 0
    for r in range(n):
        if r + native.PREFETCH_AHEAD < n:        # spans scattered over a batch: a miss each otherwise
            native.prefetch(buf, max(pos[r + native.PREFETCH_AHEAD], 0))
        length, p = max(lens[r], 0), pos[r]
        if length and (p < 0 or p + length > room):
            raise IndexError("span outside the buffer")
        o += copy_at(dst + o, src + p, length, room - p, data_room - o)
        offsets[r + 1] = o
    return o


_ARROW_TYPES = {np.dtype(np.int32): pa.int32(), np.dtype(np.int64): pa.int64()}


def fixed_array(values: np.ndarray, arrow_type: pa.DataType | None = None) -> pa.Array:
    """A numpy int32/int64 array as an Arrow array without a copy (``pa.array`` converts through pandas
    machinery: several times slower per batch). ``arrow_type`` reinterprets the values (e.g. timestamps)."""
    try:
        data = pa.py_buffer(values)
    except ValueError:                      # not contiguous (asking first costs every batch a flags object)
        data = pa.py_buffer(np.ascontiguousarray(values))
    return pa.Array.from_buffers(arrow_type or _ARROW_TYPES[values.dtype], len(values), [None, data])


def validity(valid: np.ndarray):
    """An Arrow validity bitmap for a boolean numpy mask (None when every value is valid)."""
    # count_nonzero: ndarray.all() goes through numpy's Python-level reduction wrapper, several times slower
    return None if np.count_nonzero(valid) == len(valid) else pa.py_buffer(np.packbits(valid, bitorder="little"))


def binary_array(buf, pos, lens, n, valid=None) -> pa.Array:
    offsets, data = gather(buf, pos, lens, n)
    return pa.Array.from_buffers(pa.binary(), n, [None if valid is None else validity(valid),
                                                  pa.py_buffer(offsets), pa.py_buffer(data)])


@numba.njit(cache=True, nogil=True)
def is_ascii(data):
    """Is every byte of ``data`` below 0x80 (so the bytes are valid UTF-8)? Eight bytes at a time."""
    seen = np.uint64(0)
    n = data.shape[0]
    i = 0
    while i + 8 <= n:
        seen |= load_le64(data, i)
        i += 8
    while i < n:
        seen |= np.uint64(data[i])
        i += 1
    return (seen & np.uint64(0x8080808080808080)) == 0


class RepeatedColumn:
    """One value as a column of any length: built once as long as the longest asked for, then sliced (no copy;
    a reader's context column, the same on every row of its batches, costs nothing per batch)."""

    def __init__(self, value, arrow_type: pa.DataType):
        self._scalar = pa.scalar(value, arrow_type)
        self._array = pa.repeat(self._scalar, 0)
        self._last = (0, self._array)           # the last length asked for and its slice: batches repeat it

    def __call__(self, n: int) -> pa.Array:
        last = self._last                       # read once: another thread may replace it meanwhile
        if last[0] == n:
            return last[1]
        array = self._array
        if n > len(array):
            # doubled: batches bounded by bytes ask for slowly growing lengths, each would rebuild it
            array = self._array = pa.repeat(self._scalar, max(n, 2 * len(array)))
        sliced = array.slice(0, n)
        self._last = (n, sliced)
        return sliced


def valid_utf8(arr: pa.Array) -> pa.Array:
    """``arr`` (strings, or a map or list of them) with malformed UTF-8 (damaged or hostile data) replaced by
    U+FFFD, as Java's decoder does, instead of failing the batch; ``arr`` itself when it is valid."""
    try:
        arr.validate(full=True)
        return arr
    except pa.ArrowInvalid:
        pass
    if pa.types.is_map(arr.type):
        return pa.MapArray.from_arrays(arr.offsets, valid_utf8(arr.keys), valid_utf8(arr.items),
                                       mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(arr.type):
        return pa.ListArray.from_arrays(arr.offsets, valid_utf8(arr.values), type=arr.type,
                                        mask=arr.is_null() if arr.null_count else None)
    # rare path (invalid UTF-8 in this batch): decoded per value with replacement
    raw = pa.Array.from_buffers(pa.binary(), len(arr), arr.buffers(), offset=arr.offset).to_pylist()
    return pa.array([None if b is None else b.decode("utf-8", "replace") for b in raw], pa.string())


def bool_array(values: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """A boolean Arrow array from a numpy bool array; ``valid`` = False makes a value null."""
    bits = pa.py_buffer(np.packbits(values, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), len(values), [None if valid is None else validity(valid), bits])
