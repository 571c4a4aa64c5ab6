"""What the table sources (everything but ``rocketmq`` itself) share: a source declared by its name, schema,
options and reader; partitions that carry a store's file map to the executor; batches built with exactly
the requested columns. Planning runs on the driver, ``read`` in Spark's Python workers.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS
from rocketstore_spark.datasource.options import Options
from rocketstore_spark.datasource.schemas import check_schema

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def timestamp(ms: int | None):
    """Epoch milliseconds as a UTC datetime for a Row. None, and values no timestamp can hold (a corrupt
    checkpoint or IndexFile header), are None: the raw value is still in the file, the row still reads."""
    if ms is None or not MIN_TIMESTAMP_MS <= ms <= MAX_TIMESTAMP_MS:
        return None
    return EPOCH + dt.timedelta(milliseconds=int(ms))


def validate_paths(options: Options, source: str = "", needs_root: bool = False, work=None) -> None:
    """Fail when the DataFrame is created (driver), with a one-line message, if a path names no store, names
    a bare CommitLog directory where the source reads files of the store root, or names a store written with an
    engine that makes ``work`` (a ``store.engines.Work``) wrong."""
    from rocketstore_spark.store.discovery import StorePathError, discover
    for layout in discover(options.paths, options.commitlog_dirs):
        if work is not None:
            layout.refuse(work)
        if needs_root and layout.root is None:
            raise StorePathError(f"{layout.name} is a CommitLog directory: {source} reads the store root "
                                 f"(the directory holding commitlog/, {layout.files.commitlog_dir.parent})")


@dataclass(frozen=True)
class FilesPartition(InputPartition):
    store: str
    files: object         # layout.StoreMap of the store (None: an empty scan)
    items: tuple          # source-specific: paths, or (topic, queue_id, dir)


EMPTY = FilesPartition("", None, ())


class TableSource(DataSource):
    """A table source: subclasses set NAME, SCHEMA (DDL), OPTIONS (an options.Options class) and READER."""
    NAME = ""
    SCHEMA = ""
    OPTIONS = Options
    READER: type
    NEEDS_ROOT = True          # reads files of the store root, not only commitlog/
    WORK = None                # the store.engines.Work it does: a store whose engine makes it wrong is refused

    @classmethod
    def name(cls):
        return cls.NAME

    def schema(self):
        validate_paths(self.OPTIONS(self.options, self.name()), self.name(), self.NEEDS_ROOT, self.WORK)
        return self.SCHEMA

    def reader(self, schema):
        check_schema(schema, self.SCHEMA, self.name())
        options = self.OPTIONS(self.options, self.name())
        validate_paths(options, self.name(), self.NEEDS_ROOT, self.WORK)
        return self.READER(options, schema)


class TableReader(DataSourceReader):
    def __init__(self, options: Options, schema):
        self.options = options
        self.schema = schema
        self.columns = schema.names

    def project(self, row: dict) -> tuple:
        return tuple(row[c] for c in self.columns)

    def to_batch(self, cols: dict):
        """An Arrow batch with exactly the requested columns, in order (executor)."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema
        return pa.RecordBatch.from_arrays([cols[c] for c in self.columns],
                                          schema=to_arrow_schema(self.schema, timezone="UTC"))

    def layouts(self):
        from rocketstore_spark.store.discovery import discover
        return discover(self.options.paths, self.options.commitlog_dirs)


class StoreTableReader(TableReader):
    """One partition per store (small files: checkpoint, config)."""

    def partitions(self):
        return [FilesPartition(layout.name, layout.files, ()) for layout in self.layouts()] or [EMPTY]
