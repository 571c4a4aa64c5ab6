"""C functions called from compiled (numba) code: libc ``memcpy`` and libdeflate's ``crc32``.

Each is bound by symbol name (``llvmlite.binding.add_symbol`` + ``numba.types.ExternalFunction``), not
through a ctypes pointer, so the numba kernels that call them can be cached on disk like the others.
Importing this module registers the symbols in the process; the kernels' modules import it first.
Pointers cross as ``intp`` (the ABI passes them alike on 64-bit targets). Runs wherever the codec runs.

Why: numba's slice assignment copies byte by byte (~2.5 GB/s gathering 1 KiB message bodies, against
~14 GB/s for ``memcpy``), and libdeflate's carry-less-multiply CRC-32 is ~4x zlib's on the same bodies.
"""
from __future__ import annotations

import ctypes

import llvmlite.binding as llvm
from numba import types

_MEMCPY = "rocketstore_memcpy"
_CRC32 = "rocketstore_libdeflate_crc32"


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


llvm.add_symbol(_MEMCPY, _address(ctypes.CDLL(None).memcpy))
# void *memcpy(void *dest, const void *src, size_t n)
memcpy = types.ExternalFunction(_MEMCPY, types.intp(types.intp, types.intp, types.uintp))


def _bind_libdeflate() -> bool:
    try:
        from deflate import _deflate
        llvm.add_symbol(_CRC32, _address(ctypes.CDLL(_deflate.__file__).libdeflate_crc32))
    except (ImportError, OSError, AttributeError):
        return False
    return True


HAVE_LIBDEFLATE = _bind_libdeflate()
# uint32_t libdeflate_crc32(uint32_t crc, const void *buffer, size_t len)
crc32 = types.ExternalFunction(_CRC32, types.uint32(types.uint32, types.intp, types.uintp))
