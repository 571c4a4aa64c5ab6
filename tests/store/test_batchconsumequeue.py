"""BatchConsumeQueue files (codec.batchconsumequeue, store.queues.read_batch_queue) against RocketMQ 5.5.1's view
in tests/golden/batchcq-5.5.1/: the raw units as written and the units RocketMQ's BatchConsumeQueue serves."""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec import batchconsumequeue
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.queues import read_batch_queue

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "batchcq-5.5.1"
SCENARIOS = ("clean", "crash")


def store(scenario: str) -> Path:
    return GOLDEN / scenario / "store"


@cache
def manifest(scenario: str) -> dict:
    return json.loads((GOLDEN / scenario / "manifest.json").read_text())


def batch_queues(scenario: str) -> list[dict]:
    """RocketMQ's BatchCQ queues after a restart (recovery.queues with cq_type BatchCQ)."""
    return [q for q in manifest(scenario)["recovery"]["queues"] if q["cq_type"] == "BatchCQ"]


def read_units(scenario: str) -> dict[tuple[str, int], np.ndarray]:
    out = {}
    for topic, queue_id, qdir in StoreMap.of_root(store(scenario)).batch_queue_dirs():
        out[(topic, queue_id)] = np.concatenate([c.units for c in read_batch_queue(str(qdir))])
    return out


def test_unit_layout_is_rocketmqs():
    # BatchConsumeQueue's own offsets of the fields (MSG_TAG_OFFSET_INDEX 12, store time 20, base 28, batch 36,
    # compacted 38) and unit size 46
    fields = batchconsumequeue.UNIT_DTYPE.fields
    assert [fields[f][1] for f in ("tags_code", "store_timestamp", "base_offset", "batch_size", "compacted_offset")] \
        == [12, 20, 28, 36, 38]
    assert batchconsumequeue.UNIT_SIZE == 46


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_units_are_the_bytes_rocketmq_wrote(scenario):
    files = manifest(scenario)["files"]
    assert files, "the golden store has batchconsumequeue/ files"
    by_file = {}
    for topic, queue_id, qdir in StoreMap.of_root(store(scenario)).batch_queue_dirs():
        for chunk in read_batch_queue(str(qdir)):
            rel = str(Path(chunk.file).relative_to(store(scenario)))
            by_file[rel] = [u.tobytes().hex() for u in chunk.units]
            assert list(chunk.file_positions) == [46 * i for i in range(len(chunk.units))]
    assert by_file == {f["path"]: f["units"] for f in files if f["units"]}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_units_as_rocketmq_serves_them(scenario):
    units = read_units(scenario)
    for q in batch_queues(scenario):
        u = units[(q["topic"], q["queue_id"])]
        # (queue offset, position, size, tagsCode, batch size, compacted offset) from BatchConsumeQueue.get
        assert [list(t) for t in zip(u["base_offset"].tolist(), u["physical_offset"].tolist(), u["size"].tolist(),
                                     u["tags_code"].tolist(), u["batch_size"].tolist(),
                                     u["compacted_offset"].tolist())] == q["units"]
        assert int(u["base_offset"][0]) == q["min_offset"]
        assert int(u["base_offset"][-1] + u["batch_size"][-1]) == q["max_offset"]
