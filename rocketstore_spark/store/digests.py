"""Digests of store files the incremental scrub trusts by their bytes (wherever the scrub's driver runs): the
hash they are all made with (``new_hash``), and the digests of file prefixes one run reads once
(``PrefixDigests``). Read-only: every file is opened O_RDONLY and read with pread."""
from __future__ import annotations

import os

import xxhash

HASH_BLOCK = 8 << 20            # bytes a pread while a prefix is digested


def new_hash():
    """The hash of every digest the scrub keeps (``verify.scrub``, ``verify.cross``): xxh3 with 128 bits. Not a
    cryptographic one — it tells bytes changed by accident or by a tool (bit rot, a rewrite) from the bytes
    recorded, not bytes forged to collide — and 15 times blake2b's speed (7.5 against 0.5 GB/s on the reference
    machine): the scrub reads again, every run, the prefix of each file a broker appends to."""
    return xxhash.xxh3_128()


class PrefixDigests:
    """xxh3 (128 bits: ``new_hash``) of the first ``length`` bytes of a file, then the length
    (``digest``), read with pread; of the ``length`` bytes from ``start`` (an IndexFile's entry region: its header
    and slot table change with every put), each start a prefix of its own.
    One run's: a file digested up to one length and then up to a longer one (the last run's point checked,
    then this run's recorded) is read once — the second digest goes on from where the first one's bytes ended —
    and a length digested already is not read again (the scrub's segment plan and records share the run's
    instance with the cross-checks: ``report.scrub``)."""

    def __init__(self):
        self._read: dict[tuple[str, int], tuple[int, object]] = {}  # (path, start) -> (bytes hashed, the hash)
        self._done: dict[tuple[str, int, int], str] = {}            # (path, length, start) -> digest

    def digest(self, path: str, length: int, start: int = 0) -> str:
        if (path, length, start) in self._done:
            return self._done[(path, length, start)]
        done, h = self._read.get((path, start), (0, None))
        if h is None or done > length:
            done, h = 0, new_hash()
        else:
            h = h.copy()
        fd = os.open(path, os.O_RDONLY)
        try:
            for at in range(done, length, HASH_BLOCK):
                h.update(os.pread(fd, min(HASH_BLOCK, length - at), start + at))
        finally:
            os.close(fd)
        self._read[(path, start)] = (length, h.copy())
        h.update(length.to_bytes(8, "big"))
        self._done[(path, length, start)] = h.hexdigest()
        return self._done[(path, length, start)]
