"""A multi-path CommitLog (RocketMQ 4.9.2+): one log whose segments are spread over several directories.

    storePathCommitLog=/disk1/store/commitlog,/disk2/store/commitlog   split on MixAll.MULTI_PATH_SPLITTER (",",
                                                                       -Drocketmq.broker.multiPathSplitter)
    readOnlyCommitLogStorePaths=/disk3/old/commitlog                   more directories, read and never written

What RocketMQ 5.5.1 does with them (``CommitLog``'s constructor, ``MultiPathMappedFileQueue``,
``MappedFileQueue.doLoad``; docs/format/commitlog.md "Multi-path CommitLog"):

* only a ``storePathCommitLog`` that *contains* the splitter makes the queue multi-path; a single path is a
  plain ``MappedFileQueue`` on it, and ``readOnlyCommitLogStorePaths`` is then ignored;
* the value is trimmed as a whole and split; the pieces are not trimmed, and go into a set (duplicates vanish);
* ``load()`` lists every file of every directory of both settings (a directory that does not exist lists
  nothing, silently) and sorts them **by file name**, not path: the segments of all directories make one log,
  a record's physical offset is its file's name plus its position, whatever the directory;
* a new segment goes to the writable directories (the listed ones minus the read-only ones, minus those whose
  disk is nearly full unless all are) **sorted by name**: the ``(offset / segment size) % count``-th — so the
  segments alternate between the directories in name order, not in the order broker.conf lists them;
* two files of the same name in two directories both load (``checkSelf`` logs "[BUG] ... the adjacent
  mappedFile's offset don't match"): which one serves an offset then depends on the iteration order of a Java
  ``HashSet`` of the path strings, and recovery walks both.

So here: the directories come from broker.conf (``conf_dirs``, both settings) or an explicit list (CLI
``--commitlog-path``, datasource option ``storePathCommitLog``); the segments of all of them are read as one log
(store.discovery); a directory that is missing, the same segment in two directories (equal:
``commitlog.path_duplicate_segment``, differing: ``commitlog.path_conflicting_segment``), segments missing
between directories (``commitlog.path_gap``, naming the directory RocketMQ would have put them in) and a
root ``commitlog/`` with segments that is not among the listed directories are findings. A duplicate or a
missing directory refuses the rebuild, the recovery verdict and the repair (RocketMQ's own answer then depends
on a hash order, or on segments that are not here); a
repair is refused on every multi-path store (it builds the repaired store beside the root and swaps it in,
which cannot move the other directories). Without any of this a store root whose segments come every k-th
only (``commitlog.multipath_suspected``) is reported as what it likely is: one directory of such a log.
Pure functions over names and sizes (and a byte comparison of duplicates); driver side (discovery).
"""
from __future__ import annotations

import filecmp
import os
from pathlib import Path

from rocketstore_spark.findings import Finding, finding
from rocketstore_spark.store.engines import Engine, Work

SPLITTER = ","
STORE_PATH = "storePathCommitLog"
READ_ONLY_PATHS = "readOnlyCommitLogStorePaths"
NAME = "multi-path CommitLog"
# a duplicate segment (RocketMQ's own walk and rebuild then depend on a hash order) or a missing directory (a part
# of the log): what cannot be answered for the whole log
PARTIAL_REFUSES = frozenset({Work.REBUILD, Work.RECOVER, Work.REPAIR})
REPAIR_WHY = ("a repair builds the repaired store beside the store root and swaps it in: the CommitLog directories "
              "outside it cannot move with it")


# a store whose one CommitLog directory holds every k-th segment only: a repair would cut a log it sees in part
SUSPECTED = Engine(NAME + " (suspected)", "one segment in every k of commitlog/", frozenset({Work.REPAIR}),
                   "its commitlog/ may be one directory of a multi-path CommitLog given without the others, and a "
                   "repair would cut what it sees of the log: give every directory (--broker-conf, --commitlog-path)")


def split(value: str | None) -> list[str]:
    """The directories of a ``storePathCommitLog`` value as RocketMQ splits it (trimmed as a whole, pieces kept
    as they are; empty pieces, which name no directory, left out), first occurrence first."""
    out: list[str] = []
    for piece in str(value or "").strip().split(SPLITTER):
        if piece and piece not in out:
            out.append(piece)
    return out


def conf_dirs(conf: dict[str, str] | None) -> list[str] | None:
    """The CommitLog directories broker.conf's properties give a multi-path CommitLog (``storePathCommitLog``,
    then ``readOnlyCommitLogStorePaths``), or None when RocketMQ would not use one (no splitter in the value)."""
    value = str((conf or {}).get(STORE_PATH) or "")
    if SPLITTER not in value:
        return None
    dirs = split(value)
    return dirs + [d for d in split((conf or {}).get(READ_ONLY_PATHS)) if d not in dirs]


def expected_dir(dirs: tuple[Path, ...], base_offset: int, segment_size: int) -> Path:
    """The directory RocketMQ creates the segment at ``base_offset`` in (every directory writable and not full)."""
    ordered = sorted(dirs, key=str)
    return ordered[(base_offset // segment_size) % len(ordered)]


def missing_dir(d: Path) -> Finding:
    return finding("commitlog.path_missing", str(d), None,
                   "a CommitLog directory of the multi-path log is not here (or not a directory): its segments are "
                   "not read; RocketMQ would list nothing from it either and write new segments there")


def duplicate(name: str, kept: str, other: str) -> Finding:
    """The same segment in two directories: equal bytes (a warning) or not (an error)."""
    same = os.path.getsize(kept) == os.path.getsize(other) and filecmp.cmp(kept, other, shallow=False)
    if same:
        return finding("commitlog.path_duplicate_segment", other, None,
                       f"segment {name} is also in {os.path.dirname(kept)}, byte for byte: read once, from there",
                       kept=kept)
    return finding("commitlog.path_conflicting_segment", other, None,
                   f"segment {name} is also in {os.path.dirname(kept)} with other bytes: the copy there is read, "
                   "this one is not; which one RocketMQ serves depends on a hash order", kept=kept)


def gap(dirs: tuple[Path, ...], prev_base: int, base: int, segment_size: int, path: str) -> Finding:
    missing = list(range(prev_base + segment_size, base, segment_size))
    where = sorted({str(expected_dir(dirs, m, segment_size)) for m in missing})
    return finding("commitlog.path_gap", path, None,
                   f"{len(missing)} segment(s) missing before this one in the multi-path log (from "
                   f"{missing[0]:020d}); RocketMQ would have written them to {', '.join(where)}",
                   previous_base_offset=prev_base, base_offset=base, expected_dirs=where)


def unlisted(commitlog_dir: Path) -> Finding:
    return finding("commitlog.path_unlisted", str(commitlog_dir), None,
                   "the store root's commitlog/ holds segments but is not one of the multi-path CommitLog's "
                   "directories: RocketMQ does not read it, neither does this read")


def suspected(bases: list[int], segment_size: int, path: str) -> Finding | None:
    """``commitlog.multipath_suspected`` when the segments of a single directory come every k-th only (k >= 2),
    as one directory of a CommitLog spread over k directories holds them; None otherwise."""
    if len(bases) < 2 or not segment_size:
        return None
    steps = {(b - a) // segment_size for a, b in zip(bases, bases[1:]) if (b - a) % segment_size == 0}
    if len(steps) != 1 or any((b - a) % segment_size for a, b in zip(bases, bases[1:])):
        return None
    k = steps.pop()
    if k < 2:
        return None
    return finding("commitlog.multipath_suspected", path, None,
                   f"only one segment in every {k}: this looks like one directory of a multi-path CommitLog over {k} "
                   "directories (storePathCommitLog): give the others (--broker-conf, --commitlog-path, option "
                   "storePathCommitLog) — or every other segment was lost", stride=k)


def engine(dirs: tuple[Path, ...], findings: list[Finding]) -> tuple[Engine, Finding]:
    """The multi-path engine of a store (what it refuses: the repair; with a duplicate segment also the rebuild
    and the recovery verdict) and the finding that says it is read over ``dirs``."""
    checks = {f.check for f in findings}
    dup = bool(checks & {"commitlog.path_duplicate_segment", "commitlog.path_conflicting_segment"})
    missing = "commitlog.path_missing" in checks
    refuses = PARTIAL_REFUSES if dup or missing else frozenset({Work.REPAIR})
    why = REPAIR_WHY + ("; a segment in two directories makes RocketMQ's own recovery and rebuild depend on a hash "
                        "order" if dup else "") + ("; a directory of the log is missing, so what is here is part of "
                                                    "a log" if missing else "")
    evidence = f"storePathCommitLog over {len(dirs)} directories"
    e = Engine(NAME, evidence, refuses, why)
    note = finding("store.multipath_commitlog", str(dirs[0]), None,
                   f"the CommitLog is read as one log over {len(dirs)} directories: {', '.join(map(str, dirs))}; "
                   f"refused: {', '.join(sorted(w.value for w in refuses))}",
                   directories=[str(d) for d in dirs])
    return e, note
