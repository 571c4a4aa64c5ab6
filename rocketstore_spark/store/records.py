"""A whole store's CommitLog as one Arrow table, without Spark (CLI, notebooks, tests; runs in-process).

The same decoder the Spark source uses (``codec.decoder.RecordDecoder``) over the same segment reader;
``columns`` picks what to decode (default: every column of ``codec.record_schema``).
"""
from __future__ import annotations

from typing import Iterator

import pyarrow as pa

from rocketstore_spark.codec import inner_batch
from rocketstore_spark.codec.arrow import RepeatedColumn
from rocketstore_spark.codec.decoder import Decoded, RecordDecoder
from rocketstore_spark.codec.properties import DEFAULT_DELAY_LEVELS
from rocketstore_spark.codec.record_schema import COLUMNS, DECODED, NAMES, arrow_schema
from rocketstore_spark.findings import Finding, raise_first_error
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.segment_reader import SegmentReader

POSITION_COLUMNS = tuple(c.name for c in COLUMNS if c.kind == "position")


def read_table(path, columns=NAMES, message_delay_level: str = DEFAULT_DELAY_LEVELS,
               strict: bool = False, commitlog_dirs=None, unwrap_batches: bool = False
               ) -> tuple[pa.Table, list[Finding]]:
    """(table of ``store``, the position columns and ``columns`` — names of record_schema.COLUMNS —, findings).
    ``strict``: raise StoreError on the first error finding (layout, damage, BODYCRC, ...) instead.
    ``commitlog_dirs``: the directories of a multi-path CommitLog (``discover``). ``unwrap_batches``: one row per
    inner message of a 5.x inner batch, what a consumer receives (``codec.inner_batch``; its columns added)."""
    names = tuple(dict.fromkeys(("store", *POSITION_COLUMNS, *columns, *(inner_batch.NEEDED if unwrap_batches
                                                                         else ()))))
    schema = arrow_schema(names)
    decoder = RecordDecoder([n for n in names if n in DECODED], message_delay_level=message_delay_level,
                            check_crc=strict)
    batches, findings = [], []
    for layout in discover(path, commitlog_dirs):
        store = RepeatedColumn(layout.name, pa.string())
        for decoded in iter_decoded(layout, decoder, findings, strict):
            batch = decoded.select(schema, {"store": store(decoded.n)})
            batches.append(inner_batch.unwrap(batch) if unwrap_batches else batch)
    return pa.Table.from_batches(batches, schema=schema), findings


def iter_decoded(layout: StoreLayout, decoder: RecordDecoder, findings: list[Finding], strict: bool = False
                 ) -> Iterator[Decoded]:
    """The decoded batches of one store's CommitLog in CommitLog order, one window at a time (bounded
    memory); its layout and reading findings are appended to ``findings`` as they are met."""
    findings.extend(layout.findings)
    if strict:
        raise_first_error(layout.findings)
    for k, seg in enumerate(layout.segments):
        reader = SegmentReader(seg.path, seg.base_offset, decoder, strict=strict, followed=layout.followed(k),
                               next_path=layout.next_path(k))
        yield from reader
        findings.extend(reader.result.findings)
