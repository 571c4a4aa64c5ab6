"""``spark.read.format("rocketmq_dledger_index")`` and ``"rocketmq_dledger_checkpoint"``: a DLedger store's index
units (one row per 32-byte unit written: the entry it names — magic, pos, size, index, term — and ``unit``, the
entry index its place says, which DLedger's recovery compares) and, per ``dledger-<selfId>`` directory, its
checkpoint (endIndex, committedIndex) and current term and vote. Empty for a classic store. Reading runs in
Spark's Python workers (docs/format/dledger.md; ``store.dledger``).
"""
from __future__ import annotations

from rocketstore_spark.datasource.base import StoreTableReader, TableSource
from rocketstore_spark.datasource.schemas import DLEDGER_CHECKPOINT_SCHEMA, DLEDGER_INDEX_SCHEMA


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class DLedgerIndexReader(StoreTableReader):
    def read(self, partition):
        import os

        import pyarrow as pa

        from rocketstore_spark.store.dledger import UNIT_SIZE, dledger_dirs, read_index_units
        if partition.files is None or partition.files.root is None:
            return
        for directory in dledger_dirs(partition.files.root):
            self_id = directory.name.removeprefix("dledger-")
            for path, units, positions in read_index_units(directory):
                n = len(units)
                base = int(os.path.basename(path))
                yield self.to_batch({
                    "store": pa.array([partition.store] * n, pa.string()),
                    "self_id": pa.array([self_id] * n, pa.string()),
                    "file": pa.array([os.path.relpath(path, partition.files.root)] * n, pa.string()),
                    "file_position": pa.array(positions), "unit": pa.array((base + positions) // UNIT_SIZE),
                    "magic": pa.array(units["magic"].astype("int32")), "pos": pa.array(units["pos"].astype("int64")),
                    "size": pa.array(units["size"].astype("int32")),
                    "entry_index": pa.array(units["index"].astype("int64")),
                    "term": pa.array(units["term"].astype("int64")),
                })


class DLedgerCheckpointReader(StoreTableReader):
    def read(self, partition):
        from rocketstore_spark.store.dledger import dledger_dirs, read_properties
        if partition.files is None or partition.files.root is None:
            return
        for directory in dledger_dirs(partition.files.root):
            cp = read_properties(directory / "checkpoint")
            term = read_properties(directory / "currterm") or {}
            yield self.project({
                "store": partition.store, "self_id": directory.name.removeprefix("dledger-"),
                "end_index": _int((cp or {}).get("endIndex")),
                "committed_index": _int((cp or {}).get("committedIndex")),
                "current_term": _int(term.get("currTerm")), "vote_leader": term.get("voteLeader"),
                "checkpoint_present": cp is not None,
            })


class DLedgerIndexDataSource(TableSource):
    """DLedger index units, one row per unit written."""
    NAME = "rocketmq_dledger_index"
    SCHEMA = DLEDGER_INDEX_SCHEMA
    READER = DLedgerIndexReader


class DLedgerCheckpointDataSource(TableSource):
    """DLedger's checkpoint and current term, one row per dledger-<selfId> directory."""
    NAME = "rocketmq_dledger_checkpoint"
    SCHEMA = DLEDGER_CHECKPOINT_SCHEMA
    READER = DLedgerCheckpointReader
