"""How a rebuilt ``consumequeue/`` and ``index/`` differ from the store's own (driver or CLI; reads both
read-only).

ConsumeQueue files are paired by path (topic/queue/name): ``identical``, ``differs`` (with the first
differing entry: its queue offset, the store's and the rebuilt (physical offset, size, tagsCode)),
``only_in_store``, ``only_rebuilt``. IndexFile names are the broker's wall clock, so IndexFiles are paired in
name order instead and compared by content: ``identical`` or ``differs`` (where: header field, slot, or entry
number), plus the unpaired ones. BatchConsumeQueue files (``batchconsumequeue/``, 5.x BatchCQ topics) are
paired by path as ConsumeQueue files are (kind ``batchconsumequeue``; a differing one names its first differing
unit). A resynchronised rebuild adds one ``beyond_release`` difference per queue
holding entries the release's own rebuild does not write (``beyond_differences``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocketstore_spark.codec import batchconsumequeue, consumequeue, indexfile
from rocketstore_spark.store import rocksdb
from rocketstore_spark.store.layout import StoreMap


@dataclass(frozen=True)
class Difference:
    kind: str                  # "consumequeue", "batchconsumequeue", "index" or "beyond_release"
    store_file: str | None     # relative to the store root
    rebuilt_file: str | None   # relative to the output directory
    status: str                # identical, differs, only_in_store, only_rebuilt
    detail: str = ""
    topic: str | None = None               # ConsumeQueue files: the queue
    queue_id: int | None = None
    first_queue_offset: int | None = None  # a differing ConsumeQueue file: its first differing entry
    entries_missing: int | None = None     # written only in the rebuild
    entries_extra: int | None = None       # written only in the store's file
    entries_changed: int | None = None     # written in both, pointing elsewhere (offset, size or tagsCode)

    def as_row(self) -> dict:
        """The difference as one row of ``FIELDS`` (the rebuild job's ``differences`` table)."""
        return {f: getattr(self, f) for f in FIELDS}


FIELDS = ("kind", "store_file", "rebuilt_file", "status", "topic", "queue_id", "first_queue_offset",
          "entries_missing", "entries_extra", "entries_changed", "detail")


def _files(files: StoreMap, root: Path | None = None) -> dict[str, Path]:
    """The ConsumeQueue files under ``files``' consumequeue/ (or ``root``) by store-relative name (temporary ones
    left out)."""
    root = files.consumequeue_dir if root is None else root
    return {files.relative(p): p for p in sorted(root.rglob("*")) if p.is_file() and not p.name.startswith(".")} \
        if root is not None and root.is_dir() else {}


def _entry_differences(a: bytes, b: bytes, file_name: str) -> dict:
    """The first differing entry of two ConsumeQueue files (queue offset, store's and rebuilt entry), and how
    many entries are missing from the store (written only in the rebuild), extra in it, or changed: the
    ``Difference`` fields, ``detail`` in words."""
    n = max(len(a), len(b))
    ea = consumequeue.decode_entries(a.ljust(n, b"\0"))
    eb = consumequeue.decode_entries(b.ljust(n, b"\0"))
    differ = np.flatnonzero(ea != eb)
    if not len(differ):
        return {"detail": "file sizes differ"}
    wa, wb = consumequeue.valid_mask(ea)[differ], consumequeue.valid_mask(eb)[differ]
    missing, extra = int((~wa & wb).sum()), int((wa & ~wb).sum())
    first = int(differ[0])
    show = lambda e: tuple(int(v) for v in e)      # noqa: E731
    queue_offset = int(file_name) // consumequeue.ENTRY_SIZE + first
    changed = len(differ) - missing - extra
    return {"first_queue_offset": queue_offset, "entries_missing": missing, "entries_extra": extra,
            "entries_changed": changed,
            "detail": f"first difference at queue offset {queue_offset}: store {show(ea[first])}, rebuilt "
                      f"{show(eb[first])}; {len(differ)} entries differ ({missing} missing from the store, {extra} "
                      f"only in the store, {changed} changed)"}


CHUNK = 16 << 20


def _first_difference(a: Path, b: Path) -> int | None:
    """The first byte position where two files differ (a shorter file reads as zeros), in bounded memory."""
    size = max(a.stat().st_size, b.stat().st_size)
    with open(a, "rb") as fa, open(b, "rb") as fb:
        for position in range(0, size, CHUNK):
            ca, cb = fa.read(CHUNK).ljust(min(CHUNK, size - position), b"\0"), \
                fb.read(CHUNK).ljust(min(CHUNK, size - position), b"\0")
            if ca != cb:
                return position + int(np.flatnonzero(np.frombuffer(ca, np.uint8) != np.frombuffer(cb, np.uint8))[0])
    return None


def _too_large(path: Path, limit: int, kind: str) -> str | None:
    """Why a store file is not compared (a sparse or foreign file larger than RocketMQ writes), else None."""
    size = path.stat().st_size
    return f"store file of {size} bytes: larger than any {kind} file RocketMQ writes; not read" if size > limit \
        else None


def _index_difference(a: Path, b: Path) -> str | None:
    """None when identical, else where the first difference is (header field, slot, entry)."""
    too_large = _too_large(a, indexfile.MAX_FILE_SIZE, "IndexFile")
    if too_large:
        return too_large
    i = _first_difference(a, b)
    if i is None:
        if a.stat().st_size == b.stat().st_size:
            return None
        return (f"sizes differ (store {a.stat().st_size} bytes, rebuilt {b.stat().st_size}); the shorter one reads "
                "as the other one cut short")
    with open(a, "rb") as fa, open(b, "rb") as fb:
        ha = indexfile.decode_header(fa.read(indexfile.HEADER_SIZE).ljust(indexfile.HEADER_SIZE, b"\0"))
        hb = indexfile.decode_header(fb.read(indexfile.HEADER_SIZE).ljust(indexfile.HEADER_SIZE, b"\0"))
    fields = [f for f in indexfile.HEADER_DTYPE.names if ha[f] != hb[f]]
    sizes = "" if a.stat().st_size == b.stat().st_size else \
        f"sizes differ (store {a.stat().st_size} bytes, rebuilt {b.stat().st_size}); "
    where = "header: " + ", ".join(f"{f} store {int(ha[f])} rebuilt {int(hb[f])}" for f in fields) if fields \
        else f"first difference at byte {i}"
    return sizes + where


def compare(store: StoreMap, output: Path) -> list[Difference]:
    """Every ConsumeQueue, BatchConsumeQueue and IndexFile of the store against the rebuild in ``output`` (a RocksDB ConsumeQueue:
    its units against the rebuilt files queue by queue, ``rocksdb_differences``)."""
    out: list[Difference] = []
    built = StoreMap.of_root(output)
    db = rocksdb.queue_db(store.root)
    theirs, ours = (_files(store), _files(built)) if db is None else ({}, {})
    if db is not None:
        out += rocksdb_differences(db, store, built)
    out += _paired("consumequeue", "ConsumeQueue", theirs, ours, _entry_differences)
    out += batch_differences(store, built)
    theirs_ix = [Path(p) for p in store.index_files()] if store.index_dir else []
    ours_ix = built.index_files()
    for k in range(max(len(theirs_ix), len(ours_ix))):
        a = theirs_ix[k] if k < len(theirs_ix) else None
        b = ours_ix[k] if k < len(ours_ix) else None
        store_rel = store.relative(a) if a else None
        built_rel = built.relative(b) if b else None
        if a is None or b is None:
            out.append(Difference("index", store_rel, built_rel, "only_rebuilt" if a is None else "only_in_store"))
            continue
        detail = _index_difference(a, b)
        out.append(Difference("index", store_rel, built_rel, "identical") if detail is None else
                   Difference("index", store_rel, built_rel, "differs", detail))
    return out


def _paired(kind: str, what: str, theirs: dict[str, Path], ours: dict[str, Path], differences) -> list[Difference]:
    """Queue files of ``kind`` paired by store-relative path: ``identical``, ``differs`` (``differences(store's
    bytes, rebuilt bytes, file name)``: the ``Difference`` fields of the first difference), ``only_in_store``,
    ``only_rebuilt``."""
    out = []
    for rel in sorted(set(theirs) | set(ours)):
        a, b = theirs.get(rel), ours.get(rel)
        store_rel = rel if a else None
        built_rel = rel if b else None
        parts = rel.split(os.sep)[1:]
        queue = {"topic": parts[0], "queue_id": int(parts[1])} if len(parts) == 3 and parts[1].lstrip("-").isdigit() \
            else {}
        if a is None or b is None:
            out.append(Difference(kind, store_rel, built_rel, "only_rebuilt" if a is None else "only_in_store", **queue))
            continue
        too_large = _too_large(a, consumequeue.MAX_FILE_SIZE, what)
        if too_large:
            out.append(Difference(kind, store_rel, built_rel, "differs", **queue, detail=too_large))
            continue
        da, db = a.read_bytes(), b.read_bytes()
        out.append(Difference(kind, store_rel, built_rel, "identical", **queue) if da == db else
                   Difference(kind, store_rel, built_rel, "differs", **queue,
                              **differences(da, db, os.path.basename(rel))))
    return out


def batch_differences(store: StoreMap, built: StoreMap) -> list[Difference]:
    """The store's BatchConsumeQueue files against the rebuilt ones (``_paired``; a differing file names its first
    differing unit: its base offset, the store's and the rebuilt unit)."""
    theirs = _files(store, store.batch_consumequeue_dir) if store.batch_consumequeue_dir else {}
    ours = _files(built, built.batch_consumequeue_dir) if built.batch_consumequeue_dir else {}
    return _paired("batchconsumequeue", "BatchConsumeQueue", theirs, ours, _unit_differences)


def _unit_differences(a: bytes, b: bytes, file_name: str) -> dict:
    """The first differing unit of two BatchConsumeQueue files and how many units are missing from the store,
    extra in it or changed (``_entry_differences``' fields)."""
    n = max(len(a), len(b))
    ua = batchconsumequeue.decode_units(a.ljust(n, b"\0"))
    ub = batchconsumequeue.decode_units(b.ljust(n, b"\0"))
    differ = np.flatnonzero(ua != ub)
    if not len(differ):
        return {"detail": "file sizes differ"}
    wa, wb = batchconsumequeue.valid_mask(ua)[differ], batchconsumequeue.valid_mask(ub)[differ]
    missing, extra = int((~wa & wb).sum()), int((wa & ~wb).sum())
    first = int(differ[0])
    show = lambda u: tuple(int(v) for v in u)      # noqa: E731
    base = int((ub if wb[0] else ua)["base_offset"][first])
    changed = len(differ) - missing - extra
    return {"first_queue_offset": base, "entries_missing": missing, "entries_extra": extra, "entries_changed": changed,
            "detail": f"first difference at unit {first} of the file (base offset {base}): store {show(ua[first])}, "
                      f"rebuilt {show(ub[first])}; {len(differ)} units differ ({missing} missing from the store, "
                      f"{extra} only in the store, {changed} changed)"}


def rocksdb_differences(db: Path, store: StoreMap, built: StoreMap) -> list[Difference]:
    """Each queue of a RocksDB ConsumeQueue (its units up to its "max") against the rebuilt ConsumeQueue files of
    the same queue, by queue offset: ``identical``, ``differs`` (first differing queue offset; entries only in the
    rebuild = missing from the database, only in the database = extra, changed), ``only_in_store``,
    ``only_rebuilt``. Reads the database read-only; a database that cannot be read raises
    ``store.rocksdb.RocksDBUnreadable``."""
    from rocketstore_spark.store.queues import read_queue
    name = store.relative(db)
    rebuilt = {(t, q): d for t, q, d in built.queue_dirs()}
    out = []
    with rocksdb.open_readonly(db) as rd:
        table = rocksdb.read_queue_table(rd, name)
        stored = {k: q for k, q in table.queues.items() if q.max is not None}
        for key in sorted(set(stored) | set(rebuilt)):
            topic, queue_id = key
            built_rel = built.relative(rebuilt[key]) if key in rebuilt else None
            if key not in rebuilt or key not in stored:
                out.append(Difference("consumequeue", name if key in stored else None, built_rel,
                                      "only_in_store" if key in stored else "only_rebuilt", topic=topic,
                                      queue_id=queue_id))
                continue
            mine = {}
            for offsets, units in rocksdb.read_units(rd, topic, queue_id, 0, stored[key].max[1] + 1, path=name):
                mine.update(zip(offsets.tolist(), zip(*(units[c].astype(np.int64).tolist()
                                                         for c in ("physical_offset", "size", "tags_code")))))
            theirs = {}
            for chunk in read_queue(str(rebuilt[key])):
                real = ~chunk.fillers
                e = chunk.entries[real]
                theirs.update(zip(chunk.queue_offsets[real].tolist(), zip(
                    e["commit_log_offset"].astype(np.int64).tolist(), e["size"].astype(np.int64).tolist(),
                    e["tags_code"].astype(np.int64).tolist())))
            missing = sorted(set(theirs) - set(mine))
            extra = sorted(set(mine) - set(theirs))
            changed = sorted(o for o in set(mine) & set(theirs) if mine[o] != theirs[o])
            if not (missing or extra or changed):
                out.append(Difference("consumequeue", name, built_rel, "identical", topic=topic, queue_id=queue_id))
                continue
            first = min(missing[:1] + extra[:1] + changed[:1])
            out.append(Difference(
                "consumequeue", name, built_rel, "differs", topic=topic, queue_id=queue_id, first_queue_offset=first,
                entries_missing=len(missing), entries_extra=len(extra), entries_changed=len(changed),
                detail=f"first difference at queue offset {first}: database {mine.get(first)}, rebuilt "
                       f"{theirs.get(first)}; {len(missing)} missing from the database, {len(extra)} only in it, "
                       f"{len(changed)} changed"))
    return out


def beyond_differences(beyond: dict, release: str) -> list[Difference]:
    """One ``beyond_release`` difference per queue of a resynchronised rebuild that holds entries RocketMQ
    ``release``'s own rebuild does not write (``beyond``: (topic, queue id) -> [entries, first and last queue
    offset, first and last physical offset], ``rocketmq.recovery.add_queue_spans``)."""
    return [Difference("beyond_release", None, None, "only_rebuilt", topic=topic, queue_id=queue_id,
                       first_queue_offset=lo, entries_missing=n,
                       detail=f"{topic}/{queue_id}: {n} entries RocketMQ {release}'s own rebuild does not write "
                              f"(queue offsets {lo}..{hi}, physical offsets {first}..{last})")
            for (topic, queue_id), (n, lo, hi, first, last) in sorted(beyond.items())]
