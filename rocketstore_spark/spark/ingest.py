"""Incremental ingest of CommitLog messages into a Delta table (``jobs/ingest.py``): the driver checks the table
and each store's watermark, plans the read from it and commits; Spark's executors read and write the messages.

The table: every column of the ``rocketmq`` source (``body`` and ``body_uncompressed`` only with bodies), plus
``store_date``, a Delta generated column ``CAST(store_timestamp AS DATE)`` (UTC). Partitioned by ``store`` and
``store_date``: a filter on ``store_timestamp`` prunes days (Delta derives the partition filter from the
generated column), a run writes about one file per read task and day it touches (no shuffle: a task's CommitLog
range is a time range), and a concurrent write to another store never conflicts with this one. Why, with
figures: README ("Incremental ingest into Delta Lake").

The watermark of a store is the data: the end of the row with the highest physical offset of that store
(``physical_offset + total_size``), committed in the same Delta commit as the rows, so there is nothing to keep
in step. A run for a store:

1. reads the watermark W and the row that ends there (``read_state``); decodes the store's record at that
   offset again and compares every field (``store.watermark``): a different record there is refused;
2. reads the CommitLog from W (the ``rocketmq`` source's plan from ``startOffset``: nothing below W is planned
   or decoded) and replaces the store's rows at or past W with it in one commit: by default the Python workers
   write the Parquet files with pyarrow from the reader's Arrow batches and the driver commits them through
   Delta's transaction, reading ``store = S AND physical_offset >= W`` (``spark.ingest_files``); with
   ``writer="spark"`` Spark's Delta writer does it with ``replaceWhere`` on the same predicate. Either way a run
   that died, or lost a race, can never leave two copies, and two runs of one store at once conflict in Delta
   (the loser's commit is refused: ``IngestConflict``);
3. the new watermark is the end of the last complete record read; an incomplete record at the tail (a broker
   still writing it, a torn write) is not a row, so the next run reads it whole from W.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from pyspark.sql import functions as F
from pyspark.sql.types import DateType, StructType

from rocketstore_spark.datasource.schemas import COMMITLOG_SCHEMA
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.watermark import IDENTITY_COLUMNS, TIMESTAMP_COLUMNS, Tail, mismatches, \
    record_identity, segment_at, tail_at

FORMAT = 1                                        # the table layout this code writes; a newer one is refused
FORMAT_PROPERTY = "rocketstore.ingest.format"
BODIES_PROPERTY = "rocketstore.ingest.bodies"
BODY_COLUMNS = ("body", "body_uncompressed")
PARTITION_COLUMNS = ("store", "store_date")
# Delta keeps min/max per file of these (the default, the first 32 columns, would include maps and hosts):
# what queries and the ingest itself filter on
STATS_COLUMNS = ("segment_base_offset,physical_offset,total_size,queue_id,queue_offset,store_timestamp,"
                 "born_timestamp,topic,tags")


class IngestRefused(Exception):
    """The table or a store cannot be ingested as asked; the message says why and what to do (one paragraph)."""


class IngestConflict(Exception):
    """Another run committed rows of the same store while this one was writing; nothing of this run is in the
    table (Delta refused its commit)."""


@dataclass
class StoreState:
    """What the table holds of one store: the watermark and the identity of the row that ends at it."""
    store: str
    last_offset: int | None = None                # physical offset of the last ingested record
    watermark: int = 0                            # last_offset + its total_size; 0: nothing ingested yet
    last: dict = field(default_factory=dict)      # its IDENTITY_COLUMNS as the table holds them


@dataclass
class StoreRun:
    """The outcome of one store's ingest (one line of the job's report, one row of ``_snapshots/ingest_runs``)."""
    store: str
    status: str                                   # ingested, unchanged, refused, conflict
    start_offset: int = 0
    end_offset: int = 0
    messages: int = 0
    skipped_bytes: int = 0                        # bytes of the new range that were no record (damage)
    crc_failures: int = 0
    tail: str | None = None                       # what lies at end_offset (Tail), when not nothing
    seconds: float = 0.0
    message: str = ""

    @property
    def damaged(self) -> bool:
        return self.skipped_bytes > 0 or self.crc_failures > 0


def message_schema(bodies: bool) -> StructType:
    """The ``rocketmq`` columns the table holds."""
    return StructType([f for f in COMMITLOG_SCHEMA.fields if bodies or f.name not in BODY_COLUMNS])


def sql_string(value: str) -> str:
    """``value`` as a Spark SQL string literal (store paths may hold quotes and backslashes)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


# ---------------------------------------------------------------------------------------------- the table

def open_table(spark, table: str, bodies: bool) -> None:
    """Create the table if there is none at ``table``; refuse one this code must not append to: not an ingest
    table, a newer format, bodies where the table has none or the other way round, other columns."""
    import os

    from delta.tables import DeltaTable
    if not DeltaTable.isDeltaTable(spark, table):
        if os.path.isdir(table) and any(not n.startswith(("_", ".")) for n in os.listdir(table)):
            raise IngestRefused(f"{table} holds files but no Delta table: give an empty or new directory")
        (DeltaTable.createIfNotExists(spark).location(table)
         .addColumns(message_schema(bodies))
         .addColumn("store_date", DateType(), generatedAlwaysAs="CAST(store_timestamp AS DATE)")
         .partitionedBy(*PARTITION_COLUMNS)
         .property(FORMAT_PROPERTY, str(FORMAT)).property(BODIES_PROPERTY, str(bodies).lower())
         .property("delta.dataSkippingStatsColumns", STATS_COLUMNS)
         .execute())
    check_table(spark, table, bodies)


def check_table(spark, table: str, bodies: bool) -> None:
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{table}`").first()
    properties = detail.properties or {}
    found = properties.get(FORMAT_PROPERTY)
    if found is None:
        raise IngestRefused(f"{table} is a Delta table this ingest did not create (no {FORMAT_PROPERTY} "
                            "property): give the directory of an ingest table or a new one")
    if not found.isdigit() or int(found) > FORMAT:
        raise IngestRefused(f"{table} was written by a newer version of the ingest (table format {found}; this one "
                            f"writes format {FORMAT}): run the newer rocketstore-spark, or ingest into a new table")
    if properties.get(BODIES_PROPERTY) != str(bodies).lower():
        has = properties.get(BODIES_PROPERTY) == "true"
        raise IngestRefused(f"{table} was created {'with' if has else 'without'} message bodies: run "
                            f"{'with' if has else 'without'} --bodies, or ingest into a new table")
    want = {f.name: f.dataType for f in message_schema(bodies).fields} | {"store_date": DateType()}
    have = {f.name: f.dataType for f in spark.read.format("delta").load(table).schema.fields}
    if have != want:
        odd = sorted(set(have.items()) ^ set(want.items()), key=str)
        raise IngestRefused(f"{table} has other columns than an ingest table of format {FORMAT} "
                            f"(differing: {', '.join(name for name, _ in odd)}): ingest into a new table")


def read_state(spark, table: str, store: str) -> StoreState:
    """The store's watermark and last row (two queries: the max physical offset over the store's partitions —
    one column —, then that one row, found through Delta's per-file physical_offset statistics)."""
    rows = spark.read.format("delta").load(table).where(F.col("store") == store)
    last_offset = rows.agg(F.max("physical_offset")).first()[0]
    if last_offset is None:
        return StoreState(store)
    return StoreState(store, last_offset, *_ingested_record(rows, last_offset))


def _ingested_record(rows, physical_offset: int) -> tuple[int, dict]:
    """(end, IDENTITY_COLUMNS) of the ingested row at ``physical_offset`` (timestamps in epoch microseconds)."""
    columns = [F.unix_micros(c).alias(c) if c in TIMESTAMP_COLUMNS else F.col(c) for c in IDENTITY_COLUMNS]
    row = rows.where(F.col("physical_offset") == physical_offset).select(*columns).first().asDict()
    return physical_offset + row["total_size"], row


# ------------------------------------------------------------------------------ the store against the table

def start_offset(spark, table: str, layout: StoreLayout, state: StoreState, restart_at: int | None) -> int:
    """Where this run reads the store from: the watermark, once the store's record below it is the one ingested;
    with ``restart_at`` (the recipe after a refusal) that offset, a record end on which table and store agree."""
    store = layout.name
    if restart_at is not None:
        return _restart(spark, table, layout, state, restart_at)
    if state.last_offset is None:
        return 0
    found = record_identity(layout, state.last_offset)
    differ = mismatches(state.last, found)
    if not differ:
        return state.watermark
    recipe = (f"--restart-at {store}=OFFSET replaces this store's rows at or past OFFSET with what the store holds "
              "there now, in one commit (OFFSET: where the log was cut, e.g. the cut offset of the repair plan; 0: "
              "the whole store)")
    first = layout.segments[0].base_offset if layout.segments else None
    if segment_at(layout, state.last_offset) is None and first is not None and first > state.last_offset:
        raise IngestRefused(
            f"{store}: the segments holding the watermark {state.watermark:,} were deleted (the store now starts at "
            f"physical offset {first:,}): messages between the two were never ingested. To accept that gap and "
            f"go on from the store's first record: --restart-at {store}={state.watermark}")
    what = "no complete record starts there now" if found is None else f"its {', '.join(differ)} differ"
    raise IngestRefused(
        f"{store}: the CommitLog below the watermark changed: the last ingested record, at physical offset "
        f"{state.last_offset:,}, is not in the store any more ({what}). A repair cut the log, the broker rewrote "
        f"it, or another broker's store is at this path; nothing was written for this store. {recipe}")


def _restart(spark, table: str, layout: StoreLayout, state: StoreState, offset: int) -> int:
    if offset == 0:
        return 0
    rows = spark.read.format("delta").load(table).where(F.col("store") == layout.name)
    # the row ending at offset starts within the largest record before it: a bounded range, pruned by statistics
    candidates = rows.where((F.col("physical_offset") < offset) & (F.col("physical_offset") >= offset - (64 << 20))
                            & (F.col("physical_offset") + F.col("total_size") == offset))
    hit = candidates.select("physical_offset").first()
    if hit is None:
        raise IngestRefused(f"{layout.name}: --restart-at {offset}: no ingested record of this store ends there; "
                            "give the end of an ingested record (physical_offset + total_size), or 0")
    _, ingested = _ingested_record(rows, hit[0])
    found = record_identity(layout, hit[0])
    if found is not None and mismatches(ingested, found):
        raise IngestRefused(f"{layout.name}: --restart-at {offset}: the store's record before it (at physical "
                            f"offset {hit[0]:,}) differs from the ingested one too: restart further back")
    return offset


def has_news(layout: StoreLayout, watermark: int) -> bool:
    """Is there a complete record at or past ``watermark`` (so a read, and a commit, is worth it)? A BLANK at it
    points to the next segment; an incomplete record with nothing after it waits for the next run."""
    tail = tail_at(layout, watermark)
    return tail == Tail.RECORD or any(seg.base_offset > watermark and not seg.blank_head for seg in layout.segments)


# ------------------------------------------------------------------------------------------ the write

WRITERS = ("arrow", "spark")                      # the ingest's own writer (default), Spark's Delta writer


def write_store(spark, table: str, layout: StoreLayout, start: int, bodies: bool, frame=None, batches=None,
                writer: str = "arrow") -> list[tuple] | None:
    """Read ``layout``'s CommitLog from ``start`` and replace the store's rows at or past ``start`` with it, in
    one Delta commit. ``writer`` "arrow": the Python workers write the Parquet files with pyarrow and the driver
    commits them (``spark.ingest_files``; returns the tasks' per-segment counts); "spark": Spark's Delta
    writer with ``replaceWhere`` (returns None: ``committed_range`` counts), also taken by "arrow" when a
    committed file straddles ``start`` (after ``--restart-at``) or the session has no JVM (Spark Connect).
    Test hooks, to hold or break the write: ``frame`` a DataFrame -> DataFrame (the Spark writer), ``batches``
    an Arrow batch -> batch run in the executors (the arrow writer)."""
    if writer not in WRITERS:
        raise ValueError(f"writer {writer!r}: one of {', '.join(WRITERS)}")
    predicate = f"store = {sql_string(layout.name)} AND physical_offset >= {start}"
    metadata = f"rocketstore ingest of {layout.name} from physical offset {start}"
    try:
        if writer == "arrow" and hasattr(spark, "_jvm") and table.startswith("/"):
            from rocketstore_spark.spark.ingest_files import Straddle, write_and_commit
            schema = message_schema(bodies)
            stats = [f.name for f in schema.fields if f.name in STATS_COLUMNS.split(",")]
            try:
                return write_and_commit(spark, table, layout, start, schema, stats, predicate, metadata, batches)
            except Straddle:
                pass
        df = spark.read.format("rocketmq").schema(message_schema(bodies)).option("startOffset", str(start)) \
            .load(layout.name)
        if frame is not None:
            df = frame(df)
        df.write.format("delta").mode("overwrite").option("replaceWhere", predicate) \
            .option("userMetadata", metadata).save(table)
        return None
    except Exception as e:                              # noqa: BLE001 — only Delta's commit conflicts are ours
        if _is_conflict(e):
            raise IngestConflict(f"{layout.name}: another ingest of this store committed while this one was "
                                 "writing: this run's rows were not committed (the other run's are in the table; "
                                 "run again to read on from its watermark)") from None
        raise


def _is_conflict(e: Exception) -> bool:
    """Is ``e`` Delta refusing a commit because another one changed what this one read (its exception classes
    all start with Concurrent, their error classes with DELTA_CONCURRENT)?"""
    return any(c.__name__.startswith(("Concurrent", "DeltaConcurrent")) for c in type(e).__mro__) or \
        "[DELTA_CONCURRENT" in str(e)


def committed_range(spark, table: str, layout: StoreLayout, start: int) -> StoreRun:
    """What the table now holds of the store from ``start`` on, per segment (the new files only: statistics
    prune the rest): ``run_from_counts`` of a query over the table (after the Spark writer)."""
    per_segment = spark.read.format("delta").load(table) \
        .where((F.col("store") == layout.name) & (F.col("physical_offset") >= start)) \
        .groupBy("segment_base_offset").agg(
            F.count("*").alias("n"), F.sum("total_size").alias("size"), F.min("physical_offset").alias("first"),
            F.max(F.col("physical_offset") + F.col("total_size")).alias("end"),
            F.sum(F.when(~F.col("body_crc_ok"), 1).otherwise(0)).alias("crc")).collect()
    return run_from_counts(layout, start, [tuple(r) for r in per_segment])


def run_from_counts(layout: StoreLayout, start: int, counts: list[tuple]) -> StoreRun:
    """The run's report from per-segment counts (segment base offset, messages, bytes, first offset, end offset,
    BODYCRC failures; a segment may come in several parts): messages, the new watermark, BODYCRC failures, and
    the bytes that were no record (damage the reader skipped: a segment's BLANK tail is not counted)."""
    merged: dict[int, list] = {}
    for base, n, size, first, end, crc in counts:
        m = merged.setdefault(base, [0, 0, first, end, 0])
        m[0] += n
        m[1] += size
        m[2], m[3] = min(m[2], first), max(m[3], end)
        m[4] += crc
    run = StoreRun(layout.name, "ingested", start, start)
    seen = sorted(merged)
    for base in seen:
        n, size, first, end, crc = merged[base]
        run.messages += n
        run.crc_failures += crc
        run.end_offset = max(run.end_offset, end)
        run.skipped_bytes += (first - max(start, base)) + (end - first - size)
    if seen:                    # whole segments between the first and the last read that gave no record
        run.skipped_bytes += sum(s.data_end for s in layout.segments
                                 if start < s.base_offset < seen[-1] and s.base_offset not in merged
                                 and not s.blank_head)
    return run


def ingest_store(spark, table: str, layout: StoreLayout, bodies: bool, restart_at: int | None = None,
                 frame=None, batches=None, writer: str = "arrow") -> StoreRun:
    """One store's run: check, read from the watermark, commit, report (IngestRefused and IngestConflict
    become the run's status)."""
    began = time.perf_counter()
    state = StoreState(layout.name)
    try:
        state = read_state(spark, table, layout.name)
        start = start_offset(spark, table, layout, state, restart_at)
        if restart_at is None and not has_news(layout, start):
            run = StoreRun(layout.name, "unchanged", start, start)
        else:
            counts = write_store(spark, table, layout, start, bodies, frame, batches, writer)
            run = committed_range(spark, table, layout, start) if counts is None else \
                run_from_counts(layout, start, counts)
    except IngestRefused as e:
        run = StoreRun(layout.name, "refused", state.watermark, state.watermark, message=str(e))
    except IngestConflict as e:
        run = StoreRun(layout.name, "conflict", message=str(e))
    if run.status in ("ingested", "unchanged"):
        tail = tail_at(layout, run.end_offset)
        run.tail = None if tail in (Tail.NOTHING, Tail.BLANK) else tail.value
    run.seconds = time.perf_counter() - began
    return run


def render(run: StoreRun) -> list[str]:
    """The report lines of one store's run."""
    head = f"{run.store}: "
    if run.status == "ingested":
        lines = [head + f"{run.messages:,} message(s) ingested, physical offsets {run.start_offset:,} .. "
                        f"{run.end_offset:,} ({run.end_offset - run.start_offset:,} bytes) in {run.seconds:.1f} s"]
    elif run.status == "unchanged":
        lines = [head + f"nothing new since physical offset {run.start_offset:,} ({run.seconds:.1f} s)"]
    else:
        lines = [head + f"{run.status}: {run.message}"]
    if run.tail:
        lines.append(f"  at {run.end_offset:,} the store holds {run.tail}: the next run reads it whole")
    if run.skipped_bytes:
        lines.append(f"  damage: {run.skipped_bytes:,} bytes of the new range were no record and were skipped "
                     "(the executor log names them; `rocketstore verify` for the findings)")
    if run.crc_failures:
        lines.append(f"  damage: {run.crc_failures:,} message(s) fail BODYCRC (ingested, body_crc_ok = false)")
    return lines


def ingest_stores(spark, table: str, stores: list[str], bodies: bool, restart: dict[str, int] | None = None,
                  snapshots: bool = True, prog: str = "ingest", out=None,
                  writer: str = "arrow") -> tuple[int, list[StoreRun], str]:
    """A whole run (``jobs/ingest.py``, ``rocketstore ingest``): each store of ``stores`` (absolute paths) in its
    own commit, a report line per store on ``out`` (default stdout), the snapshots appended. Returns the exit
    status (0 every store ingested or unchanged without damage, 3 damage met or a store refused, 1 another run
    of a store committed first, 2 a table this run must not write, said on stderr), the runs and the run id.
    ``writer``: ``write_store``'s."""
    import datetime as dt
    import os
    import sys
    import uuid

    from rocketstore_spark.spark.snapshots import append_snapshots, snapshot_frames
    from rocketstore_spark.store.discovery import discover
    out = out or sys.stdout
    run_id, run_time = uuid.uuid4().hex, dt.datetime.now(dt.timezone.utc)
    table = os.path.abspath(table)
    try:
        open_table(spark, table, bodies)
    except IngestRefused as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 2, [], run_id
    layouts = [discover(path)[0] for path in stores]
    runs = []
    for layout in layouts:
        run = ingest_store(spark, table, layout, bodies, (restart or {}).get(layout.name), writer=writer)
        runs.append(run)
        print("\n".join(render(run)), file=out)
    if snapshots:
        append_snapshots(spark, table, snapshot_frames(spark, layouts, runs, run_id, run_time))
    print(f"{len(runs)} store(s), {sum(r.messages for r in runs):,} message(s) ingested into {table} (run {run_id})",
          file=out)
    if any(r.status == "conflict" for r in runs):
        return 1, runs, run_id
    return (3 if any(r.status == "refused" or r.damaged for r in runs) else 0), runs, run_id
