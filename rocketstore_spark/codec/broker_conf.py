"""A broker's properties file (``broker.conf``, Java ``Properties.load`` syntax) and the store settings in it.

Syntax, as ``java.util.Properties.load``: a line is ``key=value``, ``key: value`` or ``key value``; blank
lines and lines starting with ``#`` or ``!`` are comments; a line ending in an odd number of backslashes
continues on the next (leading blanks of that line dropped); ``\\t \\n \\r \\f \\uXXXX`` escapes, any other
escaped character stands for itself. RocketMQ then sets each matching setter by name
(``MixAll.properties2Object``), so names are case-sensitive and unknown names are ignored. Pure.
"""
from __future__ import annotations

import re

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str):
    pending = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f") if pending is not None else raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending = (pending or "") + line[:-1]
            continue
        yield (pending or "") + line
        pending = None
    if pending is not None:
        yield pending


def _unescape(s: str) -> str:
    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)",
                  lambda m: chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == "u" and len(m.group(1)) == 5
                  else _ESCAPES.get(m.group(1), m.group(1)), s)


def parse_properties(text: str) -> dict[str, str]:
    """The key/value pairs of a Java properties text (a later key wins, as in Java)."""
    out = {}
    for line in _logical_lines(text):
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*[=:]?\s*(.*)$", line, re.S)
        key, value = m.group(1), m.group(2)
        if key:
            out[_unescape(key)] = _unescape(value)
    return out


# the store settings a rebuild, verify or recovery needs: name -> (type, RocketMQ's default)
STORE_SETTINGS = {
    "mappedFileSizeCommitLog": (int, 1024 * 1024 * 1024),
    "mappedFileSizeConsumeQueue": (int, 300_000 * 20),
    "maxHashSlotNum": (int, 5_000_000),
    "maxIndexNum": (int, 5_000_000 * 4),
    "messageIndexEnable": (bool, True),
    "messageIndexSafe": (bool, False),
    "duplicationEnable": (bool, False),
    "checkCRCOnRecover": (bool, True),
    "commitLogRecoverMaxNum": (int, 10),     # 5.5.x: how many segments back recovery looks for its start
    "enableMultiDispatch": (bool, False),    # 4.9.3+: INNER_MULTI_DISPATCH records also go to the queues they name
    "enableLmq": (bool, False),              # 4.9.3+: %LMQ% names among them are queue 0 (codec.lmq)
    "messageDelayLevel": (str, "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"),
}


def store_settings(properties: dict[str, str]) -> dict[str, object]:
    """The STORE_SETTINGS present in ``properties``, typed as RocketMQ converts them (``Integer.parseInt``
    after trim, ``Boolean.parseBoolean``: anything but "true", any case, is false). A malformed number is a
    ValueError naming the setting."""
    out = {}
    for name, (kind, _) in STORE_SETTINGS.items():
        if name not in properties:
            continue
        value = properties[name].strip()
        if kind is int:
            try:
                out[name] = int(value)
            except ValueError:
                raise ValueError(f"{name}={value!r} is not an integer") from None
        elif kind is bool:
            out[name] = value.lower() == "true"
        else:
            out[name] = value
    return out
