"""store.files' config readers: the broker's ConfigManager.load fallback (the file, else file.bak when missing,
empty or unparsable), one function for all four files, on copies of RocketMQ-written config/ directories."""
from __future__ import annotations

import shutil

import pytest

from rocketstore_spark.store import files
from rocketstore_spark.store.layout import StoreMap
from tests.golden.goldens import BY_ID, canonical, expected_config_rows

READERS = {"topics": ("topics.json", files.read_topics),
           "subscription_groups": ("subscriptionGroup.json", files.read_subscription_groups),
           "delay_offsets": ("delayOffset.json", files.read_delay_offsets)}


@pytest.fixture(params=["4.9.8", "5.5.1"])
def store(request, tmp_path):
    """A store root holding a copy of the golden consumer-offsets config/ directory."""
    golden = BY_ID[f"{request.param}/consumer-offsets"]
    shutil.copytree(golden.store / "config", tmp_path / "config")
    return golden, tmp_path


def test_config_paths_come_from_the_store_map():
    m = StoreMap.of_root("/data/store")
    assert [str(p) for p in m.topics_paths()] == ["/data/store/config/topics.json", "/data/store/config/topics.json.bak"]
    assert [p.name for p in m.subscription_groups_paths()] == ["subscriptionGroup.json", "subscriptionGroup.json.bak"]
    assert [p.name for p in m.delay_offsets_paths()] == ["delayOffset.json", "delayOffset.json.bak"]
    assert StoreMap(None, m.commitlog_dir).topics_paths() == ()
    assert files.read_topics(StoreMap(None, m.commitlog_dir)) == files.ConfigFile(None, [], [])


@pytest.mark.parametrize("table", READERS)
def test_the_file_is_read_when_it_loads(store, table):
    golden, root = store
    name, read = READERS[table]
    got = read(StoreMap.of_root(root))
    assert got.source == str(root / "config" / name) and got.problems == []
    assert canonical(got.rows) == expected_config_rows(golden, table)


@pytest.mark.parametrize("damage", ["missing", "empty", "unparsable", "wrong type"])
@pytest.mark.parametrize("table", READERS)
def test_the_bak_is_read_when_the_file_is_missing_empty_or_unparsable(store, table, damage):
    golden, root = store
    name, read = READERS[table]
    main = root / "config" / name
    text = main.read_text()
    if damage == "missing":
        main.unlink()
    else:                           # "wrong type": valid JSON the broker cannot bind (fastjson throws)
        main.write_text({"empty": "", "unparsable": text[: len(text) // 2],
                         "wrong type": '{"offsetTable":{1:"soon"},"topicConfigTable":{"T":{"perm":"rw"}},'
                                       '"subscriptionGroupTable":{"g":[]}}'}[damage])
    got = read(StoreMap.of_root(root))
    assert got.source == str(main) + ".bak"
    assert canonical(got.rows) == expected_config_rows(golden, table, "bak")
    assert len(got.problems) == (damage != "missing") and all(p.startswith(f"{main}: ") for p in got.problems)


def test_neither_file_loading_gives_no_rows_and_both_problems(store):
    _, root = store
    for suffix in ("", ".bak"):
        (root / "config" / f"topics.json{suffix}").write_text('{"topicConfigTable":{"T":{"perm":"rw"}}}')
    got = files.read_topics(StoreMap.of_root(root))
    assert got.source is None and got.rows == []
    assert [p.split(": ", 1)[0].rsplit("/", 1)[1] for p in got.problems] == ["topics.json", "topics.json.bak"]
    assert "topicConfigTable['T'].perm 'rw' is not an integer" in got.problems[0]


def test_a_store_without_config_files_has_no_rows_and_no_problems(tmp_path):
    assert files.read_subscription_groups(StoreMap.of_root(tmp_path)) == files.ConfigFile(None, [], [])
