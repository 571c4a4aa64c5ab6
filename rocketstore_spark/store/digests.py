"""Digests of store files the incremental scrub trusts by their bytes (wherever the scrub's driver runs): the
hash they are all made with (``new_hash``), and the digests of file prefixes one run reads once
(``PrefixDigests``). Read-only: every file is opened O_RDONLY and read through a read-only mapping
(``hash_range``)."""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager

import xxhash

from rocketstore_spark.store.segment_reader import map_window

HASH_BLOCK = 8 << 20            # bytes hashed a call while a prefix is digested


def new_hash():
    """The hash of every digest the scrub keeps (``verify.scrub``, ``verify.cross``): xxh3 with 128 bits. Not a
    cryptographic one — it tells bytes changed by accident or by a tool (bit rot, a rewrite) from the bytes
    recorded, not bytes forged to collide — and 15 times blake2b's speed (7.5 against 0.5 GB/s on the reference
    machine): the scrub reads again, every run, the prefix of each file a broker appends to."""
    return xxhash.xxh3_128()


def hash_range(h, path: str, position: int, length: int) -> None:
    """The bytes [position, position + length) of the file at ``path``, as many of them as it holds (a file cut
    below them hashes short, and so differs from any digest of the longer file), fed into the hash ``h``.
    Through read-only shared mappings of HASH_BLOCK bytes, one at a time (``store.segment_reader.map_window``):
    the page cache hashed where it lies, and no more of it mapped at once (a mapped page counts in the process's
    resident memory: a GiB segment's prefix mapped whole would, 0.5 GB more at the default geometry's peak). A
    pread copy of each block costs a quarter more (97 against 76 ms for 512 MiB here): the scrub digests
    every run the prefix of each file a broker appends to, up to a GiB."""
    fd = os.open(path, os.O_RDONLY)
    try:
        have = max(0, min(length, os.fstat(fd).st_size - position))   # a mapping past the end would fault
        for at in range(0, have, HASH_BLOCK):
            block = map_window(fd, position + at, min(HASH_BLOCK, have - at), populate=True)
            h.update(block)
            del block                                   # unmapped: the last view of the mapping goes
    finally:
        os.close(fd)


class PrefixDigests:
    """xxh3 (128 bits: ``new_hash``) of the first ``length`` bytes of a file, then the length
    (``digest``), read through ``hash_range``; of the ``length`` bytes from ``start`` (an IndexFile's entry region:
    its header and slot table change with every put), each start a prefix of its own.
    One run's: a file digested up to one length and then up to a longer one (the last run's point checked,
    then this run's recorded) is read once — the second digest goes on from where the first one's bytes ended —
    and a length digested already is not read again (the scrub's segment plan and records share the run's
    instance with the cross-checks: ``report.scrub``).

    ``asked``: what this run's callers asked for ([path, length, start, the file's stat then]), which the next
    run gives ``prefetching``: the prefixes it will check are the ones this run recorded. Thread-safe: one lock
    a (path, start), so a digest asked while the prefetch is at it waits for it rather than reading again."""

    def __init__(self):
        self._read: dict[tuple[str, int], tuple[int, object]] = {}  # (path, start) -> (bytes hashed, the hash)
        self._done: dict[tuple[str, int, int], str] = {}            # (path, length, start) -> digest
        self._locks: dict[tuple[str, int], threading.Lock] = {}
        self._guard = threading.Lock()
        self.asked: list[list] = []
        self.prefetch: threading.Thread | None = None      # ``prefetching``'s thread, while it runs

    def digest(self, path: str, length: int, start: int = 0) -> str:
        try:
            st = os.stat(path)
            self.asked.append([path, length, start, [st.st_size, st.st_mtime_ns, st.st_ino]])
        except OSError:
            pass                                            # gone: hash_range says so
        return self._digest(path, length, start)

    def _digest(self, path: str, length: int, start: int) -> str:
        with self._guard:
            lock = self._locks.setdefault((path, start), threading.Lock())
        with lock:
            if (path, length, start) in self._done:
                return self._done[(path, length, start)]
            done, h = self._read.get((path, start), (0, None))
            if h is None or done > length:
                done, h = 0, new_hash()
            else:
                h = h.copy()
            hash_range(h, path, start + done, length - done)
            self._read[(path, start)] = (length, h.copy())
            h.update(length.to_bytes(8, "big"))
            self._done[(path, length, start)] = h.hexdigest()
            return self._done[(path, length, start)]

    @contextmanager
    def prefetching(self, asked: list | None):
        """Digest on a thread of its own, while the block runs, what the last run asked for (its ``asked``) of
        the files that changed since (their stat moved, and they still hold the prefix): those are the prefixes
        this run checks — the tail segment's, the newest IndexFile's entry region, each queue's last file.
        Why: xxh3 lets the GIL go, so they are read beside the run's other work rather than one after another on
        its critical path (the digests of a default-geometry broker's active files are about 0.1 s a run). An
        unchanged file is left alone (the run does not digest it), a failure is left to the run's own call. The
        thread stops at the block's end."""
        todo = []
        # shortest first: the longest (the tail segment's prefix, up to a GiB) is the run's first need, which its
        # own thread digests meanwhile; each file's prefixes in growing length, each going on from the last
        for path, length, start, was in sorted(asked or [], key=lambda a: (a[1], a[0], a[2])):
            try:
                st = os.stat(path)
            except OSError:
                continue
            if [st.st_size, st.st_mtime_ns, st.st_ino] != was and st.st_size >= start + length:
                todo.append((path, length, start))
        if not todo:
            yield self
            return
        stop = threading.Event()

        def run():
            for key in todo:
                if stop.is_set():
                    return
                try:
                    self._digest(*key)
                except Exception:               # noqa: BLE001 — the run's own call meets it and says so
                    pass
        worker = self.prefetch = threading.Thread(target=run, name="prefix-digests", daemon=True)
        worker.start()
        try:
            yield self
        finally:
            stop.set()
            worker.join()
