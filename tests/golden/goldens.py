"""Access to the committed golden stores (tests only; runs in the pytest process).

A golden store is ``tests/golden/rocketmq-<version>/<scenario>/`` with ``store/`` (written by RocketMQ's own
DefaultMessageStore), ``manifest.json`` (RocketMQ's own view of it) and, where RocketMQ was asked to recover
or rebuild a copy, ``expected-recovery/`` or ``expected-rebuild/`` holding the ConsumeQueue and IndexFile
bytes it produced. See tests/golden/README.md.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

GOLDEN_ROOT = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Golden:
    version: str
    scenario: str
    path: Path

    @property
    def id(self) -> str:
        return f"{self.version}/{self.scenario}"

    @property
    def store(self) -> Path:
        return self.path / "store"

    @cached_property
    def manifest(self) -> dict:
        return json.loads((self.path / "manifest.json").read_text())

    @property
    def messages(self) -> list[dict]:
        return self.manifest["messages"]


def all_goldens(root: Path = GOLDEN_ROOT) -> list[Golden]:
    found = []
    for vdir in sorted(root.glob("rocketmq-*")):
        for sdir in sorted(p for p in vdir.iterdir() if (p / "manifest.json").exists()):
            found.append(Golden(vdir.name.removeprefix("rocketmq-"), sdir.name, sdir))
    return found


def fastjson_loads(text: str) -> dict:
    """json.loads for RocketMQ's config files: fastjson writes integer map keys unquoted ({0:250})."""
    return json.loads(re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', text))
