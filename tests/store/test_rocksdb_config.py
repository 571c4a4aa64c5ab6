"""Topics and subscription groups in the v1 RocksDB config (config/topics/ + config/subscriptionGroups/, or
useSingleRocksDBForAllConfigs' config/metadata/) against what RocketMQ 5.5.1's own v1 RocksDBConfigManager
loads back (tests/golden/rocksdb-5.5.1/config-v1*/manifest.json, RocksDBConfigGolden): every row, the removed
topic and group absent, the last put winning, the forbidden bits; a newer JSON file merged as the broker's
``merge`` does. Topics, groups and consumer offsets of v2's config/rdb/ against what RocketMQ's ConfigStorage
and the v2 managers' parsing load back (config-v2/manifest.json, RocksDBConfigV2Golden). The databases
untouched; a damaged one a problem naming it, never a traceback; a repair still refused."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.engines import UnsupportedStore, Work, detect
from rocketstore_spark.store.files import read_consumer_offsets, read_subscription_groups, read_topics
from rocketstore_spark.store.layout import StoreMap
from tests.golden.goldens import canonical, expected_config_rows
from tests.store.test_rocksdb import snapshot, store

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "rocksdb-5.5.1"
CONFIG_SCENARIOS = {"config-v1": ("topics", "subscriptionGroups"), "config-v1-single": ("metadata", "metadata"),
                    "config-v2": ("rdb", "rdb")}


def config_manifest(scenario: str) -> dict:
    return json.loads((GOLDEN / scenario / "manifest.json").read_text())


def expected(scenario: str, table: str) -> list[dict]:
    """The rows RocketMQ's managers loaded back ("topics" or "subscription_groups"), as the JSON goldens'."""
    m = config_manifest(scenario)
    shim = SimpleNamespace(config_manifest={"topics": {"current": m["topics"]},
                                            "subscription_groups": {"current": m["subscription_groups"]}})
    return expected_config_rows(shim, table)


def with_config(tmp_path: Path, scenario: str) -> Path:
    """A copy of the RocksDB ConsumeQueue clean store with the scenario's RocksDB config databases beside its
    consumer offsets (a whole broker store, so the CLI and Spark sources accept it)."""
    root = tmp_path / "store"
    shutil.copytree(store("clean"), root)
    for db in (GOLDEN / scenario / "store" / "config").iterdir():
        shutil.copytree(db, root / "config" / db.name)
    return root


@pytest.mark.parametrize("scenario", CONFIG_SCENARIOS)
def test_topics_and_groups_are_what_rocketmqs_managers_load(scenario):
    root = GOLDEN / scenario / "store"
    before = snapshot(root)
    files = StoreMap.of_root(root)
    topics, groups = read_topics(files), read_subscription_groups(files)
    assert topics.problems == groups.problems == []
    assert canonical(topics.rows) == expected(scenario, "topics")
    assert canonical(groups.rows) == expected(scenario, "subscription_groups")
    topic_db, group_db = CONFIG_SCENARIOS[scenario]
    assert (topics.source, groups.source) == (str(root / "config" / topic_db), str(root / "config" / group_db))
    removed = config_manifest(scenario)["removed"]
    assert removed[0] not in {r["topic"] for r in topics.rows}
    assert removed[1:] == [] or removed[1] not in {r["consumer_group"] for r in groups.rows}
    engines = detect(root)
    assert {f.check for f in engines.findings} == {"store.partial_engine"}
    engines.refuse(Work.READ_CONFIG)
    with pytest.raises(UnsupportedStore, match="config/"):
        engines.refuse(Work.REPAIR)
    assert snapshot(root) == before


@pytest.mark.parametrize("newer", [True, False])
def test_a_json_file_is_merged_over_the_database_only_when_its_data_version_is_newer(tmp_path, newer):
    # RocksDBTopicConfigManager.merge / RocksDBSubscriptionGroupManager.merge: the JSON tables put over the
    # database's when the file's dataVersion counter exceeds the database's kvDataVersion counter
    root = with_config(tmp_path, "config-v1")
    m = config_manifest("config-v1")
    counter = m["topics_data_version_counter"] + 1 if newer else m["topics_data_version_counter"]
    (root / "config" / "topics.json").write_text(json.dumps({
        "topicConfigTable": {"TopicTest": {"topicName": "TopicTest", "readQueueNums": 2, "writeQueueNums": 2,
                                           "perm": 2, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0,
                                           "order": False, "attributes": {}},
                             "JsonOnly": {"topicName": "JsonOnly", "readQueueNums": 1, "writeQueueNums": 1,
                                          "perm": 6}},
        "dataVersion": {"counter": counter, "timestamp": 0}}))
    counter = m["subscription_groups_data_version_counter"] + (1 if newer else 0)
    (root / "config" / "subscriptionGroup.json").write_text(json.dumps({
        "subscriptionGroupTable": {"json_group": {"groupName": "json_group", "retryMaxTimes": 2}},
        "forbiddenTable": {"golden_beyond_max": {"V6Topic": 1}},
        "dataVersion": {"counter": counter, "timestamp": 0}}))
    files = discover(str(root))[0].files
    topics, groups = read_topics(files), read_subscription_groups(files)
    want_topics = {r["topic"]: r for r in expected("config-v1", "topics")}
    want_groups = {r["consumer_group"]: r for r in expected("config-v1", "subscription_groups")}
    if newer:
        want_topics["TopicTest"] = {**want_topics["TopicTest"], "read_queue_nums": 2, "write_queue_nums": 2,
                                    "perm": 2, "perm_string": "-W-", "attributes": {}}
        want_topics["JsonOnly"] = {**dict.fromkeys(want_topics["TopicTest"]), "topic": "JsonOnly",
                                   "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6, "perm_string": "RW-"}
        want_groups["json_group"] = {**dict.fromkeys(want_groups["golden_in_range"]), "consumer_group": "json_group",
                                     "retry_max_times": 2}
        want_groups["golden_beyond_max"] = {**want_groups["golden_beyond_max"], "forbidden": {"V6Topic": 1}}
        assert topics.source.endswith("topics.json") and groups.source.endswith("subscriptionGroup.json")
    assert canonical(topics.rows) == canonical(want_topics.values())
    assert canonical(groups.rows) == canonical(want_groups.values())


def test_a_damaged_database_is_a_problem_naming_it_not_a_traceback(tmp_path):
    from tests.cli.helpers import run
    root = with_config(tmp_path, "config-v1")
    for p in (root / "config" / "topics").glob("*.sst"):
        p.write_bytes(b"\0" * 64)
    topics = read_topics(discover(str(root))[0].files)
    assert topics.rows == [] and any("config/topics" in p for p in topics.problems)
    assert canonical(read_subscription_groups(discover(str(root))[0].files).rows) == \
        expected("config-v1", "subscription_groups")
    r = run("offsets", root)
    assert r.exit_code == 3 and "offsets.unreadable" in r.output and "config/topics" in r.output
    assert "Traceback" not in r.output


def test_v2_consumer_offsets_are_what_rocketmq_committed_and_the_store_is_left_alone(tmp_path):
    root = with_config(tmp_path, "config-v2")            # beside v1's config/consumerOffsets/: v2 is the broker's
    before = snapshot(root)
    offsets = read_consumer_offsets(discover(str(root))[0].files)
    want = [(topic, group, queue_id, offset) for group, topic, queue_id, offset in
            config_manifest("config-v2")["consumer_offsets"]]
    assert offsets.problems == [] and offsets.source == str(root / "config" / "rdb")
    assert sorted(offsets.rows) == sorted(want)
    pulls = {tuple(p) for p in config_manifest("config-v2")["pull_offsets"]}
    assert pulls and not {(g, t, q, o) for t, g, q, o in offsets.rows} & pulls     # pull offsets are not commits
    layout = discover(str(root))[0]
    layout.refuse(Work.READ_OFFSETS)
    layout.refuse(Work.READ_CONFIG)
    with pytest.raises(UnsupportedStore, match="config/rdb/"):
        layout.refuse(Work.REPAIR)
    assert snapshot(root) == before


def test_a_damaged_v2_database_is_a_problem_naming_it(tmp_path):
    from tests.cli.helpers import run
    root = with_config(tmp_path, "config-v2")
    for p in (root / "config" / "rdb").glob("MANIFEST-*"):
        p.unlink()
    files = discover(str(root))[0].files
    for reader in (read_topics, read_subscription_groups, read_consumer_offsets):
        config = reader(files)
        assert config.rows == [] and any("config/rdb" in p for p in config.problems), reader
    r = run("offsets", root)
    assert r.exit_code == 3 and "offsets.unreadable" in r.output and "config/rdb" in r.output
    assert "Traceback" not in r.output
