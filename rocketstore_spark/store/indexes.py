"""Reading IndexFiles read-only (wherever called: Spark worker, CLI, tests).

The header is data, not truth: the number of entries read is bounded by what the file can hold, and
entries are read in chunks, so a corrupt ``index_count`` or a huge sparse file cannot exhaust memory.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from rocketstore_spark.codec import indexfile
from rocketstore_spark.store.layout import stat_once

CHUNK_ENTRIES = 1 << 20            # 20 MiB per read


@dataclass
class IndexFileView:
    path: str
    file_size: int
    header: dict
    geometry: indexfile.Geometry | None     # None: unknown (``problem`` says why)
    geometry_source: str | None = None      # "hashSlotNum option", "default size", "file contents", "file size"
    problem: str | None = None

    @property
    def entry_count(self) -> int:
        """Entries 1 .. index_count-1 that the file really holds (entry 0 is never used)."""
        if self.geometry is None:
            return 0
        return max(0, min(self.header["index_count"], self.geometry.index_num) - 1)


def read_index_file(path: str, hash_slot_num: int | None = None, store_slots: int | None = None) -> IndexFileView:
    """The header of the IndexFile at ``path`` and its geometry: from ``hash_slot_num`` (the broker's
    maxHashSlotNum) when given, else inferred (``resolve_geometry``); a file whose geometry cannot be
    inferred alone (cut short, say) takes ``store_slots``, what its store's other files agree on."""
    size = stat_once(path).st_size
    with open(path, "rb") as f:
        head = f.read(indexfile.HEADER_SIZE)
    header = {k: int(v) for k, v in zip(indexfile.HEADER_DTYPE.names,
                                         indexfile.decode_header(head.ljust(indexfile.HEADER_SIZE, b"\0")).item())}
    view = IndexFileView(path, size, header, None)
    resolve_geometry(view, hash_slot_num)
    if view.geometry is None and hash_slot_num is None and store_slots is not None:
        resolve_geometry(view, store_slots)
        view.geometry_source = "the store's other IndexFiles"
    return view


def store_slot_count(paths, known: "SlotCounts | None" = None) -> int | None:
    """The slot count the IndexFiles of one store agree on (one broker, one setting), inferred file by file;
    None when none can be inferred or they disagree (the setting was changed between files). ``known``: the
    counts of older files remembered from an earlier run (``SlotCounts``: the scrub's)."""
    paths = list(paths)
    infer = known.slots if known is not None else _slots
    found = {n for k, path in enumerate(paths) if (n := infer(path, k < len(paths) - 1)) is not None}
    return found.pop() if len(found) == 1 else None


def _slots(path, closed: bool = False) -> int | None:
    view = read_index_file(path)
    return view.geometry.hash_slot_num if view.geometry is not None else None


class SlotCounts:
    """The slot count each IndexFile's own size and entries give (``resolve_geometry`` without a given count),
    remembered across runs (the scrub's): ``known``: path -> [identity, slot count or None] of files that were
    not the newest, from an earlier run; ``identity(path)``: what tells a file unchanged (the scrub's size,
    modification and change times and inode: a file rewritten in place shows by its change time). A file that
    is not the newest (no longer written) whose identity is the recorded one is not read. ``found``: this run's
    for the files not the newest, identity taken before the read."""

    def __init__(self, known: dict[str, list] | None = None, identity=None):
        self.known, self.identity = known or {}, identity
        self.found: dict[str, list] = {}

    def slots(self, path, closed: bool = False) -> int | None:
        path = str(path)
        ident = self.identity(path) if closed and self.identity is not None else None
        old = self.known.get(path) if ident is not None else None
        n = old[1] if old is not None and old[0] == ident else _slots(path)
        if ident is not None:
            self.found[path] = [ident, n]
        return n


def resolve_geometry(view: IndexFileView, hash_slot_num: int | None) -> None:
    """Fill in the view's geometry. A given slot count must fit the file size. Otherwise: RocketMQ's default
    geometry if the size is exactly its size; else the slot count the file's entries are consistent with
    (``indexfile.infer_slot_counts``; one answer, or the one with RocketMQ's 4 entries per slot among
    several); for a file without entries, 4 entries per slot if the size allows it. Anything else leaves
    the geometry unknown, with the reason in ``problem``."""
    size, index_count = view.file_size, max(1, view.header["index_count"])
    if size > indexfile.MAX_FILE_SIZE:
        # a sparse or foreign file: no geometry is looked for (that would read it whole)
        view.problem = f"{size} bytes: larger than any IndexFile RocketMQ writes (its size is a Java int)"
        return
    default = indexfile.Geometry()
    if hash_slot_num is not None:
        view.geometry_source = "hashSlotNum option"
        view.geometry = indexfile.geometry_from_size(size, hash_slot_num)
        if view.geometry is None:
            _given_misfit(view, hash_slot_num, index_count)
        return
    if size == default.file_size:
        view.geometry, view.geometry_source = default, "default size"
        return
    by_ratio = (size - indexfile.HEADER_SIZE) // 84 if (size - indexfile.HEADER_SIZE) % 84 == 0 else None
    if index_count < 2:
        if by_ratio:
            view.geometry, view.geometry_source = indexfile.Geometry(by_ratio, 4 * by_ratio), "file size"
        else:
            view.problem = f"no entries, and {size} bytes fit no geometry with 4 entries per slot"
        return
    found = _inferred(view.path, size, index_count)
    if len(found) > 1 and by_ratio in found:
        found = [by_ratio]
    if len(found) == 1:
        view.geometry = indexfile.geometry_from_size(size, found[0])
        view.geometry_source = "file contents"
    elif found:
        view.problem = (f"the entries fit several slot counts ({', '.join(map(str, found[:5]))}"
                        f"{', ...' if len(found) > 5 else ''}): give hashSlotNum")
    else:
        view.problem = (f"no slot count fits both the size ({size} bytes) and the entries "
                        f"(index_count {index_count}): damaged, or give hashSlotNum")


def _given_misfit(view: IndexFileView, slots: int, index_count: int) -> None:
    """A given slot count that does not fit the file size: a file cut short whose entries agree with the slot
    count is read as far as it goes; otherwise the geometry stays unknown."""
    size = view.file_size
    held = (size - indexfile.HEADER_SIZE - indexfile.SLOT_SIZE * slots) // indexfile.ENTRY_SIZE
    misfit = f"{size} bytes do not fit hashSlotNum={slots} (size = 40 + 4 x hashSlotNum + 20 x maxIndexNum)"
    newest = min(index_count - 1, held - 1)
    if newest >= 1:
        data = np.memmap(view.path, dtype=np.uint8, mode="r")
        try:
            agrees = indexfile.entries_consistent(data, slots, newest)
        finally:
            del data
        if agrees:
            view.geometry = indexfile.Geometry(slots, held)
            view.problem = f"{misfit}: read as a file cut short, {held - 1} entries held"
            return
    found = _inferred(view.path, size, index_count)
    hint = f"; its entries fit hashSlotNum={found[0]}" if len(found) == 1 else ""
    view.problem = misfit + hint


def _inferred(path: str, size: int, index_count: int) -> list[int]:
    if size < indexfile.HEADER_SIZE + indexfile.ENTRY_SIZE or index_count < 2:
        return []
    data = np.memmap(path, dtype=np.uint8, mode="r")       # read-only; pages are touched only where looked at
    try:
        return indexfile.infer_slot_counts(data, index_count)
    finally:
        del data


def iter_entries(view: IndexFileView, chunk_entries: int = CHUNK_ENTRIES,
                 first: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(index of the first entry, entries) chunks of entries ``first`` .. entry_count, in file order."""
    if not view.entry_count:
        return
    with open(view.path, "rb") as f:
        last = view.entry_count + 1
        f.seek(view.geometry.entries_start + indexfile.ENTRY_SIZE * first)
        while first < last:
            want = min(chunk_entries, last - first)
            data = f.read(want * indexfile.ENTRY_SIZE)
            got = len(data) // indexfile.ENTRY_SIZE
            if not got:
                return
            yield first, np.frombuffer(data[:got * indexfile.ENTRY_SIZE], dtype=indexfile.ENTRY_DTYPE)
            first += got
