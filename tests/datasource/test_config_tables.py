"""rocketmq_topics, rocketmq_subscription_groups, rocketmq_delay_offsets against what RocketMQ was given
(config-manifest.json of both versions' consumer-offsets stores, read in one scan), and the .bak fallback."""
from __future__ import annotations

import shutil

import pytest

from tests.golden.goldens import all_goldens, canonical, expected_config_rows

pytestmark = pytest.mark.spark

CONFIG_GOLDENS = [g for g in all_goldens() if g.config_manifest is not None]
SOURCES = {"topics": ("rocketmq_topics", "topics.json"),
           "subscription_groups": ("rocketmq_subscription_groups", "subscriptionGroup.json"),
           "delay_offsets": ("rocketmq_delay_offsets", "delayOffset.json")}


def without_store_columns(rows, source_file: str) -> list[dict]:
    """The rows read from ``source_file``, without the store and source_file columns."""
    out = [r.asDict() for r in rows if r.source_file == source_file]
    for r in out:
        del r["store"], r["source_file"]
    return canonical(out)


@pytest.mark.parametrize("table", SOURCES)
def test_rows_are_what_rocketmq_was_given(spark, table):
    source, name = SOURCES[table]
    rows = spark.read.format(source).load(",".join(str(g.store) for g in CONFIG_GOLDENS)).collect()
    assert len({r.store for r in rows}) == len(CONFIG_GOLDENS)
    for g in CONFIG_GOLDENS:
        assert without_store_columns(rows, str(g.store / "config" / name)) == expected_config_rows(g, table), g.id


def test_each_table_falls_back_to_its_bak_as_the_broker_does(spark, tmp_path):
    golden = next(g for g in CONFIG_GOLDENS if g.version.startswith("5."))
    store = tmp_path / "store"
    shutil.copytree(golden.store, store)
    config = store / "config"
    (config / "topics.json").write_text('{"topicConfigTable":{"T":{"perm":"rw"}}}')     # the broker cannot bind it
    (config / "subscriptionGroup.json").write_text("")
    (config / "delayOffset.json").unlink()
    for table, (source, name) in SOURCES.items():
        rows = spark.read.format(source).load(str(store)).collect()
        bak = str(config / (name + ".bak"))
        assert len(rows) == len(without_store_columns(rows, bak)) > 0, table
        assert without_store_columns(rows, bak) == expected_config_rows(golden, table, "bak"), table
