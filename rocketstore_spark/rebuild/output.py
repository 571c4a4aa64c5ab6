"""Rebuilding a store's ConsumeQueues and IndexFiles into a directory outside it (in-process; called by the
library API ``rebuild_store``, the Spark job and the CLI).

The store is only read (the same decoder and read-only segment reader as every other reader). The output
directory must not be the store or lie inside it, also through symlinks; ``DIR/consumequeue`` and
``DIR/index`` must not exist yet. The output is laid out as a store, its names given by its own store map
(``store.layout.StoreMap.of_root(DIR)``). Topics read from the CommitLog become directory names only when they
are safe path components (``store.layout.safe_component``); a queue whose topic is not is skipped with a ``rebuild.unsafe_topic`` finding. Every file is
written under a temporary name (``.NAME.tmp``), fsynced and renamed into place when complete, ConsumeQueue
files at their full broker size (RocketMQ preallocates them): a killed run leaves no half-written file under
a final name, and ``rebuild_store`` removes what it created when it fails.

What is written: by default what the release writes when it restarts without ``consumequeue/`` and ``index/``
(its own rebuild: ``rocketmq.recovery.restart_dispatch``). On a damaged log that is less than the log holds:
a crash recovery dispatches only from the segment it starts at, the log ends at the first damage the
recovery's walk reads, and the reput skips the rest of a segment after damage it reads. ``resync`` writes
every valid record instead, reading on past damage, and counts per queue the entries the release's rebuild
would not have (``beyond``). A store with BatchCQ topics (``config/topics.json``: ``queue.type=BatchCQ``) gets
``DIR/batchconsumequeue`` for them instead of ConsumeQueue entries: the units of the same records
(``rocketmq.batch_queues``), files of ``mapperFileSizeBatchConsumeQueue`` bytes (as the store's show it).

The rebuild as one JSON document (``RebuildResult.document()``: ``documents.header``, type
rocketstore-spark/rebuild, version 2):

    store, output, records      the store, the output directory, the records read
    rocketmq_version            the release followed      settings_sources   setting -> where its value came from
    mode                        "release" (the default) or "resync"
    restart                     the release's restart: family, shutdown, walk start, process_offset, stop,
                                dispatched (from, to, phase), segment_stops, description (``restart_document``)
    settings                    every setting as resolved (``rocketmq.settings.BrokerSettings.to_json``)
    queues                      per queue: topic, queue_id, files, max_offset
    batch_queues                per BatchConsumeQueue written (5.x BatchCQ topics): topic, queue_id, files,
                                max_offset
    beyond_release              resync: per queue, the entries the release's rebuild does not write
                                (``BEYOND_FIELDS``)
    index_files, findings, differences      (``rebuild.diff.FIELDS`` per difference; a ``beyond_release``
                                difference per queue of ``beyond_release``)

Streaming: records are dispatched batch by batch in dispatch order; each queue keeps its dispatch state
(``rocketmq.consumequeue.QueueState``) and the current IndexFile is a memory map of the output file, so memory
is one decoded window plus one IndexFile, whatever the store's size.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from rocketstore_spark.codec import batchconsumequeue
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder, DispatchWindow
from rocketstore_spark.codec.indexfile import Geometry
from rocketstore_spark.documents import header
from rocketstore_spark.codec.lmq import SKIP_REASONS
from rocketstore_spark.findings import Finding, capped, distinct, finding
from rocketstore_spark.rebuild.diff import Difference, beyond_differences, compare
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.dispatch import queue_keys, queue_of
from rocketstore_spark.rocketmq import indexfile as ix
from rocketstore_spark.rocketmq.batch_queues import (batch_file_size, batch_topics, dispatched_records,
                                                     dispatched_units, redispatched)
from rocketstore_spark.rocketmq.recovery import RestartDispatch, add_queue_spans, restart_dispatch
from rocketstore_spark.rocketmq.settings import BrokerSettings, lmq_mode, resolve
from rocketstore_spark.store.discovery import StoreLayout, StorePathError, discover
from rocketstore_spark.store.ahead import ahead
from rocketstore_spark.store.durable import fsync_dirs, publish, temporary
from rocketstore_spark.store.engines import BATCH_ENGINE, LMQ_ENGINE, Work
from rocketstore_spark.store.layout import StoreMap, index_file_name, offset_name, safe_component
from rocketstore_spark.store.outputs import OutputError, outside_stores
from rocketstore_spark.store.records import iter_decoded
from rocketstore_spark.store.rocksdb import queue_db


def check_output(output: str | os.PathLike, store_root: str | os.PathLike) -> Path:
    """The output directory, resolved; refuses the store itself, anything inside it (symlinks followed),
    and a directory that already holds ``consumequeue/`` or ``index/``."""
    out = outside_stores(output, [store_root], "output directory")
    for sub in rebuilt_dirs(StoreMap.of_root(out)):
        if sub.exists():
            raise OutputError(f"{sub} already exists: give an empty or new output directory")
    return out


def rebuilt_dirs(files: StoreMap) -> tuple[Path, ...]:
    """The directories a rebuild writes in the store (or output) ``files`` maps: consumequeue/, index/ and
    batchconsumequeue/ (a store with BatchCQ topics)."""
    return files.consumequeue_dir, files.index_dir, files.batch_consumequeue_dir


@dataclass
class QueueResult:
    topic: str
    queue_id: int
    state: cq.QueueState
    files: list[str] = field(default_factory=list)


HELD_BYTES = 64 << 20                # ConsumeQueue entries held back before they are written


class ConsumeQueueWriter:
    """Writes ConsumeQueue files into ``files`` (the output directory's store map: DIR/consumequeue) from
    entries in dispatch order (driver or executor). Every queue's dispatch state is a row of one table (``consumequeue.place_many``), so a batch of
    any queues is placed in one compiled call; placed entries are held back per queue (they are contiguous:
    one run per queue) and written when ``buffer_bytes`` of them are pending and at ``close``, so each queue
    file is opened a few times per run instead of once per batch."""

    def __init__(self, files: StoreMap, file_size: int, findings: list[Finding], buffer_bytes: int | None = None,
                 release: np.ndarray | None = None):
        self.files, self.file_size, self.findings = files, file_size, findings
        # the physical offset intervals the release's restart dispatches (``RestartDispatch.intervals``): entries
        # written for records outside them are counted per queue in ``beyond`` (``add_queue_spans``' rows)
        self.release = release
        self.beyond: dict[tuple[str, int], list[int]] = {}
        self.buffer_bytes = HELD_BYTES if buffer_bytes is None else buffer_bytes
        self.queues: dict[tuple[str, int], QueueResult] = {}
        self._rows: dict[tuple[str, int], int] = {}        # queue -> row of _states (-1: topic unsafe)
        self._results: list[QueueResult] = []
        self._states = cq.new_states(16)
        self._unsafe: set[str] = set()
        self._pending: dict[int, tuple[int, list[np.ndarray]]] = {}   # row -> (queue byte offset, entries)
        self._pending_bytes = 0

    def add_window(self, window: DispatchWindow, topics: list[str]) -> None:
        """The entries of a ``DispatchWindow`` (topics named by ``topics``, the decoder's)."""
        rows, topic, queue_id, queue_offset = window.entries()
        self.add_entries(topics, topic, queue_id, queue_offset, window.physical_offset[rows], window.size[rows],
                         window.tags_code[rows])

    def add_entries(self, topics: list[str], topic, queue_id, queue_offset, physical_offset, size, tags_code) -> None:
        """Entries of any queues in dispatch order: per entry its topic (an index into ``topics``), queue id,
        QUEUEOFFSET, physical offset, size and tagsCode (numpy)."""
        if not len(topic):
            return
        # one stable sort by queue keeps each queue's dispatch order: a run per queue
        key = dispatch.queue_keys(topic, queue_id)
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        lengths = np.diff(np.r_[starts, len(key)])
        runs = np.array([self._row(topics[t], q) for t, q in map(dispatch.queue_of, key[starts].tolist())],
                        dtype=np.int64)
        row = np.repeat(runs, lengths)
        safe = row >= 0
        order, row = order[safe], row[safe]
        if not len(row):
            return
        new = self._states[runs[runs >= 0], cq.END] < 0
        physical, size = np.asarray(physical_offset)[order], np.asarray(size)[order]
        slots = cq.place_many(self._states, row, np.asarray(queue_offset)[order], physical, size, self.file_size)
        if self.release is not None:
            outside = (slots >= 0) & ~within(self.release, physical)
            add_queue_spans(self.beyond, topics, key[safe][outside], physical[outside], slots[outside])
        placed = cq.entries(physical, size, np.asarray(tags_code)[order])
        bounds = np.r_[0, np.cumsum(lengths[runs >= 0])]
        for r, is_new, lo, hi in zip(runs[runs >= 0].tolist(), new.tolist(), bounds[:-1].tolist(), bounds[1:].tolist()):
            keep = slots[lo:hi] >= 0
            if not keep.any():
                continue
            if is_new:
                state = self._states[r]
                fillers = int(state[cq.FIRST] - state[cq.FILE_START] // ENTRY_SIZE)
                self._hold(r, int(state[cq.FILE_START]), cq.fillers(fillers))
            self._hold(r, int(slots[lo:hi][keep][0]) * ENTRY_SIZE, placed[lo:hi][keep])
        if self._pending_bytes >= self.buffer_bytes:
            self._flush()

    def skipped(self) -> list[tuple[str, int]]:
        """The queues seen whose topic cannot be a directory name (not written)."""
        return [queue for queue, row in self._rows.items() if row < 0]

    def _row(self, topic: str, queue_id: int) -> int:
        row = self._rows.get((topic, queue_id))
        if row is not None:
            return row
        if not safe_component(topic):
            if topic not in self._unsafe:
                self._unsafe.add(topic)
                self.findings.append(finding("rebuild.unsafe_topic", str(self.files.consumequeue_dir), None,
                                             f"topic {topic!r} cannot be a directory name: its queues are not rebuilt"))
            self._rows[(topic, queue_id)] = -1
            return -1
        row = self._rows[(topic, queue_id)] = len(self._results)
        self._results.append(QueueResult(topic, queue_id, cq.QueueState()))
        if row >= len(self._states):
            self._states = np.concatenate([self._states, cq.new_states(len(self._states))])
        return row

    def _hold(self, row: int, queue_byte_offset: int, entries: np.ndarray) -> None:
        """Entries to be written at ``queue_byte_offset`` on, appended to the queue's pending run (a queue's
        entries are placed contiguously, so a run only grows at its end; one that would not is written first)."""
        if not len(entries):
            return
        start, held = self._pending.get(row, (queue_byte_offset, []))
        pending = sum(h.nbytes for h in held)
        if start + pending != queue_byte_offset:
            self._write_run(row, start, held)
            start, held = queue_byte_offset, []
            self._pending_bytes -= pending
        held.append(entries)
        self._pending[row] = (start, held)
        self._pending_bytes += entries.nbytes

    def _flush(self) -> None:
        for row, (start, held) in self._pending.items():
            self._write_run(row, start, held)
        self._pending, self._pending_bytes = {}, 0

    def _write_run(self, row: int, start: int, held: list[np.ndarray]) -> None:
        result = self._results[row]
        # joined as bytes: np.concatenate would turn the big-endian fields into native ones
        data = b"".join(h.tobytes() for h in held)
        self._write(result, self.files.queue_dir(result.topic, result.queue_id), start, data)

    def _write(self, result: QueueResult, directory: Path, queue_byte_offset: int, data: bytes) -> None:
        write_at(result.files, directory, self.file_size, queue_byte_offset, data)

    def close(self) -> None:
        """Every file complete: fsynced and renamed to its final name, then every directory fsynced."""
        self._flush()
        for row, result in enumerate(self._results):
            result.state = cq.queue_state(self._states[row])
            self.queues[(result.topic, result.queue_id)] = result
            for name in result.files:
                path = self.files.queue_file_path(result.topic, result.queue_id, int(name))
                publish(temporary(path), path, sync_dir=False)
        if self.files.consumequeue_dir.is_dir():
            fsync_dirs(self.files.consumequeue_dir)


def write_at(names: list[str], directory: Path, file_size: int, queue_byte_offset: int, data: bytes) -> None:
    """Queue units or entries (their bytes) at consecutive positions from ``queue_byte_offset`` of the queue in
    ``directory``, across file boundaries, into files under their temporary names (``names``: the queue's files
    begun so far, appended to)."""
    while data:
        file_offset = (queue_byte_offset // file_size) * file_size
        position = queue_byte_offset - file_offset
        chunk = data[:file_size - position]
        name = offset_name(file_offset)
        path = temporary(directory / name)
        if name not in names:
            # a new file (or one a failed attempt of this same task began: rewritten identically)
            directory.mkdir(parents=True, exist_ok=True)
            with open(path, "wb") as f:
                f.truncate(file_size)          # preallocated, as the broker's mapped files are
            names.append(name)
        with open(path, "r+b") as f:
            f.seek(position)
            f.write(chunk)
        data = data[len(chunk):]
        queue_byte_offset += len(chunk)


def within(intervals: np.ndarray, physical_offset) -> np.ndarray:
    """Which physical offsets lie in one of ``intervals`` (sorted, disjoint [start, end) rows)."""
    physical_offset = np.asarray(physical_offset)
    k = np.searchsorted(intervals[:, 0], physical_offset, side="right") - 1
    return (k >= 0) & (physical_offset < intervals[np.maximum(k, 0), 1]) if len(intervals) else \
        np.zeros(len(physical_offset), bool)


def open_index_file(tmp: Path, geometry: Geometry, preset: tuple[int, int] | None = None) -> np.memmap:
    """A new IndexFile being written at ``tmp`` (all zero, ``geometry.file_size`` bytes, mapped writable), its
    header pre-set from the (physical offset, store time) of the key before it, if any."""
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as f:
        f.truncate(geometry.file_size)
    buf = np.memmap(tmp, dtype=np.uint8, mode="r+")
    if preset is not None:
        ix.preset(buf, *preset)
    return buf


def finish_index_file(buf: np.memmap, tmp: Path, path: Path, sync_dir: bool = True) -> None:
    """The IndexFile mapped in ``buf`` written back and published under its final name ``path``."""
    buf.flush()
    publish(tmp, path, sync_dir=sync_dir)


class IndexWriter:
    """Writes IndexFiles into ``files`` (the output directory's store map: DIR/index) from keys in put order;
    one file open at a time."""

    def __init__(self, files: StoreMap, geometry: Geometry):
        self.files, self.geometry = files, geometry
        self.names: list[str] = []
        self._buf: np.memmap | None = None
        self._tmp: Path | None = None
        self._first_ms: int | None = None
        self._last_name_ms: int | None = None
        self._end: tuple[int, int] | None = None        # (phy, ms) of the last key put

    def add(self, h: np.ndarray, phy: np.ndarray, ts: np.ndarray) -> None:
        """Keys in put order: index hash, physical offset, store time (ms). Keys of a record below the last one
        indexed are not put (``IndexService.buildIndex``: a record dispatched again after a restart's recovery);
        the last one itself is put again, as RocketMQ does."""
        if self._end is not None and len(phy) and phy[0] < self._end[0]:
            keep = phy >= self._end[0]
            h, phy, ts = h[keep], phy[keep], ts[keep]
        i = 0
        while i < len(h):
            if self._buf is None:
                self._open()
            if self._first_ms is None:
                self._first_ms = int(ts[i])
            put = ix.put_keys(self._buf, self.geometry, h[i:], phy[i:], ts[i:])
            i += put
            if put:
                self._end = (int(phy[i - 1]), int(ts[i - 1]))
            if i < len(h):                  # the file is full: roll over
                self._close_file()

    def _open(self) -> None:
        self._tmp = temporary(self.files.index_path(f"building-{len(self.names)}"))
        self._buf = open_index_file(self._tmp, self.geometry, self._end)
        self._first_ms = None

    def _close_file(self) -> None:
        name, self._last_name_ms = index_name(self._first_ms, self._last_name_ms)
        finish_index_file(self._buf, self._tmp, self.files.index_path(name), sync_dir=False)
        self._buf = None
        self.names.append(name)

    def close(self) -> None:
        if self._buf is not None:
            self._close_file()
        if self.files.index_dir.is_dir():
            fsync_dirs(self.files.index_dir)


def index_name(first_ms: int, previous_ms: int | None) -> tuple[str, int]:
    """(IndexFile name, its millisecond value): the first entry's store time, UTC, kept above the previous
    file's (names must increase: the broker loads IndexFiles in name order)."""
    ms = first_ms if previous_ms is None else max(first_ms, previous_ms + 1)
    return index_file_name(ms), ms


@dataclass
class RebuildResult:
    """What a rebuild wrote and found, and how it differs from the store's own files (and, resynchronised,
    from the release's own rebuild: ``beyond``)."""
    store: str
    output: Path
    settings: BrokerSettings
    queues: list[QueueResult]
    index_files: list[str]
    records: int
    findings: list[Finding]
    differences: list[Difference]
    resync: bool = False
    restart: RestartDispatch | None = None
    # resync: per queue, the entries written that the release's restart does not write (``add_queue_spans``)
    beyond: dict = field(default_factory=dict)
    store_type: str = "default"             # "defaultRocksDB": classic files for the diff (ROCKSDB_NOTE)
    batch_queues: list = field(default_factory=list)       # BatchQueueResult: batchconsumequeue/ written

    DOCUMENT_TYPE = "rocketstore-spark/rebuild"
    DOCUMENT_VERSION = 2

    @property
    def mode(self) -> str:
        return "resync" if self.resync else "release"

    def document(self) -> dict:
        """The rebuild as one JSON-ready document (module docstring)."""
        return header(self.DOCUMENT_TYPE, self.DOCUMENT_VERSION) | {
            "store": self.store, "output": str(self.output), "rocketmq_version": str(self.settings.release),
            "mode": self.mode, "restart": restart_document(self.restart), "store_type": self.store_type,
            "note": ROCKSDB_NOTE if self.store_type == ROCKSDB_STORE_TYPE else None,
            "settings_sources": self.settings.sources, "settings": self.settings.to_json(), "records": self.records,
            "queues": [{"topic": q.topic, "queue_id": q.queue_id, "files": q.files, "max_offset": q.state.max_offset}
                       for q in self.queues],
            "batch_queues": [{"topic": q.topic, "queue_id": q.queue_id, "files": q.files, "max_offset": q.max_offset}
                             for q in self.batch_queues],
            "beyond_release": [dict(zip(BEYOND_FIELDS, (*name, *row))) for name, row in sorted(self.beyond.items())],
            "index_files": self.index_files, "findings": [f.as_row() for f in self.findings],
            "differences": [d.as_row() for d in self.differences]}


def summary_lines(resync: bool, release: str, restart: RestartDispatch | None, beyond: dict,
                  store_type: str = "default") -> list[str]:
    """What a rebuild followed, in sentences for a person (the CLI and the job print them): the mode, the
    release's restart, and in resync mode how many entries the release's own rebuild would not have."""
    if store_type == ROCKSDB_STORE_TYPE:
        return [ROCKSDB_NOTE]
    if resync:
        n = sum(row[0] for row in beyond.values())
        lines = [f"Resynchronised (--resync): every valid record, read on past damage; {n} entries in "
                 f"{len(beyond)} queue(s) that RocketMQ {release}'s own rebuild would not write (beyond_release "
                 "below)" if n else f"Resynchronised (--resync): every valid record; RocketMQ {release}'s own "
                 "rebuild writes the same entries"]
    else:
        lines = [f"What RocketMQ {release} writes when it restarts without consumequeue/ and index/ (5.x: with "
                 "recheckReputOffsetFromCq=true); --resync for every valid record past damage"]
    return lines + ([f"  {d}" for d in restart.describe()] if restart is not None else [])


BEYOND_FIELDS = ("topic", "queue_id", "entries", "first_queue_offset", "last_queue_offset", "first_physical_offset",
                 "last_physical_offset")


def restart_document(restart: RestartDispatch | None) -> dict | None:
    """The release's restart a rebuild follows (or compares with), JSON-ready."""
    if restart is None:
        return None
    r, w = restart.report, restart.report.walk
    return {"release_family": r.release_family, "shutdown": r.shutdown,
            "walk_start": w.start_file if w else None, "walk_start_reason": w.start_reason if w else None,
            "process_offset": w.process_offset if w else None,
            "stop": {"file": w.stop_file, "position": w.stop_position, "reason": w.stop_reason} if w else None,
            "dispatched": [{"from": lo, "to": hi, "phase": phase} for lo, hi, phase in restart.ranges],
            "segment_stops": [{"file": f, "position": at, "reason": why} for f, at, why in restart.stops],
            "description": restart.describe()}


class SettingsConflict(ValueError):
    """Given broker settings contradict what the store's files show."""


def prepare(store: str, output, options: dict | None = None, broker_conf: str | None = None,
            allow_conflicts: bool = False, allow_engines: frozenset[str] = frozenset()) \
        -> tuple[StoreLayout, Path, BrokerSettings]:
    """(the store's layout, the output directory, the settings), all checked before anything is written
    (driver): one store, an output outside it, settings without conflicts unless allowed; ``allow_engines``:
    engines the caller rebuilds in its own way (``rebuild_store``: a RocksDB ConsumeQueue)."""
    layouts = discover(store)
    if len(layouts) != 1:
        raise StorePathError(f"{store}: names {len(layouts)} stores; a rebuild takes one")
    layout = layouts[0]
    out = check_output(output, layout.files.base)
    settings = resolve(layout, options, broker_conf)
    for d in layout.files.commitlog_dirs:   # a multi-path CommitLog's other directories are the store's too
        check_output(output, d)
    layout.refuse(Work.REBUILD, allow_engines)     # classic files for a store another engine keeps would mislead
    if settings.conflicts and not allow_conflicts:
        raise SettingsConflict("; ".join(settings.conflicts) + " (allow_conflicts / --force to rebuild anyway)")
    return layout, out, settings


def rebuild_store(store: str, output: str | os.PathLike, *, options: dict | None = None,
                  broker_conf: str | None = None, allow_conflicts: bool = False, resync: bool = False) -> RebuildResult:
    """Rebuild ``DIR/consumequeue`` and (with messageIndexEnable) ``DIR/index`` of one store from its
    CommitLog, then compare them with the store's own. ``options``: broker setting name -> value (and
    ``rocketmqVersion``), over ``broker_conf`` (a broker.conf path), over what the store shows
    (``rocketmq.settings``).

    By default the files the release writes when it restarts without them (``rocketmq.recovery.
    restart_dispatch``: on a damaged log, what its recovery keeps and its reput reads). ``resync``: every
    valid record, reading on past damage; what that writes beyond the release's rebuild is listed per queue
    (``beyond``, and one ``beyond_release`` difference per queue)."""
    layout, out, settings = prepare(store, output, options, broker_conf, allow_conflicts,
                                    ROCKSDB_REBUILT | LMQ_REBUILT | BATCH_REBUILT)
    if queue_db(layout.root) is not None:
        # RocksDB mode: the classic files of every valid record and the diff against the database (not what
        # RocketMQ writes there: it reads no ConsumeQueue files in that mode; module docstring)
        queues, index_files, records, findings, _, batch = write_dispatched(layout, out, settings, None, True)
        return RebuildResult(layout.name, out, settings, queues, index_files, records, findings,
                             compare(layout.files, out), True, None, {}, ROCKSDB_STORE_TYPE, batch)
    # the release's own rebuild finds where each segment's dispatch stops as it reads it (one pass); resync
    # needs every stop first, to tell what it writes beyond the release
    restart = restart_dispatch(layout, settings, lazy=not resync)
    queues, index_files, records, findings, beyond, batch = write_dispatched(layout, out, settings, restart, resync)
    return RebuildResult(layout.name, out, settings, queues, index_files, records, findings,
                         compare(layout.files, out) + beyond_differences(beyond, settings.release_label),
                         resync, restart, beyond, batch_queues=batch)


ROCKSDB_STORE_TYPE = "defaultRocksDB"
ROCKSDB_REBUILT = frozenset({"RocksDB ConsumeQueue"})        # rebuild_store's own way (the engine's name)
LMQ_REBUILT = frozenset({LMQ_ENGINE})              # rebuilt as RocketMQ dispatches it (codec.lmq)
BATCH_REBUILT = frozenset({BATCH_ENGINE})          # batchconsumequeue/ written as RocketMQ dispatches it
#: what the Spark rebuild (spark.rebuild) rebuilds as this module does: not a RocksDB ConsumeQueue's differences
SPARK_REBUILT = LMQ_REBUILT | BATCH_REBUILT
ROCKSDB_NOTE = ("RocksDB ConsumeQueue store (storeType=defaultRocksDB): written are classic ConsumeQueue files of "
                "every valid record and the IndexFiles, for the differences against the database below. RocketMQ in "
                "RocksDB mode reads no ConsumeQueue files (and refuses to start with both layouts): they are not a "
                "drop-in. Writing a RocksDB database for the broker is not done (its options, format and native "
                "compaction filter are the broker's); the IndexFiles are the same in both modes.")


def _pieces(restart: RestartDispatch, decoders: dict, findings: list[Finding]) -> Iterator:
    """(decoded batch, its decoder's topics) of ``restart``'s pieces, in order, each phase's through its decoder
    (``decoders``: phase -> ``DispatchDecoder``); the readers' findings appended to ``findings``."""
    for p in restart.pieces:
        decoder = decoders[p.phase]
        for decoded in restart.read(p, decoder, findings):
            yield decoded, decoder.topics


def write_rebuild(layout: StoreLayout, out: Path, settings: BrokerSettings, batch_queues: bool = True) \
        -> tuple[list[QueueResult], list[str], int, list[Finding]]:
    """Write ``out/consumequeue`` and (with an index geometry) ``out/index`` for every record of ``layout``'s
    CommitLog with ``settings``: (queues, IndexFile names, records read, findings). Neither directory may
    exist yet; on failure both are removed. The caller has checked ``out`` (``prepare``, or the repair's own
    staging, whose log holds nothing a restart would not dispatch). ``batch_queues`` False: the BatchCQ topics'
    records are kept out of ``consumequeue/`` but ``out/batchconsumequeue`` is not written (the repair cuts the
    store's own, ``recovery.apply``)."""
    return write_dispatched(layout, out, settings, batch_queues=batch_queues)[:4]


def write_dispatched(layout: StoreLayout, out: Path, settings: BrokerSettings, restart: RestartDispatch | None = None,
                     resync: bool = True, batch_queues: bool = True) \
        -> tuple[list[QueueResult], list[str], int, list[Finding], dict, list["BatchQueueResult"]]:
    """``write_rebuild`` of what a restart dispatches: (queues, IndexFile names, records read, findings,
    beyond, BatchConsumeQueues written). Without ``restart``, or with ``resync``, every record of the log is
    dispatched (resynchronising after damage); with ``restart`` and not ``resync``, only what it dispatches, in
    its order. ``beyond``: with both, the entries written for records ``restart`` does not dispatch, per queue.
    The records of BatchCQ topics (``config/topics.json``) get no ConsumeQueue entry: their units go to
    ``out/batchconsumequeue`` (``write_batch_queues``; not with ``batch_queues`` False)."""
    findings: list[Finding] = []                   # the reading's (decoded in another thread: kept apart)
    written: list[Finding] = []                    # the writers'
    files = StoreMap.of_root(out)
    release = restart.intervals if restart is not None and resync else None
    queues = ConsumeQueueWriter(files, settings.consume_queue_file_size, written, release=release)
    index = IndexWriter(files, settings.geometry) if settings.geometry is not None else None

    lmq = lmq_mode(settings)
    skipped = LmqSkips(layout.segments)
    batch = batch_topics(layout.files) if layout.files.root is not None else frozenset()
    batch_seen = BatchSeen(batch)

    def decoder(message_delay_level: str) -> DispatchDecoder:
        return DispatchDecoder(message_delay_level, index=index is not None, index_tags=settings.release.index_tags,
                               lmq=lmq, batch_topics=batch)
    records = 0
    if restart is None or resync:
        whole = decoder(settings.message_delay_level)
        batches = ((decoded, whole.topics) for decoded in iter_decoded(layout, whole, findings))
    else:
        findings.extend(layout.findings)
        batches = _pieces(restart, {phase: decoder(restart.delay_levels(phase, settings.message_delay_level))
                                    for _, _, phase in restart.ranges}, findings)
    try:
        for decoded, topics in ahead(batches):
            window = decoded.batch
            records += window.num_rows
            queues.add_window(window, topics)
            skipped.add(window)
            batch_seen.add(window, topics)
            if index is not None:
                index.add(window.key_hash, window.key_physical_offset, window.key_store_timestamp)
        queues.close()
        if index is not None:
            index.close()
        written_batch = write_batch_queues(layout, files, settings, batch, batch_seen.physical(), written) \
            if batch_queues else []
    except BaseException:
        for sub in rebuilt_dirs(files)[:None if batch_queues else 2]:     # none existed before (the caller checked)
            shutil.rmtree(sub, ignore_errors=True)
        raise
    return (sorted(queues.queues.values(), key=lambda q: (q.topic, q.queue_id)),
            index.names if index is not None else [], records, distinct(findings) + written + skipped.findings(),
            queues.beyond, written_batch)


class BatchSeen:
    """The physical offsets of the dispatched records of BatchCQ ``topics`` (driver), window by window: the
    records whose units a rebuild writes (memory: 8 bytes a record of those topics)."""

    def __init__(self, topics: frozenset[str]):
        self.topics = topics
        self._flags: dict[int, np.ndarray] = {}      # id(a decoder's topics) -> per topic number: a BatchCQ topic
        self._seen: list[np.ndarray] = []

    def add(self, window: DispatchWindow, topics: list[str]) -> None:
        if not self.topics or not window.num_rows:
            return
        flags = self._flags.get(id(topics), np.zeros(0, bool))
        if len(flags) < len(topics):
            flags = self._flags[id(topics)] = np.r_[flags, [t in self.topics for t in topics[len(flags):]]]
        self._seen.append(window.physical_offset[flags[window.topic]])

    def physical(self) -> np.ndarray:
        return np.unique(np.concatenate(self._seen)) if self._seen else np.zeros(0, np.int64)


@dataclass
class BatchQueueResult:
    """One BatchConsumeQueue a rebuild wrote: its files and max offset (its last unit's base + batch size)."""
    topic: str
    queue_id: int
    files: list[str]
    max_offset: int


def write_batch_queues(layout: StoreLayout, files: StoreMap, settings: BrokerSettings, topics: frozenset[str],
                       physical: np.ndarray, findings: list[Finding]) -> list[BatchQueueResult]:
    """``files``' batchconsumequeue/ (the output's) for the records of ``topics`` at ``physical`` (what the
    restart dispatched, sorted): the units RocketMQ's dispatch writes (``rocketmq.batch_queues``), files at their
    full size, each written under a temporary name and published."""
    if not topics or not len(physical):
        return []
    writer = BatchQueueWriter(files, batch_file_size(layout.files, settings), findings)
    writer.add(*dispatched_units(dispatched_records(layout, topics, physical, settings.message_delay_level), topics))
    return writer.close()


class BatchQueueWriter:
    """Writes ``files``' batchconsumequeue/ (the output's) from units in dispatch order (driver or executor: the
    in-process rebuild's, and each queue group's write task of the Spark rebuild): a unit at or below its
    queue's last physical offset is skipped (``rocketmq.batch_queues.redispatched``), a queue's units are held
    back and written when ``buffer_bytes`` of them are pending and at ``close``, into files of ``file_size``
    bytes (mapperFileSizeBatchConsumeQueue) under temporary names, published at ``close``."""

    def __init__(self, files: StoreMap, file_size: int, findings: list[Finding], buffer_bytes: int = HELD_BYTES):
        if file_size <= 0 or file_size % batchconsumequeue.UNIT_SIZE:
            raise ValueError(f"a BatchConsumeQueue file size must be a positive multiple of "
                             f"{batchconsumequeue.UNIT_SIZE}, not {file_size}")
        self.files, self.file_size, self.findings, self.buffer_bytes = files, file_size, findings, buffer_bytes
        self._queues: dict[tuple[str, int], list] = {}     # queue -> [last physical offset, units, result, held]
        self._pending = 0

    def add(self, names: list[str], topic: np.ndarray, queue_id: np.ndarray, units: np.ndarray) -> None:
        """Units (``batchconsumequeue.UNIT_DTYPE``) of any queues in dispatch order, each with its topic (an index
        into ``names``) and queue id (``rocketmq.batch_queues.dispatched_units``' form)."""
        key = queue_keys(topic, queue_id)
        order = np.argsort(key, kind="stable")
        key = key[order]
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]]) if len(key) else np.zeros(0, np.int64)
        for start, stop in zip(starts.tolist(), np.r_[starts[1:], len(key)].tolist()):
            t, q = queue_of(key[start])
            state = self._queue(names[t], q)
            if state is None:
                continue
            run = units[order[start:stop]]
            physical = run["physical_offset"].astype(np.int64)
            run = run[~redispatched(physical, state[0])]
            if len(run):
                state[0] = max(state[0], int(physical.max()))
                state[1] += len(run)
                state[3].append(run)
                self._pending += run.nbytes
                state[2].max_offset = int(run["base_offset"][-1]) + int(run["batch_size"][-1])
        if self._pending >= self.buffer_bytes:
            self._flush()

    def _queue(self, topic: str, queue_id: int) -> list | None:
        state = self._queues.get((topic, queue_id))
        if state is None and (topic, queue_id) not in self._queues:
            if not safe_component(topic):
                self.findings.append(finding("rebuild.unsafe_topic", str(self.files.batch_consumequeue_dir), None,
                                             f"topic {topic!r} cannot be a directory name: its queues are not rebuilt"))
            else:
                state = [-1, 0, BatchQueueResult(topic, queue_id, [], 0), []]
            self._queues[(topic, queue_id)] = state
        return state

    def _flush(self) -> None:
        for (topic, queue_id), state in self._queues.items():
            if state is not None and state[3]:
                held = b"".join(h.tobytes() for h in state[3])
                start = (state[1] * batchconsumequeue.UNIT_SIZE) - len(held)
                write_at(state[2].files, self.files.batch_queue_dir(topic, queue_id), self.file_size, start, held)
                state[3] = []
        self._pending = 0

    def close(self) -> list[BatchQueueResult]:
        """Every file complete: fsynced and renamed to its final name, then every directory fsynced; the queues
        written, in (topic, queue id) order."""
        self._flush()
        out = sorted((q[2] for q in self._queues.values() if q is not None and q[1]),
                     key=lambda r: (r.topic, r.queue_id))
        for r in out:
            directory = self.files.batch_queue_dir(r.topic, r.queue_id)
            for name in r.files:
                publish(temporary(directory / name), directory / name, sync_dir=False)
        if out:
            fsync_dirs(self.files.batch_consumequeue_dir)
        return out


class LmqSkips:
    """The records whose LMQ multi-dispatch RocketMQ passes over in part or whole (``codec.lmq.SKIP_*``), as
    ``rebuild.lmq_not_dispatched`` findings naming the segment and byte position (capped). ``segments``: the
    segments the windows come from (``path`` and ``base_offset`` of each, ascending): the layout's, or a Spark
    scan task's ranges (``spark.rebuild``)."""

    def __init__(self, segments):
        self.segments = segments
        self.physical: list[np.ndarray] = []
        self.codes: list[np.ndarray] = []

    def add(self, window: DispatchWindow, topics: list[str] | None = None) -> None:
        if window.lmq_skip_row is not None and len(window.lmq_skip_row):
            self.physical.append(window.physical_offset[window.lmq_skip_row])
            self.codes.append(window.lmq_skip_code)

    def findings(self) -> list[Finding]:
        if not self.physical:
            return []
        physical, codes = np.concatenate(self.physical), np.concatenate(self.codes)
        segments = self.segments
        bases = np.array([seg.base_offset for seg in segments], dtype=np.int64)

        def make(i: int) -> Finding:
            phy = int(physical[i])
            k = max(int(np.searchsorted(bases, phy, side="right")) - 1, 0)
            return finding("rebuild.lmq_not_dispatched", segments[k].path if segments else None,
                           phy - int(bases[k]) if segments else None, SKIP_REASONS[int(codes[i])],
                           physical_offset=phy)
        return capped(make, range(len(physical)))
