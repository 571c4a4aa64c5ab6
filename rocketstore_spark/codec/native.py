"""Native operations for compiled (numba) code: big-endian loads, libc ``memcpy`` and ``memchr``, libdeflate's
``crc32``; and ``keep_freed_memory``, glibc's allocator told to reuse freed batches (in huge pages).

``load_le64_at``/``store_le64_at`` do the same at a raw address, for small helpers that
inline into a hot loop: numba keeps a reference count on every array an inlined helper with a loop or a branch
takes, two atomic calls per use in the caller's loop (a short copy helper taking arrays made the property pass
2.5x slower), where integers cost nothing. ``prefetch(buf, i)`` starts loading a cache line ahead of use. ``byte_at(buf, i)`` reads one byte without numba's negative-index handling, ``load_le64`` eight (for
searching 8 bytes at a time), ``store_le64`` writes eight; ``load_be16/32/64(buf, i)`` read a big-endian integer at byte index i of a contiguous uint8 array as one
unaligned load plus a byte swap (three times faster than assembling bytes, which numba does not fuse).
Like numba's own indexing they do not check bounds: callers check against the buffer length first (in the
bounds-checked mode, ``checked``, ``store_le64`` and ``copy_at`` check their writes: ``check_write``).

Each is bound by symbol name (``llvmlite.binding.add_symbol`` + ``numba.types.ExternalFunction``), not
through a ctypes pointer, so the numba kernels that call them can be cached on disk like the others.
Importing this module registers the symbols in the process; the kernels' modules import it first.
Pointers cross as ``intp`` (the ABI passes them alike on 64-bit targets). Runs wherever the codec runs.

Why: numba's slice assignment copies byte by byte (~2.5 GB/s gathering 1 KiB message bodies, against
~14 GB/s for ``memcpy``; a byte-by-byte search for a record start crawls through a zero-filled GiB where
``memchr`` skips it), and libdeflate's carry-less-multiply CRC-32 is ~4x zlib's on the same bodies.
"""
from __future__ import annotations

import ctypes
import os

import llvmlite.binding as llvm
import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

from rocketstore_spark.codec.checked import CHECKED

_MEMCPY = "rocketstore_memcpy"
_MEMCHR = "rocketstore_memchr"
_CRC32 = "rocketstore_libdeflate_crc32"


def _load_be(bits: int):
    width = ir.IntType(bits)
    result = {16: types.int16, 32: types.int32, 64: types.int64}[bits]

    @intrinsic
    def load(typingctx, buf, index):
        if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
                and isinstance(index, types.Integer)):
            raise TypingError(f"load_be{bits}(contiguous uint8 array, integer index)")

        def codegen(context, builder, signature, args):
            array = context.make_array(signature.args[0])(context, builder, args[0])
            address = builder.bitcast(builder.gep(array.data, [args[1]]), width.as_pointer())
            swap = builder.module.declare_intrinsic("llvm.bswap", [width])
            return builder.call(swap, [builder.load(address, align=1)])
        return result(buf, index), codegen
    return load


@intrinsic
def byte_at(typingctx, buf, index):
    """buf[index] of a contiguous uint8 array without numba's negative-index wraparound, which keeps byte
    loops from being optimised (a scan of properties runs twice as fast). No bounds check, like load_be*."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
            and isinstance(index, types.Integer)):
        raise TypingError("byte_at(contiguous uint8 array, integer index)")

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.load(builder.gep(array.data, [args[1]]))
    return types.uint8(buf, index), codegen


@intrinsic
def load_le64(typingctx, buf, index):
    """The 8 bytes at buf[index:] as a little-endian uint64 (one unaligned load; no bounds check)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
            and isinstance(index, types.Integer)):
        raise TypingError("load_le64(contiguous uint8 array, integer index)")

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(address, align=1)
    return types.uint64(buf, index), codegen


@intrinsic
def _store_le64(typingctx, buf, index, value):
    """buf[index:index+8] = value (uint64, little-endian; one unaligned store; no bounds check)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
            and isinstance(index, types.Integer) and value == types.uint64):
        raise TypingError("store_le64(contiguous uint8 array, integer index, uint64)")

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        builder.store(args[2], address, align=1)
        return context.get_dummy_value()
    return types.none(buf, index, value), codegen


@numba.njit(cache=True, nogil=True, inline="always")
def check_write(at, length, room):
    """In the bounds-checked mode (``checked``): an IndexError unless [at, at + length) lies inside a destination
    of ``room`` bytes. Compiles to nothing in normal mode."""
    if CHECKED:
        at, length, room = np.int64(at), np.int64(length), np.int64(room)
        if at < 0 or length < 0 or at + length > room:
            raise IndexError("bounds-checked mode: a write outside its region (at, bytes, region size)", at, length,
                             room)


if CHECKED:
    @numba.njit(cache=True, nogil=True, inline="always")
    def store_le64(buf, index, value):
        """buf[index:index+8] = value (uint64, little-endian; one unaligned store), checked (``check_write``)."""
        check_write(index, 8, buf.shape[0])
        _store_le64(buf, index, value)
else:
    store_le64 = _store_le64


@intrinsic
def load_le64_at(typingctx, address):
    """The 8 bytes at a raw ``address`` (an integer from ``array.ctypes.data``) as a little-endian uint64."""
    if not isinstance(address, types.Integer):
        raise TypingError("load_le64_at(integer address)")

    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()), align=1)
    return types.uint64(address), codegen


@intrinsic
def store_le64_at(typingctx, address, value):
    """The 8 bytes at a raw ``address`` = value (uint64, little-endian)."""
    if not (isinstance(address, types.Integer) and value == types.uint64):
        raise TypingError("store_le64_at(integer address, uint64)")

    def codegen(context, builder, signature, args):
        builder.store(args[1], builder.inttoptr(args[0], ir.IntType(64).as_pointer()), align=1)
        return context.get_dummy_value()
    return types.none(address, value), codegen


@intrinsic
def unowned(typingctx, array):
    """The same array without its owner: a view whose reference count numba never touches (meminfo NULL).
    numba counts references to every array an inlined helper with a branch or a loop takes — two calls, each an
    atomic operation, per use inside the caller's loop, which the refcount pruning does not remove — where a
    view without an owner costs two calls that return at once. For a kernel's input buffers, which its caller
    keeps alive for the call: never return it, or anything viewing it."""
    if not isinstance(array, types.Array):
        raise TypingError("unowned(array)")

    def codegen(context, builder, signature, args):
        view = context.make_array(signature.args[0])(context, builder, value=args[0])
        view.meminfo = cgutils.get_null_value(view.meminfo.type)
        view.parent = cgutils.get_null_value(view.parent.type)
        return view._getvalue()
    return array(array), codegen


PREFETCH_AHEAD = 16        # records: far enough to cover a miss, near enough to stay in cache


@intrinsic
def prefetch(typingctx, buf, index):
    """Ask the CPU to start loading the cache line of buf[index] (LLVM's prefetch: a hint, never a fault).
    A pass over records whose per-record work is long waits out one memory miss per record otherwise: the
    out-of-order window ends before the next record's load issues. Prefetching a record a few ahead
    overlaps those misses (a third of the time on a property pass)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.layout == "C"
            and isinstance(index, types.Integer)):
        raise TypingError("prefetch(contiguous uint8 array, integer index)")

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]),
                                                  "llvm.prefetch.p0")
        # read, keep in all cache levels, data cache
        builder.call(function, [builder.bitcast(builder.gep(array.data, [args[1]]), i8p),
                                ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()
    return types.none(buf, index), codegen


load_be16 = _load_be(16)
load_be32 = _load_be(32)
load_be64 = _load_be(64)


def _address(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


_LIBC = ctypes.CDLL(None)          # the C library this process runs on
llvm.add_symbol(_MEMCPY, _address(_LIBC.memcpy))
# void *memcpy(void *dest, const void *src, size_t n)
memcpy = types.ExternalFunction(_MEMCPY, types.intp(types.intp, types.intp, types.uintp))
llvm.add_symbol(_MEMCHR, _address(_LIBC.memchr))
# void *memchr(const void *s, int c, size_t n): the address of the first byte c, or 0
memchr = types.ExternalFunction(_MEMCHR, types.intp(types.intp, types.int32, types.uintp))


SHORT_COPY = 32            # copy_at: copies up to this long go 8 bytes at a time
SPARE = 8                  # bytes a destination of copy_at or store_le64 needs after its end (7, kept aligned)


@numba.njit(cache=True, nogil=True, inline="always")
def copy_at(dst, src, length, src_room, dst_room):
    """Copy ``length`` bytes from address ``src`` to address ``dst``; returns ``length``. Up to SHORT_COPY
    bytes go 8 at a time (a ``memcpy`` call per short string costs more than the copy): up to 7 bytes past
    the end are then written — the destination needs SPARE bytes after its end, which later copies
    overwrite — and read, where the source has them (``src_room``: bytes readable from ``src``).
    ``dst_room``: bytes writable from ``dst``, checked in the bounds-checked mode (``check_write``).
    Addresses, not arrays (``load_le64_at``). A length below zero copies nothing (memcpy would take it as
    a huge size)."""
    if length <= 0:
        return 0
    if length <= SHORT_COPY and src_room >= SHORT_COPY:
        check_write(0, (length + 7) & ~7, dst_room)
        k = 0
        while k < length:
            store_le64_at(dst + k, load_le64_at(src + k))
            k += 8
    else:
        check_write(0, length, dst_room)
        memcpy(dst, src, length)
    return length

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


# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20          # glibc's largest
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Let this process reuse the memory of freed batches instead of returning it to the kernel and faulting
    fresh zeroed pages for the next batch (glibc by default serves and returns blocks of a few MiB — one
    batch's body column — with mmap/munmap, or trims its heap: ≈ 10,000 page faults per 256 MiB segment
    decoded, a third of a full-schema decode on a busy host). Blocks up to 32 MiB then come from the heap
    and up to 256 MiB of free heap is kept: what is kept never exceeds the peak the process used, which a
    batch bounds. The first call also backs that heap with huge pages (``huge_pages_for_heap``; not where the
    environment sets ROCKETSTORE_HUGE_PAGES=0, e.g. a container with a tight memory limit). Call where
    batches are decoded in a loop (a Spark worker). False where the C library is not glibc (nothing
    changes)."""
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is None:
        return False
    kept = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    global _heap_advised
    if kept and not _heap_advised and os.environ.get(HUGE_PAGES_ENV, "1") != "0":
        _heap_advised = True
        huge_pages_for_heap()
    return kept


_heap_advised = False
HUGE_PAGES_ENV = "ROCKETSTORE_HUGE_PAGES"
HEAP_RESERVE = 64 << 20              # heap grown ahead and advised: a few batches' worth of buffers
_MADV_HUGEPAGE = 14
_THP = "/sys/kernel/mm/transparent_hugepage"
THP_SETTING = f"{_THP}/enabled"


def huge_pages_for_heap(reserve: int = HEAP_RESERVE) -> bool:
    """Ask the kernel to back glibc's main malloc heap (``[heap]``: the arena of the thread that decodes, in a
    Spark worker the main one) with transparent huge pages (``madvise`` MADV_HUGEPAGE), after growing it by
    ``reserve`` bytes that are freed again (kept by keep_freed_memory's trim threshold), so the blocks later
    batches take lie in the advised range. Why: a full-schema batch writes ≈ 7 MB of fresh columns (bodies,
    properties) that Spark's serializer then reads; in 4 KiB pages that is ≈ 1,700 TLB entries a batch, and a
    256 MiB segment decodes ≈ 6 % faster with 2 MiB pages (what glibc's own ``glibc.malloc.hugetlb=1`` tunable
    does, which only works when set before the process starts).

    Nothing is touched or populated here. What it can cost: the heap's resident size may round up to whole
    huge pages (the kernel's khugepaged may also collapse sparsely used ranges of it), so RSS can grow by up to
    the size of the ``[heap]`` mapping; where huge pages are scarce, the kernel may compact memory when a range
    is first touched (``defrag`` = ``madvise``), once per range, as the heap is kept and reused. Only where the
    kernel's THP setting is ``madvise`` (``always`` needs no advice, ``never`` refuses it) and ``/proc`` shows
    the heap. Returns whether advice was given."""
    try:
        with open(THP_SETTING) as f:
            if "[madvise]" not in f.read():
                return False
        try:
            with open(f"{_THP}/hpage_pmd_size") as f:
                huge_page = int(f.read())
        except (OSError, ValueError):
            huge_page = 2 << 20
        malloc, free, madvise = _LIBC.malloc, _LIBC.free, _LIBC.madvise
    except (OSError, AttributeError):
        return False
    malloc.restype, malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    free.restype, free.argtypes = None, [ctypes.c_void_p]
    madvise.restype, madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    chunk = MMAP_THRESHOLD // 2                      # below the mmap threshold: served from the heap
    blocks = [malloc(chunk) for _ in range(max(1, reserve // chunk))]
    try:
        with open("/proc/self/maps") as f:
            heap = [tuple(int(x, 16) for x in line.split()[0].split("-")) for line in f
                    if line.rstrip().endswith("[heap]")]
    except OSError:                                  # no /proc: nothing to advise
        heap = []
    finally:
        for block in blocks:
            free(block)
    advised = False
    for lo, hi in heap:                              # whole huge pages inside each mapping
        start, end = -(-lo // huge_page) * huge_page, hi // huge_page * huge_page
        if end > start and madvise(start, end - start, _MADV_HUGEPAGE) == 0:
            advised = True
    return advised
