"""What RocketMQ 5.5.1's restart does to a store's BatchConsumeQueues (5.x ``queue.type=BatchCQ``,
docs/format/batchconsumequeue.md), simulated read-only beside the ConsumeQueues' (``rocketmq.recovery``; driver
or CLI). Each step is ``BatchConsumeQueue``'s:

1. ``recover``: from the third-last file, units up to the first failing the recovery test
   (``batchconsumequeue.valid_mask``); a file valid to its end leads to the next. The queue ends there
   (``processOffset``): files starting after it are deleted (``MappedFileQueue.truncateDirtyFiles``), and
   ``maxMsgPhyOffsetInCommitLog`` is the last valid unit's physical offset (-1: none read). That offset —
   a unit's start, not its end as a ConsumeQueue's — counts in the store's maxCQ
   (``ConsumeQueueStore.getMaxPhyOffsetInConsumeQueue``: where a clean start dispatches from, and whether the
   queues are cut).
2. dispatch: each record of the queue the CommitLog walk dispatches again gets a unit at the queue's end when its
   physical offset is past ``maxMsgPhyOffsetInCommitLog`` (``putBatchMessagePositionInfo``; units as
   ``rocketmq.batch_queues`` computes them), a new file when the last is full.
3. the cut, when maxCQ reaches the log's new end (``truncateDirty``): from the last file back, a file whose first
   unit points at or past it is deleted; in the first that does not, that first unit is kept whatever it holds
   (an all-zero one too), and the queue ends at the first later unit that is invalid or points at or past the end
   (``truncateDirtyLogicFiles``).
4. the bounds a consumer sees (``recoverOffsetTable``: ``reviseMinOffsetInQueue``, ``correctMinOffset``,
   ``reviseMaxOffsetInQueue``): min is the first file's first unit's base offset (-1: that file holds none), moved
   past the units of that file pointing below the CommitLog's min offset; max is the last unit's base offset +
   batch size (the second-last file's last unit when the last file is empty; 0: none).

Files are read whole (``mapperFileSizeBatchConsumeQueue`` bytes each) as the steps need them: the last three,
those the cut walks back over, and the first; memory is a few files per queue.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rocketstore_spark.codec import batchconsumequeue as bcq
from rocketstore_spark.store.layout import StoreMap

UNIT = bcq.UNIT_SIZE


@dataclass
class BatchQueueRecovery:
    """One BatchConsumeQueue through the restart (module docstring). Queue byte offsets: ``end`` is where its units
    end; files are (path or None for one the dispatch creates, queue byte offset of the file)."""
    topic: str
    queue_id: int
    file_size: int
    files: list[tuple[str | None, int]]
    end: int = 0
    max_physical: int = -1                  # maxMsgPhyOffsetInCommitLog
    max_offset_on_disk: int = 0             # getMaxOffsetInQueue after step 1 alone
    units_on_disk: int = 0                  # units before ``end`` after step 1 (from the third-last file on)
    units_cut: int = 0
    cut_units: np.ndarray = field(default_factory=lambda: np.zeros(0, bcq.UNIT_DTYPE))   # the units ``truncate`` cut
    files_deleted: list[str] = field(default_factory=list)
    units_dispatched: int = 0
    first_dispatched: int = -1              # base offset of the first unit the dispatch writes (-1: none)
    dispatch_at: int = -1                   # queue byte offset of the first unit the dispatch writes (-1: none)
    min_offset: int = -1                    # getMinOffsetInQueue after the restart
    max_offset: int = 0                     # getMaxOffsetInQueue after the restart
    _written: dict = field(default_factory=dict, repr=False)     # file offset -> {unit index: unit} dispatched
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def key(self) -> tuple[str, int]:
        return self.topic, self.queue_id

    @property
    def units(self) -> int:
        """The units the queue holds (from its first file to its end)."""
        return (self.end - self.files[0][1]) // UNIT if self.files else 0

    def file_units(self, file_offset: int) -> np.ndarray:
        """The file's units as RocketMQ's mapped buffer holds them: the bytes on disk (zeros past them; a new
        file all zero) with what the dispatch wrote over them."""
        if file_offset not in self._cache:
            path = dict((o, p) for p, o in self.files).get(file_offset)
            raw = b""
            if path is not None:
                with open(path, "rb") as f:
                    raw = f.read(self.file_size)
            self._cache[file_offset] = bcq.decode_units(raw.ljust(self.file_size, b"\0")).copy()
        out = self._cache[file_offset]
        for i, unit in self._written.get(file_offset, {}).items():
            out[i] = unit
        return out

    def unit_bytes(self, start: int, stop: int) -> bytes:
        """The units between queue byte offsets ``start`` and ``stop`` as the restart leaves them (``file_units``:
        what it dispatched over the bytes on disk)."""
        out, at = [], start
        while at < stop:
            offset = at - at % self.file_size
            i, j = (at - offset) // UNIT, (min(stop, offset + self.file_size) - offset) // UNIT
            out.append(self.file_units(offset)[i:j].tobytes())
            at = offset + j * UNIT
        return b"".join(out)

    def _revise(self, log_min: int) -> tuple[int, int]:
        """(min, max) offsets as reviseMinOffsetInQueue + correctMinOffset and reviseMaxOffsetInQueue give them."""
        if not self.files:
            return -1, 0
        first_offset, last_offset = self.files[0][1], self.files[-1][1]
        read = lambda off: self.file_size if off != last_offset else self.end - off      # noqa: E731 (readPosition)
        first = self.file_units(first_offset)[: read(first_offset) // UNIT]
        low = -1
        if len(first):
            low = int(first["base_offset"][0])
            below = np.flatnonzero(first["physical_offset"] >= log_min)
            k = int(below[0]) if len(below) else len(first)
            if k:
                low = int(first["base_offset"][k - 1]) + int(first["batch_size"][k - 1])
        n = read(last_offset) // UNIT
        if n:
            u = self.file_units(last_offset)[n - 1]
        elif len(self.files) >= 2:
            u = self.file_units(self.files[-2][1])[self.file_size // UNIT - 1]
        else:
            return low, 0
        return low, int(u["base_offset"]) + int(u["batch_size"])

    def recover(self, log_min: int) -> None:
        """Step 1."""
        if not self.files:
            return
        k = max(0, len(self.files) - 3)
        while True:
            offset = self.files[k][1]
            units = self.file_units(offset)
            n = bcq.written_count(units)
            if n:
                self.max_physical = int(units["physical_offset"][n - 1])
            self.units_on_disk += n
            self.end = offset + n * UNIT
            if n * UNIT == self.file_size and k + 1 < len(self.files):
                k += 1
                continue
            break
        kept = [(p, o) for p, o in self.files if o <= self.end]
        self.files_deleted += [p for p, o in self.files if o > self.end]
        self.files = kept
        self.max_offset_on_disk = self._revise(log_min)[1]

    def dispatch(self, units: np.ndarray) -> None:
        """Step 2 for the units (``batchconsumequeue.UNIT_DTYPE``, in dispatch order) of the records dispatched."""
        units = units[units["physical_offset"] > self.max_physical]
        if len(units) and self.dispatch_at < 0:
            self.dispatch_at = self.end
        for unit in units:
            offset = self.end - self.end % self.file_size
            if not self.files or self.files[-1][1] < offset:
                self.files.append((None, offset))
            self._written.setdefault(offset, {})[(self.end - offset) // UNIT] = unit
            self.end += UNIT
        if len(units):
            self.max_physical = int(units["physical_offset"][-1])
            self.units_dispatched += len(units)
            if self.first_dispatched < 0:
                self.first_dispatched = int(units["base_offset"][0])

    def truncate(self, process_offset: int) -> None:
        """Step 3."""
        before = self.end
        self.max_physical = process_offset - 1
        while self.files:
            path, offset = self.files[-1]
            units = self.file_units(offset)
            if int(units["physical_offset"][0]) >= process_offset:
                self.files.pop()
                if path is not None:
                    self.files_deleted.append(path)
                continue
            stop = ~bcq.valid_mask(units) | (units["physical_offset"] >= process_offset)
            stop[0] = False
            n = int(np.flatnonzero(stop)[0]) if stop.any() else len(units)
            self.max_physical = int(units["physical_offset"][n - 1])
            self.end = offset + n * UNIT
            break
        else:
            self.end = 0
        self.units_cut += max(0, (before - self.end) // UNIT)
        if before > self.end:           # every file read above is in the cache: the units cut, as they were
            self.cut_units = np.concatenate([bcq.decode_units(self.unit_bytes(self.end, before)), self.cut_units])

    def bounds(self, log_min: int) -> None:
        """Step 4."""
        self.min_offset, self.max_offset = self._revise(log_min)


def load_batch_queues(files: StoreMap, file_size: int, log_min: int) -> list[BatchQueueRecovery]:
    """Every queue under ``batchconsumequeue/`` through step 1, in (topic, queue id) order."""
    out = []
    for topic, queue_id, qdir in files.batch_queue_dirs():
        q = BatchQueueRecovery(topic, queue_id, file_size, [(p, o) for p, o in StoreMap.queue_files(qdir)])
        q.recover(log_min)
        out.append(q)
    return sorted(out, key=lambda q: q.key)
