"""Reading store files ahead of the passes that will read them: the page cache filled from the disk while the
compiled passes work on what it already holds (driver or CLI process; a thread of its own).

The passes read a segment through mapped windows, so the disk is read a page fault at a time, in the kernel's
small read-ahead steps, while the pass waits; ``cat`` of the same files streams them. ``ReadAhead`` asks the
kernel for the next files (``posix_fadvise(POSIX_FADV_WILLNEED)``, each file opened ``O_RDONLY`` and closed
again: nothing is written, nothing mapped, no memory of ours held — the pages are the page cache's) one step
ahead of the passes: ``want(k)`` when a pass starts step k reads step k + 1 ahead, never further, so a store
larger than RAM does not evict what the passes have yet to read (a step may be a byte range of a file: verify
reads the log 128 MiB ahead of each of its threads, whose pages the cache keeps until the thread reaches them
even when other work presses on it — a whole segment ahead was partly evicted and read twice). Where
``posix_fadvise`` is missing (not Linux) it does nothing.

Linux reads at most the device's larger of ``read_ahead_kb`` and ``max_sectors_kb`` per WILLNEED call
(``force_page_cache_ra`` caps the request there; the rest of the range is silently not read): each call asks
for that much (``advice_chunk``, from the device's queue in sysfs; 128 KiB, the kernel's default read-ahead,
where it cannot be told). A chunk whose first and last bytes the page cache already holds (a read with
``RWF_NOWAIT`` succeeds) is not asked for: on a store the cache holds, the read-ahead costs a few reads.
"""
from __future__ import annotations

import os
import stat
import threading

from rocketstore_spark.store.queues import data_end

MIN_CHUNK = 128 << 10       # the kernel's default read-ahead (VM_READAHEAD_PAGES): a WILLNEED reads at least this
MAX_CHUNK = 32 << 20        # bytes a WILLNEED asks for at most (the thread checks for close between chunks)
_chunks: dict[int, int] = {}     # st_dev -> advice_chunk


def advice_chunk(st_dev: int) -> int:
    """The bytes one WILLNEED call reads on the block device ``st_dev``: the larger of its ``read_ahead_kb`` and
    ``max_sectors_kb`` (a partition's are its disk's), within [MIN_CHUNK, MAX_CHUNK]; MIN_CHUNK where sysfs does
    not say (no block device behind the file system, not Linux)."""
    chunk = _chunks.get(st_dev)
    if chunk is None:
        chunk = 0
        dev = os.path.realpath(f"/sys/dev/block/{os.major(st_dev)}:{os.minor(st_dev)}")
        for queue in (os.path.join(dev, "queue"), os.path.join(os.path.dirname(dev), "queue")):
            for name in ("read_ahead_kb", "max_sectors_kb"):
                try:
                    with open(os.path.join(queue, name)) as f:
                        chunk = max(chunk, int(f.read()) << 10)
                except (OSError, ValueError):
                    pass
            if chunk:
                break
        chunk = _chunks[st_dev] = min(MAX_CHUNK, max(MIN_CHUNK, chunk))
    return chunk


def cached(fd: int, position: int) -> bool:
    """Whether the page cache holds the byte at ``position`` of ``fd`` (a one-byte read that does not wait for
    the disk); False where that cannot be told."""
    try:
        return os.preadv(fd, [bytearray(1)], position, os.RWF_NOWAIT) == 1
    except (OSError, AttributeError, ValueError):
        return False


class ReadAhead:
    """A thread reading ``steps`` (a list of lists of pieces — a file path, or (path, start, end) for a byte
    range of one — in the order the passes reach them) ahead of the passes: ``want(k)`` (a pass has started step
    k) reads step k + 1, once, in the order asked (passes on two threads each get their own next step read);
    ``close`` stops it. A context manager."""

    def __init__(self, steps: list[list]):
        self.steps = steps
        self._asked: list[int] = []         # steps asked for, not yet read (in order)
        self._seen: set[int] = set()        # steps ever asked for
        self._closed = False
        self._cv = threading.Condition()
        self._thread = None
        if steps and hasattr(os, "posix_fadvise"):
            self._thread = threading.Thread(target=self._run, name="readahead", daemon=True)
            self._thread.start()

    def want(self, k: int) -> None:
        """A pass has started step ``k``: read step k + 1 ahead (once)."""
        with self._cv:
            if k + 1 < len(self.steps) and k + 1 not in self._seen:
                self._seen.add(k + 1)
                self._asked.append(k + 1)
                self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed and not self._asked:
                    self._cv.wait()
                if self._closed:
                    return
                step = self.steps[self._asked.pop(0)]
            for piece in step:
                path, start, end = (piece, 0, None) if isinstance(piece, str) else piece
                if not self._advise(path, start, end):
                    return

    def _advise(self, path: str, start: int = 0, end: int | None = None) -> bool:
        """WILLNEED over [start, end) of ``path`` (None: as far as its data goes, ``store.queues.data_end``: a
        preallocated file's hole is not read), ``advice_chunk`` at a time, what the cache holds skipped; False
        once closed. A file gone or unreadable, or not a regular file, is skipped (the pass that reads it reports
        it): opened non-blocking, so a FIFO put where a store file was does not hold the thread (and the audit
        waiting for it) until a writer comes."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            return True
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return True
            size, chunk = data_end(fd, st.st_size), advice_chunk(st.st_dev)
            size = size if end is None else min(size, end)
            for at in range(start, size, chunk):
                if self._closed:
                    return False
                n = min(chunk, size - at)
                if not (cached(fd, at) and cached(fd, at + n - 1)):
                    os.posix_fadvise(fd, at, n, os.POSIX_FADV_WILLNEED)
        except OSError:
            pass
        finally:
            os.close(fd)
        return True

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> "ReadAhead":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
