"""Verifying one IndexFile: its structure, and its keys against the CommitLog records it covers (one Spark
task per file, or in-process; read-only).

Structure (``index.bad_header``, ``bad_chain``, ``unreachable_entries``, ``bad_time``): the header against
what the file holds, every slot head and prev_index in range and pointing to an older entry of the same
slot (so no chain can loop), every entry reachable from its slot's head, time differences within the
header's span.

Keys (``index.wrong_entry``, ``missing_key``): RocketMQ's dispatch rules (``dispatch.index_keys``, the same
the rebuild uses) give the keys of every record from the header's begin to end physical offset; each entry's
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
import pyarrow as pa

from rocketstore_spark import dispatch
from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.indexes import IndexFileView
from rocketstore_spark.store.segment_reader import SegmentReader
from rocketstore_spark.verify.capped import capped
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
    header = lambda message, **ev: finding("index.bad_header", name, 0, message, **ev)     # noqa: E731
    held = max(0, (view.file_size - g.entries_start) // indexfile.ENTRY_SIZE)
    if h["index_count"] > store_geometry.index_num:
        out.append(header(f"index_count {h['index_count']} is above maxIndexNum {store_geometry.index_num}"))
    if h["index_count"] < 1 and (h["begin_phy_offset"] or h["end_phy_offset"]):
        out.append(header(f"index_count {h['index_count']} (1 for a file without entries)"))
    if n and (h["begin_phy_offset"] > h["end_phy_offset"] or h["begin_timestamp"] > h["end_timestamp"]):
        out.append(header(f"begins after it ends: physical offsets {h['begin_phy_offset']} .. {h['end_phy_offset']}, "
                          f"timestamps {h['begin_timestamp']} .. {h['end_timestamp']}"))
    if h["hash_slot_count"] > max(0, h["index_count"] - 1) or h["hash_slot_count"] < 0:
        out.append(header(f"hash_slot_count {h['hash_slot_count']} is above the entry count {max(0, h['index_count'] - 1)}"))
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
    bad_head = np.flatnonzero(((heads < 0) | (heads > n)) & ~into_lost)
    ok_head = np.flatnonzero((heads > 0) & (heads <= n))
    wrong_slot_head = ok_head[(key_hash[heads[ok_head]] < 0) |
                              (key_hash[heads[ok_head]] % g.hash_slot_num != ok_head)]
    out += capped(lambda s: finding("index.bad_chain", name, slot_pos(s),
                                    f"slot {s} points to entry {int(heads[s])}, outside 1 .. {n}", slot=s), bad_head)
    out += capped(lambda s: finding("index.bad_chain", name, slot_pos(s),
                                    f"slot {s} points to entry {int(heads[s])}, whose key hash {int(key_hash[heads[s]])} "
                                    "belongs to another slot", slot=s), wrong_slot_head)
    live = idx[1:]
    bad_prev = live[(prev[1:] < 0) | (prev[1:] >= live)]
    out += capped(lambda i: at(i, "index.bad_chain", f"entry {i}'s prev_index {int(prev[i])} is not an older entry "
                               f"(0 .. {i - 1})"), bad_prev)
    chained = live[(prev[1:] > 0) & (prev[1:] < live)]
    cross = chained[(key_hash[chained] >= 0) & (key_hash[prev[chained]] >= 0) &
                    (key_hash[chained] % g.hash_slot_num != key_hash[prev[chained]] % g.hash_slot_num)]
    out += capped(lambda i: at(i, "index.bad_chain", f"entry {i}'s prev_index {int(prev[i])} is an entry of another "
                               "slot"), cross)
    negative = live[key_hash[1:] < 0]
    out += capped(lambda i: at(i, "index.bad_chain", f"entry {i}'s key hash {int(key_hash[i])} is negative (RocketMQ "
                               "stores abs(hashCode))"), negative)
    reached = _reachable(heads, prev, n)
    lost = live[~reached[1:]]
    if len(lost):
        out.append(at(int(lost[0]), "index.unreachable_entries",
                      f"{len(lost)} entr{'y' if len(lost) == 1 else 'ies'} no slot chain reaches (the first: entry "
                      f"{int(lost[0])}): lookups never return them", entries=len(lost)))
    span = max(0, (h["end_timestamp"] - h["begin_timestamp"]) // 1000)
    diff = entries["time_diff"].astype(np.int64)
    # entry 1 of a rolled-over file is timed from the previous file's end (the header is pre-set from it),
    # so only its sign is checked
    bad_time = live[(diff[1:] < 0) | ((diff[1:] > span + 1) & (live > 1))]
    out += capped(lambda i: at(i, "index.bad_time", f"entry {i}'s time difference {int(diff[i])} s is outside the "
                               f"file's span 0 .. {span} s"), bad_time)
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


def covered_keys(layout: StoreLayout, release: dispatch.Release, delay_levels: str, begin: int, end: int | None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(key hash, physical offset) of every key RocketMQ puts for the records from physical offset ``begin``
    to ``end`` inclusive (None: to the end of the log), in put order."""
    decoder = RecordDecoder(dispatch.DISPATCH_COLUMNS, message_delay_level=delay_levels, batch_rows=1 << 16)
    hashes, phys = [], []
    for k, seg in enumerate(layout.segments):
        if seg.base_offset + seg.size <= begin or (end is not None and seg.base_offset > end):
            continue
        start = max(0, begin - seg.base_offset)
        for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=start, followed=layout.followed(k)):
            keys = dispatch.index_keys(pa.Table.from_batches([decoded.batch]), release)
            phy = keys["physical_offset"].to_numpy()
            keep = (phy >= begin) & (phy <= end if end is not None else True)
            hashes.append(keys["key_hash"].to_numpy()[keep].astype(np.int64))
            phys.append(phy[keep])
            if end is not None and len(phy) and phy[-1] > end:
                return np.concatenate(hashes), np.concatenate(phys)
    if not hashes:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(hashes), np.concatenate(phys)


def _pair_keys(hash_a, phy_a, hash_b, phy_b) -> tuple[np.ndarray, np.ndarray]:
    """(hash, phy) pairs of two sets as comparable int64 keys (phy replaced by its rank among both)."""
    ranks = np.unique(np.concatenate([phy_a, phy_b]), return_inverse=True)[1]
    keys = (ranks.astype(np.int64) << 32) | (np.concatenate([hash_a, hash_b]) & 0xFFFFFFFF)
    return keys[:len(phy_a)], keys[len(phy_a):]


def check_index_file(layout: StoreLayout, view: IndexFileView, root: str, store_geometry: indexfile.Geometry,
                     release: dispatch.Release, delay_levels: str, log: LogBounds, newest: bool) -> IndexVerdict:
    """Verify one IndexFile (geometry known) against the CommitLog of ``layout``; ``log``: its first physical
    offset (entries below it point at expired segments and are not checked) and data end; ``newest``: the
    store's newest IndexFile, after whose end the keys of later records are counted as not indexed."""
    name = os.path.relpath(view.path, root)
    v = IndexVerdict(name, view.entry_count)
    v.findings, entries = check_structure(view, name, store_geometry)
    n, h = view.entry_count, view.header
    if not n:
        return v
    log_min = log.min_offset
    begin, end = max(h["begin_phy_offset"], log_min), h["end_phy_offset"]
    if end < begin:                  # the whole file covers expired segments
        return v
    e_hash, e_phy = covered_keys(layout, release, delay_levels, begin, None if newest else end)
    after = e_phy > end
    v.unindexed_after = int(after.sum())
    if v.unindexed_after:
        first = int(e_phy[after][0])
        v.findings.append(finding(
            "index.lagging", name, None,
            f"{v.unindexed_after} key(s) of records after this newest IndexFile's end (physical offset {end}) are "
            f"not indexed; the first record at {first}", physical_offset=first, keys=v.unindexed_after))
    e_hash, e_phy = e_hash[~after], e_phy[~after]
    v.keys_expected = len(e_hash)
    a_hash = entries["key_hash"][1:].astype(np.int64)
    a_phy = entries["phy_offset"][1:].astype(np.int64)
    a_key, e_key = _pair_keys(a_hash, a_phy, e_hash, e_phy)
    wrong = np.flatnonzero(~np.isin(a_key, e_key) & (a_phy >= log_min))
    g = view.geometry

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
