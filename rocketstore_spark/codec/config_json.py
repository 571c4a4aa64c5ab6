"""RocketMQ's ``config/*.json`` files as the broker writes them (docs/format/checkpoint.md).

fastjson writes integer map keys unquoted (``{0:250,1:248}``), which ``json.loads`` rejects; the keys are
quoted first (outside string literals). The broker reads ``file`` and falls back to ``file.bak`` when it is
missing, empty or unparsable (store.files.read_config); every parser here raises ValueError for what the
broker could not load, naming the place.

* ``consumerOffset.json``: ``offsetTable`` maps ``"topic@group"`` to ``{queueId: next offset to consume}``.
* ``lmqConsumerOffset.json`` (enableLmq, instead of consumerOffset.json): the same ``offsetTable``, and
  ``lmqOffsetTable`` mapping ``"topic@group"`` of a ``%LMQ%`` group to the offset of queue 0.
* ``topics.json``: ``topicConfigTable`` maps a topic to its TopicConfig.
* ``subscriptionGroup.json``: ``subscriptionGroupTable`` maps a group to its SubscriptionGroupConfig; 5.x adds
  ``forbiddenTable`` (group -> topic -> forbidden bits).
* ``delayOffset.json``: ``offsetTable`` maps a delay level (1-based) to the next offset to deliver in queue
  level - 1 of SCHEDULE_TOPIC_XXXX; 5.x adds ``dataVersion``.

Table rows are dicts keyed by column name, with the value the file holds, or None where the file has no
such field (older versions do not write it; the broker then uses its default). Pure.
"""
from __future__ import annotations

import json
import re

# a string literal (left as it is), or a bare integer key after { or ,
_BARE_INT_KEY = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|([{,]\s*)(-?\d+)(\s*:)')


def _quote_key(m: re.Match) -> str:
    return m.group(0) if m.group(1) is None else f'{m.group(1)}"{m.group(2)}"{m.group(3)}'


def loads(text: str) -> dict:
    """Parse fastjson output: unquoted integer keys are quoted first (string literals are left alone)."""
    return json.loads(_BARE_INT_KEY.sub(_quote_key, text))


INT32_MAX = (1 << 31) - 1
INT64_MAX = (1 << 63) - 1


def _integer(value, name: str, lo: int, hi: int) -> int:
    # what Java's Integer/Long fields accept: integral JSON numbers (or numeric strings) in range
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"{name} {value!r} is not an integer")
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"{name} {value!r} is not an integer") from None
    if not lo <= n <= hi:
        raise ValueError(f"{name} {n} is out of range")
    return n


def _int32(value, name: str) -> int:
    return _integer(value, name, -INT32_MAX - 1, INT32_MAX)


def _int64(value, name: str) -> int:
    return _integer(value, name, -INT64_MAX - 1, INT64_MAX)


def _boolean(value, name: str) -> bool:
    # fastjson also takes "true"/"false" and 1/0 for a boolean field
    if isinstance(value, bool):
        return value
    if value in (0, 1, "0", "1", "true", "false"):
        return value in (1, "1", "true")
    raise ValueError(f"{name} {value!r} is not a boolean")


def _text(value, name: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{name} {value!r} is not a string")
    return value


def _object(value, name: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{name} is not an object")
    return value


def _string_map(value, name: str) -> dict[str, str]:
    # Map<String, String>: fastjson turns a number value into its text
    out = {}
    for k, v in _object(value, name).items():
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        out[k] = None if v is None else _text(v, f"{name}[{k!r}]")
    return out


def _int_map(value, name: str) -> dict[str, int]:
    return {k: _int32(v, f"{name}[{k!r}]") for k, v in _object(value, name).items()}


def _document(text: str) -> dict:
    try:
        doc = loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    return _object(doc, "the document")


def _table(doc: dict, key: str) -> dict:
    """A top-level table; missing is empty (the broker's field keeps its empty default), null is not."""
    return _object(doc.get(key, {}), key)


def _fields(config, fields, name: str) -> dict:
    """Columns of one config object: (column, JSON field, converter) each; None where the field is absent or null."""
    config = _object(config, name)
    return {column: None if config.get(field) is None else convert(config[field], f"{name}.{field}")
            for column, field, convert in fields}


def consumer_offsets(text: str) -> list[tuple[str, str, int, int]]:
    """(topic, group, queue_id, offset) rows of a consumerOffset.json text. Anything the broker could not
    load — malformed JSON, a key that is not topic@group, a queue id or offset that is not an int32/int64 —
    raises ValueError naming it (the caller falls back to the .bak, as the broker does)."""
    rows = []
    for key, per_queue in _table(_document(text), "offsetTable").items():
        topic, sep, group = key.partition("@")
        if not sep:
            raise ValueError(f"offsetTable key {key!r} is not topic@group")
        for queue_id, offset in _object(per_queue, f"offsetTable[{key!r}]").items():
            rows.append((topic, group, _integer(queue_id, f"{key}: queue id", 0, INT32_MAX),
                         _int64(offset, f"{key}: offset")))
    return rows


def lmq_consumer_offsets(text: str) -> list[tuple[str, str, int, int]]:
    """(topic, group, queue_id, offset) rows of an lmqConsumerOffset.json text (a broker with enableLmq keeps
    every group's offsets there, ``LmqConsumerOffsetManager``): its ``offsetTable`` as in consumerOffset.json,
    then its ``lmqOffsetTable`` (``"topic@group"`` -> offset, the %LMQ% groups' offsets of queue 0). Raises
    ValueError as ``consumer_offsets`` does."""
    rows = consumer_offsets(text)
    for key, offset in _table(_document(text), "lmqOffsetTable").items():
        topic, sep, group = key.partition("@")
        if not sep:
            raise ValueError(f"lmqOffsetTable key {key!r} is not topic@group")
        rows.append((topic, group, 0, _int64(offset, f"lmqOffsetTable[{key!r}]")))
    return rows


# a quoted integer key three tabs deep: a key of one of the per-queue maps of a pretty-printed table
_QUOTED_QUEUE_KEY = re.compile(r'^(\t\t\t)"(-?\d+)":', re.MULTILINE)


def with_consumer_offsets(text: str, offsets: dict[tuple[str, str, int], int]) -> str:
    """A consumerOffset.json text with the offsets of some queues replaced — ``offsets``: (topic, group, queue
    id) -> the new offset, each a queue the file holds (KeyError otherwise) — and everything else kept (the
    other tables, dataVersion), written as fastjson's pretty format writes it (tabs, unquoted integer map
    keys), as the broker's ConsumerOffsetManager.persist would. An lmqConsumerOffset.json text too: a %LMQ%
    group's offset of queue 0 kept in its ``lmqOffsetTable`` is replaced there (LmqConsumerOffsetManager reads
    a %LMQ% group's offsets from that table), any other in its ``offsetTable``."""
    doc = _document(text)
    table = _table(doc, "offsetTable")
    lmq = _table(doc, "lmqOffsetTable") if isinstance(doc.get("lmqOffsetTable"), dict) else {}
    for (topic, group, queue_id), offset in offsets.items():
        key = f"{topic}@{group}"
        if key in lmq and queue_id == 0 and (group.startswith("%LMQ%") or key not in table):
            lmq[key] = int(offset)
            continue
        per_queue = _object(table[key], f"offsetTable[{key}]")
        key = next(k for k in per_queue if int(k) == queue_id)
        per_queue[key] = int(offset)
    return _QUOTED_QUEUE_KEY.sub(r"\1\2:", json.dumps(doc, indent="\t", separators=(",", ":"), ensure_ascii=False))


def perm_string(perm: int) -> str:
    """PermName.perm2String: R (read, 4), W (write, 2), X (inherit, 1), '-' where unset (priority, 8, not shown)."""
    return "".join(c if perm & bit else "-" for c, bit in (("R", 4), ("W", 2), ("X", 1)))


TOPIC_FIELDS = (
    ("read_queue_nums", "readQueueNums", _int32), ("write_queue_nums", "writeQueueNums", _int32),
    ("perm", "perm", _int32), ("topic_filter_type", "topicFilterType", _text),
    ("topic_sys_flag", "topicSysFlag", _int32), ("order", "order", _boolean),
    ("attributes", "attributes", _string_map),
)


def topics(text: str) -> list[dict]:
    """One row per topicConfigTable entry: ``topic`` (its key), the TOPIC_FIELDS columns and ``perm_string``."""
    return topic_rows(tables(text, "topicConfigTable")[0])


def topic_rows(table: dict) -> list[dict]:
    """``topics``' rows of a topic -> TopicConfig (parsed JSON) mapping: topics.json's topicConfigTable, or the
    v1 RocksDB topics database (store.rocksdb: one TopicConfig JSON value per topic key)."""
    rows = []
    for topic, config in table.items():
        row = {"topic": topic, **_fields(config, TOPIC_FIELDS, f"topicConfigTable[{topic!r}]")}
        row["perm_string"] = None if row["perm"] is None else perm_string(row["perm"])
        rows.append(row)
    return rows


def tables(text: str, *names: str) -> list[dict]:
    """The top-level tables ``names`` of a config file text (missing: empty), each a JSON object."""
    doc = _document(text)
    return [_table(doc, name) for name in names]


GROUP_FIELDS = (
    ("consume_enable", "consumeEnable", _boolean), ("consume_from_min_enable", "consumeFromMinEnable", _boolean),
    ("consume_broadcast_enable", "consumeBroadcastEnable", _boolean),
    ("consume_message_orderly", "consumeMessageOrderly", _boolean),
    ("retry_queue_nums", "retryQueueNums", _int32), ("retry_max_times", "retryMaxTimes", _int32),
    ("broker_id", "brokerId", _int64), ("which_broker_when_consume_slowly", "whichBrokerWhenConsumeSlowly", _int64),
    ("notify_consumer_ids_changed_enable", "notifyConsumerIdsChangedEnable", _boolean),
    ("group_sys_flag", "groupSysFlag", _int32), ("consume_timeout_minute", "consumeTimeoutMinute", _int32),
    ("attributes", "attributes", _string_map),
)


def subscription_groups(text: str) -> list[dict]:
    """One row per subscriptionGroupTable entry: ``consumer_group`` (its key), the GROUP_FIELDS columns and
    ``forbidden`` (its forbiddenTable entry, topic -> bits; None without one). A group that only the
    forbiddenTable names gets a row of its own with the GROUP_FIELDS columns None."""
    return group_rows(*tables(text, "subscriptionGroupTable", "forbiddenTable"))


def group_rows(table: dict, forbidden_table: dict) -> list[dict]:
    """``subscription_groups``' rows of a group -> SubscriptionGroupConfig mapping and a group -> {topic: bits}
    mapping: subscriptionGroup.json's two tables, or the v1 RocksDB groups database's default and
    ``forbidden`` column families (store.rocksdb)."""
    forbidden = {group: _int_map(per_topic, f"forbiddenTable[{group!r}]")
                 for group, per_topic in forbidden_table.items()}
    rows = [{"consumer_group": group, **_fields(config, GROUP_FIELDS, f"subscriptionGroupTable[{group!r}]"),
             "forbidden": forbidden.pop(group, None)}
            for group, config in table.items()]
    empty = dict.fromkeys(column for column, _, _ in GROUP_FIELDS)
    return rows + [{"consumer_group": group, **empty, "forbidden": bits} for group, bits in forbidden.items()]


def delay_offsets(text: str) -> list[dict]:
    """One row per offsetTable entry: ``delay_level`` and ``offset`` (``dataVersion``, 5.x, is not a row)."""
    return [{"delay_level": _int32(level, "offsetTable: delay level"), "offset": _int64(offset, f"offsetTable[{level}]")}
            for level, offset in _table(_document(text), "offsetTable").items()]


def dumps(offset_table: dict[str, dict[int, int]]) -> str:
    """Serialise like fastjson's pretty format (tabs, unquoted integer keys) — for tests and fixtures."""
    lines = ["{", '\t"offsetTable":{']
    items = list(offset_table.items())
    for n, (key, per_queue) in enumerate(items):
        body = ",".join(f"{q}:{o}" for q, o in per_queue.items())
        lines.append(f'\t\t"{key}":{{{body}}}' + ("," if n < len(items) - 1 else ""))
    lines += ["\t}", "}"]
    return "\n".join(lines)
