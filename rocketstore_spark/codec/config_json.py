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


def consumer_offsets(text: str) -> list[tuple[str, str, int, int]]:
    """(topic, group, queue_id, offset) rows of a consumerOffset.json text."""
    rows = []
    for key, per_queue in loads(text).get("offsetTable", {}).items():
        topic, sep, group = key.partition("@")
        if not sep:
            raise ValueError(f"offsetTable key {key!r} is not topic@group")
        for queue_id, offset in per_queue.items():
            rows.append((topic, group, int(queue_id), int(offset)))
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
