"""The IndexFile check streams a file and its expected keys in chunks and merges them on physical offset
(verify/index.py); a damaged file whose entries are out of order is matched whole. Whatever the chunking,
and whichever of the two ways a file is matched, the findings are the same: damage of every kind the
structure and key checks look for, planted at random into IndexFiles RocketMQ wrote, checked with
RocketMQ's own chunk size, with chunks of a few entries and keys (every run boundary exercised), and with
the whole-file match forced."""
from __future__ import annotations

import random

import numpy as np
import pytest

from rocketstore_spark.codec import indexfile
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.indexes import read_index_file
from rocketstore_spark.verify import index
from rocketstore_spark.verify.queues import LogBounds
from rocketstore_spark.verify.store import log_bounds
from rocketstore_spark.store.scan import scan_segment
from tests.golden.goldens import BY_ID
from tests.store_files import copy_store

ENTRY = indexfile.ENTRY_DTYPE


def damage(path, slots: int, rng: random.Random) -> str:
    """One random kind of damage to the IndexFile at ``path`` (of ``slots`` hash slots), in place (a copy);
    returns what was done."""
    view = read_index_file(str(path), slots)
    g, n = view.geometry, view.entry_count
    data = bytearray(path.read_bytes())
    at = lambda i: g.entries_start + indexfile.ENTRY_SIZE * i                           # noqa: E731
    entry = lambda i: np.frombuffer(bytes(data[at(i):at(i) + 20]), ENTRY).copy()        # noqa: E731

    def put(i, e):
        data[at(i):at(i) + 20] = e.tobytes()
    kind = rng.choice(["hash", "prev", "phy_forward", "phy_back", "swap", "time", "head", "negative", "zero",
                       "many_hashes", "duplicate"])
    i = rng.randrange(1, n + 1)
    e = entry(i)
    if kind == "hash":
        e["key_hash"] = rng.randrange(0, 2**31)
    elif kind == "prev":
        e["prev_index"] = rng.randrange(0, n + 5)
    elif kind == "phy_forward":                      # points at a later record: still in order if i is last
        e["phy_offset"] = entry(min(n, i + rng.randrange(1, 4)))["phy_offset"]
    elif kind == "phy_back":                          # out of order: matched whole
        e["phy_offset"] = entry(max(1, i - rng.randrange(1, 30)))["phy_offset"]
    elif kind == "swap":
        j = rng.randrange(1, n + 1)
        other = entry(j)
        put(j, e)
        e = other
    elif kind == "time":
        e["time_diff"] = rng.choice([-1, int(e["time_diff"][0]) + rng.randrange(1, 100)])
    elif kind == "head":
        s = rng.randrange(g.hash_slot_num)
        data[indexfile.HEADER_SIZE + 4 * s:indexfile.HEADER_SIZE + 4 * s + 4] = \
            int(rng.randrange(0, n + 3)).to_bytes(4, "big")
    elif kind == "negative":
        e["key_hash"] = -rng.randrange(1, 2**31)
    elif kind == "zero":
        e[:] = np.zeros(1, ENTRY)
    elif kind == "many_hashes":                       # a run of wrong entries, past the findings cap
        for k in range(i, min(n, i + 40) + 1):
            f = entry(k)
            f["key_hash"] = rng.randrange(0, 2**31)
            put(k, f)
        e = entry(i)
    elif kind == "duplicate":                         # the same key twice: set semantics
        e = entry(max(1, i - 1))
    put(i, e)
    path.write_bytes(bytes(data))
    return f"{kind} at entry {i}"


def rechunked(source, rng: random.Random):
    """The same keys in chunks of 1 to 5."""
    def keys(begin, end):
        for key_hash, phy, ts in source(begin, end):
            k = 0
            while k < len(phy):
                step = rng.randrange(1, 6)
                yield key_hash[k:k + step], phy[k:k + step], ts[k:k + step]
                k += step
    return keys


def verdicts(layout, settings, log, views, keys=None):
    out = []
    for k, v in enumerate(views):
        out.append(index.check_index_file(
            layout, v, str(layout.files.base), settings.geometry, settings.release, settings.message_delay_level,
            log, newest=k == len(views) - 1, previous_end=views[k - 1].header["end_timestamp"] if k else None,
            keys=keys))
    return [(x.file, x.entries, x.keys_expected, x.unindexed_after, x.findings) for x in out]


@pytest.mark.parametrize("seed", range(12))
def test_every_chunking_and_both_matches_give_one_verdict(tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    store = copy_store(BY_ID[rng.choice(["5.5.1/clean", "4.9.8/clean", "5.3.3/cq-lag-clean"])].store, tmp_path / "s")
    files = [p for p in sorted((store / "index").iterdir()) if read_index_file(str(p)).entry_count]
    slots = read_index_file(str(files[0])).geometry.hash_slot_num
    done = [damage(rng.choice(files), slots, rng) for _ in range(rng.randrange(1, 4))]
    layout = discover(str(store))[0]
    settings = resolve(layout)
    scans = [(s.base_offset, scan_segment(s.path, s.base_offset, followed=layout.followed(k)))
             for k, s in enumerate(layout.segments)]
    log = log_bounds(layout, scans)
    assert isinstance(log, LogBounds)
    views = [read_index_file(str(p), settings.geometry.hash_slot_num) for p in layout.files.index_files()]
    views = [v for v in views if v.geometry is not None]

    whole_chunks = verdicts(layout, settings, log, views)
    monkeypatch.setattr(index, "CHUNK_ENTRIES", 3)
    source = index.dispatched_keys(layout, settings.release, settings.message_delay_level)
    small_chunks = verdicts(layout, settings, log, views, keys=rechunked(source, rng))
    structure = index.check_structure
    monkeypatch.setattr(index, "check_structure", lambda *a: (lambda s: setattr(s, "in_order", False) or s)(
        structure(*a)))
    matched_whole = verdicts(layout, settings, log, views)
    assert small_chunks == whole_chunks, done
    assert matched_whole == whole_chunks, done
    assert any(f for *_, fs in whole_chunks for f in fs), done          # the damage was seen


def test_a_sound_file_streams_in_order_and_reports_nothing(tmp_path):
    layout = discover(str(BY_ID["5.5.1/clean"].store))[0]
    settings = resolve(layout)
    views = [read_index_file(str(p), settings.geometry.hash_slot_num) for p in layout.files.index_files()]
    for v in views:
        s = index.check_structure(v, v.path, settings.geometry)
        assert s.in_order and not s.findings


def test_one_wrong_hash_is_one_wrong_entry_and_one_missing_key(tmp_path):
    store = copy_store(BY_ID["5.5.1/clean"].store, tmp_path / "s")
    layout = discover(str(store))[0]
    settings = resolve(layout)
    scans = [(s.base_offset, scan_segment(s.path, s.base_offset, followed=layout.followed(k)))
             for k, s in enumerate(layout.segments)]
    log = log_bounds(layout, scans)
    path = next(p for p in layout.files.index_files() if read_index_file(str(p)).entry_count > 8)
    views = [read_index_file(str(p), settings.geometry.hash_slot_num) for p in layout.files.index_files()]
    clean = verdicts(layout, settings, log, views)
    assert not [f for *_, fs in clean for f in fs if f.severity != "info"]
    view = read_index_file(str(path), settings.geometry.hash_slot_num)
    i = view.entry_count // 2
    pos = view.geometry.entries_start + indexfile.ENTRY_SIZE * i
    data = bytearray(path.read_bytes())
    e = np.frombuffer(bytes(data[pos:pos + 20]), ENTRY).copy()
    phy, old = int(e["phy_offset"][0]), int(e["key_hash"][0])
    e["key_hash"] = (old + 1) % 2**31
    data[pos:pos + 20] = e.tobytes()
    path.write_bytes(bytes(data))
    found = {(f.check, f.physical_offset) for *_, fs in verdicts(layout, settings, log, views) for f in fs
             if f.severity != "info" and f.check != "index.bad_chain"}
    assert found == {("index.wrong_entry", phy), ("index.missing_key", phy)}
