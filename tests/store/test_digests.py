"""``store.digests``: the prefix digests the incremental scrub trusts bytes by, and their prefetch (the last run's
prefixes of the files that changed since, digested on a thread of its own while the run goes on)."""
from __future__ import annotations

import os
import threading

from rocketstore_spark.store import digests
from rocketstore_spark.store.digests import PrefixDigests, new_hash


def by_definition(path, length, start=0) -> str:
    """xxh3-128 of the bytes [start, start + length) the file holds, then the length (8 bytes, big-endian)."""
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(length)
    h = new_hash()
    h.update(data)
    h.update(length.to_bytes(8, "big"))
    return h.hexdigest()


def counting(monkeypatch) -> list:
    """Every range ``hash_range`` reads, as (path, position, length) — from any thread."""
    seen, real, lock = [], digests.hash_range, threading.Lock()

    def hash_range(h, path, position, length):
        with lock:
            seen.append((path, position, length))
        real(h, path, position, length)
    monkeypatch.setattr(digests, "hash_range", hash_range)
    return seen


def test_a_digest_is_its_definition_and_goes_on_from_a_shorter_one(tmp_path, monkeypatch):
    path = tmp_path / "f"
    path.write_bytes(os.urandom(3 << 20))
    seen = counting(monkeypatch)
    d = PrefixDigests()
    assert d.digest(str(path), 1 << 20) == by_definition(path, 1 << 20)
    assert d.digest(str(path), 3 << 20) == by_definition(path, 3 << 20)
    assert d.digest(str(path), 2 << 20, start=1000) == by_definition(path, 2 << 20, 1000)
    assert d.digest(str(path), 5 << 20) == by_definition(path, 5 << 20)        # a file shorter than asked
    assert sum(n for p, _, n in seen if p == str(path)) == (1 << 20) + (2 << 20) + (2 << 20) + (2 << 20)
    assert [a[:3] for a in d.asked] == [[str(path), 1 << 20, 0], [str(path), 3 << 20, 0],
                                        [str(path), 2 << 20, 1000], [str(path), 5 << 20, 0]]


def test_the_prefetch_digests_the_changed_files_once_and_leaves_the_unchanged_alone(tmp_path, monkeypatch):
    grown, same, gone = (str(tmp_path / n) for n in ("grown", "same", "gone"))
    for p in (grown, same, gone):
        with open(p, "wb") as f:
            f.write(os.urandom(1 << 20))
    last = PrefixDigests()                                      # the last run
    for p in (grown, same, gone):
        last.digest(p, 1 << 20)
    with open(grown, "ab") as f:                                # a broker appends
        f.write(os.urandom(1 << 20))
    os.unlink(gone)
    seen = counting(monkeypatch)
    run = PrefixDigests()
    with run.prefetching(last.asked):
        run.prefetch.join()                                     # done before anything is asked
        assert seen == [(grown, 0, 1 << 20)]
        assert run.digest(grown, 1 << 20) == by_definition(grown, 1 << 20)
        assert run.digest(grown, 2 << 20) == by_definition(grown, 2 << 20)   # goes on from the prefetched
        assert seen == [(grown, 0, 1 << 20), (grown, 1 << 20, 1 << 20)]
    assert run.asked[0][:3] == [grown, 1 << 20, 0]              # what the callers asked, not the prefetch
    assert len(run.asked) == 2


def test_a_digest_asked_while_the_prefetch_reads_it_waits_for_it(tmp_path, monkeypatch):
    path = str(tmp_path / "f")
    with open(path, "wb") as f:
        f.write(os.urandom(64 << 20))
    last = PrefixDigests()
    last.digest(path, 64 << 20)
    os.utime(path, ns=(1, 1))                                   # its stat moved: the prefetch takes it
    seen = counting(monkeypatch)
    run = PrefixDigests()
    with run.prefetching(last.asked):
        assert run.digest(path, 64 << 20) == by_definition(path, 64 << 20)
    assert sum(n for _, _, n in seen) == 64 << 20               # read once, by whichever came first
