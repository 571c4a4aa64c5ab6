"""A slice of one or more stores' messages written out for replay: Parquet (every column, bodies as bytes) or
JSON lines (bodies base64; ``codec.json_lines``) (CLI ``rocketstore export`` and the repair plan's export of what a restart would
lose; in-process, one decoded window at a time, so memory is bounded whatever the store's size).

``Slice`` says which records: topic, queue, a KEYS value, a UNIQ_KEY, a TAGS value, a store-time window,
a physical offset range, and whether only CRC-correct records count. Every filter is an Arrow compute
expression over a decoded batch; a physical offset range also skips whole segments. A slice of a topic reads
each store through the topic's ConsumeQueues where they account for every record and scans elsewhere
(``lookup.queue_slice``; the rows are the scan's either way). Columns: ``store`` then
every column of the ``rocketmq`` source except the segment's base offset (``EXPORT_COLUMNS``) — what is
needed to publish a message again (topic, queue, flag, keys, tags, properties, body, born host and time).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rocketstore_spark.codec import json_lines
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.properties import DEFAULT_DELAY_LEVELS
from rocketstore_spark.codec.record_schema import DECODED, arrow_schema
from rocketstore_spark.findings import Finding
from rocketstore_spark.lookup.queue_slice import ClaimedRead, Plan, TopicClaims, plan
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.ahead import ahead
from rocketstore_spark.store.durable import publish, temporary
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.segment_reader import SegmentReader, crc_findings, record_start

EXPORT_COLUMNS = ("physical_offset", *(c for c in DECODED if c not in ("segment_base_offset", "physical_offset")))
FORMATS = ("parquet", "jsonl")
SLICE_AHEAD = 2         # batches decoded on a second thread while the last ones are written (compiled kernels
                        # and pyarrow's writers release the GIL): two cores in one process


@dataclass(frozen=True)
class Slice:
    """Which records to export (None: no condition)."""
    topic: str | None = None
    queue_id: int | None = None
    key: str | None = None
    uniq_key: str | None = None
    tag: str | None = None
    since_ms: int | None = None
    until_ms: int | None = None
    from_offset: int = 0                  # physical offsets [from_offset, to_offset)
    to_offset: int | None = None
    crc_ok_only: bool = False

    def mask(self, t: pa.Table, crc: bool = True) -> pa.Array | None:
        """Which rows of ``t`` are in the slice (None: all); ``crc``: with ``crc_ok_only``'s condition."""
        conditions = []
        phy = t["physical_offset"]
        if self.from_offset:
            conditions.append(pc.greater_equal(phy, self.from_offset))
        if self.to_offset is not None:
            conditions.append(pc.less(phy, self.to_offset))
        for column, value in (("topic", self.topic), ("queue_id", self.queue_id), ("uniq_key", self.uniq_key),
                              ("tags", self.tag)):
            if value is not None:
                conditions.append(pc.fill_null(pc.equal(t[column], value), False))
        if self.key is not None:
            keys = t["keys"].combine_chunks()
            hit = np.zeros(t.num_rows, dtype=bool)
            rows = pc.list_parent_indices(keys).to_numpy()
            hit[rows[pc.fill_null(pc.equal(pc.list_flatten(keys), self.key), False).to_numpy(zero_copy_only=False)]] = True
            conditions.append(pa.array(hit))
        if self.since_ms is not None or self.until_ms is not None:
            ms = pc.cast(t["store_timestamp"], pa.int64())            # microseconds since the epoch
            if self.since_ms is not None:
                conditions.append(pc.fill_null(pc.greater_equal(ms, self.since_ms * 1000), False))
            if self.until_ms is not None:
                conditions.append(pc.fill_null(pc.less_equal(ms, self.until_ms * 1000), False))
        if self.crc_ok_only and crc:
            conditions.append(pc.fill_null(t["body_crc_ok"], False))
        if not conditions:
            return None
        out = conditions[0]
        for c in conditions[1:]:
            out = pc.and_(out, c)
        return out


def export_schema(columns=EXPORT_COLUMNS) -> pa.Schema:
    return pa.schema([pa.field("store", pa.string()), *arrow_schema(columns)])


def iter_slice(layouts: list[StoreLayout], where: Slice, delay_levels: str = DEFAULT_DELAY_LEVELS,
               plans: list[Plan] | None = None, columns=EXPORT_COLUMNS, covers: dict | None = None,
               findings: list[Finding] | None = None):
    """The slice's records as tables of ``export_schema(columns)`` (``columns``: those the slice's conditions
    read among them), store by store in CommitLog order. A slice of a topic reads each store through the
    topic's ConsumeQueues where they account for every record (``lookup.queue_slice``: the same rows as a
    scan), else scans; ``plans`` (when given) receives each store's ``Plan`` — how it was read and why —
    before its records; ``covers``: store name -> its ``rocketmq.coverage`` when the caller has it already;
    ``findings`` (when given) receives what the reading met — each store's layout findings, damage in the
    ranges read, and the slice's records whose body fails BODYCRC (with ``body_crc_ok`` among the columns;
    also those ``crc_ok_only`` leaves out) — so a damaged record is reported, never silently left out."""
    decoder = RecordDecoder(columns, message_delay_level=delay_levels)
    findings = [] if findings is None else findings
    checked = "body_crc_ok" in columns
    schema = export_schema(columns)
    for layout in layouts:
        how = plan(layout, where.topic, where.queue_id, (covers or {}).get(layout.name))
        if plans is not None:
            plans.append(how)
        findings.extend(layout.findings)
        for seg, batch in _store_batches(layout, where, decoder, how, findings):
            t = pa.Table.from_batches([batch])
            keep = where.mask(t, crc=False)
            if keep is not None:
                t = t.filter(keep)
            if checked:
                failed = pc.invert(pc.fill_null(t["body_crc_ok"], True))
                if pc.any(failed).as_py():
                    phy = t["physical_offset"].filter(failed).to_numpy()
                    findings.extend(crc_findings(str(seg.path), seg.base_offset, phy - seg.base_offset))
            if where.crc_ok_only:
                t = t.filter(pc.fill_null(t["body_crc_ok"], False))
            if t.num_rows:
                store = pa.repeat(pa.scalar(layout.name, pa.string()), t.num_rows)
                yield pa.Table.from_arrays([store, *(t[c] for c in columns)], schema=schema)


def _store_batches(layout: StoreLayout, where: Slice, decoder: RecordDecoder, how: Plan, findings: list[Finding]):
    """(segment, decoded batch) of one store's batches that may hold the slice's records, in CommitLog order: per segment a
    scan from where the slice starts, or (``how`` through the queues) the topic's records up to the
    segment's covered end and a scan of the rest; what each read met appended to ``findings``."""
    claimed = TopicClaims(how.queue_dirs) if how.through_queues else None
    for k, seg in enumerate(layout.segments):
        if seg.base_offset + seg.size <= where.from_offset or \
                (where.to_offset is not None and seg.base_offset >= where.to_offset):
            continue
        start = max(0, where.from_offset - seg.base_offset)
        covered = int(how.covered[k]) if claimed is not None else -1
        if covered > start:
            # records at or past to_offset are filtered out: the queue read stops there, the tail is not scanned
            stop = covered if where.to_offset is None else min(covered, where.to_offset - seg.base_offset)
            read = ClaimedRead(seg, decoder, claimed, where.topic, start, stop)
            yield from ((seg, decoded.batch) for decoded in read)
            if read.resume is not None:
                how.fallbacks.append((k, read.failure))
                start = read.resume
            elif stop < covered:
                continue
            else:
                start = covered
        reader = SegmentReader(seg.path, seg.base_offset, decoder, start=record_start(seg.path, start),
                               followed=layout.followed(k), next_path=layout.next_path(k))
        yield from ((seg, decoded.batch) for decoded in reader)
        findings.extend(reader.result.findings)


def format_of(target: str | os.PathLike) -> str:
    """The format a target's name asks for: JSON lines for ``.jsonl``, ``.json`` and ``.ndjson``, else Parquet."""
    return "jsonl" if Path(target).suffix in (".jsonl", ".json", ".ndjson") else "parquet"


def export(layouts: list[StoreLayout], target: str | os.PathLike, where: Slice = Slice(), fmt: str = "parquet",
           delay_levels: str = DEFAULT_DELAY_LEVELS, plans: list[Plan] | None = None,
           findings: list[Finding] | None = None) -> int:
    """Write the slice to ``target`` (written under a temporary name, renamed when complete); returns how
    many records (``plans``, ``findings``: as ``iter_slice``). A store whose engine we do not read refuses before anything
    is written (``store.engines``)."""
    for layout in layouts:
        layout.refuse(Work.READ_COMMITLOG)
    if fmt not in FORMATS:
        raise ValueError(f"export format {fmt!r}: expected one of {', '.join(FORMATS)}")
    target = Path(target)
    tmp = temporary(target)
    written = 0
    try:
        if fmt == "parquet":
            with pq.ParquetWriter(tmp, export_schema()) as out:
                for t in ahead(iter_slice(layouts, where, delay_levels, plans, findings=findings), SLICE_AHEAD):
                    out.write_table(t)
                    written += t.num_rows
                if not written:
                    out.write_table(export_schema().empty_table())
        else:
            with open(tmp, "wb") as out:
                for t in ahead(iter_slice(layouts, where, delay_levels, plans, findings=findings), SLICE_AHEAD):
                    json_lines.write_table(t, out)
                    written += t.num_rows
        publish(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return written

