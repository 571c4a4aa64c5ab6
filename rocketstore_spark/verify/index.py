"""Verifying one IndexFile: its structure, and its keys against the CommitLog records it covers (one Spark
task per file, or in-process; read-only).

Structure (``index.bad_header``, ``bad_chain``, ``unreachable_entries``, ``bad_time``): the header against
what the file holds, every slot head and prev_index in range and pointing to an older entry of the same
slot (so no chain can loop), every entry reachable from its slot's head, time differences within the
header's span.

Keys (``index.wrong_entry``, ``missing_key``): RocketMQ's dispatch rules (``codec.dispatch_kernel.DispatchDecoder``, the
same the rebuild uses) give the keys of every record from the header's begin to end physical offset; each entry's
(key hash, physical offset) must be one of them, and each of them must be in the file — except for the
records at the two ends, whose keys a rollover splits between two files. For the store's newest file the
records after its end are counted too (``index.lagging``).

Memory: the file's slot table and entry columns plus the covered records' keys, i.e. proportional to the
IndexFile's geometry (about 1 GB for RocketMQ's default 5M slots x 20M entries), not to the CommitLog.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numba
import numpy as np

from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.findings import Finding, capped, finding
from rocketstore_spark.rocketmq.releases import Release
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.indexes import IndexFileView
from rocketstore_spark.store.segment_reader import SegmentReader
from rocketstore_spark.verify.queues import LogBounds


@dataclass
class IndexVerdict:
    file: str
    entries: int = 0
    keys_expected: int = 0
    unindexed_after: int = 0            # newest file only: keys of records after its end
    findings: list[Finding] = field(default_factory=list)


def _columns(view: IndexFileView) -> tuple[np.ndarray, np.ndarray]:
    """(slot heads, entries 0 .. entry_count) of a file with a known geometry, read-only."""
    g = view.geometry
    n = view.entry_count
    data = np.memmap(view.path, dtype=np.uint8, mode="r")
    try:
        heads = np.frombuffer(bytes(data[indexfile.HEADER_SIZE:g.entries_start]), dtype=">i4").astype(np.int64)
        raw = bytes(data[g.entries_start:g.entries_start + (n + 1) * indexfile.ENTRY_SIZE])
    finally:
        del data
    heads = np.pad(heads, (0, g.hash_slot_num - len(heads)))
    return heads, np.frombuffer(raw.ljust((n + 1) * indexfile.ENTRY_SIZE, b"\0"), dtype=indexfile.ENTRY_DTYPE)


def check_structure(view: IndexFileView, name: str, store_geometry: indexfile.Geometry
                    ) -> tuple[list[Finding], np.ndarray]:
    """Header, chain and time findings of one file with a known geometry (``view.geometry``: what the file
    holds; ``store_geometry``: the broker's setting), and its entries (0 .. n)."""
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
    heads, entries = _columns(view)
    key_hash = entries["key_hash"].astype(np.int64)
    prev = entries["prev_index"].astype(np.int64)
    idx = np.arange(len(entries))
    slot_pos = lambda s: indexfile.HEADER_SIZE + indexfile.SLOT_SIZE * s                    # noqa: E731
    entry_pos = lambda i: g.entries_start + indexfile.ENTRY_SIZE * i                        # noqa: E731
    at = lambda i, check, message, **ev: finding(check, name, entry_pos(i), message,        # noqa: E731
                                                 physical_offset=int(entries["phy_offset"][i]), entry=i, **ev)

    cut = view.file_size != store_geometry.file_size
    into_lost = (heads > n) & (heads < h["index_count"]) if cut else np.zeros(len(heads), bool)
    if cut:
        lost = max(0, h["index_count"] - max(1, held))
        out.append(header(f"{view.file_size} bytes, {store_geometry.file_size} expected: the file was cut short; it "
                          f"holds {max(0, held - 1)} entries, {lost} of those its header counts are lost "
                          f"({int(into_lost.sum())} slot(s) point to lost entries)",
                          size=view.file_size, expected=store_geometry.file_size, lost_entries=lost,
                          slots_into_lost=int(into_lost.sum())))
    # RocketMQ chains every entry to the newest older entry of its slot and points the slot at its newest
    # entry, so the whole chain structure follows from the hashes: compare with it
    slot = np.where(key_hash >= 0, key_hash % g.hash_slot_num, -1)
    live = idx[1:]
    negative = live[slot[1:] < 0]
    out += capped(lambda i: at(i, "index.bad_chain", f"entry {i}'s key hash {int(key_hash[i])} is negative (RocketMQ "
                               "stores abs(hashCode))"), negative)
    hashed = live[slot[1:] >= 0]
    order = hashed[np.lexsort((hashed, slot[hashed]))]
    same = np.zeros(len(order), dtype=bool)
    same[1:] = slot[order][1:] == slot[order][:-1]
    want_prev = np.zeros(len(entries), dtype=np.int64)
    want_prev[order[same]] = order[:-1][same[1:]]
    want_head = np.zeros(g.hash_slot_num, dtype=np.int64)
    last = np.r_[~same[1:], True] if len(order) else np.zeros(0, bool)
    want_head[slot[order[last]]] = order[last]
    wrong_prev = hashed[prev[hashed] != want_prev[hashed]]
    out += capped(lambda i: at(i, "index.bad_chain", f"entry {i}'s prev_index is {int(prev[i])}; the previous entry "
                               f"of its slot is {int(want_prev[i])}" + (" (a forward link: a loop)" if prev[i] >= i
                                                                        else ""), expected=int(want_prev[i])),
                  wrong_prev)
    wrong_head = np.flatnonzero((heads != want_head) & ~into_lost)
    out += capped(lambda s: finding("index.bad_chain", name, slot_pos(s),
                                    f"slot {s} points to entry {int(heads[s])}; its newest entry is {int(want_head[s])}",
                                    slot=s, expected=int(want_head[s])), wrong_head)
    used = int((want_head > 0).sum())
    if n and not cut and h["hash_slot_count"] != used:
        out.append(header(f"hash_slot_count {h['hash_slot_count']}; the entries use {used} slots", 32, expected=used))
    reached = _reachable(heads, prev, n)
    lost = live[~reached[1:]]
    if len(lost):
        out.append(at(int(lost[0]), "index.unreachable_entries",
                      f"{len(lost)} entr{'y' if len(lost) == 1 else 'ies'} no slot chain reaches (the first: entry "
                      f"{int(lost[0])}): lookups never return them", entries=len(lost)))
    diff = entries["time_diff"].astype(np.int64)
    out += capped(lambda i: at(i, "index.bad_time", f"entry {i}'s time difference {int(diff[i])} s is negative"),
                  live[diff[1:] < 0])
    return out, entries


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


def covered_keys(layout: StoreLayout, release: Release, delay_levels: str, begin: int, end: int | None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(key hash, physical offset, store time in ms) of every key RocketMQ puts for the records from physical
    offset ``begin`` to ``end`` inclusive (None: to the end of the log), in put order."""
    # the compiled dispatch (the rebuild's): raw store times, even those no TIMESTAMP column can hold
    decoder = DispatchDecoder(delay_levels, index_tags=release.index_tags, batch_rows=1 << 16)
    hashes, phys, times = [], [], []
    for k, seg in enumerate(layout.segments):
        if seg.base_offset + seg.size <= begin or (end is not None and seg.base_offset > end):
            continue
        start = max(0, begin - seg.base_offset)
        for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=start, followed=layout.followed(k)):
            window = decoded.batch
            phy = window.key_physical_offset
            keep = (phy >= begin) & (phy <= end if end is not None else True)
            hashes.append(window.key_hash[keep].astype(np.int64))
            phys.append(phy[keep])
            times.append(window.key_store_timestamp[keep])
            if end is not None and len(phy) and phy[-1] > end:
                break
        else:
            continue
        break
    if not hashes:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(hashes), np.concatenate(phys), np.concatenate(times)


def _java_seconds(ms: np.ndarray) -> np.ndarray:
    """Java's ``long / 1000`` (truncating toward zero)."""
    return np.where(ms >= 0, ms // 1000, -((-ms) // 1000))


def _time_findings(name: str, g, h: dict, a_phy, a_diff, known, e_phy, e_ts, newest_held: bool = True,
                   previous_end: int | None = None) -> list[Finding]:
    """The header's timestamps and every entry's time difference against the store times of the records
    the entries point at (entries whose record is known): begin = entry 1's record, end = the newest entry's,
    difference = (store time - begin) / 1000 clamped at 0 — except entry 1, timed from the header pre-set
    from the previous file's end (``previous_end``; unchecked when the previous file is unknown)."""
    out = []
    if not len(e_phy) or not known.any():
        return out
    ts_at = lambda phy: e_ts[np.clip(np.searchsorted(e_phy, phy), 0, len(e_phy) - 1)]       # noqa: E731
    a_ts = ts_at(a_phy)
    if known[0] and h["begin_timestamp"] != a_ts[0]:
        out.append(finding("index.bad_header", name, 0, f"begin_timestamp {h['begin_timestamp']}; entry 1's record "
                           f"was stored at {int(a_ts[0])}", expected=int(a_ts[0])))
    if newest_held and known[-1] and h["end_timestamp"] != a_ts[-1]:
        out.append(finding("index.bad_header", name, 8, f"end_timestamp {h['end_timestamp']}; the newest entry's record "
                           f"was stored at {int(a_ts[-1])}", expected=int(a_ts[-1])))
    if known[0]:
        want = np.clip(_java_seconds(a_ts - a_ts[0]), 0, 2**31 - 1)
        checked = np.arange(len(a_phy)) > 0
        if previous_end is not None:
            want[0] = 0 if previous_end <= 0 else min(max(int(_java_seconds(np.int64(a_ts[0] - previous_end))), 0),
                                                      2**31 - 1)
            checked[0] = True
        bad = np.flatnonzero(known & (a_diff != want) & checked)
        out += capped(lambda j: finding(
            "index.bad_time", name, g.entries_start + indexfile.ENTRY_SIZE * (j + 1) + 12,
            f"entry {j + 1}'s time difference is {int(a_diff[j])} s; its record was stored {int(want[j])} s after "
            f"the file's begin", physical_offset=int(a_phy[j]), entry=j + 1, expected=int(want[j])), bad)
    return out


def _pair_keys(hash_a, phy_a, hash_b, phy_b) -> tuple[np.ndarray, np.ndarray]:
    """(hash, phy) pairs of two sets as comparable int64 keys (phy replaced by its rank among both)."""
    ranks = np.unique(np.concatenate([phy_a, phy_b]), return_inverse=True)[1]
    keys = (ranks.astype(np.int64) << 32) | (np.concatenate([hash_a, hash_b]) & 0xFFFFFFFF)
    return keys[:len(phy_a)], keys[len(phy_a):]


def check_index_file(layout: StoreLayout, view: IndexFileView, root: str, store_geometry: indexfile.Geometry,
                     release: Release, delay_levels: str, log: LogBounds, newest: bool,
                     previous_end: int | None = None) -> IndexVerdict:
    """Verify one IndexFile (geometry known) against the CommitLog of ``layout``; ``log``: its first physical
    offset (entries below it point at expired segments and are not checked) and data end; ``newest``: the
    store's newest IndexFile, after whose end the keys of later records are counted as not indexed;
    ``previous_end``: the end timestamp of the IndexFile before it, if the store has one."""
    name = os.path.relpath(view.path, root)
    v = IndexVerdict(name, view.entry_count)
    v.findings, entries = check_structure(view, name, store_geometry)
    n, h = view.entry_count, view.header
    if not n:
        return v
    log_min = log.min_offset
    a_hash = entries["key_hash"][1:].astype(np.int64)
    a_phy = entries["phy_offset"][1:].astype(np.int64)
    g = view.geometry
    # RocketMQ sets begin from entry 1 and end from the newest entry: the header must say so. Where it does
    # not (damage), the entries give the range that is checked.
    first, last = int(a_phy[0]), int(a_phy[-1])
    begin, end = h["begin_phy_offset"], h["end_phy_offset"]
    lost = h["index_count"] - 1 > n           # a file cut short: its newest entries are gone (bad_header said so)
    if lost:
        last = end
    if (begin, end) != (first, last):
        v.findings.append(finding("index.bad_header", name, 16,
                                  f"begin/end physical offsets {begin} .. {end}; entries 1 and {n} are at {first} and "
                                  f"{last}", expected=f"{first} .. {last}"))
        if first <= last:
            begin, end = first, last
    begin = max(begin, log_min)
    if end < begin:                  # the whole file covers expired segments
        return v
    e_hash, e_phy, e_ts = covered_keys(layout, release, delay_levels, begin, None if newest else end)
    after = e_phy > end
    v.unindexed_after = int(after.sum())
    if v.unindexed_after:
        first = int(e_phy[after][0])
        v.findings.append(finding(
            "index.lagging", name, None,
            f"{v.unindexed_after} key(s) of records after this newest IndexFile's end (physical offset {end}) are "
            f"not indexed; the first record at {first}", physical_offset=first, keys=v.unindexed_after))
    e_hash, e_phy, e_ts = e_hash[~after], e_phy[~after], e_ts[~after]
    v.keys_expected = len(e_hash)
    a_key, e_key = _pair_keys(a_hash, a_phy, e_hash, e_phy)
    known = np.isin(a_key, e_key)
    wrong = np.flatnonzero(~known & ~((a_phy >= 0) & (a_phy < log_min)))      # below log_min: expired
    v.findings += _time_findings(name, g, h, a_phy, entries["time_diff"][1:].astype(np.int64), known, e_phy, e_ts,
                                 newest_held=not lost, previous_end=previous_end)

    def wrong_entry(j: int) -> Finding:
        i = j + 1
        where = ("beyond the end of the CommitLog's data" if a_phy[j] >= log.end else
                 "outside the file's range" if not begin <= a_phy[j] <= end else "not a key of a record there")
        return finding("index.wrong_entry", name, g.entries_start + indexfile.ENTRY_SIZE * i,
                       f"entry {i} (key hash {int(a_hash[j])}, physical offset {int(a_phy[j])}): {where}",
                       physical_offset=int(a_phy[j]), entry=i)
    v.findings += capped(wrong_entry, wrong)
    missing = np.flatnonzero(~np.isin(e_key, a_key) & (e_phy != begin) & (e_phy != end))
    if len(missing):
        k = int(missing[0])
        v.findings.append(finding(
            "index.missing_key", name, None,
            f"{len(missing)} key(s) of records inside the file's range are not indexed; the first: key hash "
            f"{int(e_hash[k])} of the record at physical offset {int(e_phy[k])}",
            physical_offset=int(e_phy[k]), keys=len(missing)))
    return v
