"""The parallel rebuild's tasks without Spark (store.spill): the CommitLog scanned in many small ranges,
queues written by group and IndexFiles one by one from the spill files give RocketMQ's own files."""
from __future__ import annotations

import pytest

from rocketstore_spark.datasource.planning import plan_partitions
from rocketstore_spark.rebuild import parallel
from rocketstore_spark.rebuild.output import index_name
from rocketstore_spark.rocketmq.settings import resolve
from rocketstore_spark.spark.rebuild import plan_index_files
from rocketstore_spark.store import spill
from rocketstore_spark.store.discovery import discover
from tests.rebuild.test_rebuild import CLEAN
from tests.store_files import tree_bytes


@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.id)
@pytest.mark.parametrize("split_size,groups", [(16384, 3), (1 << 30, 1)])
def test_spilled_tasks_write_rocketmqs_files(g, split_size, groups, tmp_path):
    layout = discover(str(g.store))[0]
    settings = resolve(layout, None, None)
    work, out = tmp_path / "spill", tmp_path / "out"
    partitions = plan_partitions([(layout.name, s, layout.followed(k)) for k, s in enumerate(layout.segments)],
                                 split_size, 1)
    topics, task_keys = [], []
    for task, p in enumerate(partitions):
        ranges = [(r.path, r.base_offset, r.start, r.end, r.followed) for r in p.ranges]
        names, keys, findings = spill.scan_range(ranges, work, task, groups, settings.message_delay_level, True,
                                                 settings.release.index_tags)
        assert not findings
        topics.append(names)
        task_keys.append(keys)
    for group in range(groups):
        _, unsafe, findings, _ = parallel.write_queue_group(work, group, topics, out,
                                                      settings.consume_queue_file_size)
        assert not unsafe and not findings
    previous = None
    for first, count in plan_index_files(task_keys, settings.geometry.index_num)[1]:
        name, previous = index_name(spill.key_at(work, task_keys, first)[1], previous)
        assert parallel.write_index_file(work, task_keys, out, name, settings.geometry, first, count) == count
    expected = g.store.parent / "expected-rebuild"
    assert tree_bytes(out / "consumequeue") == tree_bytes(expected / "consumequeue")
    assert [p.read_bytes() for p in sorted((out / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((expected / "index").iterdir())]
