"""The store's small files, read-only: checkpoint, abort, lock, config/consumerOffset.json (+ .bak).

Paths come from the store map (layout.StoreMap); runs wherever called (a Spark executor, the CLI, tests)."""
from __future__ import annotations

import os
from dataclasses import dataclass

from rocketstore_spark.codec import checkpoint, config_json
from rocketstore_spark.store.layout import StoreMap


@dataclass
class StoreState:
    checkpoint: dict | None
    abort_present: bool
    lock_present: bool


def read_checkpoint(files: StoreMap) -> StoreState:
    cp = None
    if files.checkpoint_path is not None and os.path.isfile(files.checkpoint_path):
        with open(files.checkpoint_path, "rb") as f:
            cp = checkpoint.decode(f.read(checkpoint.DTYPE.itemsize))
    return StoreState(cp, files.abort_path is not None and files.abort_path.exists(),
                      files.lock_path is not None and files.lock_path.exists())


@dataclass
class ConsumerOffsets:
    source: str | None                       # the file the rows came from, None if neither exists
    rows: list[tuple[str, str, int, int]]    # (topic, group, queue_id, offset)
    problems: list[str]


def read_consumer_offsets(files: StoreMap) -> ConsumerOffsets:
    """As ConfigManager.load does: the file, or its .bak when the file is missing, empty or unparsable."""
    problems = []
    for path in files.consumer_offsets_paths():
        path = str(path)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        if not text.strip():
            problems.append(f"{path}: empty")
            continue
        try:
            return ConsumerOffsets(path, config_json.consumer_offsets(text), problems)
        except ValueError as e:           # config_json turns every malformation into a ValueError
            problems.append(f"{path}: {e}")
    return ConsumerOffsets(None, [], problems)
