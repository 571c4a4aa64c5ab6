"""IndexFile geometry (slot and entry counts) established without the broker's settings: from the file's
size and entries, from the store's other files, or from a given hashSlotNum checked against the size."""
from __future__ import annotations

import random
import shutil

import numpy as np
import pytest

from rocketstore_spark.codec import indexfile
from rocketstore_spark.store.indexes import read_index_file, store_slot_count
from tests.golden.goldens import GOLDENS


def put_keys(geometry: indexfile.Geometry, hashes: list[int]) -> bytes:
    """An IndexFile as IndexFile.putKey fills it (docs/format/indexfile.md): entry i chains to the slot's
    previous head, the slot then points at i."""
    slots = np.zeros(geometry.hash_slot_num, dtype=np.int64)
    entries = np.zeros(len(hashes) + 1, dtype=indexfile.ENTRY_DTYPE)
    for i, h in enumerate(hashes, start=1):
        s = h % geometry.hash_slot_num
        entries[i] = (h, 1000 + i, i // 7, slots[s])
        slots[s] = i
    header = {"begin_timestamp": 1, "end_timestamp": 2, "index_count": len(hashes) + 1}
    return indexfile.encode(header, slots, entries, geometry)


@pytest.mark.parametrize("slots,entries,keys", [(64, 256, 255), (97, 300, 40), (5, 1000, 999),
                                                (1000, 10, 9), (4096, 4096, 3000), (500, 2000, 2)])
def test_the_slot_count_is_found_from_the_entries(tmp_path, slots, entries, keys):
    rng = random.Random(slots * 31 + keys)
    geometry = indexfile.Geometry(slots, entries)
    path = tmp_path / "20261123000000000"
    path.write_bytes(put_keys(geometry, [rng.randrange(1 << 31) for _ in range(keys)]))
    view = read_index_file(str(path))
    assert view.geometry == geometry and view.geometry_source == "file contents", view.problem
    assert view.entry_count == keys


def test_a_file_without_entries_takes_rocketmqs_four_entries_per_slot_if_the_size_allows(tmp_path):
    path = tmp_path / "20261123000000000"
    path.write_bytes(put_keys(indexfile.Geometry(100, 400), []))
    assert read_index_file(str(path)).geometry == indexfile.Geometry(100, 400)
    path.write_bytes(put_keys(indexfile.Geometry(100, 401), []))
    view = read_index_file(str(path))
    assert view.geometry is None and view.entry_count == 0 and "no entries" in view.problem


@pytest.mark.parametrize("g", [g for g in GOLDENS if g.id.endswith("/clean")], ids=lambda g: g.id)
def test_rocketmq_written_index_files_are_inferred_as_the_broker_was_configured(g):
    want = g.manifest["geometry"]
    for path in sorted((g.store / "index").iterdir()):
        view = read_index_file(str(path))
        assert view.geometry == indexfile.Geometry(want["max_hash_slot_num"], want["max_index_num"]), view.problem


@pytest.mark.parametrize("g", [g for g in GOLDENS if g.id.endswith("/index-truncated")], ids=lambda g: g.id)
def test_a_file_cut_short_takes_the_slot_count_of_its_stores_other_files(g):
    slots = g.manifest["geometry"]["max_hash_slot_num"]
    files = sorted(str(p) for p in (g.store / "index").iterdir())
    cut = [f for f in files if read_index_file(f).geometry is None]
    assert len(cut) == 1 and "no slot count fits" in read_index_file(cut[0]).problem
    assert store_slot_count(files) == slots
    view = read_index_file(cut[0], store_slots=slots)
    assert view.geometry_source == "the store's other IndexFiles" and "cut short" in view.problem
    held = (view.file_size - 40 - 4 * slots) // 20
    assert view.entry_count == min(view.header["index_count"], held) - 1


def test_a_given_slot_count_that_does_not_fit_names_what_does(tmp_path):
    g = next(g for g in GOLDENS if g.id == "5.5.1/clean")
    path = tmp_path / "20261123000000000"
    shutil.copy(next((g.store / "index").iterdir()), path)
    view = read_index_file(str(path), 100)
    assert view.geometry is None
    assert view.problem.endswith(f"its entries fit hashSlotNum={g.manifest['geometry']['max_hash_slot_num']}")
