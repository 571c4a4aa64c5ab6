"""RocketMQ's ``config/*.json`` files as the broker writes them (docs/format/checkpoint.md).

fastjson writes integer map keys unquoted (``{0:250,1:248}``), which ``json.loads`` rejects; the keys are
quoted first. ``consumerOffset.json`` maps ``"topic@group"`` to ``{queueId: next offset to consume}``;
the broker reads ``file`` and falls back to ``file.bak`` when it is missing, empty or unparsable. Pure.
"""
from __future__ import annotations

import json
import re

_BARE_INT_KEY = re.compile(r'([{,]\s*)(-?\d+)(\s*:)')


def loads(text: str) -> dict:
    """Parse fastjson output (unquoted integer keys are quoted first; names cannot contain { , or :)."""
    return json.loads(_BARE_INT_KEY.sub(r'\1"\2"\3', text))


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


def consumer_offsets(text: str) -> list[tuple[str, str, int, int]]:
    """(topic, group, queue_id, offset) rows of a consumerOffset.json text. Anything the broker could not
    load — malformed JSON, a key that is not topic@group, a queue id or offset that is not an int32/int64 —
    raises ValueError naming it (the caller falls back to the .bak, as the broker does)."""
    try:
        doc = loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    table = doc.get("offsetTable", {}) if isinstance(doc, dict) else None
    if not isinstance(table, dict):
        raise ValueError("offsetTable is not an object")
    rows = []
    for key, per_queue in table.items():
        topic, sep, group = key.partition("@")
        if not sep:
            raise ValueError(f"offsetTable key {key!r} is not topic@group")
        if not isinstance(per_queue, dict):
            raise ValueError(f"offsetTable[{key!r}] is not an object")
        for queue_id, offset in per_queue.items():
            rows.append((topic, group, _integer(queue_id, f"{key}: queue id", 0, INT32_MAX),
                         _integer(offset, f"{key}: offset", -INT64_MAX - 1, INT64_MAX)))
    return rows


def dumps(offset_table: dict[str, dict[int, int]]) -> str:
    """Serialise like fastjson's pretty format (tabs, unquoted integer keys) — for tests and fixtures."""
    lines = ["{", '\t"offsetTable":{']
    items = list(offset_table.items())
    for n, (key, per_queue) in enumerate(items):
        body = ",".join(f"{q}:{o}" for q, o in per_queue.items())
        lines.append(f'\t\t"{key}":{{{body}}}' + ("," if n < len(items) - 1 else ""))
    lines += ["\t}", "}"]
    return "\n".join(lines)
