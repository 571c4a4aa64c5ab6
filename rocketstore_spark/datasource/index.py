"""``spark.read.format("rocketmq_index")``: one row per IndexFile entry; ``rocketmq_index_header``: one row
per IndexFile (its header and geometry).

The geometry (slot and entry counts) is broker configuration, not stored in the file: option ``hashSlotNum``
(the broker's maxHashSlotNum) gives it; without it each file's geometry is inferred from its size and
entries (store.indexes.resolve_geometry). A file with entries whose geometry cannot be established fails
``rocketmq_index`` with a message naming it (``index.unknown_geometry``) rather than returning no rows;
``rocketmq_index_header`` shows it with ``geometry_problem``. One partition per IndexFile; planning lists
the files (driver), reading opens them read-only (Spark's Python workers).
"""
from __future__ import annotations

import os

import numpy as np

from rocketstore_spark.codec.arrow import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS
from rocketstore_spark.datasource.base import EMPTY, FilesPartition, TableReader, TableSource, timestamp
from rocketstore_spark.datasource.options import IndexOptions
from rocketstore_spark.datasource.schemas import INDEX_HEADER_SCHEMA, INDEX_SCHEMA
from rocketstore_spark.store.engines import Work


class _IndexFilesReader(TableReader):
    def partitions(self):
        """One per IndexFile (driver); without hashSlotNum each carries the slot count its store's files
        agree on, for a file that cannot be inferred alone."""
        from rocketstore_spark.store.indexes import store_slot_count
        parts = []
        for layout in self.layouts():
            files = [str(f) for f in layout.files.index_files()]
            slots = store_slot_count(files) if self.options.hash_slot_num is None and files else None
            parts += [FilesPartition(layout.name, layout.files, (f, slots)) for f in files]
        return parts or [EMPTY]

    def view(self, partition: FilesPartition):
        from rocketstore_spark.store.indexes import read_index_file
        path, store_slots = partition.items
        return read_index_file(path, self.options.hash_slot_num, store_slots)


class IndexHeaderReader(_IndexFilesReader):
    def read(self, partition: FilesPartition):
        if not partition.items:
            return
        idx = self.view(partition)
        h = idx.header
        yield self.project({
            "store": partition.store, "file": os.path.basename(idx.path), "file_size": idx.file_size,
            "begin_timestamp": timestamp(h["begin_timestamp"]), "end_timestamp": timestamp(h["end_timestamp"]),
            "begin_phy_offset": h["begin_phy_offset"], "end_phy_offset": h["end_phy_offset"],
            "hash_slot_count": h["hash_slot_count"], "index_count": h["index_count"],
            "hash_slot_num": idx.geometry.hash_slot_num if idx.geometry else None,
            "index_num": idx.geometry.index_num if idx.geometry else None,
            "geometry_source": idx.geometry_source, "geometry_problem": idx.problem,
        })


class IndexReader(_IndexFilesReader):
    def read(self, partition: FilesPartition):
        if not partition.items:
            return
        import pyarrow as pa

        from rocketstore_spark.codec.arrow import TIMESTAMP_TYPE, fixed_array
        from rocketstore_spark.store.indexes import iter_entries
        idx = self.view(partition)
        if idx.geometry is None and idx.header["index_count"] > 1:
            from rocketstore_spark.findings import StoreError, finding
            raise StoreError(finding("index.unknown_geometry", idx.path, None, idx.problem))
        begin = int(idx.header["begin_timestamp"])
        name = os.path.basename(idx.path)
        for first, e in iter_entries(idx):
            n = len(e)
            cols = {
                "store": pa.repeat(pa.scalar(partition.store, pa.string()), n),
                "file": pa.repeat(pa.scalar(name, pa.string()), n),
                "entry_index": fixed_array(np.arange(first, first + n, dtype=np.int32)),
                "slot": fixed_array((e["key_hash"].astype(np.int64) % idx.geometry.hash_slot_num).astype(np.int32)),
                "key_hash": fixed_array(e["key_hash"].astype(np.int32)),
                "physical_offset": fixed_array(e["phy_offset"].astype(np.int64)),
                "time_diff": fixed_array(e["time_diff"].astype(np.int32)),
                "prev_index": fixed_array(e["prev_index"].astype(np.int32)),
                "store_time": fixed_array(store_time_us(begin, e["time_diff"]), TIMESTAMP_TYPE),
            }
            yield self.to_batch(cols)


def store_time_us(begin_ms: int, time_diff: np.ndarray) -> np.ndarray:
    """begin + time_diff seconds, in microseconds; values outside what a timestamp can hold are clamped to
    its range (a corrupt header or entry must not fail the batch)."""
    ms = np.clip(np.int64(begin_ms) + time_diff.astype(np.int64) * 1000, MIN_TIMESTAMP_MS, MAX_TIMESTAMP_MS)
    return ms * 1000


class IndexDataSource(TableSource):
    """One row per IndexFile entry (see module docstring)."""
    NAME = "rocketmq_index"
    WORK = Work.READ_INDEX
    SCHEMA = INDEX_SCHEMA
    OPTIONS = IndexOptions
    READER = IndexReader


class IndexHeaderDataSource(TableSource):
    """One row per IndexFile: its header and geometry (see module docstring)."""
    NAME = "rocketmq_index_header"
    WORK = Work.READ_INDEX
    SCHEMA = INDEX_HEADER_SCHEMA
    OPTIONS = IndexOptions
    READER = IndexHeaderReader
