"""``spark.read.format("rocketmq_segments")``: one row per CommitLog segment scan.

Records, first/last store time, where the valid data ends and why the walk stopped (BLANK, zero fill, or
damage), CRC failures past the first, and every finding (check id, severity, file relative to the store,
byte position, message): corruption is data here. Findings about the store rather than a segment (a stray
file in ``commitlog/``) come in one extra row per store whose ``segment`` is null. Options: ``checkCrc`` (default true), ``checkPropertiesCrc`` and ``checkTimes`` (default false; see
``store.scan.scan_segment``), ``maxRecordSize``. Consecutive segments of a
store share a partition, as many partitions as the session has cores (Spark's per-task cost is ~75 ms).
Planning lists files (driver); the scan runs in Spark's Python workers.
"""
from __future__ import annotations

import os

from rocketstore_spark.datasource.base import EMPTY, FilesPartition, TableReader, TableSource, timestamp
from rocketstore_spark.datasource.options import SegmentsOptions
from rocketstore_spark.datasource.schemas import SEGMENTS_SCHEMA
from rocketstore_spark.store.engines import Work


class SegmentsReader(TableReader):
    def partitions(self):
        from rocketstore_spark.datasource.planning import session_parallelism
        layouts = self.layouts()
        per_partition = max(1, -(-sum(len(layout.segments) for layout in layouts) // session_parallelism()))
        parts = []
        for layout in layouts:
            # layout findings about a segment (wrong size, gap, ...) travel with it
            items = [(seg.path, seg.base_offset, seg.size, layout.followed(k),
                      tuple(f for f in layout.findings if f.file == seg.path), layout.next_path(k))
                     for k, seg in enumerate(layout.segments)]
            paths = {seg.path for seg in layout.segments}
            store_findings = tuple(f for f in layout.findings if f.file not in paths)
            if store_findings:
                items.append((None, None, None, False, store_findings, None))
            for i in range(0, len(items), per_partition):
                parts.append(FilesPartition(layout.name, layout.files, tuple(items[i:i + per_partition])))
        return parts or [EMPTY]

    def read(self, partition: FilesPartition):
        root = str(partition.files.commitlog_dir.parent) if partition.files is not None else ""
        for item in partition.items:
            if item[0] is None:
                yield self.project({c: None for c in self.columns} | {
                    "store": partition.store, "records": 0, "crc_failures": 0,
                    "findings": self._findings(root, item[4])})
            else:
                yield self._scan(partition.store, root, *item)

    @staticmethod
    def _findings(root: str, findings) -> list[tuple]:
        return [(f.check, str(f.severity), os.path.relpath(f.file, root) if f.file.startswith(root) else f.file,
                 f.file_position, f.message, f.physical_offset, {k: str(v) for k, v in f.evidence.items()})
                for f in findings]

    def _scan(self, store: str, root: str, path: str, base_offset: int, size: int, followed: bool,
              layout_findings: tuple, next_path: str | None) -> tuple:
        from rocketstore_spark.store.scan import scan_segment
        summary = scan_segment(path, base_offset, check_crc=self.options.check_crc,
                               max_record_size=self.options.max_record_size, followed=followed,
                               check_properties_crc=self.options.check_properties_crc,
                               check_times=self.options.check_times, next_path=next_path)
        findings = list(layout_findings) + summary.findings
        return self.project({
            "store": store, "segment": os.path.basename(path), "base_offset": base_offset,
            "file_size": size, "records": summary.records,
            "first_store_timestamp": timestamp(summary.first_store_timestamp),
            "last_store_timestamp": timestamp(summary.last_store_timestamp),
            "valid_end": summary.valid_end, "stop_reason": summary.stop_reason,
            "stop_position": summary.stop_position, "crc_failures": summary.crc_failures,
            "first_crc_failure": summary.first_crc_failure, "data_end": summary.data_end,
            "properties_crc_failures": summary.properties_crc_failures,
            "findings": self._findings(root, findings),
        })


class SegmentsDataSource(TableSource):
    """One row per CommitLog segment scan (see module docstring)."""
    NAME = "rocketmq_segments"
    WORK = Work.READ_COMMITLOG
    SCHEMA = SEGMENTS_SCHEMA
    OPTIONS = SegmentsOptions
    READER = SegmentsReader
    NEEDS_ROOT = False
