"""What is in a store, as one JSON-ready document (driver; ``rocketstore inspect``, notebooks): its CommitLog
segments (a header scan each, no CRC), its queues with RocketMQ's min and max offsets, its IndexFiles, the
checkpoint and shutdown state and the release — read-only, in-process.

    for doc in inspect_stores(["tests/golden/rocketmq-5.5.1/clean/store"]):
        print(doc["store"], doc["rocketmq_release"], len(doc["segments"]))
"""
from __future__ import annotations

import os

from rocketstore_spark.findings import finding
from rocketstore_spark.report.text import utc_time
from rocketstore_spark.rocketmq.consumequeue import store_queue_bounds
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.store.discovery import StoreLayout, discover
from rocketstore_spark.store.engines import Work
from rocketstore_spark.store.files import read_checkpoint
from rocketstore_spark.store.indexes import read_index_file
from rocketstore_spark.store.rocksdb import RocksDBUnreadable, queue_db
from rocketstore_spark.store.scan import scan_segment


def inspect_store(layout: StoreLayout) -> dict:
    """The document of one store (times as UTC text, offsets as numbers). The parts an engine we do not read
    keeps (``store.engines``) are left empty; ``engines`` and the layout findings say why."""
    settings = resolve(layout)
    segments = []
    for k, seg in enumerate(layout.segments if not layout.refused(Work.READ_COMMITLOG) else ()):
        s = scan_segment(seg.path, seg.base_offset, check_crc=False, followed=layout.followed(k),
                         next_path=layout.next_path(k))
        segments.append({"file": os.path.basename(seg.path), "base_offset": seg.base_offset, "size": seg.size,
                         "records": s.records, "first_store_time": utc_time(s.first_store_timestamp),
                         "last_store_time": utc_time(s.last_store_timestamp), "valid_end": s.valid_end,
                         "stop": s.stop_reason, "findings": len(s.findings)})
    problems = []
    try:
        bounds = store_queue_bounds(layout, settings.release.expired_min_is_max) \
            if not layout.refused(Work.READ_QUEUE_UNITS) else {}
    except RocksDBUnreadable as e:
        bounds, problems = {}, [finding("rocksdb.unreadable", e.path, None, e.why).render()]
    queues = []
    if queue_db(layout.root) is not None:         # a RocksDB ConsumeQueue: no files, one database
        queues = [{"topic": topic, "queue_id": queue_id, "min_offset": lo, "max_offset": hi, "messages": hi - lo,
                   "files": 0} for (topic, queue_id), (lo, hi) in bounds.items()]
    for topic, queue_id, d in layout.files.queue_dirs() if not layout.refused(Work.READ_QUEUES) and not queues else ():
        lo, hi = bounds[(topic, queue_id)]
        queues.append({"topic": topic, "queue_id": queue_id, "min_offset": lo, "max_offset": hi, "messages": hi - lo,
                       "files": len(layout.files.queue_files(d))})
    index = []
    for p in layout.files.index_files() if not layout.refused(Work.READ_INDEX) else ():
        v = read_index_file(str(p), settings.geometry.hash_slot_num if settings.geometry else None)
        index.append({"file": p.name, "entries": v.entry_count, "begin_time": utc_time(v.header["begin_timestamp"]),
                      "end_time": utc_time(v.header["end_timestamp"]), "begin_phy_offset": v.header["begin_phy_offset"],
                      "end_phy_offset": v.header["end_phy_offset"], "problem": v.problem})
    state = read_checkpoint(layout.files) if layout.files.root is not None else None
    return {"store": layout.name, "rocketmq_version": str(settings.release),
            "rocketmq_release": settings.release_label, "release_source": settings.sources.get("rocketmqVersion"),
            "abort_present": bool(state and state.abort_present), "lock_present": bool(state and state.lock_present),
            "checkpoint": state.checkpoint if state else None, "segments": segments, "queues": queues,
            "index_files": index, "layout_findings": [f.render() for f in layout.findings] + problems,
            "engines": [{"engine": e.name, "evidence": e.evidence} for e in (layout.engines.engines
                                                                           if layout.engines else [])]}


def inspect_stores(paths) -> list[dict]:
    """The document of every store found under each of ``paths`` (``store.discovery.discover``), in order."""
    return [inspect_store(layout) for path in paths for layout in discover(path)]
