"""The rows of one store file, as ``rocketstore dump`` prints them (driver, CLI; in-process, read-only): the
records of one CommitLog segment, the entries of one ConsumeQueue file, or the entries of one IndexFile —
like Kafka's dump-log tool.

The kind of file is told by where it lies (``commitlog/NAME``, ``consumequeue/TOPIC/QUEUE/NAME``,
``index/NAME``), or given. ``start``: the physical offset (segments), queue offset (ConsumeQueue) or entry
number (IndexFile) to start at; ``count``: how many (0: all).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.lookup.query import encode_body
from rocketstore_spark.store.indexes import iter_entries, read_index_file
from rocketstore_spark.store.layout import DLEDGER_PREFIX, entry_frame, parse_offset_name
from rocketstore_spark.store.segment_reader import SegmentReader, record_start

KINDS = ("commitlog", "consumequeue", "index")
SEGMENT_COLUMNS = ("physical_offset", "file_position", "total_size", "topic", "queue_id", "queue_offset",
                   "store_timestamp", "transaction_type", "tags", "keys", "uniq_key", "msg_id", "body_length",
                   "body_crc_ok", "properties")


@dataclass
class Dump:
    kind: str                                            # one of KINDS
    rows: list[dict]
    notes: list[str] = field(default_factory=list)      # for the reader, beside the rows: an IndexFile's header,
                                                         # the findings of a segment read to its end


def file_kind(path: str) -> str:
    """The kind of store file ``path`` is, from the directories it lies in."""
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if len(parts) >= 2 and parts[-2] == "commitlog" or entry_frame(path):     # a DLedger data file: its records
        return "commitlog"
    if len(parts) >= 3 and parts[-3].startswith(DLEDGER_PREFIX):
        raise ValueError(f"{path}: a DLedger {parts[-2]} file; only its data/ files (their records) are dumped")
    if len(parts) >= 4 and parts[-4] == "consumequeue":
        return "consumequeue"
    if len(parts) >= 2 and parts[-2] == "index":
        return "index"
    raise ValueError(f"{path}: not under commitlog/, consumequeue/TOPIC/QUEUE/ or index/: give --kind")


def dump_file(path: str, kind: str | None = None, start: int | None = None, count: int = 20,
              body: str = "none") -> Dump:
    """The rows of the file at ``path`` (``kind``: default from the path); ``body``: a segment's bodies
    (``none``, or ``query.encode_body``'s ``text`` or ``hex``)."""
    kind = kind or file_kind(path)
    return {"commitlog": segment_rows, "consumequeue": consumequeue_rows, "index": index_rows}[kind](
        path, start, count, body)


def segment_rows(path: str, start: int | None = None, count: int = 20, body: str = "none") -> Dump:
    """The records of one CommitLog segment from physical offset ``start`` (default: its base)."""
    base = parse_offset_name(os.path.basename(path))
    if base is None:
        raise ValueError(f"{path}: a CommitLog segment is named by its 20-digit base offset")
    columns = SEGMENT_COLUMNS + (("body",) if body != "none" else ())
    decoder = RecordDecoder([c for c in columns if c not in ("physical_offset", "file_position")], check_crc=False)
    position = max(0, (start or base) - base)
    out = Dump("commitlog", [])
    reader = SegmentReader(path, base, decoder, start=record_start(path, position), followed=True)
    for decoded in reader:
        t = decoded.batch.to_pylist()
        for pos, rec in zip(decoded.positions.tolist(), t):
            row = {"physical_offset": base + pos, "file_position": pos, **rec}
            row["properties"] = dict(row["properties"] or [])
            if body != "none":
                row["body"] = encode_body(row.pop("body"), body)
            out.rows.append(row)
            if count and len(out.rows) >= count:
                return out
    out.notes = [f.render() for f in reader.result.findings]
    return out


def consumequeue_rows(path: str, start: int | None = None, count: int = 20, body: str = "none") -> Dump:
    """The entries of one ConsumeQueue file from queue offset ``start`` (default: its first)."""
    first = parse_offset_name(os.path.basename(path))
    if first is None:
        raise ValueError(f"{path}: a ConsumeQueue file is named by its 20-digit queue byte offset")
    with open(path, "rb") as f:
        entries = consumequeue.decode_entries(f.read())
    n = consumequeue.written_count(entries)
    skip = max(0, (start if start is not None else first // 20) - first // 20)
    stop = n if not count else min(n, skip + count)
    filler = consumequeue.is_filler(entries)
    return Dump("consumequeue", [{"queue_offset": first // 20 + i, "file_position": i * 20,
                                  "physical_offset": int(entries["commit_log_offset"][i]),
                                  "size": int(entries["size"][i]), "tags_code": int(entries["tags_code"][i]),
                                  "filler": bool(filler[i])} for i in range(skip, stop)])


def index_rows(path: str, start: int | None = None, count: int = 20, body: str = "none") -> Dump:
    """The entries of one IndexFile from entry ``start`` (default: 1, the first); none where its geometry
    cannot be told (the note says why)."""
    view = read_index_file(path)
    out = Dump("index", [], [f"header: {view.header}; geometry: {view.geometry} "
                             f"({view.geometry_source or view.problem})"])
    if view.geometry is None:
        return out
    first = max(1, start or 1)
    for index0, entries in iter_entries(view):
        for k in range(len(entries)):
            i = index0 + k
            if i < first:
                continue
            e = entries[k]
            out.rows.append({"entry": i, "key_hash": int(e["key_hash"]),
                             "slot": int(e["key_hash"]) % view.geometry.hash_slot_num,
                             "physical_offset": int(e["phy_offset"]), "time_diff_s": int(e["time_diff"]),
                             "prev_index": int(e["prev_index"])})
            if count and len(out.rows) >= count:
                return out
    return out
