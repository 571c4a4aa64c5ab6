"""Finding CommitLog segments and the other store files on disk (driver side; listing, sizes, data extents).

Accepts a store root (``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``,
``config/``), a bare CommitLog directory, or glob patterns matching several of them. Nothing is read
here: planning Spark partitions must stay cheap. Irregularities — segment sizes that differ, gaps and
overlaps between segments, stray files — are findings, never exceptions. Each segment is opened once, for
a few lseeks, to learn where its data ends (sparse files).
"""
from __future__ import annotations

import errno
import glob
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.engines import Engines, Work, detect
from rocketstore_spark.store.layout import OFFSET_NAME, StoreMap, is_regular_file, parse_offset_name


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
        files may not show): the engines are told again with it, its new findings added."""
        if self.engines is None:
            return
        before = {(f.check, f.message) for f in self.engines.findings}
        self.engines = detect(self.root, properties)
        self.findings[:0] = [f for f in self.engines.findings if (f.check, f.message) not in before]

    def refused(self, work: Work) -> bool:
        """Whether an engine of this store makes ``work`` wrong (``refuse`` raises instead)."""
        return self.engines is not None and bool(self.engines.refused(work))

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


def discover(paths) -> list[StoreLayout]:
    """Every store named by ``paths`` (a path, a glob, a comma-separated list, or a list of those; ``file://``
    URLs are local paths). Paths are made absolute here, on the driver, so executors with another working
    directory read the same files; the ``store`` name stays as the user gave it. A path that names no store
    raises StorePathError with a one-line message."""
    layouts = []
    expanded = _expand(paths)
    if not expanded:
        raise StorePathError(f"no store given ({paths!r})")
    for p in expanded:
        path = Path(os.path.abspath(p))
        try:
            if StoreMap.of_root(path).commitlog_dir.is_dir():
                layouts.append(_layout(p, StoreMap.of_root(path)))
            elif path.is_dir() and any(OFFSET_NAME.match(n) for n in os.listdir(path)):
                layouts.append(_layout(p, StoreMap(None, path)))
            else:
                # a store root without commitlog/ (a DLedger store) is refused by name, not as "no store"
                detect(path).refuse(Work.READ_COMMITLOG)
                raise _not_a_store(p, path)
        except PermissionError as e:
            raise StorePathError(f"{p}: permission denied ({e.filename}): the store must be readable by the "
                                 "user running Spark") from None
    return layouts


def _layout(name: str, files: StoreMap) -> StoreLayout:
    findings: list[Finding] = []
    segments: list[Segment] = []
    for entry in sorted(os.scandir(files.commitlog_dir), key=lambda e: e.name):
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
    sizes = Counter(s.size for s in segments if s.size > 0)
    segment_size = sizes.most_common(1)[0][0] if sizes else None
    for prev, seg in zip(segments, segments[1:]):
        if segment_size and seg.base_offset > prev.base_offset + segment_size:
            findings.append(finding("commitlog.gap", seg.path, None,
                                    f"{seg.base_offset - prev.base_offset - segment_size} bytes missing "
                                    f"after {os.path.basename(prev.path)}",
                                    previous_base_offset=prev.base_offset, base_offset=seg.base_offset))
        elif seg.base_offset < prev.base_offset + prev.size:
            findings.append(finding("commitlog.overlap", seg.path, None,
                                    f"starts inside {os.path.basename(prev.path)}",
                                    previous_base_offset=prev.base_offset, base_offset=seg.base_offset))
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
    engines = detect(files.root) if files.root is not None else None
    if engines is not None:
        findings[:0] = engines.findings
    return StoreLayout(name, files, segments, segment_size, findings, engines)
