"""``rocketstore dump FILE``: the records of one CommitLog segment, the entries of one ConsumeQueue file, or
the header and entries of one IndexFile — like Kafka's dump-log tool; in-process, read-only.

The kind of file is told by where it lies (``commitlog/NAME``, ``consumequeue/TOPIC/QUEUE/NAME``,
``index/NAME``), or given with ``--kind``. ``--from``: the physical offset (segments), queue offset
(ConsumeQueue) or entry number (IndexFile) to start at; ``--count``: how many.
"""
from __future__ import annotations

import json
import os

import click
import numpy as np

from rocketstore_spark.cli.output import line, table

SEGMENT_COLUMNS = ("physical_offset", "file_position", "total_size", "topic", "queue_id", "queue_offset",
                   "store_timestamp", "transaction_type", "tags", "keys", "uniq_key", "msg_id", "body_length",
                   "body_crc_ok", "properties")


def file_kind(path: str) -> str:
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    if len(parts) >= 2 and parts[-2] == "commitlog":
        return "commitlog"
    if len(parts) >= 4 and parts[-4] == "consumequeue":
        return "consumequeue"
    if len(parts) >= 2 and parts[-2] == "index":
        return "index"
    raise ValueError(f"{path}: not under commitlog/, consumequeue/TOPIC/QUEUE/ or index/: give --kind")


@click.command("dump")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--kind", type=click.Choice(["commitlog", "consumequeue", "index"]), help="default: from the path")
@click.option("--from", "start", type=int, default=None, help="physical offset / queue offset / entry to start at")
@click.option("--count", type=int, default=20, show_default=True, help="how many records or entries (0: all)")
@click.option("--body", type=click.Choice(["none", "text", "hex"]), default="none", show_default=True,
              help="CommitLog bodies: off by default")
@click.option("--json", "as_json", is_flag=True, help="JSON lines on stdout, one per record or entry")
def dump_cmd(file, kind, start, count, body, as_json):
    """The records of one CommitLog segment, ConsumeQueue file or IndexFile.

    \b
    Examples:
      rocketstore dump tests/golden/rocketmq-5.5.1/clean/store/commitlog/00000000000000000000 --count 5
      rocketstore dump tests/golden/rocketmq-5.5.1/clean/store/consumequeue/TopicTest/0/00000000000000000000
    """
    kind = kind or file_kind(file)
    rows = {"commitlog": _segment, "consumequeue": _consumequeue, "index": _index}[kind](file, start, count, body)
    if as_json:
        for r in rows:
            click.echo(json.dumps(r, ensure_ascii=False, default=str))
        return
    if not rows:
        line("nothing at that position")
        return
    headers = list(rows[0])
    table(f"{kind} {file}", headers, [tuple(r.values()) for r in rows],
          numeric={h for h in headers if isinstance(rows[0][h], (int, np.integer)) and not isinstance(rows[0][h], bool)})


def _segment(path: str, start, count, body) -> list[dict]:
    from rocketstore_spark.codec.decoder import RecordDecoder
    from rocketstore_spark.store.layout import parse_offset_name
    from rocketstore_spark.store.segment_reader import SegmentReader
    base = parse_offset_name(os.path.basename(path))
    if base is None:
        raise ValueError(f"{path}: a CommitLog segment is named by its 20-digit base offset")
    columns = SEGMENT_COLUMNS + (("body",) if body != "none" else ())
    decoder = RecordDecoder([c for c in columns if c not in ("physical_offset", "file_position")], check_crc=False)
    position = max(0, (start or base) - base)
    out = []
    reader = SegmentReader(path, base, decoder, start=position, followed=True)
    for decoded in reader:
        t = decoded.batch.to_pylist()
        for pos, rec in zip(decoded.positions.tolist(), t):
            row = {"physical_offset": base + pos, "file_position": pos, **rec}
            row["properties"] = dict(row["properties"] or [])
            if body != "none":
                raw = row.pop("body")
                row["body"] = raw.hex() if body == "hex" else raw.decode("utf-8", "replace")
            out.append(row)
            if count and len(out) >= count:
                return out
    for f in reader.result.findings:
        click.echo(f.render(), err=True)
    return out


def _consumequeue(path: str, start, count, body) -> list[dict]:
    from rocketstore_spark.codec import consumequeue
    from rocketstore_spark.store.layout import parse_offset_name
    first = parse_offset_name(os.path.basename(path))
    if first is None:
        raise ValueError(f"{path}: a ConsumeQueue file is named by its 20-digit queue byte offset")
    with open(path, "rb") as f:
        entries = consumequeue.decode_entries(f.read())
    n = consumequeue.written_count(entries)
    skip = max(0, (start if start is not None else first // 20) - first // 20)
    stop = n if not count else min(n, skip + count)
    filler = consumequeue.is_filler(entries)
    return [{"queue_offset": first // 20 + i, "file_position": i * 20,
             "physical_offset": int(entries["commit_log_offset"][i]), "size": int(entries["size"][i]),
             "tags_code": int(entries["tags_code"][i]), "filler": bool(filler[i])} for i in range(skip, stop)]


def _index(path: str, start, count, body) -> list[dict]:
    from rocketstore_spark.store.indexes import iter_entries, read_index_file
    view = read_index_file(path)
    h = view.header
    click.echo(f"header: {h}; geometry: {view.geometry} ({view.geometry_source or view.problem})", err=True)
    if view.geometry is None:
        return []
    first = max(1, start or 1)
    out = []
    for index0, entries in iter_entries(view):
        for k in range(len(entries)):
            i = index0 + k
            if i < first:
                continue
            e = entries[k]
            out.append({"entry": i, "key_hash": int(e["key_hash"]), "slot": int(e["key_hash"]) % view.geometry.hash_slot_num,
                        "physical_offset": int(e["phy_offset"]), "time_diff_s": int(e["time_diff"]),
                        "prev_index": int(e["prev_index"])})
            if count and len(out) >= count:
                return out
    return out
