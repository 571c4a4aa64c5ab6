"""Finding CommitLog segments and the other store files on disk (driver side; listing, sizes, data extents).

Accepts a store root (``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``,
``config/``), a bare CommitLog directory, or glob patterns matching several of them. Nothing is read
here: planning Spark partitions must stay cheap. Irregularities — segment sizes that differ, gaps and
overlaps between segments, stray files — are findings, never exceptions. Each segment is opened once, for
a few lseeks, to learn where its data ends (sparse files). A multi-path CommitLog (store.multipath) is listed
over all its directories as one log once its directories are known (``discover(..., commitlog_dirs)``, or
broker.conf's through ``StoreLayout.note_broker_conf``).

A DLedger store (``dledger-<selfId>/data/``, docs/format/dledger.md) is one log of two parts, as
``DLedgerCommitLog`` reads it: the classic segments of ``commitlog/`` below ``dividedCommitlogOffset`` (the base
offset of the first DLedger data file; a store switched to DLedger keeps them), then the DLedger data files,
whose records are read through their entries (``layout.entry_frame``). Classic segments at or past the divide
are never read by RocketMQ: a finding, left out.
"""
from __future__ import annotations

import errno
import glob
import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store import multipath
from rocketstore_spark.store.engines import Engines, Work, detect
from rocketstore_spark.store.dledger import dledger_dirs
from rocketstore_spark.store.layout import (COMMITLOG, DLEDGER_DATA, OFFSET_NAME, StoreMap, is_regular_file,
                                            parse_offset_name)


@dataclass(frozen=True)
class Segment:
    path: str
    base_offset: int
    size: int
    data_end: int = -1            # end of the last data region (< size when the file ends in a hole)
    blank_head: bool = False      # its first 8 bytes are zero: nothing was ever written (a preallocated file)

    def __post_init__(self):
        if self.data_end < 0:
            object.__setattr__(self, "data_end", self.size)


def probe(path: str, size: int) -> tuple[int, bool]:
    """(data_end, blank_head) of a segment file, with one open: where its data ends (the start of a trailing
    hole — a sparse file such as the last segment a broker preallocated — else its size; the size where the
    file system cannot tell), and whether its first 8 bytes are zero (nothing was ever written there)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return size, True
    try:
        blank_head = not any(os.pread(fd, 8, 0))
        end, pos = 0, 0
        while pos < size:
            try:
                start = os.lseek(fd, pos, os.SEEK_DATA)
            except OSError as e:
                return (end if e.errno == errno.ENXIO else size), blank_head
            pos = end = os.lseek(fd, start, os.SEEK_HOLE)
        return min(end, size), blank_head
    except OSError:
        return size, True
    finally:
        os.close(fd)


@dataclass
class StoreLayout:
    """One store (or bare CommitLog directory) as found on disk: its file names (``files``), its segments and
    what is irregular about them."""
    name: str                      # value of the ``store`` column
    files: StoreMap
    segments: list[Segment]
    segment_size: int | None       # inferred mapped file size (None: no segments)
    findings: list[Finding] = field(default_factory=list)
    engines: Engines | None = None  # the store engines its files show (store.engines); None: a bare CommitLog

    def note_broker_conf(self, properties: dict[str, str]) -> None:
        """What broker.conf says of the engines (a multi-path CommitLog, a RocksDB-only index, …: things the
        files may not show): a multi-path CommitLog's directories are listed as one log (unless the log's
        directories were given), the engines are told again with it, its new findings added."""
        dirs = multipath.conf_dirs(properties)
        if dirs and not self.files.commitlog_dirs:
            self.use_commitlog_dirs(dirs, properties)
            return
        if self.engines is None:
            return
        before = {(f.check, f.message) for f in self.engines.findings}
        self.engines = detect(self.root, properties)
        self.findings[:0] = [f for f in self.engines.findings if (f.check, f.message) not in before]

    def use_commitlog_dirs(self, dirs, properties: dict[str, str] | None = None) -> None:
        """List the CommitLog again over ``dirs`` (paths; relative ones from the working directory, as the
        broker takes them from its own): its segments, findings and engines become those of that log."""
        files = self.files if self.root is None else StoreMap.of_root(self.root)
        given = tuple(Path(os.path.abspath(d)) for d in dirs)
        fresh = _layout(self.name, replace(files, commitlog_dirs=given), properties)
        self.files, self.segments, self.segment_size = fresh.files, fresh.segments, fresh.segment_size
        self.findings, self.engines = fresh.findings, fresh.engines

    def refused(self, work: Work, allow: frozenset[str] = frozenset()) -> bool:
        """Whether an engine of this store makes ``work`` wrong (``refuse`` raises instead); ``allow``: engines
        the caller handles itself."""
        return self.engines is not None and any(e.name not in allow for e in self.engines.refused(work))

    def refuse(self, work: Work, allow: frozenset[str] = frozenset()) -> None:
        """Raise ``store.engines.UnsupportedStore`` when this store was written with an engine that makes
        ``work`` wrong (e.g. reading ``commitlog/`` of a store switched to DLedger); ``allow``: engines the caller
        handles itself."""
        if self.engines is not None:
            self.engines.refuse(work, allow)

    @property
    def root(self) -> Path | None:
        return self.files.root

    def followed(self, k: int) -> bool:
        """Does a segment after the k-th hold records? RocketMQ then closed the k-th with a BLANK. Files the
        broker preallocated and never wrote to do not count."""
        return any(not s.blank_head for s in self.segments[k + 1:])

    def next_path(self, k: int) -> str | None:
        """Where the segment after the k-th lies or would lie, when that is not beside it (a multi-path
        CommitLog, store.multipath); None otherwise (the readers look beside it)."""
        if not self.files.commitlog_dirs or not self.segment_size:
            return None
        seg = self.segments[k]
        return str(self.files.segment_path(seg.base_offset + seg.size, self.segment_size))


class StorePathError(FileNotFoundError):
    """A path that does not name a store, with a one-line message saying what it is and what to give."""


def _local(part: str) -> str:
    if part.startswith("file://"):
        return part[len("file://"):]
    scheme = part.split("://", 1)[0] if "://" in part else None
    if scheme:
        raise StorePathError(f"{part}: {scheme}:// is not supported: the store must be on a local (or mounted) "
                             "file system of every Spark node; copy or mount it and give that path")
    return part


def _expand(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[str] = []
    for p in paths:
        p = str(p)
        for part in p.split(",") if "," in p and not os.path.exists(p) else [p]:
            part = _local(part.strip())
            if glob.has_magic(part):
                matches = sorted(glob.glob(part))
                if not matches:
                    where = "" if os.path.isabs(part) else f" (relative to {os.getcwd()})"
                    raise StorePathError(f"{part}: the pattern matches nothing{where}")
                found.extend(matches)
            else:
                found.append(part)
    return found


def _not_a_store(p: str, path: Path) -> StorePathError:
    if not os.path.lexists(p):
        # a relative path is resolved where the sources plan: on Spark Connect that is the server, not the client
        where = "" if os.path.isabs(p) else f" (relative to {os.getcwd()}: give an absolute path)"
        return StorePathError(f"{p}: no such file or directory{where}")
    if path.is_file():
        if OFFSET_NAME.match(path.name):
            return StorePathError(f"{p} is a single CommitLog segment file: give its directory "
                                  f"({path.parent}) or the store root")
        return StorePathError(f"{p} is a file, not a store: give the store root (the directory holding "
                              "commitlog/) or a CommitLog directory")
    if not path.is_dir():
        return StorePathError(f"{p} is not a directory (a broken link or a special file)")
    return StorePathError(f"{p} is neither a RocketMQ store root (no commitlog/ inside) nor a CommitLog "
                          "directory (no 20-digit segment files)")


def discover(paths, commitlog_dirs=None) -> list[StoreLayout]:
    """Every store named by ``paths`` (a path, a glob, a comma-separated list, or a list of those; ``file://``
    URLs are local paths). Paths are made absolute here, on the driver, so executors with another working
    directory read the same files; the ``store`` name stays as the user gave it. A path that names no store
    raises StorePathError with a one-line message. ``commitlog_dirs``: the directories of the one store's
    CommitLog (a multi-path log: a list, or a comma-separated string as in ``storePathCommitLog``)."""
    layouts = []
    expanded = _expand(paths)
    if not expanded:
        raise StorePathError(f"no store given ({paths!r})")
    if commitlog_dirs:
        dirs = multipath.split(commitlog_dirs) if isinstance(commitlog_dirs, str) else list(commitlog_dirs)
        if len(expanded) != 1:
            raise StorePathError(f"{len(expanded)} stores given with CommitLog directories ({', '.join(dirs)}): "
                                 "those name the CommitLog of one store; give one store")
        path = Path(os.path.abspath(expanded[0]))
        if not path.is_dir():
            raise _not_a_store(expanded[0], path)
        # the store root, or (no commitlog/ in it, segment files instead) one of the CommitLog's directories
        bare = not (path / COMMITLOG).exists() and any(OFFSET_NAME.match(n) for n in os.listdir(path))
        files = StoreMap(None, path) if bare else StoreMap.of_root(path)
        return [_layout(expanded[0], replace(files, commitlog_dirs=tuple(Path(os.path.abspath(d)) for d in dirs)))]
    for p in expanded:
        path = Path(os.path.abspath(p))
        try:
            if StoreMap.of_root(path).commitlog_dir.is_dir() or dledger_data_dirs(path):
                layouts.append(_layout(p, StoreMap.of_root(path)))
            elif path.is_dir() and any(OFFSET_NAME.match(n) for n in os.listdir(path)):
                layouts.append(_layout(p, StoreMap(None, path)))
            else:
                # a store root without commitlog/ of an engine we do not read is refused by name, not as "no store"
                detect(path).refuse(Work.READ_COMMITLOG)
                raise _not_a_store(p, path)
        except PermissionError as e:
            raise StorePathError(f"{p}: permission denied ({e.filename}): the store must be readable by the "
                                 "user running Spark") from None
    return layouts


def dledger_data_dirs(root: Path) -> list[Path]:
    """The DLedger data directories of a store root (``dledger-<selfId>/data``): one on a DLedger broker."""
    return [d / DLEDGER_DATA for d in dledger_dirs(root) if (d / DLEDGER_DATA).is_dir()]


def _segments(directory: Path, findings: list[Finding]) -> list[Segment]:
    """The segment files of one directory, in offset order; stray entries are findings (FileNotFoundError or
    NotADirectoryError when it is not a directory)."""
    segments: list[Segment] = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        base_offset = parse_offset_name(entry.name)
        if not is_regular_file(entry.path):
            findings.append(finding("store.stray_entry", entry.path, None,
                                    "directory, special file or unreadable link inside the CommitLog directory "
                                    "(ignored)"))
        elif base_offset is None:
            findings.append(finding("store.stray_file", entry.path, None,
                                    "file name is not a 20-digit offset within int64 (ignored)"))
        else:
            size = os.stat(entry.path).st_size
            segments.append(Segment(entry.path, base_offset, size, *probe(entry.path, size)))
    return segments


def _dledger_log(files: StoreMap, classic: list[Segment], findings: list[Finding]) -> list[Segment]:
    """One log of a DLedger store: the classic segments below the divide, then the DLedger data files (one
    data directory; with several — which self id is this broker? — the classic segments only, and the engine
    stays refused)."""
    data_dirs = dledger_data_dirs(files.root) if files.root is not None else []
    if len(data_dirs) != 1:
        return classic
    entries = _segments(data_dirs[0], findings)       # a directory (dledger_data_dirs)
    if not entries:
        return classic
    divide = entries[0].base_offset
    for seg in classic:
        if seg.base_offset >= divide:
            findings.append(finding("commitlog.beyond_divide", seg.path, None,
                                    f"a classic segment at or past dividedCommitlogOffset {divide} (the first DLedger "
                                    "data file): RocketMQ reads DLedger's data there, never this file (left out)",
                                    divided_commitlog_offset=divide))
    return [seg for seg in classic if seg.base_offset < divide] + entries


def _layout(name: str, files: StoreMap, conf: dict[str, str] | None = None) -> StoreLayout:
    multi = bool(files.commitlog_dirs)
    segments, findings = _list_segments(files)
    if files.root is not None:
        segments = _dledger_log(files, segments, findings)
    sizes = Counter(s.size for s in segments if s.size > 0)
    segment_size = sizes.most_common(1)[0][0] if sizes else None
    for prev, seg in zip(segments, segments[1:]):
        if segment_size and seg.base_offset > prev.base_offset + segment_size:
            findings.append(multipath.gap(files.log_dirs, prev.base_offset, seg.base_offset, segment_size, seg.path)
                            if multi else
                            finding("commitlog.gap", seg.path, None,
                                    f"{seg.base_offset - prev.base_offset - segment_size} bytes missing "
                                    f"after {os.path.basename(prev.path)}",
                                    previous_base_offset=prev.base_offset, base_offset=seg.base_offset))
        elif seg.base_offset < prev.base_offset + prev.size:
            findings.append(finding("commitlog.overlap", seg.path, None,
                                    f"starts inside {os.path.basename(prev.path)}",
                                    previous_base_offset=prev.base_offset, base_offset=seg.base_offset))
    if not multi and segment_size:
        hint = multipath.suspected([s.base_offset for s in segments], segment_size, str(files.commitlog_dir))
        if hint is not None:
            findings.append(hint)
    for seg in segments:
        if seg.size == 0:
            findings.append(finding("commitlog.empty_segment", seg.path, None, "segment file of zero bytes"))
        elif segment_size and seg.size != segment_size:
            findings.append(finding("commitlog.wrong_size", seg.path, None,
                                    f"{seg.size} bytes, the other segments have {segment_size} "
                                    "(RocketMQ refuses to load such a store)",
                                    size=seg.size, expected=segment_size))
        if segment_size and seg.base_offset % segment_size:
            findings.append(finding("commitlog.misaligned_name", seg.path, None,
                                    f"base offset is not a multiple of the segment size {segment_size}"))
    engines = detect(files.root, conf) if files.root is not None else None
    if multi:
        engine, note = multipath.engine(files.log_dirs, findings)
        engines = engines if engines is not None else Engines(None)
        engines.engines.append(engine)
        engines.findings.append(note)
    elif any(f.check == "commitlog.multipath_suspected" for f in findings):
        engines = engines if engines is not None else Engines(None)
        engines.engines.append(multipath.SUSPECTED)
    if engines is not None:
        findings[:0] = engines.findings
    return StoreLayout(name, files, segments, segment_size, findings, engines)


def _list_segments(files: StoreMap) -> tuple[list[Segment], list[Finding]]:
    """The segments of every CommitLog directory in base offset order, and what is irregular in the listing
    (stray entries; multi-path: a directory missing, a segment in two directories — the first directory's copy
    kept —, a root commitlog/ with segments outside the list)."""
    findings: list[Finding] = []
    segments: dict[int, Segment] = {}
    multi = bool(files.commitlog_dirs)
    for d in files.log_dirs:
        try:
            listed = _segments(d, findings)
        except (FileNotFoundError, NotADirectoryError):
            if not multi:
                if files.root is not None and dledger_data_dirs(files.root):
                    continue                # a DLedger store that never had a classic CommitLog
                raise
            findings.append(multipath.missing_dir(d))
            continue
        for seg in listed:
            if seg.base_offset in segments:
                findings.append(multipath.duplicate(os.path.basename(seg.path), segments[seg.base_offset].path,
                                                    seg.path))
            else:
                segments[seg.base_offset] = seg
    if multi and files.root is not None and files.commitlog_dir not in files.log_dirs and \
            files.commitlog_dir.is_dir() and any(parse_offset_name(n) is not None for n in os.listdir(files.commitlog_dir)):
        findings.append(multipath.unlisted(files.commitlog_dir))
    return [segments[k] for k in sorted(segments)], findings
