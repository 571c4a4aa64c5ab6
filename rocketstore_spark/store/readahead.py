"""Reading store files ahead of the passes that will read them: the page cache filled from the disk while the
compiled passes work on what it already holds (driver or CLI process; a thread of its own).

The passes read a segment through mapped windows, so the disk is read a page fault at a time, in the kernel's
small read-ahead steps, while the pass waits; ``cat`` of the same files streams them. ``ReadAhead`` asks the
kernel for the next files (``posix_fadvise(POSIX_FADV_WILLNEED)`` over CHUNK bytes at a time, each file opened
``O_RDONLY`` and closed again: nothing is written, nothing mapped, no memory of ours held — the pages are the
page cache's) one step ahead of the passes: ``want(k)`` when a pass starts step k reads step k + 1 ahead, never
further, so a store larger than RAM does not evict what the passes have yet to read. Where ``posix_fadvise`` is
missing (not Linux) it does nothing.
"""
from __future__ import annotations

import os
import threading

CHUNK = 32 << 20            # bytes a WILLNEED asks for at once (the thread checks for close between chunks)


class ReadAhead:
    """A thread reading ``steps`` (a list of lists of file paths, in the order the passes reach them) ahead of
    the passes: ``want(k)`` (a pass has started step k) reads step k + 1; ``close`` stops it. A context
    manager."""

    def __init__(self, steps: list[list[str]]):
        self.steps = steps
        self._wanted = -1           # the furthest step asked for
        self._done = -1             # steps read ahead so far (in order)
        self._closed = False
        self._cv = threading.Condition()
        self._thread = None
        if steps and hasattr(os, "posix_fadvise"):
            self._thread = threading.Thread(target=self._run, name="readahead", daemon=True)
            self._thread.start()

    def want(self, k: int) -> None:
        """A pass has started step ``k``: read up to step k + 1 ahead."""
        with self._cv:
            if k + 1 > self._wanted:
                self._wanted = k + 1
                self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._closed and self._done >= min(self._wanted, len(self.steps) - 1):
                    self._cv.wait()
                if self._closed:
                    return
                self._done += 1
                step = self.steps[self._done]
            for path in step:
                if not self._advise(path):
                    return

    def _advise(self, path: str) -> bool:
        """WILLNEED over ``path``, CHUNK at a time; False once closed. A file gone or unreadable is skipped
        (the pass that reads it reports it)."""
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return True
        try:
            size = os.fstat(fd).st_size
            for at in range(0, size, CHUNK):
                if self._closed:
                    return False
                os.posix_fadvise(fd, at, min(CHUNK, size - at), os.POSIX_FADV_WILLNEED)
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
