"""config_json's parsers of topics.json, subscriptionGroup.json and delayOffset.json: RocketMQ-written files
(4.9.8 fastjson 1.x, 5.5.1 fastjson2) against what RocketMQ was given, fastjson's quirks, malformed input."""
from __future__ import annotations

import pytest

from rocketstore_spark.codec import config_json
from tests.golden.goldens import all_goldens, canonical, expected_config_rows

CONFIG_GOLDENS = [g for g in all_goldens() if g.config_manifest is not None]
PARSERS = {"topics": ("topics.json", config_json.topics),
           "subscription_groups": ("subscriptionGroup.json", config_json.subscription_groups),
           "delay_offsets": ("delayOffset.json", config_json.delay_offsets)}


def test_both_rocketmq_lines_have_config_files():
    assert sorted(g.version for g in CONFIG_GOLDENS) == ["4.9.8", "5.1.4", "5.3.3", "5.5.1"]


@pytest.mark.parametrize("table", PARSERS)
@pytest.mark.parametrize("state", ["current", "bak"])
@pytest.mark.parametrize("golden", CONFIG_GOLDENS, ids=lambda g: g.id)
def test_golden_config_files_parse_to_what_rocketmq_was_given(golden, table, state):
    name, parse = PARSERS[table]
    text = (golden.store / "config" / (name + (".bak" if state == "bak" else ""))).read_text()
    assert canonical(parse(text)) == expected_config_rows(golden, table, state)


def test_fastjson_integer_keys_are_quoted_outside_strings_only():
    text = '{\n\t"offsetTable":{1:1,2:1,-3:7\n\t},"note":"{4:5, 6:7}"}'       # fastjson 1.x: `{1:1,2:1\n\t}`
    assert config_json.loads(text) == {"offsetTable": {"1": 1, "2": 1, "-3": 7}, "note": "{4:5, 6:7}"}
    rows = config_json.topics('{"topicConfigTable":{"a,1:b":{"perm":6,"attributes":{"k":"{2:3"}}}}')
    assert rows[0]["topic"] == "a,1:b" and rows[0]["attributes"] == {"k": "{2:3"}


def test_what_fastjson_accepts_is_read_as_the_broker_reads_it():
    topics = config_json.topics('{"dataVersion":{"counter":1},"topicConfigTable":{"T":{'
                                '"readQueueNums":"4","perm":"7","order":"true","attributes":{"reserve.time":72},'
                                '"unknownField":[1]}}}')
    assert topics == [{"topic": "T", "read_queue_nums": 4, "write_queue_nums": None, "perm": 7,
                       "topic_filter_type": None, "topic_sys_flag": None, "order": True,
                       "attributes": {"reserve.time": "72"}, "perm_string": "RWX"}]
    groups = config_json.subscription_groups('{"subscriptionGroupTable":{"g":{"consumeEnable":0,"brokerId":null}}}')
    assert groups[0]["consume_enable"] is False and groups[0]["broker_id"] is None and groups[0]["forbidden"] is None
    # 5.x adds a dataVersion next to the levels; a missing table is an empty one (the field's default)
    assert config_json.delay_offsets('{"dataVersion":{"counter":3},"offsetTable":{18:2}}') == [
        {"delay_level": 18, "offset": 2}]
    assert config_json.delay_offsets('{"dataVersion":{}}') == [] and config_json.topics("{}") == []


def test_perm_string_is_perm2string():
    assert [config_json.perm_string(p) for p in (0, 1, 2, 4, 6, 7, 14, 15)] == [
        "---", "--X", "-W-", "R--", "RW-", "RWX", "RW-", "RWX"]                 # priority (8) is not shown


def test_a_group_only_in_the_forbidden_table_has_a_row_of_its_own():
    rows = config_json.subscription_groups('{"forbiddenTable":{"g":{"T":5},"h":{"U":2}},'
                                           '"subscriptionGroupTable":{"g":{"groupName":"g"}}}')
    assert [(r["consumer_group"], r["forbidden"], r["consume_enable"]) for r in rows] == [
        ("g", {"T": 5}, None), ("h", {"U": 2}, None)]


@pytest.mark.parametrize("parse, text, message", [
    (config_json.topics, '{"topicConfigTable":{"T":{"perm":"rw"}}}', r"topicConfigTable\['T'\]\.perm 'rw' is not an integer"),
    (config_json.topics, '{"topicConfigTable":{"T":{"readQueueNums":2147483648}}}', r"readQueueNums 2147483648 is out of range"),
    (config_json.topics, '{"topicConfigTable":{"T":{"order":"maybe"}}}', r"order 'maybe' is not a boolean"),
    (config_json.topics, '{"topicConfigTable":{"T":{"topicFilterType":3}}}', r"topicFilterType 3 is not a string"),
    (config_json.topics, '{"topicConfigTable":{"T":{"attributes":{"k":[1]}}}}', r"attributes\['k'\] \[1\] is not a string"),
    (config_json.topics, '{"topicConfigTable":{"T":[6]}}', r"topicConfigTable\['T'\] is not an object"),
    (config_json.topics, '{"topicConfigTable":null}', r"topicConfigTable is not an object"),
    (config_json.topics, '[{"topicConfigTable":{}}]', r"the document is not an object"),
    (config_json.topics, '{"topicConfigTable":{"T":{"perm":6}', r"Expecting"),
    (config_json.subscription_groups, '{"subscriptionGroupTable":{"g":{"brokerId":1.5}}}', r"brokerId 1\.5 is not an integer"),
    (config_json.subscription_groups, '{"forbiddenTable":{"g":{"T":"x"}}}', r"forbiddenTable\['g'\]\['T'\] 'x' is not an integer"),
    (config_json.subscription_groups, '{"forbiddenTable":{"g":[]}}', r"forbiddenTable\['g'\] is not an object"),
    (config_json.delay_offsets, '{"offsetTable":{"x":1}}', r"delay level 'x' is not an integer"),
    (config_json.delay_offsets, '{"offsetTable":{1:9223372036854775808}}', r"offsetTable\[1\] 9223372036854775808 is out of range"),
    (config_json.delay_offsets, "[" * 100000, r"nested too deeply"),
])
def test_malformed_content_is_a_value_error_naming_the_place(parse, text, message):
    with pytest.raises(ValueError, match=message):
        parse(text)
