"""Arrow record batches that compiled code writes whole, into one buffer, as an Arrow IPC record batch message;
``pyarrow.ipc.read_record_batch`` then makes the batch from it without a copy.

Why: a batch assembled in Python from numpy buffers costs some 60 Arrow calls (``from_buffers``, ``py_buffer``,
``MapArray.from_arrays``, ``RecordBatch.from_arrays``) — ~270 µs per 31-column batch, ~13 ms per 256 MiB segment;
reading one message is one call (~10 µs).

The message (Arrow columnar format, "Encapsulated message format"): int32 0xFFFFFFFF, int32 metadata size,
the flatbuffer ``Message`` {version, header_type = RecordBatch, header = ``RecordBatch`` {length, nodes:
[FieldNode {length, null_count}], buffers: [Buffer {offset, length}]}, bodyLength} padded to 8 bytes, then the
body, in which every buffer lies at an 8-byte-aligned offset. For one schema, every number of the metadata lies
at the same place whatever its value: nodes and buffers are vectors of inline structs, one per node and buffer
in depth-first field order (validity, then offsets and/or data; a map is list<struct<key, value>>). So a
template serialized once by pyarrow (``Template``) is copied and patched per batch (``begin``, ``node``,
``buffer``, ``finish``): RecordBatch.length, each node's and buffer's two int64s, and bodyLength. The metadata
is padded to 64 bytes so the body (and every buffer, at 8-byte offsets) is aligned wherever the arena's base is
64-aligned (``arena``).

Pure; the template is made wherever a decoder is built, the message written wherever records are decoded.
"""
from __future__ import annotations

import struct

import numba
import numpy as np
import pyarrow as pa

from rocketstore_spark.codec.native import load_le64, store_le64

ALIGN = 64              # the arena's base and the metadata's size: buffers at 8-byte offsets stay 8-aligned
CONTINUATION = 0xFFFFFFFF

# where the patched numbers are: int64 positions in ``Template.positions``
POS_LENGTH = 0          # RecordBatch.length
POS_BODY_LENGTH = 1     # Message.bodyLength
POS_NODES = 2           # first FieldNode
POS_BUFFERS = 3         # first Buffer
POS_METADATA_SIZE = 4   # bytes before the body (a multiple of ALIGN)


def _table_field(fb: bytes, table: int, index: int) -> int | None:
    """Absolute position of field ``index`` of the flatbuffer table at ``table`` (None when absent)."""
    vtable = table - struct.unpack_from("<i", fb, table)[0]
    vtable_size = struct.unpack_from("<H", fb, vtable)[0]
    slot = 4 + 2 * index
    if slot + 2 > vtable_size:
        return None
    offset = struct.unpack_from("<H", fb, vtable + slot)[0]
    return table + offset if offset else None


def _follow(fb: bytes, at: int) -> int:
    """The target of the uoffset stored at ``at``."""
    return at + struct.unpack_from("<I", fb, at)[0]


def _template_batch(schema: pa.Schema) -> pa.RecordBatch:
    """One all-null row of ``schema`` (values of every node non-zero, so no number is left out as default)."""
    return pa.RecordBatch.from_arrays([pa.nulls(1, f.type) for f in schema], names=schema.names)


def buffer_count(arrow_type: pa.DataType) -> tuple[int, int]:
    """(nodes, buffers) that a column of this type has in a record batch message."""
    if pa.types.is_map(arrow_type):
        nodes, buffers = 2, 3                                   # the map (validity, offsets), its entries struct
        for child in (arrow_type.key_type, arrow_type.item_type):
            n, b = buffer_count(child)
            nodes, buffers = nodes + n, buffers + b
        return nodes, buffers
    if pa.types.is_list(arrow_type):
        n, b = buffer_count(arrow_type.value_type)
        return 1 + n, 2 + b
    if pa.types.is_struct(arrow_type):
        nodes, buffers = 1, 1
        for f in arrow_type:
            n, b = buffer_count(f.type)
            nodes, buffers = nodes + n, buffers + b
        return nodes, buffers
    if pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type):
        return 1, 3
    return 1, 2                                                 # fixed width and boolean: validity, values


class Template:
    """The record batch message metadata of one schema, ready to be copied and patched (module docstring).
    ``metadata``: the bytes before the body (uint8, a multiple of ALIGN); ``positions``: POS_* int64 slots."""

    def __init__(self, schema: pa.Schema):
        self.schema = schema
        message = _template_batch(schema).serialize().to_pybytes()
        if struct.unpack_from("<I", message, 0)[0] != CONTINUATION:
            raise ValueError("pyarrow wrote a record batch message without the continuation marker")
        size = struct.unpack_from("<i", message, 4)[0]
        fb = message[8:8 + size]
        root = _follow(fb, 0)
        header = _follow(fb, _table_field(fb, root, 2))
        body_length = _table_field(fb, root, 3)
        length = _table_field(fb, header, 0)
        nodes = _follow(fb, _table_field(fb, header, 1))
        buffers = _follow(fb, _table_field(fb, header, 2))
        if _table_field(fb, header, 3) is not None or _table_field(fb, header, 4) is not None:
            raise ValueError("unexpected compression or variadic buffers in a record batch template")
        self.nodes, self.buffers = (struct.unpack_from("<I", fb, at)[0] for at in (nodes, buffers))
        expected = tuple(map(sum, zip(*(buffer_count(f.type) for f in schema)))) if len(schema) else (0, 0)
        if (self.nodes, self.buffers) != expected or None in (body_length, length):
            raise ValueError(f"record batch template of {schema} has {self.nodes} nodes and {self.buffers} "
                             f"buffers, expected {expected}")
        padded = -(-(8 + size) // ALIGN) * ALIGN
        metadata = bytearray(padded)
        metadata[:8 + size] = message[:8 + size]
        struct.pack_into("<i", metadata, 4, padded - 8)         # the padding counts as metadata
        self.metadata = np.frombuffer(bytes(metadata), dtype=np.uint8)
        # positions in the message: the flatbuffer starts after the marker and size
        self.positions = np.array([8 + length, 8 + body_length, 8 + nodes + 4, 8 + buffers + 4, padded],
                                  dtype=np.int64)
        self.positions.flags.writeable = False

    def read(self, arena: np.ndarray) -> pa.RecordBatch:
        """The batch written into ``arena`` (which it keeps alive; no copy)."""
        return pa.ipc.read_record_batch(pa.py_buffer(arena), self.schema)


def arena(size: int) -> np.ndarray:
    """A uint8 buffer of ``size`` bytes whose first byte is ALIGN-aligned (a view of a slightly larger one)."""
    raw = np.empty(size + ALIGN, dtype=np.uint8)
    skip = -raw.ctypes.data % ALIGN
    return raw[skip:skip + size]


@numba.njit(cache=True, nogil=True, inline="always")
def begin(out, metadata, positions, rows):
    """Start a message in ``out``: the template's metadata, with RecordBatch.length = rows."""
    size = positions[POS_METADATA_SIZE]
    for i in range(0, size, 8):
        store_le64(out, i, load_le64(metadata, i))
    store_le64(out, positions[POS_LENGTH], np.uint64(rows))


@numba.njit(cache=True, nogil=True, inline="always")
def node(out, positions, index, length, nulls):
    """FieldNode ``index`` of the message in ``out``."""
    at = positions[POS_NODES] + 16 * index
    store_le64(out, at, np.uint64(length))
    store_le64(out, at + 8, np.uint64(nulls))


@numba.njit(cache=True, nogil=True, inline="always")
def buffer(out, positions, index, offset, length):
    """Buffer ``index``: ``length`` bytes at body offset ``offset`` (a multiple of 8)."""
    at = positions[POS_BUFFERS] + 16 * index
    store_le64(out, at, np.uint64(offset))
    store_le64(out, at + 8, np.uint64(length))


@numba.njit(cache=True, nogil=True, inline="always")
def finish(out, positions, body_length):
    """Message.bodyLength (the body must be a multiple of 8 bytes)."""
    store_le64(out, positions[POS_BODY_LENGTH], np.uint64(body_length))
