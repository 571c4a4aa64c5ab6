"""Finding messages in a store without a broker (CLI, notebooks; in-process, read-only): by key or UNIQ_KEY
through the IndexFiles (like ``mqadmin queryMsgByKey``, without its result limit), by broker message id or
physical offset directly, by topic, queue and queue offset through the ConsumeQueue, or by scanning a topic's
records in a time range.

Every hit is the record decoded at its physical offset and checked: an index entry only names a hash, so a
record is returned for a key only if it carries the key (RocketMQ's clients filter the same way).
"""
from __future__ import annotations

import base64
import bisect
import datetime as dt
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from rocketstore_spark.codec import indexfile
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.lookup.queue_files import QueueFiles, offset_by_time
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.consumequeue import queue_bounds
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.indexes import read_index_file, store_slot_count
from rocketstore_spark.store.segment_reader import SegmentReader, record_start

COLUMNS = ("topic", "queue_id", "queue_offset", "store_timestamp", "born_timestamp", "tags", "keys", "uniq_key",
           "msg_id", "transaction_type", "body_length", "body_crc_ok", "properties", "born_host", "store_host")


@dataclass(frozen=True)
class TimeRange:
    since_ms: int | None = None
    until_ms: int | None = None

    def __contains__(self, ms: int) -> bool:
        return (self.since_ms is None or ms >= self.since_ms) and (self.until_ms is None or ms <= self.until_ms)


def parse_time(text: str | None) -> int | None:
    """An ISO 8601 time (UTC if it has no zone) as epoch milliseconds."""
    if text is None:
        return None
    t = dt.datetime.fromisoformat(text)
    return int((t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)).timestamp() * 1000)


def record_at(layout: StoreLayout, physical_offset: int, body: bool = False) -> dict | None:
    """The record starting at ``physical_offset`` (every column of COLUMNS, the body on request), or None when
    no record with that stored PHYSICALOFFSET starts there."""
    bases = [s.base_offset for s in layout.segments]
    k = bisect.bisect_right(bases, physical_offset) - 1
    if k < 0 or physical_offset - bases[k] >= layout.segments[k].size:
        return None
    seg = layout.segments[k]
    decoder = RecordDecoder(COLUMNS + (("body",) if body else ()), batch_rows=1)
    start = record_start(seg.path, physical_offset - seg.base_offset)
    for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start=start, end=start + 1):
        if decoded.n and seg.base_offset + int(decoded.positions[0]) == physical_offset:
            row = decoded.batch.to_pylist()[0]
            row["properties"] = dict(row["properties"] or [])
            return {"physical_offset": physical_offset, "segment": seg.path.rsplit("/", 1)[-1],
                    "file_position": int(decoded.positions[0]), **row}
        return None
    return None


def by_offset(layout: StoreLayout, physical_offset: int, body: bool = False) -> list[dict]:
    r = record_at(layout, physical_offset, body)
    return [r] if r else []


def by_msg_id(layout: StoreLayout, msg_id: str, body: bool = False) -> list[dict]:
    """The broker message id is the store host's address and port, then the physical offset (16 hex digits)."""
    if len(msg_id) not in (32, 56) or any(c not in "0123456789abcdefABCDEF" for c in msg_id):
        raise ValueError(f"message id {msg_id!r}: expected 32 (IPv4) or 56 (IPv6) hex digits")
    return [r for r in by_offset(layout, int(msg_id[-16:], 16), body) if r["msg_id"].upper() == msg_id.upper()]


def by_queue_offset(layout: StoreLayout, topic: str, queue_id: int, queue_offset: int, count: int = 1,
                    body: bool = False) -> list[dict]:
    """``count`` records of a queue from ``queue_offset``, through its ConsumeQueue."""
    queue_dir = next((d for t, q, d in layout.files.queue_dirs() if t == topic and q == queue_id), None)
    if queue_dir is None:
        return []
    files, out = QueueFiles(queue_dir), []
    for q in range(queue_offset, queue_offset + count):
        e = files.entry(q)
        if e is None:
            break
        r = record_at(layout, e[0], body)
        if r is not None:
            out.append(r)
    return out


def by_key(layout: StoreLayout, topic: str, key: str, window: TimeRange = TimeRange(), body: bool = False,
           hash_slot_num: int | None = None, uniq: bool = False) -> list[dict]:
    """Records of ``topic`` carrying ``key`` among their KEYS (``uniq``: as UNIQ_KEY), found through every
    IndexFile's chain for ``topic#key``, newest file first, every hit checked against the record."""
    h = int(dispatch.string_index_hashes(pa.array([f"{topic}{dispatch.KEY_SEPARATOR}{key}"]))[0])
    paths = [str(p) for p in layout.files.index_files()]
    slots = hash_slot_num or store_slot_count(paths)
    seen, out = set(), []
    for path in reversed(paths):
        view = read_index_file(path, slots)
        if view.geometry is None or not view.entry_count:
            continue
        for phy in _chain(view, h, window):
            if phy in seen:
                continue
            seen.add(phy)
            r = record_at(layout, phy, body)
            if r is None or r["topic"] != topic:
                continue
            if (r["uniq_key"] == key) if uniq else (key in (r["keys"] or [])):
                out.append(r)
    return sorted(out, key=lambda r: r["physical_offset"])


def _chain(view, key_hash: int, window: TimeRange) -> list[int]:
    """Physical offsets of the entries in ``key_hash``'s slot chain with that hash and a time in the window."""
    g, n = view.geometry, view.entry_count
    data = np.memmap(view.path, dtype=np.uint8, mode="r")
    try:
        slot_pos = indexfile.HEADER_SIZE + indexfile.SLOT_SIZE * (key_hash % g.hash_slot_num)
        i = int.from_bytes(bytes(data[slot_pos:slot_pos + 4]), "big", signed=True)
        begin = view.header["begin_timestamp"]
        out, steps = [], 0
        while 0 < i <= n and steps <= n:
            at = g.entries_start + indexfile.ENTRY_SIZE * i
            e = np.frombuffer(bytes(data[at:at + indexfile.ENTRY_SIZE]), dtype=indexfile.ENTRY_DTYPE)[0]
            if int(e["key_hash"]) == key_hash and begin + int(e["time_diff"]) * 1000 in window:
                out.append(int(e["phy_offset"]))
            prev = int(e["prev_index"])
            if prev >= i:               # a damaged chain: never loop
                break
            i, steps = prev, steps + 1
        return out
    finally:
        del data


def by_topic(layout: StoreLayout, topic: str, window: TimeRange = TimeRange(), limit: int = 1000,
             body: bool = False) -> list[dict]:
    """The first ``limit`` records of ``topic`` stored in the window, in CommitLog order: each queue's
    ConsumeQueue is searched by time (RocketMQ's getOffsetInQueueByTime) and read from there, at most
    ``limit`` per queue, then the queues are merged."""
    out = []
    log_min = layout.segments[0].base_offset if layout.segments else 0
    for t, q, d in layout.files.queue_dirs():
        if t != topic:
            continue
        lo, hi = queue_bounds(str(d), log_min)
        files = QueueFiles(d)
        start = offset_by_time(files, layout, lo, hi, window.since_ms) if window.since_ms is not None else lo
        taken = 0
        for qo in range(start, hi):
            e = files.entry(qo)
            r = record_at(layout, e[0], body) if e else None
            if r is None:
                continue
            ms = int(r["store_timestamp"].timestamp() * 1000) if r["store_timestamp"] else 0
            if window.until_ms is not None and ms > window.until_ms:
                break
            out.append(r)
            taken += 1
            if taken >= limit:
                break
    return sorted(out, key=lambda r: r["physical_offset"])[:limit]


BODY_ENCODINGS = ("text", "hex", "base64")


def encode_body(raw: bytes, how: str) -> str:
    """A body as text: ``hex``, ``base64``, or ``text`` (UTF-8, undecodable bytes replaced)."""
    if how == "hex":
        return raw.hex()
    if how == "base64":
        return base64.b64encode(raw).decode()
    return raw.decode("utf-8", "replace")


def find(layout: StoreLayout, *, topic: str | None = None, key: str | None = None, uniq_key: str | None = None,
         msg_id: str | None = None, physical_offset: int | None = None, queue_id: int | None = None,
         queue_offset: int | None = None, count: int = 1, window: TimeRange = TimeRange(), limit: int = 1000,
         body: bool = False) -> list[dict]:
    """The records of one store found the one way given, the first of: ``key`` or ``uniq_key`` (with
    ``topic``: ``by_key``), ``msg_id``, ``physical_offset``, ``queue_offset`` (with ``topic`` and
    ``queue_id``: ``count`` records from there), else ``topic`` alone (``by_topic``, at most ``limit``). The
    window applies to keys and topics. A store whose engine we do not read refuses (``store.engines``)."""
    layout.refuse(Work.READ_COMMITLOG)
    layout.refuse(Work.READ_INDEX if key or uniq_key else Work.READ_QUEUES)
    if key or uniq_key:
        return by_key(layout, topic, key or uniq_key, window, body, uniq=uniq_key is not None)
    if msg_id:
        return by_msg_id(layout, msg_id, body)
    if physical_offset is not None:
        return by_offset(layout, physical_offset, body)
    if queue_offset is not None:
        return by_queue_offset(layout, topic, queue_id, queue_offset, count, body)
    return by_topic(layout, topic, window, limit, body)


def find_in_stores(paths, *, body: str = "none", **where) -> list[dict]:
    """``find`` (``where``: its keywords) in every store found under each of ``paths``, each hit with its
    ``store`` first; ``body``: ``none`` (left out), or the encoding of ``encode_body``."""
    found = []
    for path in paths:
        for layout in discover(path):
            for hit in find(layout, body=body != "none", **where):
                if body != "none":
                    hit["body"] = encode_body(hit.pop("body"), body)
                found.append({"store": layout.name, **hit})
    return found
