"""Verifying one IndexFile: its structure, and its keys against the CommitLog records it covers (one Spark
task per file, or in-process; read-only).

Structure (``index.bad_header``, ``bad_chain``, ``unreachable_entries``, ``bad_time``): the header against
what the file holds, every slot head and prev_index in range and pointing to an older entry of the same
slot (so no chain can loop), every entry reachable from its slot's head, time differences within the
header's span.

Keys (``index.wrong_entry``, ``missing_key``): RocketMQ's dispatch rules (``codec.dispatch_kernel.DispatchDecoder``,
the same the rebuild uses) give the keys of every record from the header's begin to end physical offset; each
entry's (key hash, physical offset) must be one of them, and each of them must be in the file — except for the
records at the two ends, whose keys a rollover splits between two files. For the store's newest file the
records after its end are counted too (``index.lagging``). The expected keys come from a ``KeySource``: the
dispatch of the records themselves (``dispatched_keys``, one Spark task per file) or the keys a whole-store
dispatch already spilled (``store.spill.spilled_keys``, the in-process verify).

How, and in what memory: RocketMQ puts keys in CommitLog order, so a sound file's entries run in physical
offset order, as the expected keys do. Both are streamed a chunk at a time (``CHUNK_ENTRIES``) and merged
on physical offset by a compiled kernel (``_match``); the chain structure is one compiled pass keeping the
newest entry of every slot (``_chain_step``), and the chains are only walked when they are not what RocketMQ
writes. Memory: two slot tables (8 bytes a slot: 80 MB for RocketMQ's default 5M slots) and a few chunks,
whatever the entry count. A damaged file whose entries are out of physical offset order is matched whole
(its entry columns and covered keys in memory: proportional to its geometry, about 1 GB at the default).

Resumed (the scrub's cross-checks, ``verify.cross``, for a file that grew since the last run: the newest, and
the one that was): a check of a sound file leaves an ``IndexCarry`` — the match's state just before its newest
physical offset (the header's end, R): the entry where the entries at R start, the expected keys below R, entry
1's record time; and a digest of every slot's newest entry (the slot table it had). Given it back with entries
1 .. its count unchanged (the caller's trust: a digest of those entries' bytes), the check matches only the
entries from R and the keys of the records from R — the match is by physical offset, so the part below R gives
what it gave, and R itself, the end a rollover may split, is matched again with the file's end as it is now.
The structure pass reads only the new entries too: every slot's newest old entry is walked back from the heads
through the new entries' prev_index and taken when its digest is the recorded one (else the whole file is read:
the chains are damaged, and said so). The pass is cheap at the bench's 40,000 entries (about 1 ms, against 15 ms
for a whole match that dispatches the file's 20 MB of log again) but not at RocketMQ's default 20 M (about
1 s). Anything it cannot show the same (entries out of order, a header whose begin or end is not its entries',
a file cut short, another begin, geometry or fewer entries) is checked whole, and the verdict says why (``how``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numba
import numpy as np

from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.findings import CappedRun, Finding, finding
from rocketstore_spark.rocketmq.releases import Release
from rocketstore_spark.store.digests import new_hash
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.indexes import IndexFileView, iter_entries
from rocketstore_spark.store.segment_reader import SegmentReader
from rocketstore_spark.verify.queues import LogBounds

CHUNK_ENTRIES = 1 << 20           # IndexFile entries (20 MiB) and expected keys read at a time
INT32_MAX = 2**31 - 1

# (key hash, physical offset, store time in ms) chunks of the keys RocketMQ puts for the records from
# physical offset ``begin`` to ``end`` inclusive (None: to the end of the log), in put order
KeyChunks = Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]
KeySource = Callable[[int, "int | None"], KeyChunks]


@dataclass
class IndexCarry:
    """A sound file's match just before its newest physical offset (``at``, the header's end), for a later check of
    the same file grown (``check_index_file``'s ``resume``; JSON in the scrub's state)."""
    entries: int                        # the file's entry count then: entries 1 .. entries are trusted unchanged
    slots: int                          # its geometry (hash slots, entries)
    index_num: int
    begin: int                          # where the match started (the header's begin, or the log's first offset)
    at: int                             # its end then: the physical offset of entry ``entries``
    first: int                          # the first entry at ``at`` (the ones before it lie below)
    first_phy: int                      # entry 1's physical offset
    heads: str                          # xxh3 of every slot's newest entry then (as int32s: the slot table it had)
    keys: int                           # the expected keys from ``begin`` below ``at``: each matched, or at ``begin``
    first_seen: bool                    # the timing (``_Timing``) after the entries below ``at``
    first_ts: int | None
    any_known: bool


@dataclass
class IndexVerdict:
    file: str
    entries: int = 0
    keys_expected: int = 0
    unindexed_after: int = 0            # newest file only: keys of records after its end
    findings: list[Finding] = field(default_factory=list)
    carry: IndexCarry | None = None     # what a check of this file grown resumes from; None: it checks whole
    how: str = "whole"                  # "resumed from entry N", or "whole: why" when a carry was given in vain


@dataclass
class Structure:
    """What the structure pass learned of a file's entries 1 .. n besides its findings."""
    findings: list[Finding]
    first_phy: int = 0                  # entry 1's physical offset
    last_phy: int = 0                   # entry n's
    in_order: bool = True               # physical offsets never decrease from entry to entry (as RocketMQ puts)
    tail_first: int = 0                 # the first of the entries at the end that share entry n's physical offset
    newest: np.ndarray | None = None    # every slot's newest entry (what its head should be)
    resumed: bool = False               # entries 1 .. the carry's count taken from it, not read


def _slot_heads(view: IndexFileView) -> np.ndarray:
    """The slot table (each slot's newest entry), zero where the file is cut inside it."""
    g = view.geometry
    with open(view.path, "rb") as f:
        f.seek(indexfile.HEADER_SIZE)
        raw = f.read(indexfile.SLOT_SIZE * g.hash_slot_num)
    heads = np.zeros(g.hash_slot_num, dtype=np.int64)      # one conversion into the table: no padded copy
    held = len(raw) // 4
    heads[:held] = np.frombuffer(raw, dtype=">i4", count=held)
    return heads


def _entry_chunks(view: IndexFileView, start: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(first entry, entries) chunks of entries ``start`` .. n; entries the file does not hold read as zeros."""
    n, got = view.entry_count, start - 1
    for first, entries in iter_entries(view, CHUNK_ENTRIES, start):
        got = first + len(entries) - 1
        yield first, entries
    if got < n:
        yield got + 1, np.zeros(n - got, dtype=indexfile.ENTRY_DTYPE)


def _prev_column(view: IndexFileView) -> np.ndarray:
    """prev_index of entries 0 .. n (int32: 4 bytes an entry), for walking the chains."""
    prev = np.zeros(view.entry_count + 1, dtype=np.int32)
    for first, e in _entry_chunks(view):
        prev[first:first + len(e)] = e["prev_index"]
    return prev


@numba.njit(cache=True, nogil=True)
def _chain_step(slot, newest, first_index, want_prev):
    """RocketMQ links every entry to the newest older entry of its slot and points the slot at it: for the
    chunk of entries from ``first_index``, the prev_index each should have (``newest`` carried over chunks)."""
    for j in range(len(slot)):
        s = slot[j]
        if s >= 0:
            want_prev[j] = newest[s]
            newest[s] = first_index + j


@numba.njit(cache=True, nogil=True)
def _reachable(heads, prev, n):
    """Entries reachable from a slot head by following prev_index through strictly older entries."""
    seen = np.zeros(n + 1, dtype=np.bool_)
    for s in range(len(heads)):
        i = heads[s]
        while 0 < i <= n and not seen[i]:
            seen[i] = True
            p = prev[i]
            if p >= i:
                break
            i = p
    return seen


def _heads_digest(newest: np.ndarray) -> str:
    """The digest (the scrub's hash, ``store.digests.new_hash``) of every slot's newest entry, as the slot table
    holds it."""
    h = new_hash()
    h.update(newest.astype(">i4"))             # hashed where it lies (buffer protocol): no bytes copy
    return h.hexdigest()


@numba.njit(cache=True, nogil=True)
def _newest_below(heads, prev, first, n):
    """Every slot's newest entry below ``first``, as its chain from its head through entries ``first`` .. ``n``
    (their prev_index in ``prev``) leads back to it; False when a chain leaves that range or does not go back."""
    out = heads.copy()
    for s in range(len(heads)):
        i = out[s]
        while i >= first:
            if i > n or prev[i - first] >= i:
                return False, out
            i = prev[i - first]
        out[s] = i
    return True, out


def check_structure(view: IndexFileView, name: str, store_geometry: indexfile.Geometry,
                    resume: IndexCarry | None = None) -> Structure:
    """Header, chain and time findings of one file with a known geometry (``view.geometry``: what the file
    holds; ``store_geometry``: the broker's setting), read a chunk at a time. ``resume``: the carry of a check
    of the file when it held fewer entries, its entries 1 .. ``resume.entries`` unchanged since (the caller's
    trust) and without findings then: only the later entries are read, from every slot's newest entry among
    the old ones — walked back from the heads through the new entries, and taken only when its digest is the
    one recorded (else the whole file is read)."""
    g, h, out = view.geometry, view.header, []
    n = view.entry_count
    header = lambda message, position=0, **ev: finding("index.bad_header", name, position, message,  # noqa: E731
                                                        **ev)
    held = max(0, (view.file_size - g.entries_start) // indexfile.ENTRY_SIZE)
    if h["index_count"] > store_geometry.index_num:
        out.append(header(f"index_count {h['index_count']} is above maxIndexNum {store_geometry.index_num}", 36))
    if h["index_count"] < 1 and (h["begin_phy_offset"] or h["end_phy_offset"]):
        out.append(header(f"index_count {h['index_count']} (1 for a file without entries)", 36))
    if n and (h["begin_phy_offset"] > h["end_phy_offset"] or h["begin_timestamp"] > h["end_timestamp"]):
        out.append(header(f"begins after it ends: physical offsets {h['begin_phy_offset']} .. {h['end_phy_offset']}, "
                          f"timestamps {h['begin_timestamp']} .. {h['end_timestamp']}"))
    heads = _slot_heads(view)
    slot_pos = lambda s: indexfile.HEADER_SIZE + indexfile.SLOT_SIZE * s                    # noqa: E731
    entry_pos = lambda i: g.entries_start + indexfile.ENTRY_SIZE * i                        # noqa: E731

    cut = view.file_size != store_geometry.file_size
    into_lost = (heads > n) & (heads < h["index_count"]) if cut else np.zeros(len(heads), bool)
    if cut:
        lost = max(0, h["index_count"] - max(1, held))
        out.append(header(f"{view.file_size} bytes, {store_geometry.file_size} expected: the file was cut short; it "
                          f"holds {max(0, held - 1)} entries, {lost} of those its header counts are lost "
                          f"({int(into_lost.sum())} slot(s) point to lost entries)",
                          size=view.file_size, expected=store_geometry.file_size, lost_entries=lost,
                          slots_into_lost=int(into_lost.sum())))
    negative, wrong_prev, bad_time = CappedRun(), CappedRun(), CappedRun()
    newest = np.zeros(g.hash_slot_num, dtype=np.int64)
    s = Structure(out)
    last_phy = None
    start = 1
    if resume is not None and not cut and n >= resume.entries and \
            (g.hash_slot_num, g.index_num) == (resume.slots, resume.index_num):
        prev_new = [e["prev_index"].astype(np.int64) for _, e in _entry_chunks(view, resume.entries + 1)]
        ok, below = _newest_below(heads, np.concatenate(prev_new) if prev_new else np.zeros(0, np.int64),
                                  resume.entries + 1, n)
        if ok and _heads_digest(below) == resume.heads:
            newest, start, s.resumed = below, resume.entries + 1, True
            s.first_phy, last_phy, s.last_phy, s.tail_first = resume.first_phy, resume.at, resume.at, resume.first
    s.newest = newest
    for first, e in _entry_chunks(view, start):
        key_hash, prev = e["key_hash"].astype(np.int64), e["prev_index"].astype(np.int64)
        phy, diff = e["phy_offset"].astype(np.int64), e["time_diff"].astype(np.int64)
        at = lambda j, check, message, **ev: finding(check, name, entry_pos(first + j), message,   # noqa: E731
                                                     physical_offset=int(phy[j]), entry=first + j, **ev)
        if last_phy is None:
            s.first_phy = int(phy[0])
        other = np.flatnonzero(phy != phy[-1])
        if len(other):
            s.tail_first = first + int(other[-1]) + 1
        elif last_phy != phy[-1]:
            s.tail_first = first
        s.in_order &= bool((last_phy is None or phy[0] >= last_phy) and np.all(phy[1:] >= phy[:-1]))
        last_phy = s.last_phy = int(phy[-1])
        slot = np.where(key_hash >= 0, key_hash % g.hash_slot_num, -1)
        want = np.zeros(len(e), dtype=np.int64)
        _chain_step(slot, newest, first, want)
        negative.add(lambda j: at(j, "index.bad_chain", f"entry {first + j}'s key hash {int(key_hash[j])} is negative "
                                  "(RocketMQ stores abs(hashCode))"), np.flatnonzero(slot < 0))
        wrong_prev.add(lambda j: at(j, "index.bad_chain", f"entry {first + j}'s prev_index is {int(prev[j])}; the "
                                    f"previous entry of its slot is {int(want[j])}"
                                    + (" (a forward link: a loop)" if prev[j] >= first + j else ""),
                                    expected=int(want[j])), np.flatnonzero((slot >= 0) & (prev != want)))
        bad_time.add(lambda j: at(j, "index.bad_time", f"entry {first + j}'s time difference {int(diff[j])} s is "
                                  "negative"), np.flatnonzero(diff < 0))
    out += negative.findings() + wrong_prev.findings()
    wrong_head = np.flatnonzero((heads != newest) & ~into_lost)
    run = CappedRun()
    run.add(lambda k: finding("index.bad_chain", name, slot_pos(k), f"slot {k} points to entry {int(heads[k])}; its "
                              f"newest entry is {int(newest[k])}", slot=k, expected=int(newest[k])), wrong_head)
    out += run.findings()
    used = int((newest > 0).sum())
    if n and not cut and h["hash_slot_count"] != used:
        out.append(header(f"hash_slot_count {h['hash_slot_count']}; the entries use {used} slots", 32, expected=used))
    # chains exactly as RocketMQ links them reach every entry with a slot; only other chains are walked
    if wrong_prev.count or (heads != newest).any():
        reached = _reachable(heads, _prev_column(view), n)
        lost = np.flatnonzero(~reached[1:]) + 1
        unreached, first_lost = len(lost), int(lost[0]) if len(lost) else 0
        first_phy = _entry_phy(view, first_lost) if unreached else 0
    else:
        unreached = negative.count
        first_lost = negative.first[0].evidence["entry"] if unreached else 0
        first_phy = negative.first[0].physical_offset if unreached else 0
    if unreached:
        out.append(finding("index.unreachable_entries", name, entry_pos(first_lost),
                           f"{unreached} entr{'y' if unreached == 1 else 'ies'} no slot chain reaches (the first: "
                           f"entry {first_lost}): lookups never return them", physical_offset=first_phy,
                           entry=first_lost, entries=unreached))
    out += bad_time.findings()
    return s


def _entry_phy(view: IndexFileView, i: int) -> int:
    """The physical offset of entry ``i`` (0 for one the file does not hold)."""
    with open(view.path, "rb") as f:
        f.seek(view.geometry.entries_start + indexfile.ENTRY_SIZE * i)
        raw = f.read(indexfile.ENTRY_SIZE)
    return int(np.frombuffer(raw, indexfile.ENTRY_DTYPE)["phy_offset"][0]) if len(raw) == indexfile.ENTRY_SIZE else 0


def dispatched_keys(layout: StoreLayout, release: Release, delay_levels: str, stop: int | None = None) -> KeySource:
    """A ``KeySource`` that dispatches the records themselves (the compiled dispatch the rebuild uses: raw store
    times, even those no TIMESTAMP column can hold), reading only the segments the range covers; ``stop``: a
    record boundary (the log's end as a scrub found it) no record at or after which is read."""
    def keys(begin: int, end: int | None) -> KeyChunks:
        decoder = DispatchDecoder(delay_levels, index_tags=release.index_tags, batch_rows=1 << 16)
        for k, seg in enumerate(layout.segments):
            if seg.base_offset + seg.size <= begin:
                continue
            if (end is not None and seg.base_offset > end) or (stop is not None and seg.base_offset >= stop):
                return
            start = max(0, begin - seg.base_offset)
            limit = None if stop is None or stop >= seg.base_offset + seg.size else stop - seg.base_offset
            for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=start, end=limit,
                                         followed=layout.followed(k)):
                w = decoded.batch
                phy = w.key_physical_offset
                keep = (phy >= begin) & (phy <= end if end is not None else True)
                yield w.key_hash[keep].astype(np.int64), phy[keep].astype(np.int64), \
                    w.key_store_timestamp[keep].astype(np.int64)
                if end is not None and len(phy) and phy[-1] > end:
                    return
    return keys


def split_keys(below: KeySource, above: KeySource, at: int) -> KeySource:
    """A ``KeySource`` taking the keys of the records below physical offset ``at`` from ``below`` and the others
    from ``above`` (the scrub's resumed checks: the log from its last end ``at`` is dispatched into spill files
    already, the records before it are dispatched again)."""
    def keys(begin: int, end: int | None) -> KeyChunks:
        if begin < at:
            yield from below(begin, at - 1 if end is None else min(end, at - 1))
        if end is None or end >= at:
            yield from above(max(begin, at), end)
    return keys


def _java_seconds(ms: np.ndarray) -> np.ndarray:
    """Java's ``long / 1000`` (truncating toward zero)."""
    return np.where(ms >= 0, ms // 1000, -((-ms) // 1000))


@numba.njit(cache=True, nogil=True)
def _match(a_phy, a_hash, e_phy, e_hash, e_ts, known, a_ts, matched):
    """Entries (a) against expected keys (e), both in physical offset order: an entry is known when a key of
    its record has its hash (``a_ts``: that record's store time), a key is matched when an entry has it."""
    j, ne = 0, len(e_phy)
    for i in range(len(a_phy)):
        p = a_phy[i]
        while j < ne and e_phy[j] < p:
            j += 1
        k = j
        while k < ne and e_phy[k] == p:
            if e_hash[k] == a_hash[i]:
                if not known[i]:
                    a_ts[i] = e_ts[k]
                known[i] = True
                matched[k] = True
            k += 1


@dataclass
class _Entries:
    """Columns of a run of entries, in file order (``index``: entry numbers)."""
    index: np.ndarray
    key_hash: np.ndarray
    phy: np.ndarray
    diff: np.ndarray

    @staticmethod
    def of(first: int, e: np.ndarray) -> "_Entries":
        return _Entries(np.arange(first, first + len(e)), e["key_hash"].astype(np.int64),
                        e["phy_offset"].astype(np.int64), e["time_diff"].astype(np.int64))

    def take(self, sel) -> "_Entries":
        return _Entries(self.index[sel], self.key_hash[sel], self.phy[sel], self.diff[sel])

    @staticmethod
    def join(parts: list["_Entries"]) -> "_Entries":
        return _Entries(*(np.concatenate([getattr(p, c) for p in parts]) for c in ("index", "key_hash", "phy", "diff")))


_NO_KEYS = (np.zeros(0, np.int64),) * 3


def _join_keys(parts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.concatenate([p[c] for p in parts]) for c in range(3)) if parts else _NO_KEYS


def _matched_runs(view: IndexFileView, in_order: bool, keys: KeyChunks, start: int = 1):
    """(entries, keys, known, entries' record times, matched) for runs of entries (from entry ``start``: in order
    only) and expected keys that hold every entry and key of their physical offsets. In order: streamed, the
    runs cut at a physical offset both sides have passed. Out of order (damage): one run of the whole file,
    sorted for the match and put back in file order."""
    if not in_order:
        a = _Entries.join([_Entries.of(first, e) for first, e in _entry_chunks(view)])
        e_hash, e_phy, e_ts = _join_keys(list(keys))
        order = np.argsort(a.phy, kind="stable")
        known, a_ts, matched = np.zeros(len(order), bool), np.zeros(len(order), np.int64), np.zeros(len(e_phy), bool)
        _match(a.phy[order], a.key_hash[order], e_phy, e_hash, e_ts, known, a_ts, matched)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        yield a, (e_hash, e_phy, e_ts), known[back], a_ts[back], matched
        return
    a_iter = (_Entries.of(first, e) for first, e in _entry_chunks(view, start))
    a_parts: list[_Entries] = []
    e_parts: list = []
    a_more = e_more = True
    top = np.iinfo(np.int64).max

    def pull_a():
        nonlocal a_more
        nxt = next(a_iter, None)
        a_more = nxt is not None
        if a_more and len(nxt.phy):
            a_parts.append(nxt)

    def pull_e():
        nonlocal e_more
        nxt = next(keys, None)
        e_more = nxt is not None
        if e_more and len(nxt[1]):
            e_parts.append(nxt)

    while True:
        if a_more and not a_parts:
            pull_a()
            continue
        if e_more and not e_parts:
            pull_e()
            continue
        # below the frontier both sides are whole: past the last offset read from a side still read from,
        # more of that offset may follow (a side read to its end holds everything)
        a_last = a_parts[-1].phy[-1] if a_more else top
        e_last = e_parts[-1][1][-1] if e_more else top
        frontier = min(a_last, e_last)
        a = _Entries.join(a_parts) if a_parts else _Entries.of(1, np.zeros(0, indexfile.ENTRY_DTYPE))
        e_hash, e_phy, e_ts = _join_keys(e_parts)
        na = int(np.searchsorted(a.phy, frontier, "left")) if frontier < top else len(a.phy)
        ne = int(np.searchsorted(e_phy, frontier, "left")) if frontier < top else len(e_phy)
        if na or ne:
            known, a_ts, matched = np.zeros(na, bool), np.zeros(na, np.int64), np.zeros(ne, bool)
            _match(a.phy[:na], a.key_hash[:na], e_phy[:ne], e_hash[:ne], e_ts[:ne], known, a_ts, matched)
            yield a.take(slice(0, na)), (e_hash[:ne], e_phy[:ne], e_ts[:ne]), known, a_ts, matched
        a_parts = [a.take(slice(na, None))] if na < len(a.phy) else []
        e_parts = [(e_hash[ne:], e_phy[ne:], e_ts[ne:])] if ne < len(e_phy) else []
        if frontier == top:
            return
        if not (na or ne):
            # all that is held sits at the frontier: read on from the side that ends there
            pull_a() if a_last == frontier else pull_e()


class _After:
    """Keys after ``end`` taken out of a stream (the newest file: records it does not index yet)."""

    def __init__(self, keys: KeyChunks, end: int):
        self.keys, self.end = keys, end
        self.count, self.first = 0, None

    def __iter__(self) -> KeyChunks:
        for key_hash, phy, ts in self.keys:
            cut = int(np.searchsorted(phy, self.end, "right"))
            if cut < len(phy):
                self.count += len(phy) - cut
                if self.first is None:
                    self.first = int(phy[cut])
            if cut:
                yield key_hash[:cut], phy[:cut], ts[:cut]


def check_index_file(layout: StoreLayout, view: IndexFileView, root: str, store_geometry: indexfile.Geometry,
                     release: Release, delay_levels: str, log: LogBounds, newest: bool,
                     previous_end: int | None = None, keys: KeySource | None = None,
                     resume: IndexCarry | None = None) -> IndexVerdict:
    """Verify one IndexFile (geometry known) against the CommitLog of ``layout``; ``log``: its first physical
    offset (entries below it point at expired segments and are not checked) and data end; ``newest``: the
    store's newest IndexFile, after whose end the keys of later records are counted as not indexed;
    ``previous_end``: the end timestamp of the IndexFile before it, if the store has one; ``keys``: where the
    expected keys come from (default: the records dispatched again, ``dispatched_keys``); ``resume``: the carry
    of a check of this file with fewer entries (module docstring; the caller vouches that its entries 1 ..
    ``resume.entries``, the log below the carry's end and ``previous_end`` are as they were then)."""
    name = os.path.relpath(view.path, root)
    v = IndexVerdict(name, view.entry_count)
    structure = check_structure(view, name, store_geometry, resume)
    v.findings = structure.findings
    n, h = view.entry_count, view.header
    if not n:
        return _whole_because(v, resume, "it holds no entry")
    log_min = log.min_offset
    g = view.geometry
    # RocketMQ sets begin from entry 1 and end from the newest entry: the header must say so. Where it does
    # not (damage), the entries give the range that is checked.
    first, last = structure.first_phy, structure.last_phy
    begin, end = h["begin_phy_offset"], h["end_phy_offset"]
    lost = h["index_count"] - 1 > n           # a file cut short: its newest entries are gone (bad_header said so)
    if lost:
        last = end
    sound = structure.in_order and not lost and (begin, end) == (first, last)
    if (begin, end) != (first, last):
        v.findings.append(finding("index.bad_header", name, 16,
                                  f"begin/end physical offsets {begin} .. {end}; entries 1 and {n} are at {first} and "
                                  f"{last}", expected=f"{first} .. {last}"))
        if first <= last:
            begin, end = first, last
    begin = max(begin, log_min)
    if end < begin:                  # the whole file covers expired segments
        return _whole_because(v, resume, "it covers expired segments only")
    timing = _Timing(name, g, h, previous_end)
    start, from_phy = 1, begin          # the first entry and key matched
    if resume is not None:
        why = None if sound else "its entries are out of physical offset order, or its header's begin or end " \
                                 "are not its entries', or it was cut short"
        why = why or next((w for bad, w in (
            ((g.hash_slot_num, g.index_num) != (resume.slots, resume.index_num), "its geometry changed"),
            (begin != resume.begin, f"it begins at {begin}, not {resume.begin}"),
            (n < resume.entries or end < resume.at, f"it holds fewer entries than the {resume.entries} checked"))
            if bad),
            None)
        if why is None:
            start, from_phy, v.keys_expected = resume.first, resume.at, resume.keys
            timing.first_seen, timing.first_ts, timing.any_known = resume.first_seen, resume.first_ts, resume.any_known
            v.how = f"resumed from entry {resume.first}" + ("" if structure.resumed else " (its structure read whole)")
        else:
            _whole_because(v, resume, why)
    after = _After((keys or dispatched_keys(layout, release, delay_levels))(from_phy, None if newest else end), end)
    wrong, missing = CappedRun(), []
    carry = None

    def take(a, e_hash, e_phy, known, a_ts, matched):
        v.keys_expected += len(e_phy)
        timing.add(a, known, a_ts)

        def wrong_entry(j: int) -> Finding:
            where = ("beyond the end of the CommitLog's data" if a.phy[j] >= log.end else
                     "outside the file's range" if not begin <= a.phy[j] <= end else "not a key of a record there")
            return finding("index.wrong_entry", name, g.entries_start + indexfile.ENTRY_SIZE * int(a.index[j]),
                           f"entry {int(a.index[j])} (key hash {int(a.key_hash[j])}, physical offset {int(a.phy[j])}): "
                           f"{where}", physical_offset=int(a.phy[j]), entry=int(a.index[j]))
        wrong.add(wrong_entry, np.flatnonzero(~known & ~((a.phy >= 0) & (a.phy < log_min))))
        gone = np.flatnonzero(~matched & (e_phy != begin) & (e_phy != end))
        if len(gone):
            if not missing:
                missing[:] = [0, int(e_hash[gone[0]]), int(e_phy[gone[0]])]
            missing[0] += len(gone)
    for a, (e_hash, e_phy, _), known, a_ts, matched in _matched_runs(view, structure.in_order, iter(after), start):
        if not sound:
            take(a, e_hash, e_phy, known, a_ts, matched)
            continue
        # in order: each run cut at the end, the state before the end's physical offset kept for a resumed check
        na, ne = int(np.searchsorted(a.phy, end, "left")), int(np.searchsorted(e_phy, end, "left"))
        take(a.take(slice(0, na)), e_hash[:ne], e_phy[:ne], known[:na], a_ts[:na], matched[:ne])
        if carry is None and (na < len(a.phy) or ne < len(e_phy)):
            carry = IndexCarry(n, g.hash_slot_num, g.index_num, begin, end, structure.tail_first, first, "",
                               v.keys_expected, timing.first_seen, timing.first_ts, timing.any_known)
        take(a.take(slice(na, None)), e_hash[ne:], e_phy[ne:], known[na:], a_ts[na:], matched[ne:])
    v.unindexed_after = after.count
    if after.count:
        v.findings.append(finding(
            "index.lagging", name, None,
            f"{after.count} key(s) of records after this newest IndexFile's end (physical offset {end}) are "
            f"not indexed; the first record at {after.first}", physical_offset=after.first, keys=after.count))
    v.findings += timing.findings(newest_held=not lost, any_expected=v.keys_expected > 0) + wrong.findings()
    if missing:
        count, key_hash, phy = missing
        v.findings.append(finding(
            "index.missing_key", name, None,
            f"{count} key(s) of records inside the file's range are not indexed; the first: key hash "
            f"{key_hash} of the record at physical offset {phy}", physical_offset=phy, keys=count))
    # a file with findings (but lagging, which a later check counts again) is checked whole next time
    if carry is not None and all(f.check == "index.lagging" for f in v.findings):
        carry.heads = _heads_digest(structure.newest)         # the slot table as RocketMQ's chains make it
        v.carry = carry
    return v


def _whole_because(v: IndexVerdict, resume: IndexCarry | None, why: str) -> IndexVerdict:
    if resume is not None:
        v.how = f"whole: {why}"
    return v


class _Timing:
    """The header's timestamps and every entry's time difference against the store times of the records the
    entries point at (entries whose record is known), fed run by run in file order: begin = entry 1's record,
    end = the newest entry's, difference = (store time - begin) / 1000 clamped at 0 — except entry 1, timed
    from the header pre-set from the previous file's end (``previous_end``; unchecked when the previous file is
    unknown)."""

    def __init__(self, name: str, g: indexfile.Geometry, h: dict, previous_end: int | None):
        self.name, self.g, self.h, self.previous_end = name, g, h, previous_end
        self.first_ts: int | None = None        # entry 1's record's store time, when entry 1 is known
        self.first_seen = False
        self.last: tuple[bool, int] | None = None   # (known, record time) of the newest entry seen
        self.any_known = False
        self.bad = CappedRun()

    def add(self, a: _Entries, known: np.ndarray, a_ts: np.ndarray) -> None:
        if not len(a.index):
            return
        if not self.first_seen:
            self.first_seen = True
            self.first_ts = int(a_ts[0]) if known[0] else None
        self.any_known |= bool(known.any())
        self.last = bool(known[-1]), int(a_ts[-1])
        if self.first_ts is None:
            return
        want = np.clip(_java_seconds(a_ts - self.first_ts), 0, INT32_MAX)
        checked = a.index > 1
        if a.index[0] == 1 and self.previous_end is not None:
            prev = self.previous_end
            want[0] = 0 if prev <= 0 else min(max(int(_java_seconds(np.int64(self.first_ts - prev))), 0), INT32_MAX)
            checked[0] = True
        entry_pos = lambda i: self.g.entries_start + indexfile.ENTRY_SIZE * i + 12          # noqa: E731
        self.bad.add(lambda j: finding(
            "index.bad_time", self.name, entry_pos(int(a.index[j])),
            f"entry {int(a.index[j])}'s time difference is {int(a.diff[j])} s; its record was stored {int(want[j])} s "
            f"after the file's begin", physical_offset=int(a.phy[j]), entry=int(a.index[j]), expected=int(want[j])),
            np.flatnonzero(known & (a.diff != want) & checked))

    def findings(self, newest_held: bool, any_expected: bool) -> list[Finding]:
        if not any_expected or not self.any_known:
            return []
        out, h = [], self.h
        if self.first_ts is not None and h["begin_timestamp"] != self.first_ts:
            out.append(finding("index.bad_header", self.name, 0, f"begin_timestamp {h['begin_timestamp']}; entry 1's "
                               f"record was stored at {self.first_ts}", expected=self.first_ts))
        if newest_held and self.last is not None and self.last[0] and h["end_timestamp"] != self.last[1]:
            out.append(finding("index.bad_header", self.name, 8, f"end_timestamp {h['end_timestamp']}; the newest "
                               f"entry's record was stored at {self.last[1]}", expected=self.last[1]))
        return out + self.bad.findings()
