"""The ingest's own writer (``spark.ingest.write_store``'s default): the Python workers decode the CommitLog with
our reader and write the table's Parquet files with pyarrow straight from its Arrow batches, and the driver
commits them to the Delta table through Delta's transaction API. Spark's own write of the same DataFrame (rows
out of Arrow into the JVM, through parquet-mr, partitioned by a sort) costs about twice the read itself;
this one costs a fraction of it (bench/README.md, "Incremental ingest into Delta").

What a run commits is what the Spark-written path (``replaceWhere``) commits for the same range, file for
file: the same read plan (``datasource.planning``: one task per core), in each task one file per
``store_date`` met, ``store_date`` the UTC day of ``store_timestamp`` (``CAST(store_timestamp AS DATE)``: a
null timestamp goes to the null partition), the partition columns ``store`` and ``store_date`` last in the
files as Spark's writer puts them there (readers of the table take them from the log's partition values), the
statistics Delta collects for ``STATS_COLUMNS`` (numRecords, minValues, maxValues, nullCount; timestamps in
milliseconds, strings cut to 32 UTF-16 units as Delta 4.4 cuts them), and one commit that

- reads ``store = S AND physical_offset >= W`` through ``txn.filterFiles``: two runs of one store conflict as
  two ``replaceWhere`` writes do (the loser's commit is refused);
- removes the files wholly at or past W and adds the new ones (a file straddling W, only possible after
  ``--restart-at``, is left to the Spark-written path, which rewrites its rows below W: ``Straddle``);
- is a ``WRITE`` with the same predicate and user metadata as the Spark path's.

Each task also returns, per CommitLog segment, the counts ``spark.ingest`` reports (messages, bytes, first and
end offset, BODYCRC failures), so no second pass over the new files is needed.

Executors write under the table's directory, which must be a path every executor sees (a local path on one
machine, a shared mount on a cluster); the Delta log is written by the driver only.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import uuid

STRING_PREFIX = 32                     # Delta's dataSkippingStringPrefixLength (its default)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
FLUSH_BYTES = 64 << 20                 # a file's rows buffered before a row group is written
DAY_US = 86_400_000_000
NULL_DAY = -(1 << 62)                  # store_days' value for a null store_timestamp


class Straddle(Exception):
    """A committed file holds rows on both sides of the run's start: the Spark-written path must rewrite it."""


# ------------------------------------------------------------------------------------ statistics (executor)

def _ms_text(micros: int) -> str:
    """A timestamp as Delta's statistics hold it (session time zone UTC): milliseconds, ISO 8601, ``Z``."""
    t = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros // 1000 * 1000)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _units(s: str) -> list[int]:
    """``s`` as Java holds it: UTF-16 code units."""
    raw = s.encode("utf-16-le", errors="surrogatepass")
    return [int.from_bytes(raw[k:k + 2], "little") for k in range(0, len(raw), 2)]


def _text(units: list[int]) -> str:
    return b"".join(u.to_bytes(2, "little") for u in units).decode("utf-16-le", errors="surrogatepass")


def _min_text(s: str) -> str | None:
    """Delta's string minimum (``StatisticsCollection.truncateMinStringAgg``, Java strings): the first 32 UTF-16
    units, one more when the cut would split a surrogate pair."""
    u = _units(s)
    if len(u) <= STRING_PREFIX:
        return s
    cut = STRING_PREFIX + (0xD800 <= u[STRING_PREFIX - 1] < 0xDC00 and 0xDC00 <= u[STRING_PREFIX] < 0xE000)
    return _text(u[:cut])


def _max_text(s: str) -> str | None:
    """Delta's string maximum (``StatisticsCollection.truncateMaxStringAgg`` of delta-spark 4.4): the minimum's
    prefix, extended past any U+10FFFF, then U+007F when the next unit is below it, else U+10FFFF; None (no
    maximum) when that needs more than 64 units."""
    u = _units(s)
    if len(u) <= STRING_PREFIX:
        return s
    at = len(_units(_min_text(s)))
    while at <= 2 * STRING_PREFIX:
        if at >= len(u):
            return s
        if at + 1 < len(u) and u[at:at + 2] == [0xDBFF, 0xDFFF]:
            at += 2
        elif u[at] < 0x7F:
            return _text(u[:at]) + "\x7f"
        else:
            return _text(u[:at]) + "\U0010ffff"
    return None


class FileStats:
    """Running min, max and null count of the statistics columns of one file (their table order)."""

    def __init__(self, columns: list[str]):
        self.columns = columns
        self.rows = 0
        self.lo: dict = {}
        self.hi: dict = {}
        self.nulls = dict.fromkeys(columns, 0)

    def add(self, batch) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc
        self.rows += batch.num_rows
        for name in self.columns:
            col = batch.column(name)
            self.nulls[name] += col.null_count
            if col.null_count == len(col):
                continue
            if pa.types.is_timestamp(col.type):
                col = col.cast(pa.int64())
            mm = pc.min_max(col)
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if name not in self.lo or lo < self.lo[name]:
                self.lo[name] = lo
            if name not in self.hi or hi > self.hi[name]:
                self.hi[name] = hi

    def json(self, types: dict) -> str:
        def values(found, bound):
            out = {}
            for name in self.columns:
                v = found.get(name)
                if v is not None and types[name] in ("timestamp", "string"):
                    v = _ms_text(v) if types[name] == "timestamp" else bound(v)
                if v is not None:                       # Spark's to_json leaves nulls out
                    out[name] = v
            return out
        return json.dumps({
            "numRecords": self.rows, "minValues": values(self.lo, _min_text), "maxValues": values(self.hi, _max_text),
            "nullCount": self.nulls}, separators=(",", ":"), ensure_ascii=False)


# ---------------------------------------------------------------------------------------- the task (executor)

def store_days(batch):
    """``CAST(store_timestamp AS DATE)`` in UTC as days since the epoch (int64 numpy, -2**62 for null)."""
    import numpy as np
    col = batch.column("store_timestamp")
    days = np.floor_divide(col.cast("int64").fill_null(0).to_numpy(zero_copy_only=False), DAY_US)
    if col.null_count:
        days[col.is_null().to_numpy(zero_copy_only=False)] = NULL_DAY
    return days


class _OpenFile:
    """One Parquet file of a task: a partition's rows, buffered and written a row group at a time."""

    def __init__(self, directory: str, name: str, day: int, stats_columns: list[str]):
        self.directory, self.name, self.day = directory, name, day
        self.stats = FileStats(stats_columns)
        self.pending, self.pending_bytes, self.writer = [], 0, None

    def add(self, batch) -> None:
        self.stats.add(batch)
        self.pending.append(batch)
        self.pending_bytes += batch.nbytes
        if self.pending_bytes >= FLUSH_BYTES:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq
        if not self.pending:
            return
        table = pa.Table.from_batches(self.pending)
        if self.writer is None:
            os.makedirs(self.directory, exist_ok=True)
            self.writer = pq.ParquetWriter(os.path.join(self.directory, self.name), table.schema,
                                           compression="snappy")
        self.writer.write_table(table, row_group_size=table.num_rows)
        self.pending, self.pending_bytes = [], 0

    def close(self) -> str:
        self.flush()
        self.writer.close()
        return os.path.join(self.directory, self.name)


def write_task(index: int, partition, table: str, store_dir: str, schema, stats_columns: list[str],
               options: dict, batch_hook=None) -> tuple[list[dict], list[tuple]]:
    """Executor: the CommitLog ranges of ``partition`` (a ``ScanPartition``) decoded and written as one Parquet
    file per ``store_date`` under ``table``/``store_dir``/. Returns the files (relative path as on disk, the
    day, size, modification time, statistics JSON) and per range (segment base offset, messages, bytes, first
    offset, end offset, BODYCRC failures). ``batch_hook``: an Arrow batch -> batch function (tests)."""
    import numpy as np
    import pyarrow as pa

    from rocketstore_spark.datasource.commitlog import commitlog_batches
    from rocketstore_spark.datasource.options import CommitLogOptions
    opts = CommitLogOptions(options)
    keep = [n for n in schema.names if n != "store"] + ["store"]          # Spark's order: the partitions last
    tag = uuid.uuid4()
    files: dict[int, _OpenFile] = {}
    counts = []
    for segment_range in partition.ranges:
        n = size = crc = 0
        first = end = None
        for batch in commitlog_batches(segment_range, schema, [], opts):
            if batch_hook is not None:
                batch = batch_hook(batch)
            if not batch.num_rows:
                continue
            offsets = batch.column("physical_offset").to_numpy()
            sizes = batch.column("total_size").to_numpy().astype(np.int64)
            n += batch.num_rows
            size += int(sizes.sum())
            crc += batch.num_rows - int(np.count_nonzero(batch.column("body_crc_ok").to_numpy(zero_copy_only=False)))
            first = int(offsets.min()) if first is None else min(first, int(offsets.min()))
            last = int((offsets + sizes).max())
            end = last if end is None else max(end, last)
            data = batch.select(keep)
            days = store_days(batch)
            for day in np.unique(days):
                part = data if days[0] == days[-1] and (days == day).all() else data.filter(pa.array(days == day))
                date = pa.nulls(part.num_rows, pa.date32()) if day == NULL_DAY else \
                    pa.array(np.full(part.num_rows, day, np.int32), pa.date32())
                part = pa.RecordBatch.from_arrays([*part.columns, date], names=[*keep, "store_date"])
                f = files.get(int(day))
                if f is None:
                    value = NULL_PARTITION if day == NULL_DAY else \
                        (dt.date(1970, 1, 1) + dt.timedelta(days=int(day))).isoformat()
                    f = files[int(day)] = _OpenFile(os.path.join(table, store_dir, f"store_date={value}"),
                                                    f"part-{index:05d}-{tag}.c{len(files):03d}.snappy.parquet",
                                                    int(day), stats_columns)
                f.add(part)
        if n:
            counts.append((segment_range.base_offset, n, size, first, end, crc))
    types = {f.name: f.dataType.typeName() for f in schema.fields}
    out = []
    for f in files.values():
        path = f.close()
        st = os.stat(path)
        out.append({"path": os.path.relpath(path, table), "day": None if f.day == NULL_DAY else f.day,
                    "size": st.st_size, "modificationTime": st.st_mtime_ns // 1_000_000,
                    "stats": f.stats.json(types)})
    return out, counts


# --------------------------------------------------------------------------------------- the commit (driver)

def plan(spark, layout, start: int):
    """The run's read partitions: the ``rocketmq`` source's plan for this store from ``start``."""
    from rocketstore_spark.datasource.planning import plan_partitions
    selected = [(layout.name, seg, layout.followed(k)) for k, seg in enumerate(layout.segments)
                if seg.base_offset + seg.size > start]
    return plan_partitions(selected, None, spark.sparkContext.defaultParallelism, start)


def write_and_commit(spark, table: str, layout, start: int, schema, stats_columns: list[str], predicate: str,
                     user_metadata: str, batch_hook=None) -> list[tuple]:
    """Driver: open the Delta transaction (reading ``predicate``), run the tasks, commit their files (and the
    removal of the store's files at or past ``start``) in one ``WRITE``. Returns the tasks' per-range counts.
    Raises ``Straddle`` before writing anything when a committed file holds rows on both sides of ``start``."""
    jvm = spark._jvm
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, table)
    txn = log.startTransaction()
    seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq

    condition = spark.read.format("delta").load(table).where(predicate)._jdf.queryExecution().analyzed() \
        .condition()
    found = txn.filterFiles(seq([condition]), False)      # read by this commit: a run adding rows there conflicts
    old = [found.apply(k) for k in range(found.size())]
    removes = []
    if old:                               # filterFiles' files come without statistics: the snapshot's have them
        from pyspark.sql import DataFrame
        snapshot = DataFrame(txn.snapshot().allFiles().toDF(), spark)
        bounds = {r.path: json.loads(r.stats or "{}") for r in snapshot.where(
            snapshot.partitionValues["store"] == layout.name).select("path", "stats").collect()}
        for add in old:
            stats = bounds.get(add.path(), {})
            low = stats.get("minValues", {}).get("physical_offset")
            high = stats.get("maxValues", {}).get("physical_offset")
            if high is not None and high < start:   # no row of it is at or past start
                continue
            if low is None or low < start:
                raise Straddle(add.path())
            removes.append(add.remove())

    store_dir = "store=" + jvm.org.apache.spark.sql.catalyst.catalog.ExternalCatalogUtils.escapePathName(layout.name)
    partitions = plan(spark, layout, start)
    options = {"path": layout.name, "startOffset": str(start)}
    args = (table, store_dir, schema, stats_columns, options, batch_hook)
    results = spark.sparkContext.parallelize(list(enumerate(partitions)), max(1, len(partitions))) \
        .map(lambda p: write_task(p[0], p[1], *args)).collect()

    actions = list(removes)
    path_of = jvm.org.apache.hadoop.fs.Path
    from_json = jvm.org.apache.spark.sql.delta.actions.Action.fromJson
    for files, _ in results:
        for f in files:
            day = None if f["day"] is None else (dt.date(1970, 1, 1) + dt.timedelta(days=f["day"])).isoformat()
            add = {"add": {"path": path_of(f["path"]).toUri().toString(),
                           "partitionValues": {"store": layout.name, "store_date": day},
                           "size": f["size"], "modificationTime": f["modificationTime"], "dataChange": True,
                           "stats": f["stats"]}}
            actions.append(from_json(json.dumps(add)))
    some, none = jvm.scala.Some, jvm.scala.Option.empty()
    op = getattr(jvm.org.apache.spark.sql.delta, "DeltaOperations$Write")(
        jvm.org.apache.spark.sql.SaveMode.Overwrite, some(seq([])), some(predicate),
        some(user_metadata), none, none, none, none, none)
    txn.commit(seq(actions), op)
    return [c for _, counts in results for c in counts]
