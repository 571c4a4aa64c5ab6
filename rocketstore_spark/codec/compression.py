"""Message body compression (docs/format/commitlog.md, "Compression"; store-format.md §2.11).

Producers compress large bodies and say so in SYSFLAG: bit ``0x001`` (COMPRESSED_FLAG) set, the type in bits
``0x700``: 0 (legacy) and 3 are ZLIB (an RFC 1950 stream, ``java.util.zip.Deflater``), 1 is LZ4 (frame
format), 2 is ZSTD (frame). The broker stores the compressed bytes as they came (BODYCRC and BODYLENGTH
are of those); only consumers decompress. An unknown type, a damaged stream, or an output larger than
``max_size`` gives None: a body a consumer could not read is reported, never raised.

Only compressed records are touched (one C call each, the decompression being the work); runs wherever
records are decoded.
"""
from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore_spark.codec.arrow import RepeatedColumn

COMPRESSED_FLAG = 0x001
TYPE_MASK = 0x700
ZLIB_TYPES = (0, 3)
LZ4, ZSTD = 1, 2
DEFAULT_MAX_SIZE = 64 << 20          # bounds a decompression bomb; RocketMQ's default body limit is 4 MiB
_NO_BODIES = RepeatedColumn(None, pa.binary())      # the column of a batch without compressed records


def decompress(data: bytes, sys_flag: int, max_size: int = DEFAULT_MAX_SIZE) -> bytes | None:
    """The decompressed body of one compressed record, or None (module docstring)."""
    kind = (sys_flag & TYPE_MASK) >> 8
    try:
        if kind in ZLIB_TYPES:
            d = zlib.decompressobj()
            out = d.decompress(data, max_size)
            return out if d.eof and not d.unconsumed_tail else None
        if kind == LZ4:
            import lz4.frame
            d = lz4.frame.LZ4FrameDecompressor()
            out = d.decompress(data, max_length=max_size)
            return out if d.eof else None
        if kind == ZSTD:
            import zstandard
            d = zstandard.ZstdDecompressor().decompressobj()
            out = d.decompress(data)
            return out if len(out) <= max_size and d.eof else None
    except Exception:            # noqa: BLE001 — every codec has its own error type; a bad body is data
        return None
    return None


def uncompressed_bodies(bodies: pa.BinaryArray, sys_flag: np.ndarray, max_size: int = DEFAULT_MAX_SIZE) -> pa.Array:
    """Per record: the decompressed body where SYSFLAG says it is compressed, else null."""
    compressed = (sys_flag & COMPRESSED_FLAG) != 0
    if not np.count_nonzero(compressed):
        return _NO_BODIES(len(bodies))
    rows = np.flatnonzero(compressed)
    values = pa.array([decompress(bodies[int(r)].as_py(), int(sys_flag[r]), max_size) for r in rows], pa.binary())
    return pc.replace_with_mask(pa.nulls(len(bodies), pa.binary()), pa.array(compressed), values)
