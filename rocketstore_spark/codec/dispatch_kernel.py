"""RocketMQ's dispatch rules, compiled: from record spans to ConsumeQueue selections and IndexFile key hashes,
with no strings built (docs/format/rocketmq-dispatch.md, docs/format/indexfile.md "Which keys are indexed").

The one implementation of the rules; ``dispatch`` is its Arrow API (verify, tests) and
``DispatchDecoder`` its CommitLog API (the rebuilds). Rules:

* record types (``commitlog.TRANSACTION_TYPES``, index = (SYSFLAG & 0xC) >> 2): NOT_TYPE and COMMIT get a
  ConsumeQueue entry, PREPARED and ROLLBACK none (``CommitLogDispatcherBuildConsumeQueue``); every type but
  ROLLBACK is indexed (``IndexService.buildIndex`` returns early for ROLLBACK only);
* keys of an indexed record, in put order: ``topic#UNIQ_KEY`` (when present), ``topic#KEY`` for each KEYS
  piece (split on single spaces, empty pieces dropped: ``properties.property_columns`` splits them), and from
  5.4.0 ``topic#T#TAGS`` for a non-empty TAGS (the whole value);
* a key's IndexFile hash is abs(``String.hashCode``) with Integer.MIN_VALUE -> 0 (``javahash``).

``String.hashCode`` is a polynomial over UTF-16 code units, so hash(prefix + suffix) = hash(prefix) *
31^units(suffix) + hash(suffix) (mod 2^32): the topic is hashed once per record and each suffix once, straight
from the UTF-8 bytes (``javahash.java_hash_span``: malformed input as Java's decoder replaces it), never
concatenated. Pure and compiled (numba, GIL released); runs wherever called (driver, executors, CLI).
"""
from __future__ import annotations

import dataclasses

import numba
import numpy as np

from rocketstore_spark.codec import native, properties
from rocketstore_spark.codec.audit import AuditDecoder
from rocketstore_spark.codec.commitlog import TRANSACTION_MASK, TRANSACTION_TYPES, HeaderColumns, Stop
from rocketstore_spark.codec.decoder import Decoded, RecordDecoder
from rocketstore_spark.codec.lmq import lmq_entries
from rocketstore_spark.codec.javahash import _code_point, index_hash_from_java, java_hash_span
from rocketstore_spark.codec.native import PREFETCH_AHEAD, prefetch
from rocketstore_spark.codec.record_schema import Family, wanted

QUEUED_TYPES = ("NOT_TYPE", "COMMIT")           # PREPARED and ROLLBACK records get no ConsumeQueue entry
UNINDEXED_TYPES = ("ROLLBACK",)                 # buildIndex returns early for ROLLBACK only
KEY_SEPARATOR = "#"
TAGS_KEY_SEPARATOR = "#T#"
# per transaction type index ((SYSFLAG & 0xC) >> 2): is it queued, is it indexed
QUEUED = np.array([t in QUEUED_TYPES for t in TRANSACTION_TYPES], dtype=np.bool_)
INDEXED = np.array([t not in UNINDEXED_TYPES for t in TRANSACTION_TYPES], dtype=np.bool_)
# what an IndexFile key is made of (``index_keys``' kinds)
KIND_UNIQ_KEY = 0
KIND_KEY = 1
KIND_TAGS = 2
_MASK32 = np.int64(0xFFFFFFFF)
_HASH_SEPARATOR = np.int64(ord(KEY_SEPARATOR))
_TAGS_SEPARATOR = np.frombuffer(TAGS_KEY_SEPARATOR.encode(), dtype=np.uint8).copy()


@numba.njit(cache=True, nogil=True, inline="always")
def _pow31(n):
    """31^n mod 2^32."""
    result, base = np.int64(1), np.int64(31)
    while n > 0:
        if n & 1:
            result = (result * base) & _MASK32
        base = (base * base) & _MASK32
        n >>= 1
    return result


@numba.njit(cache=True, nogil=True)
def utf16_units(buf, start, length):
    """How many UTF-16 code units ``new String(buf[start:start+length], UTF_8)`` has (decoded as
    ``javahash`` decodes: supplementary characters are two units, a malformed subpart one U+FFFD)."""
    units = 0
    i, end = start, start + length
    while i < end:
        cp, n = _code_point(buf, i, end)
        units += 2 if cp >= 0x10000 else 1
        i += n
    return units


@numba.njit(cache=True, nogil=True, inline="always")
def _append(prefix, data, start, length, ascii):
    """hash(prefix string + the UTF-8 string data[start:start+length]) from hash(prefix), in [0, 2^32)."""
    if ascii:                   # one code unit per byte: the polynomial straight over the bytes
        h = prefix
        for i in range(start, start + length):
            h = (31 * h + data[i]) & _MASK32
        return h
    return (prefix * _pow31(utf16_units(data, start, length))
            + (np.int64(java_hash_span(data, start, length)) & _MASK32)) & _MASK32


@numba.njit(cache=True, nogil=True, inline="always")
def _index_hash(h):
    """The IndexFile hash of a hashCode kept in [0, 2^32)."""
    return index_hash_from_java(np.int32(h - (1 << 32) if h >= (1 << 31) else h))


@numba.njit(cache=True, nogil=True)
def index_keys(indexed, topic_hash, uniq_data, uniq_offsets, uniq_valid, keys_data, keys_offsets, keys_list_offsets,
               tags_data, tags_offsets, tags_valid, index_tags, ascii):
    """Every IndexFile key of n records in put order (records in the given order; per record UNIQ_KEY, the
    KEYS pieces, then with ``index_tags`` the TAGS key): (record row, kind (KIND_*), index hash) arrays.

    ``indexed``: which records put keys; ``topic_hash``: each record's topic's hashCode (``local_topics``).
    UNIQ_KEY and TAGS are Arrow-layout strings (offsets + data, null where not valid); KEYS a list of strings
    (list offsets into ``keys_offsets``). ``ascii``: every suffix byte is below 0x80 (units = bytes, no decoding)."""
    # no reference counting in the loop (native.unowned): the inputs outlive the call
    uniq_data, keys_data, tags_data = native.unowned(uniq_data), native.unowned(keys_data), native.unowned(tags_data)
    n = indexed.shape[0]
    cap = 0
    for r in range(n):
        if indexed[r]:
            cap += 2 + keys_list_offsets[r + 1] - keys_list_offsets[r]
    rows = np.empty(cap, dtype=np.int64)
    kinds = np.empty(cap, dtype=np.int8)
    hashes = np.empty(cap, dtype=np.int32)
    k = 0
    for r in range(n):
        if not indexed[r]:
            continue
        first = keys_list_offsets[r]
        last = keys_list_offsets[r + 1]
        has_uniq = uniq_valid[r]
        has_tags = index_tags and tags_valid[r] and tags_offsets[r + 1] > tags_offsets[r]
        if not (has_uniq or has_tags or last > first):
            continue
        topic = np.int64(topic_hash[r]) & _MASK32
        keyed = (topic * 31 + _HASH_SEPARATOR) & _MASK32                  # hash("topic#")
        if has_uniq:
            rows[k], kinds[k] = r, KIND_UNIQ_KEY
            hashes[k] = _index_hash(_append(keyed, uniq_data, uniq_offsets[r], uniq_offsets[r + 1] - uniq_offsets[r],
                                            ascii))
            k += 1
        for p in range(first, last):
            rows[k], kinds[k] = r, KIND_KEY
            hashes[k] = _index_hash(_append(keyed, keys_data, keys_offsets[p], keys_offsets[p + 1] - keys_offsets[p],
                                            ascii))
            k += 1
        if has_tags:
            tagged = _append(topic, _TAGS_SEPARATOR, 0, 3, True)           # hash("topic#T#")
            rows[k], kinds[k] = r, KIND_TAGS
            hashes[k] = _index_hash(_append(tagged, tags_data, tags_offsets[r], tags_offsets[r + 1] - tags_offsets[r],
                                            ascii))
            k += 1
    return rows[:k], kinds[:k], hashes[:k]


@numba.njit(cache=True, nogil=True)
def local_topics(data, topic_pos, topic_len):
    """Distinct topics of n records by their bytes (topic r is data[topic_pos[r]:][:topic_len[r]]): (per record
    the index of its topic among the distinct ones, the record row where each distinct topic first occurs,
    each distinct topic's Java hashCode). An open-addressing table keyed on length and first and last bytes,
    confirmed byte by byte; the hashCode is computed once per distinct topic."""
    data = native.unowned(data)           # no reference counting in the loop (native.unowned)
    n = topic_pos.shape[0]
    size = 64
    while size < 2 * n:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)           # slot -> distinct topic index
    firsts = np.empty(n, dtype=np.int64)
    hashes = np.empty(n, dtype=np.int32)
    ids = np.empty(n, dtype=np.int32)
    distinct = 0
    last_pos, last_len, last_id = np.int64(-1), np.int64(-1), np.int32(-1)
    for r in range(n):
        if r + PREFETCH_AHEAD < n:         # topics lie a record apart: overlap the next ones' misses with this one
            prefetch(data, topic_pos[r + PREFETCH_AHEAD])
        p, m = topic_pos[r], topic_len[r]
        if last_id >= 0 and m == last_len and _same(data, p, last_pos, m):          # runs of one topic
            ids[r] = last_id
            continue
        probe = m * np.int64(0x9E3779B1)
        if m > 0:
            probe ^= np.int64(data[p]) * 31 + np.int64(data[p + m - 1]) * 0x10001 + np.int64(data[p + m // 2]) * 257
        slot = (probe ^ (probe >> 16)) & (size - 1)
        while True:
            t = table[slot]
            if t < 0:
                table[slot] = distinct
                firsts[distinct] = r
                hashes[distinct] = java_hash_span(data, p, m)
                t = distinct
                distinct += 1
                break
            f = firsts[t]
            if topic_len[f] == m and _same(data, p, topic_pos[f], m):
                break
            slot = (slot + 1) & (size - 1)
        ids[r] = t
        last_pos, last_len, last_id = p, m, np.int32(t)
    return ids, firsts[:distinct], hashes[:distinct]


@numba.njit(cache=True, nogil=True, inline="always")
def _same(data, a, b, length):
    for i in range(length):
        if data[a + i] != data[b + i]:
            return False
    return True


# the header fields and property outputs a dispatch needs
DISPATCH_FIELDS = ("total_size", "queue_id", "queue_offset", "sys_flag", "store_timestamp", "topic_pos",
                   "topic_len", "props_pos", "props_len")
_WANT = wanted(Family.PROPERTY, ("tags", "keys", "uniq_key", "tags_code"))


LMQ_OFF, LMQ_MULTI, LMQ_ON = 0, 1, 2          # DispatchDecoder's lmq: none, enableMultiDispatch, + enableLmq


class DispatchWindow:
    """What the records of one decoded window dispatch (numpy arrays, the window no longer needed):

    per record, in CommitLog order: ``physical_offset``, ``size``, ``queue_id``, ``queue_offset``,
    ``tags_code``, ``topic`` (an index into the decoder's ``topics``), ``queued`` (gets a ConsumeQueue entry);
    per IndexFile key, in put order (empty without index keys): ``key_hash``, ``key_physical_offset``,
    ``key_store_timestamp`` (ms), ``key_kind`` (KIND_*) and ``key_order`` (its place among its record's keys);
    per LMQ multi-dispatch entry (None unless the decoder dispatches LMQ, ``codec.lmq``), in dispatch order:
    ``lmq_row`` (its record's row), ``lmq_topic`` (an index into the decoder's ``topics``), ``lmq_queue_id``,
    ``lmq_queue_offset``; and the records whose multi-dispatch RocketMQ passes over in part or whole:
    ``lmq_skip_row``, ``lmq_skip_code`` (``lmq.SKIP_*``)."""

    __slots__ = ("physical_offset", "size", "queue_id", "queue_offset", "tags_code", "topic", "queued",
                 "key_hash", "key_physical_offset", "key_store_timestamp", "key_kind", "key_order",
                 "lmq_row", "lmq_topic", "lmq_queue_id", "lmq_queue_offset", "lmq_skip_row", "lmq_skip_code")

    def __init__(self, **arrays):
        self.lmq_row = self.lmq_topic = self.lmq_queue_id = self.lmq_queue_offset = None
        self.lmq_skip_row = self.lmq_skip_code = None
        for name, value in arrays.items():
            setattr(self, name, value)

    @property
    def num_rows(self) -> int:
        return len(self.physical_offset)

    def entries(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Every ConsumeQueue entry the window's records dispatch, in dispatch order (a record's own entry, then
        its LMQ multi-dispatch entries): (record row, topic, queue id, QUEUEOFFSET); the entry's physical
        offset, size and tagsCode are its record's."""
        q = np.flatnonzero(self.queued)
        if self.lmq_row is None or not len(self.lmq_row):
            return q, self.topic[q], self.queue_id[q], self.queue_offset[q]
        rows = np.r_[q, self.lmq_row]
        order = np.lexsort((np.arange(len(rows)), rows))
        return (rows[order], np.r_[self.topic[q], self.lmq_topic][order],
                np.r_[self.queue_id[q], self.lmq_queue_id][order], np.r_[self.queue_offset[q], self.lmq_queue_offset][order])


class DispatchDecoder(RecordDecoder):
    """A ``RecordDecoder`` whose batches are ``DispatchWindow``s instead of Arrow batches: the same walk, stops,
    misplaced-record and damage handling (``store.segment_reader`` drives it unchanged), then the header fields
    of ``DISPATCH_FIELDS``, one ``properties.property_columns`` pass (TAGS, KEYS, UNIQ_KEY, tagsCode with
    SCHEDULE_TOPIC_XXXX delivery times) and the compiled rules. ``index``: also compute IndexFile keys
    (``index_tags``: 5.4.0 and later); ``tags_code=False`` without ``index``: no property parsed, tagsCodes 0
    (where only the placement of entries matters: the recovery report). Topics are numbered in order of first appearance across every window
    this decoder sees (``topics``: their names, malformed UTF-8 replaced as the Arrow decoder does;
    ``topic_hashes``: their Java hashCodes), so a queue keeps its number from window to window. Runs where the
    CommitLog is read (driver or executor). ``lmq``: the store dispatches LMQ (``LMQ_OFF``, ``LMQ_MULTI``:
    enableMultiDispatch, ``LMQ_ON``: and enableLmq): each window also carries its multi-dispatch entries
    (``codec.lmq``), their queue names numbered with the topics. ``batch_topics``: the topics whose queues are
    BatchConsumeQueues (5.x ``queue.type=BatchCQ``): their records get no ConsumeQueue entry (``queued`` false;
    ``rocketmq.batch_queues`` computes their units), keys in the IndexFile as any record's. ``audit``: a
    ``codec.audit.AuditDecoder`` whose checks (BODYCRC, ``__CRC32#``, store times) this decoder's walk makes on
    every record it walks, a tile at a time right behind the walk (``codec.audit.audit_tiles``): the decoded
    batches carry the BODYCRC failures (``Decoded.crc_failures``, the reader reports them) and the audit's
    ``state`` fills as its own decode would fill it, so one pass gives a segment's dispatch and its CRC scan
    (``store.spill.scan_range``)."""

    def __init__(self, message_delay_level: str = properties.DEFAULT_DELAY_LEVELS, *, index: bool = True,
                 index_tags: bool = True, batch_rows: int = 1 << 14, tags_code: bool = True, lmq: int = 0,
                 batch_topics: frozenset[str] = frozenset(), audit: AuditDecoder | None = None):
        super().__init__((), message_delay_level=message_delay_level, batch_rows=batch_rows, batch_bytes=1 << 30,
                         lanes=1, extra_fields=DISPATCH_FIELDS, fixed_width=False)
        self.audit = audit
        self.index, self.index_tags = index, index_tags
        # without index keys and tagsCodes (placing entries needs neither) no property is parsed: the costly part
        self.properties = index or tags_code or bool(lmq)
        self.lmq = lmq
        self.topics: list[str] = []
        self.topic_hashes: list[int] = []          # each topic's Java hashCode
        self._topic_numbers: dict[str, int] = {}
        self.batch_topics = frozenset(batch_topics)
        self._batch: list[bool] = []               # per topic number: a BatchCQ topic

    @property
    def reads_every_byte(self) -> bool:
        return super().reads_every_byte or (self.audit is not None and self.audit.reads_every_byte)

    def reset(self) -> None:
        super().reset()
        if self.audit is not None:
            self.audit.reset()

    def decode(self, window: np.ndarray, window_position: int, file_size: int, base_offset: int,
               start: int, limit: int) -> Decoded:
        """``RecordDecoder.decode``; with ``audit``, its walk is ``AuditDecoder.audit_tiles``."""
        if self.audit is None:
            return super().decode(window, window_position, file_size, base_offset, start, limit)
        positions = np.empty(self.batch_rows, dtype=np.int64)
        header = HeaderColumns(self.batch_rows, self.fields)
        count, next_pos, stop, crc_failures = self.audit.audit_tiles(
            window, window_position, file_size, base_offset, start, limit, self.batch_rows, self.batch_bytes,
            positions, self.stream, header, self.frame)
        header.cut(count)
        if not count:
            return Decoded(None, positions[:0], None, next_pos, Stop(stop))
        decoded = self._finish(window, window_position, base_offset, positions[:count], header, None, None, next_pos,
                               Stop(stop))
        # the audit's verdicts: of placed records only, as _finish's own would be
        return dataclasses.replace(decoded, crc_failures=crc_failures) if len(crc_failures) else decoded

    def output(self, buf, buf_file_pos, base_offset, positions, h, crc_verdicts=None, bodies=None) -> DispatchWindow:
        n = h.n
        if self.properties:
            (_, _, _, _, _, tags_offsets, tags_data, tags_valid, uniq_offsets, uniq_data, uniq_valid,
             keys_list_offsets, keys_offsets, keys_data, tags_code, _, _, ascii) = properties.property_columns(
                buf, h.props_pos, h.props_len, h.topic_pos, h.topic_len, h.store_timestamp, self.delay_ms, n, _WANT)
        else:
            tags_code = np.zeros(n, np.int64)
        kind = (h.sys_flag & TRANSACTION_MASK) >> 2
        physical = base_offset + positions
        local, firsts, topic_hashes = local_topics(buf, h.topic_pos, h.topic_len)
        numbers = np.array([self._topic_number(buf, h.topic_pos[f], h.topic_len[f], topic_hashes[k])
                            for k, f in enumerate(firsts.tolist())], dtype=np.int32)
        window = DispatchWindow(physical_offset=physical, size=h.total_size, queue_id=h.queue_id,
                                queue_offset=h.queue_offset, tags_code=tags_code, topic=numbers[local],
                                queued=QUEUED[kind])
        if self.lmq:
            self._lmq(window, buf, h)
        if self.batch_topics and n:
            # a BatchCQ topic's record goes to its BatchConsumeQueue (ConsumeQueueStore.findOrCreateConsumeQueue)
            window.queued = window.queued & ~np.array(self._batch, dtype=bool)[window.topic]
        if self.index:
            rows, kinds, hashes = index_keys(INDEXED[kind], topic_hashes[local], uniq_data, uniq_offsets,
                                             uniq_valid, keys_data, keys_offsets, keys_list_offsets, tags_data,
                                             tags_offsets, tags_valid, self.index_tags, bool(ascii))
            window.key_hash, window.key_kind = hashes, kinds
            window.key_physical_offset, window.key_store_timestamp = physical[rows], h.store_timestamp[rows]
            window.key_order = key_order(rows)
        return window

    def _lmq(self, window: DispatchWindow, buf, h) -> None:
        rows, name_pos, name_len, offsets, qids, skip_rows, skip_codes = lmq_entries(
            buf, h.props_pos, h.props_len, h.topic_pos, h.topic_len, h.queue_id, window.queued, self.lmq == LMQ_ON)
        local, firsts, hashes = local_topics(buf, name_pos, name_len)
        numbers = np.array([self._topic_number(buf, name_pos[f], name_len[f], hashes[k])
                            for k, f in enumerate(firsts.tolist())], dtype=np.int32)
        window.lmq_row, window.lmq_topic, window.lmq_queue_id, window.lmq_queue_offset = (
            rows, numbers[local] if len(rows) else np.zeros(0, np.int32), qids, offsets)
        window.lmq_skip_row, window.lmq_skip_code = skip_rows, skip_codes

    def _topic_number(self, buf, pos: int, length: int, java_hash: int) -> int:
        name = bytes(buf[pos:pos + length]).decode("utf-8", "replace")
        number = self._topic_numbers.get(name)
        if number is None:
            number = self._topic_numbers[name] = len(self.topics)
            self.topics.append(name)
            self.topic_hashes.append(int(java_hash))
            self._batch.append(name in self.batch_topics)
        return number


def key_order(rows: np.ndarray) -> np.ndarray:
    """Each key's place among its record's keys, from the record row of every key (grouped by record)."""
    if not len(rows):
        return np.zeros(0, np.int64)
    starts = np.r_[0, np.flatnonzero(rows[1:] != rows[:-1]) + 1]
    lengths = np.diff(np.r_[starts, len(rows)])
    return np.arange(len(rows)) - np.repeat(starts, lengths)
