"""A DLedger store's own files beside its data: the index units and the checkpoint (docs/format/dledger.md).

    dledger-<selfId>/index/<20 digits>   32-byte units: magic int32, pos int64, size int32, index int64, term int64
                                         (unit i describes entry index i; files preallocated with zeros)
    dledger-<selfId>/checkpoint          java.util.Properties: endIndex, committedIndex (checkpoint.bak: the last)
    dledger-<selfId>/currterm            java.util.Properties: currTerm, voteLeader

Read-only, whole files (an index file is read a chunk at a time); runs where called (Spark workers of the
``rocketmq_dledger_*`` sources, tests). The data files are the CommitLog readers' (``layout.entry_frame``).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import numpy as np

from rocketstore_spark.store.layout import DLEDGER_INDEX, DLEDGER_PREFIX, OFFSET_NAME

UNIT_DTYPE = np.dtype([("magic", ">i4"), ("pos", ">i8"), ("size", ">i4"), ("index", ">i8"), ("term", ">i8")])
UNIT_SIZE = 32
CHUNK_UNITS = 1 << 20
assert UNIT_DTYPE.itemsize == UNIT_SIZE


def dledger_dirs(root: Path) -> list[Path]:
    """The ``dledger-<selfId>`` directories of a store root, by name."""
    try:
        return [root / n for n in sorted(os.listdir(root)) if n.startswith(DLEDGER_PREFIX) and (root / n).is_dir()]
    except OSError:
        return []


def read_index_units(directory: Path, chunk_units: int = CHUNK_UNITS) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(file, its written units, their file positions) of each index file of ``directory`` in offset order, a
    chunk at a time; a file's units end at the first all-zero one (DLedger preallocates with zeros)."""
    index_dir = directory / DLEDGER_INDEX
    names = sorted(n for n in os.listdir(index_dir) if OFFSET_NAME.match(n)) if index_dir.is_dir() else []
    for name in names:
        path = index_dir / name
        with open(path, "rb") as f:
            position = 0
            while True:
                data = f.read(chunk_units * UNIT_SIZE)
                units = np.frombuffer(data[:len(data) // UNIT_SIZE * UNIT_SIZE], dtype=UNIT_DTYPE)
                raw = np.frombuffer(data[:len(units) * UNIT_SIZE], dtype=np.uint8).reshape(-1, UNIT_SIZE)
                empty = ~raw.any(axis=1)
                n = int(np.argmax(empty)) if empty.any() else len(units)
                if n:
                    yield str(path), units[:n], position + np.arange(n, dtype=np.int64) * UNIT_SIZE
                if n < len(units) or len(data) < chunk_units * UNIT_SIZE:
                    break
                position += len(data)


def read_properties(path: Path) -> dict[str, str] | None:
    """A java.util.Properties file as DLedger writes it (``key=value`` lines, ``#`` comments); None if absent."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    return out


class IndexUnits:
    """The index files of a ``dledger-<selfId>`` directory as one array of units by entry index, memory-mapped
    read-only (unit i lies at byte i × 32 over the files, each named by its first byte's offset): what
    DLedger's recovery compares its entries with (``rocketmq.dledger_recovery``)."""

    def __init__(self, directory: Path):
        index_dir = directory / DLEDGER_INDEX
        names = sorted(n for n in os.listdir(index_dir) if OFFSET_NAME.match(n)) if index_dir.is_dir() else []
        self.files: list[tuple[int, np.ndarray]] = []
        for name in names:
            size = os.path.getsize(index_dir / name)
            if size >= UNIT_SIZE:
                self.files.append((int(name) // UNIT_SIZE, np.memmap(index_dir / name, dtype=UNIT_DTYPE, mode="r",
                                                                     shape=(size // UNIT_SIZE,))))

    def get(self, indexes: np.ndarray) -> np.ndarray:
        """The units of entry ``indexes`` (all zero where no file holds one)."""
        out = np.zeros(len(indexes), UNIT_DTYPE)
        for first, units in self.files:
            inside = (indexes >= first) & (indexes < first + len(units))
            if inside.any():
                out[inside] = units[indexes[inside] - first]
        return out

    def written_after(self, index: int) -> np.ndarray:
        """The written units (not all zero) of the entries after ``index``."""
        parts = [np.zeros(0, UNIT_DTYPE)]
        for first, units in self.files:
            if first + len(units) > index + 1:
                tail = np.asarray(units[max(0, index + 1 - first):])
                parts.append(tail[tail.view(np.uint8).reshape(-1, UNIT_SIZE).any(axis=1)])
        return np.concatenate(parts)
