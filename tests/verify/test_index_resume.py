"""The scrub's resumed IndexFile check (``verify.index.check_index_file`` from an ``IndexCarry``, driven by
``verify.cross``): a store from our encoder whose newest IndexFile grows between runs, then fills and a new one
starts, as a broker's does. At each run the verdict the scrub keeps of every IndexFile — entries, expected keys,
keys after the newest's end, findings — is the one a whole check (``verify.store.verify_store``) gives the same
store, and the newest's carry the one a whole check leaves. Damage: a wrong entry and a missing key in the new
part (found, resumed), an old entry changed in a way the structure pass cannot see (the digest sends it whole),
header counts and times that disagree; a file with findings is checked whole the next run."""
from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec import indexfile
from rocketstore_spark.rocketmq.indexfile import put_keys
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify import index
from rocketstore_spark.verify.scrub import load_state
from rocketstore_spark.verify.store import verify_store
from tests.verify.test_scrub import as_json
from tests.verify.test_scrub_resume import OPTIONS, audit, built, grow, messages, same, scrub

GEOMETRY = indexfile.Geometry(OPTIONS["maxHashSlotNum"], OPTIONS["maxIndexNum"])


def kept(store: Path, state: Path) -> dict:
    """The scrub's record of each IndexFile (``verify.cross._index_state``)."""
    return load_state(str(state))["stores"][os.path.abspath(str(store))]["cross"]["resume"]["index"]


def agrees(store: Path, state: Path, entry: dict) -> dict:
    """The scrub's verdict of every IndexFile is the whole check's, and so is the newest's carry; the scrub's
    answer is the audit's. Returns what the scrub kept."""
    got = kept(store, state)
    whole = {v.file: v for v in verify_store(str(store), options=OPTIONS).index}
    assert sorted(got) == sorted(whole)
    for name, v in whole.items():
        g = got[name]
        assert (g["entries"], g["keys_expected"], g["unindexed_after"], g["findings"]) == \
            (v.entries, v.keys_expected, v.unindexed_after, as_json([f.as_row() for f in v.findings])), name
    newest = got[max(got)]
    carry = newest["carry"] and {k: x for k, x in newest["carry"].items() if k != "digest"}
    assert carry == (as_json(asdict(whole[max(whole)].carry)) if whole[max(whole)].carry else None)
    same(entry, audit(store))
    return got


def newest_file(store: Path) -> Path:
    return sorted((store / "index").iterdir())[-1]


def entry_count(path: Path) -> int:
    return int(indexfile.decode_header(path.read_bytes()[:40])["index_count"]) - 1


def poke(path: Path, position: int, fmt: str, change) -> None:
    """The big-endian integer (``fmt``: numpy's, e.g. '>i4') at ``position`` changed in place."""
    data = bytearray(path.read_bytes())
    size = np.dtype(fmt).itemsize
    value = int(np.frombuffer(bytes(data[position:position + size]), fmt)[0])
    data[position:position + size] = np.array([change(value)], fmt).tobytes()
    path.write_bytes(bytes(data))


def other_key(key_hash: int) -> int:
    """Another key hash of the same slot: the chains stay RocketMQ's, only the key is wrong."""
    return key_hash - GEOMETRY.hash_slot_num if key_hash >= GEOMETRY.hash_slot_num else key_hash + GEOMETRY.hash_slot_num


def test_a_growing_then_filled_index_file_is_checked_on_from_where_it_stopped(tmp_path):
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    got = agrees(store, state, scrub(store, state))
    first = max(got)
    assert got[first]["carry"]["entries"] == entry_count(newest_file(store)) > 0
    steps = []
    for count in (3, 3, 5, 1):          # grows, fills (a new one starts), again, a little
        before = entry_count(newest_file(store))
        grow(tmp_path, store, w, messages(len(w.appended), count))
        entry = scrub(store, state)
        assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
        now = agrees(store, state, entry)
        # the file that was the newest went on from its carry; a new one is checked whole
        # ... its structure too: only the new entries read
        assert now[first]["checked"].startswith("resumed from entry") and "whole" not in now[first]["checked"], \
            now[first]
        assert now[first]["entries"] > before or len(now) > len(got)
        steps.append((first, len(now) - len(got)))
        new = sorted(set(now) - set(got))
        assert all(now[n]["checked"] == "whole" for n in new)
        got, first = now, max(now)
    assert any(added for _, added in steps) and any(not added for _, added in steps), steps


def missing_one(store: Path, before: bytes) -> None:
    """The newest IndexFile as a broker that lost one key would leave it: its bytes before the growth, the keys of
    the records after its end then put as ``IndexFile.putKey`` does — but the second."""
    newest = newest_file(store)
    end = int(indexfile.decode_header(before[:40])["end_phy_offset"])
    layout = discover(str(store))[0]
    settings = resolve(layout, OPTIONS)
    parts = list(index.dispatched_keys(layout, settings.release, settings.message_delay_level)(end + 1, None))
    key_hash, phy, ts = (np.concatenate([p[c] for p in parts]) for c in range(3))
    keep = np.ones(len(phy), bool)
    keep[1] = False
    buf = np.frombuffer(bytearray(before), np.uint8)
    assert put_keys(buf, GEOMETRY, key_hash[keep], phy[keep], ts[keep]) == int(keep.sum())
    newest.write_bytes(buf.tobytes())


@pytest.mark.parametrize("damage", ["wrong_entry", "missing_key", "old_entry", "slot_count", "index_count",
                                    "end_timestamp", "begin_offset", "slot_head"])
def test_damage_after_growth_is_found_as_a_whole_check_finds_it(tmp_path, damage):
    """In the new part (resumed: the findings are the whole check's), in the old entries (the digest differs:
    checked whole — trusting the carry would miss a key changed within its slot, which the structure pass cannot
    see) and in the header; the next run checks a file with findings whole."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    newest = newest_file(store)
    before, old = newest.read_bytes(), entry_count(newest)
    grow(tmp_path, store, w, messages(len(w.appended), 3))
    assert newest_file(store) == newest and entry_count(newest) > old + 1
    entry_at = lambda i: GEOMETRY.entries_start + indexfile.ENTRY_SIZE * i         # noqa: E731
    if damage == "wrong_entry":
        poke(newest, entry_at(old + 1), ">i4", other_key)
    elif damage == "missing_key":
        missing_one(store, before)
    elif damage == "old_entry":
        poke(newest, entry_at(2), ">i4", other_key)
    elif damage == "slot_count":
        poke(newest, 32, ">i4", lambda v: v + 1)
    elif damage == "index_count":            # the newest entry left out (its record's other keys end the file)
        poke(newest, 36, ">i4", lambda v: v - 1)
    elif damage == "end_timestamp":
        poke(newest, 8, ">i8", lambda v: v + 1000)
    elif damage == "begin_offset":
        poke(newest, 16, ">i8", lambda v: v + 1)
    else:       # a slot with old and new entries emptied: its newest old entry cannot be walked back to
        entries = np.frombuffer(newest.read_bytes(), indexfile.ENTRY_DTYPE, count=entry_count(newest) + 1,
                                offset=GEOMETRY.entries_start)
        slot = entries["key_hash"].astype(np.int64) % GEOMETRY.hash_slot_num
        k = next(int(x) for x in slot[old + 1:][::-1] if (slot[1:old + 1] == x).any())
        poke(newest, indexfile.HEADER_SIZE + indexfile.SLOT_SIZE * k, ">i4", lambda v: 0)
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    got = agrees(store, state, entry)
    name = str(newest.relative_to(store))
    checks = {f["check"] for f in got[name]["findings"]}
    how = got[name]["checked"]
    want = {"wrong_entry": ("resumed", {"index.wrong_entry", "index.missing_key"}),
            "missing_key": ("resumed", {"index.missing_key"}),
            "old_entry": (f"whole: its entries 1 .. {old} changed since the last run", {"index.wrong_entry"}),
            "slot_count": ("resumed", {"index.bad_header"}),
            "index_count": ("resumed", {"index.bad_chain", "index.unreachable_entries"}),
            "end_timestamp": ("resumed", {"index.bad_header"}),
            "begin_offset": ("whole: its entries are out of physical offset order, or its header's begin or end",
                             {"index.bad_header"}),
            "slot_head": ("resumed", {"index.bad_chain", "index.unreachable_entries"})}[damage]
    assert how.startswith(want[0]) and want[1] <= checks, (how, checks)
    # the structure goes on from the carry unless the chains do not lead back to the old part's slots
    assert how.endswith("(its structure read whole)") == (damage in ("slot_head", "index_count")), how
    assert got[name]["carry"] is None
    grow(tmp_path, store, w, messages(len(w.appended), 1))
    entry = scrub(store, state)
    got = agrees(store, state, entry)
    assert got[name]["checked"] == "whole: it had findings last run"


def test_a_newest_file_lagging_behind_the_log_is_resumed_and_its_lag_counted_as_a_whole_check_counts_it(tmp_path):
    """The log grown while the newest IndexFile was not (the broker's index dispatch behind): ``index.lagging``, the
    one finding a carry survives (the next check counts the keys after the end again); then the file catches up."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    newest = newest_file(store)
    before = newest.read_bytes()
    grow(tmp_path, store, w, messages(len(w.appended), 3))
    newest.write_bytes(before)                    # the index holds none of the new records' keys yet
    entry = scrub(store, state)
    got = agrees(store, state, entry)
    name = str(newest.relative_to(store))
    assert got[name]["checked"].startswith("resumed") and got[name]["unindexed_after"] > 0
    assert [f["check"] for f in got[name]["findings"]] == ["index.lagging"] and got[name]["carry"] is not None
    grow(tmp_path, store, w, messages(len(w.appended), 2))      # the index caught up, and more
    got = agrees(store, state, scrub(store, state))
    assert got[name]["checked"].startswith("resumed") and got[name]["unindexed_after"] == 0
