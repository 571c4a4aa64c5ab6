"""Reading one topic's records (optionally one queue's) through its ConsumeQueues instead of decoding every
record of the CommitLog: the fast path of ``lookup.export`` (CLI, in-process; read-only; memory bounded by a
window of the log and a chunk of each of the topic's queues).

Exactness: the records returned for a segment are the ones a full scan of it returns, in the same order, so
the caller's filters give the same rows. Per store (``plan``):

* ``rocketmq.coverage`` finds, per segment, whether the claims of all queues of all topics tile it from its
  first byte to some ``covered`` end. Where they do, every record of [0, covered) has an entry, so the
  topic's records there are exactly those its own queues name — provided each entry it names is checked:
  a valid record (``RecordDecoder.decode_at``: magic, lengths, stored PHYSICALOFFSET) of the entry's size,
  topic and queue id. [covered, end of file) — records dispatched by no queue yet (the lag after a crash),
  the BLANK, anything after it — is scanned as a full scan would.
* A segment that is not covered (a transactional half message in it, a queue file, directory or entry lost,
  dispatch lagging) is scanned whole.
* An entry that fails its check ends the queue read of its segment: the segment is scanned from the end of
  the last record returned (a record boundary the walk passes through) and the fallback is noted.
* The whole store is scanned, and the plan says why, when the slice names no topic, the store has no
  ConsumeQueues (or keeps them in an engine we do not read), the topic is a light message queue, or one of
  its queues' entries does not ascend in physical offset.

What is trusted without being read: the claims of other topics' entries (their records are not opened — that
is the saving). A record of another topic whose bytes no longer match its entry's size makes the full scan
resynchronise there; it lands on the next record start as the claims do unless the damage itself looks like
a record placed where it lies.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
import pyarrow.compute as pc

from rocketstore_spark.codec.decoder import Decoded, RecordDecoder
from rocketstore_spark.rocketmq.coverage import LMQ_PREFIX, QUEUE_CHUNK, Coverage, claims, coverage
from rocketstore_spark.store.discovery import Segment, StoreLayout
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.queues import read_queue
from rocketstore_spark.store.segment_reader import DEFAULT_MAX_RECORD, DEFAULT_WINDOW, map_window



@dataclass
class Plan:
    """How one store's records are read for a slice: through the ConsumeQueue (``covered``: per segment the
    file position up to which its queues account for every record, -1 where it is scanned) or by a scan
    (``covered`` None), and why. ``fallbacks``: segments whose queue read stopped at an entry that failed its
    check (filled as they are read)."""
    store: str
    reason: str
    covered: np.ndarray | None = None
    queue_dirs: list = field(default_factory=list)
    fallbacks: list = field(default_factory=list)

    @property
    def through_queues(self) -> bool:
        return self.covered is not None

    def describe(self) -> str:
        if not self.through_queues:
            return f"scanned: {self.reason}"
        scanned = int(np.count_nonzero(self.covered < 0))
        text = "read through the ConsumeQueue"
        if scanned:
            text += (f"; {scanned} of {len(self.covered)} segment(s) scanned (records without a ConsumeQueue entry "
                     "there: transactional half messages, dispatch lag, or queue files or entries lost or overwritten)")
        for segment, why in self.fallbacks:
            text += f"; segment {segment} scanned from where an entry failed its check ({why})"
        return text


def plan(layout: StoreLayout, topic: str | None, queue_id: int | None, cover: Coverage | None = None) -> Plan:
    """Whether and where ``layout``'s records of ``topic`` (and ``queue_id``) can be read through its queues.
    ``cover``: the store's ``coverage`` asked about ``topic`` among others, when several topics are read (one
    pass over the queue files for all); by default it is computed here."""
    if topic is None:
        return Plan(layout.name, "the slice names no topic")
    cq = layout.files.consumequeue_dir
    if cq is None or not cq.is_dir():
        return Plan(layout.name, "the store has no ConsumeQueues")
    if layout.refused(Work.READ_QUEUES):
        return Plan(layout.name, "its ConsumeQueues are kept by an engine this tool does not read")
    if topic.startswith(LMQ_PREFIX):
        return Plan(layout.name, "a light message queue's entries name other topics' records")
    cover = cover if cover is not None else coverage(layout, topic)
    backwards = [q for q in cover.backwards if q.rpartition("/")[0] == topic]
    if backwards:
        return Plan(layout.name, f"the entries of queue {', '.join(backwards)} do not ascend in physical offset")
    if not np.any(cover.covered >= 0):
        return Plan(layout.name, "no segment has a ConsumeQueue entry for every record (transactional half "
                                 "messages, dispatch lag, or queue files or entries lost or overwritten)")
    dirs = [(q, d) for name, q, d in layout.files.queue_dirs() if name == topic and queue_id in (None, q)]
    return Plan(layout.name, "", cover.covered, dirs)


class TopicClaims:
    """The entries of a topic's queues merged in physical-offset order, consumed a window at a time: each queue
    is read ``QUEUE_CHUNK`` entries at a time (its entries ascend: ``plan`` checked), so memory holds one chunk
    per queue and one window's entries, however many the topic has."""

    def __init__(self, queue_dirs):
        self._queues = [(q, read_queue(str(d), QUEUE_CHUNK), [np.zeros(0, np.int64), np.zeros(0, np.int64)])
                        for q, d in queue_dirs]

    def take(self, lower: int, upper: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(offsets, sizes, queue ids) of the entries in [lower, upper), ascending, each offset once; entries
        below ``lower`` are passed over."""
        parts = []
        for queue_id, chunks, held in self._queues:
            while True:
                if not len(held[0]):
                    chunk = next(chunks, None)
                    if chunk is None:
                        break
                    held[:] = claims(chunk.entries, chunk.fillers)
                    continue
                k = int(np.searchsorted(held[0], upper))
                offsets, sizes = held[0][:k], held[1][:k]
                keep = offsets >= lower
                if keep.any():
                    parts.append((offsets[keep], sizes[keep], np.full(int(keep.sum()), queue_id, dtype=np.int64)))
                held[:] = held[0][k:], held[1][k:]
                if len(held[0]):
                    break
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
        offsets, sizes, queues = (np.concatenate(column) for column in zip(*parts))
        order = np.argsort(offsets, kind="stable")
        offsets, sizes, queues = offsets[order], sizes[order], queues[order]
        once = np.ones(len(offsets), dtype=bool)
        once[1:] = offsets[1:] != offsets[:-1]                  # an offset two entries name is one record
        return offsets[once], sizes[once], queues[once]


class ClaimedRead:
    """The topic's records of [start, stop) of one covered segment, decoded at the offsets its entries name,
    a window at a time (windows holding none of them are never mapped). Iterating yields ``Decoded``; after
    it, ``resume`` is None when every entry checked out, else the file position to scan on from (the end of
    the last record yielded, or ``start``) and ``failure`` says why."""

    def __init__(self, segment: Segment, decoder: RecordDecoder, topic_claims: TopicClaims, topic: str,
                 start: int, stop: int, window: int = DEFAULT_WINDOW):
        self.segment, self.decoder, self.claims, self.topic = segment, decoder, topic_claims, topic
        self.start, self.stop, self.window = start, stop, window
        self.resume: int | None = start
        self.failure = ""

    def __iter__(self) -> Iterator[Decoded]:
        base = self.segment.base_offset
        fd = os.open(self.segment.path, os.O_RDONLY)
        try:
            file_size = os.fstat(fd).st_size
            position = self.start
            while position < self.stop:
                upper = min(position + self.window, self.stop)
                offsets, sizes, queues = self.claims.take(base + position, base + upper)
                position = upper
                if not len(offsets):
                    continue
                starts, ends = offsets - base, offsets - base + sizes
                if sizes.max() > DEFAULT_MAX_RECORD or ends.max() > file_size:
                    self.failure = "an entry's size runs past the segment or any record's"
                    return
                buf = map_window(fd, int(starts[0]), int(ends.max() - starts[0]))
                rows = self.decoder.batch_rows
                for a in range(0, len(starts), rows):
                    decoded = self.decoder.decode_at(buf, int(starts[0]), file_size, base, starts[a:a + rows])
                    self.failure = _mismatch(decoded, sizes[a:a + rows], queues[a:a + rows], self.topic)
                    if self.failure:
                        return
                    yield decoded
                    self.resume = int(decoded.next_position)
                buf = None                      # unmapped before the next window is mapped
            self.resume = None
        finally:
            os.close(fd)


def _mismatch(decoded: Decoded, sizes: np.ndarray, queues: np.ndarray, topic: str) -> str:
    """Why the records decoded at a run of entries do not match them ('' when they all do)."""
    if decoded.n != len(sizes):
        return "no valid record where an entry points"
    if not np.array_equal(decoded.header.total_size, sizes):
        return "an entry's size is not its record's"
    if not np.array_equal(decoded.header.queue_id, queues):
        return "an entry names a record of another queue"
    if not pc.all(pc.equal(decoded.columns["topic"], topic)).as_py():
        return "an entry names a record of another topic"
    return ""
