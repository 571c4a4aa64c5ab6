"""The store's small files, read-only: checkpoint, abort, lock, config/consumerOffset.json (+ .bak)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from rocketstore_spark.codec import checkpoint, config_json


@dataclass
class StoreState:
    checkpoint: dict | None
    abort_present: bool
    lock_present: bool


def read_checkpoint(root: str) -> StoreState:
    path = os.path.join(root, "checkpoint")
    cp = None
    if os.path.isfile(path):
        with open(path, "rb") as f:
            cp = checkpoint.decode(f.read(checkpoint.DTYPE.itemsize))
    return StoreState(cp, os.path.exists(os.path.join(root, "abort")), os.path.exists(os.path.join(root, "lock")))


@dataclass
class ConsumerOffsets:
    source: str | None                       # the file the rows came from, None if neither exists
    rows: list[tuple[str, str, int, int]]    # (topic, group, queue_id, offset)
    problems: list[str]


def read_consumer_offsets(root: str) -> ConsumerOffsets:
    """As ConfigManager.load does: the file, or its .bak when the file is missing, empty or unparsable."""
    problems = []
    for name in ("consumerOffset.json", "consumerOffset.json.bak"):
        path = os.path.join(root, "config", name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        if not text.strip():
            problems.append(f"{path}: empty")
            continue
        try:
            return ConsumerOffsets(path, config_json.consumer_offsets(text), problems)
        except (ValueError, AttributeError) as e:
            problems.append(f"{path}: {e}")
    return ConsumerOffsets(None, [], problems)
