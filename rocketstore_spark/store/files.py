"""The store's small files, read-only: checkpoint, abort, lock, config/*.json (+ .bak: consumerOffset, topics,
subscriptionGroup, delayOffset).

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
class ConfigFile:
    source: str | None       # the file the rows came from; None if neither exists nor loads
    rows: list               # what the codec parser returned for it
    problems: list[str]      # "path: why" for each file passed over (empty, unparsable)


def read_config(paths, parse) -> ConfigFile:
    """As ConfigManager.load does: the file, or its .bak when the file is missing, empty or unparsable
    (``parse``, a codec.config_json parser, raises ValueError for every malformation). ``paths``: the pair a
    StoreMap gives (``config_paths``); names read from the data never become paths."""
    problems = []
    for path in paths:
        path = str(path)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        if not text.strip():
            problems.append(f"{path}: empty")
            continue
        try:
            return ConfigFile(path, parse(text), problems)
        except ValueError as e:
            problems.append(f"{path}: {e}")
    return ConfigFile(None, [], problems)


def read_consumer_offsets(files: StoreMap) -> ConfigFile:
    """config/consumerOffset.json: (topic, group, queue_id, offset) rows."""
    return read_config(files.consumer_offsets_paths(), config_json.consumer_offsets)


def read_topics(files: StoreMap) -> ConfigFile:
    """config/topics.json: a dict per topic config (config_json.topics)."""
    return read_config(files.topics_paths(), config_json.topics)


def read_subscription_groups(files: StoreMap) -> ConfigFile:
    """config/subscriptionGroup.json: a dict per consumer group (config_json.subscription_groups)."""
    return read_config(files.subscription_groups_paths(), config_json.subscription_groups)


def read_delay_offsets(files: StoreMap) -> ConfigFile:
    """config/delayOffset.json: a dict per delay level (config_json.delay_offsets)."""
    return read_config(files.delay_offsets_paths(), config_json.delay_offsets)
