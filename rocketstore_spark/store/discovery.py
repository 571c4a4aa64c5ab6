"""Finding CommitLog segments and the other store files on disk (driver side; listing and sizes only).

Accepts a store root (``commitlog/``, ``consumequeue/``, ``index/``, ``checkpoint``, ``abort``,
``config/``), a bare CommitLog directory, or glob patterns matching several of them. Nothing is opened
here: planning Spark partitions must stay cheap. Irregularities — segment sizes that differ, gaps and
overlaps between segments, stray files — are findings, never exceptions.
"""
from __future__ import annotations

import glob
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from rocketstore_spark.store.findings import Finding

SEGMENT_NAME = re.compile(r"^\d{20}$")
QUEUE_ID_NAME = re.compile(r"^\d+$")


@dataclass(frozen=True)
class Segment:
    path: str
    base_offset: int
    size: int


@dataclass
class StoreLayout:
    """One store (or bare CommitLog directory) as found on disk."""
    name: str                      # value of the ``store`` column
    root: Path | None              # store root, None for a bare commitlog directory
    commitlog_dir: Path
    segments: list[Segment]
    segment_size: int | None       # inferred mapped file size (None: no segments)
    findings: list[Finding] = field(default_factory=list)

    @property
    def consumequeue_dir(self) -> Path | None:
        return None if self.root is None else self.root / "consumequeue"

    @property
    def index_dir(self) -> Path | None:
        return None if self.root is None else self.root / "index"

    def queue_dirs(self) -> list[tuple[str, int, Path]]:
        """(topic, queue_id, directory) for every ConsumeQueue, as RocketMQ loads them: directory names
        that are not integers are skipped, as the broker skips them."""
        out = []
        cq = self.consumequeue_dir
        if cq is None or not cq.is_dir():
            return out
        for topic_dir in sorted(cq.iterdir()):
            if not topic_dir.is_dir():
                continue
            for qdir in sorted(topic_dir.iterdir(), key=lambda p: (len(p.name), p.name)):
                if qdir.is_dir() and QUEUE_ID_NAME.match(qdir.name):
                    out.append((topic_dir.name, int(qdir.name), qdir))
        return out


def _expand(paths) -> list[str]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    found: list[str] = []
    for p in paths:
        p = str(p)
        for part in p.split(",") if "," in p and not os.path.exists(p) else [p]:
            matches = sorted(glob.glob(part)) if glob.has_magic(part) else [part]
            found.extend(matches)
    return found


def discover(paths) -> list[StoreLayout]:
    """Every store named by ``paths`` (a path, a glob, a comma-separated list, or a list of those)."""
    layouts = []
    expanded = _expand(paths)
    if not expanded:
        raise FileNotFoundError(f"no store matches {paths!r}")
    for p in expanded:
        path = Path(p)
        if not path.exists():
            raise FileNotFoundError(f"store path does not exist: {p}")
        if (path / "commitlog").is_dir():
            layouts.append(_layout(str(path), path, path / "commitlog"))
        elif path.is_dir() and any(SEGMENT_NAME.match(n) for n in os.listdir(path)):
            layouts.append(_layout(str(path), None, path))
        else:
            raise FileNotFoundError(f"{p} is neither a RocketMQ store root (no commitlog/ inside) "
                                    f"nor a CommitLog directory (no 20-digit segment files)")
    return layouts


def _layout(name: str, root: Path | None, commitlog_dir: Path) -> StoreLayout:
    findings: list[Finding] = []
    segments: list[Segment] = []
    for entry in sorted(os.scandir(commitlog_dir), key=lambda e: e.name):
        if not entry.is_file():
            findings.append(Finding("store.stray_entry", "warning", entry.path, None,
                                    "directory or special file inside the CommitLog directory (ignored)"))
        elif not SEGMENT_NAME.match(entry.name):
            findings.append(Finding("store.stray_file", "warning", entry.path, None,
                                    "file name is not a 20-digit offset (ignored)"))
        else:
            segments.append(Segment(entry.path, int(entry.name), entry.stat().st_size))
    sizes = Counter(s.size for s in segments if s.size > 0)
    segment_size = sizes.most_common(1)[0][0] if sizes else None
    for prev, seg in zip(segments, segments[1:]):
        if segment_size and seg.base_offset > prev.base_offset + segment_size:
            findings.append(Finding("commitlog.gap", "error", seg.path, None,
                                    f"{seg.base_offset - prev.base_offset - segment_size} bytes missing "
                                    f"after {os.path.basename(prev.path)}",
                                    {"previous_base_offset": prev.base_offset, "base_offset": seg.base_offset}))
        elif seg.base_offset < prev.base_offset + prev.size:
            findings.append(Finding("commitlog.overlap", "error", seg.path, None,
                                    f"starts inside {os.path.basename(prev.path)}",
                                    {"previous_base_offset": prev.base_offset, "base_offset": seg.base_offset}))
    for seg in segments:
        if segment_size and seg.size != segment_size:
            findings.append(Finding("commitlog.wrong_size", "error" if seg.size else "warning", seg.path, None,
                                    f"{seg.size} bytes, the other segments have {segment_size} "
                                    "(RocketMQ refuses to load such a store)",
                                    {"size": seg.size, "expected": segment_size}))
        if segment_size and seg.base_offset % segment_size:
            findings.append(Finding("commitlog.misaligned_name", "warning", seg.path, None,
                                    f"base offset is not a multiple of the segment size {segment_size}"))
    return StoreLayout(name, root, commitlog_dir, segments, segment_size, findings)
