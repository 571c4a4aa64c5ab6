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

    @property
    def parent(self) -> "Golden | None":
        """The scenario this store is a copy of (manifest ``derived_from``), None for a store RocketMQ wrote."""
        name = self.manifest.get("derived_from")
        return Golden(self.version, name, self.path.parent / name) if name else None

    @cached_property
    def records_on_disk(self) -> list[dict]:
        """Every intact record in the store's bytes, as RocketMQ decodes them. The manifest's own walk
        (``checkMessageAndReturnSize`` from position 0 of each segment) stops at the first invalid record, so
        where surgery zeroed a page in the middle of a segment the intact records after the page are taken
        from the parent's manifest: RocketMQ's decoding of the same, untouched bytes."""
        zeroed = [(s["physical_offset"], s["physical_offset"] + s["length"]) for s in self.manifest["surgery"]
                  if s["action"] == "zero_page"]
        if not zeroed:
            return self.messages
        own = {r["physical_offset"] for r in self.messages}
        after = [r for r in self.parent.messages if r["physical_offset"] not in own
                 and all(r["physical_offset"] >= hi or r["physical_offset"] + r["total_size"] <= lo for lo, hi in zeroed)
                 and any(r["physical_offset"] >= hi for _, hi in zeroed)]
        return sorted(self.messages + after, key=lambda r: r["physical_offset"])

    @cached_property
    def config_manifest(self) -> dict | None:
        """config-manifest.json (consumer-offsets stores): what RocketMQ was given for topics.json,
        subscriptionGroup.json and delayOffset.json; None where the scenario has none."""
        path = self.path / "config-manifest.json"
        return json.loads(path.read_text()) if path.exists() else None

    @property
    def settings(self) -> dict:
        """The broker settings the store was written with, as serve_check takes them."""
        geometry = self.manifest["geometry"]
        return {"mappedFileSizeConsumeQueue": geometry["mapped_file_size_consume_queue"],
                "maxHashSlotNum": geometry["max_hash_slot_num"], "maxIndexNum": geometry["max_index_num"],
                "messageDelayLevel": geometry["message_delay_level"]}


def all_goldens(root: Path = GOLDEN_ROOT) -> list[Golden]:
    found = []
    for vdir in sorted(root.glob("rocketmq-*")):
        for sdir in sorted(p for p in vdir.iterdir() if (p / "manifest.json").exists()):
            found.append(Golden(vdir.name.removeprefix("rocketmq-"), sdir.name, sdir))
    return found


GOLDENS: list[Golden] = all_goldens()                      # the committed golden stores
BY_ID: dict[str, Golden] = {g.id: g for g in GOLDENS}       # "5.5.1/clean" -> its golden


def fastjson_loads(text: str) -> dict:
    """json.loads for RocketMQ's config files: fastjson writes integer map keys unquoted ({0:250})."""
    return json.loads(re.sub(r'([{,]\s*)(-?\d+)(\s*:)', r'\1"\2"\3', text))


#: RocketMQ's field names (config-manifest.json) -> the columns of rocketmq_topics / _subscription_groups
TOPIC_COLUMNS = {"topicName": "topic", "readQueueNums": "read_queue_nums", "writeQueueNums": "write_queue_nums",
                 "perm": "perm", "perm2String": "perm_string", "topicFilterType": "topic_filter_type",
                 "topicSysFlag": "topic_sys_flag", "order": "order", "attributes": "attributes"}
GROUP_COLUMNS = {"groupName": "consumer_group", "consumeEnable": "consume_enable",
                 "consumeFromMinEnable": "consume_from_min_enable", "consumeBroadcastEnable": "consume_broadcast_enable",
                 "consumeMessageOrderly": "consume_message_orderly", "retryQueueNums": "retry_queue_nums",
                 "retryMaxTimes": "retry_max_times", "brokerId": "broker_id",
                 "whichBrokerWhenConsumeSlowly": "which_broker_when_consume_slowly",
                 "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
                 "groupSysFlag": "group_sys_flag", "consumeTimeoutMinute": "consume_timeout_minute",
                 "attributes": "attributes"}


def canonical(rows) -> list[dict]:
    """Config table rows (dicts, with map values) in one order, whatever the order of their keys."""
    def key(value):
        return sorted((k, key(v)) for k, v in value.items()) if isinstance(value, dict) else value
    return sorted(rows, key=lambda r: repr(key(r)))


def expected_config_rows(golden: Golden, table: str, state: str = "current") -> list[dict]:
    """The rows a config table should have for what RocketMQ was given (``state``: "current" for the file,
    "bak" for its .bak), in canonical order; fields the version does not have are None. ``table``: "topics",
    "subscription_groups" or "delay_offsets"."""
    given = golden.config_manifest[table][state]
    if table == "delay_offsets":
        return canonical({"delay_level": int(k), "offset": v} for k, v in given.items())
    columns = TOPIC_COLUMNS if table == "topics" else GROUP_COLUMNS
    configs = given if table == "topics" else given["groups"]
    rows = [{ours: c.get(java) for java, ours in columns.items()} for c in configs]
    if table == "subscription_groups":
        forbidden = dict(given.get("forbidden", {}))
        for row in rows:
            row["forbidden"] = forbidden.pop(row["consumer_group"], None)
        rows += [{**dict.fromkeys(GROUP_COLUMNS.values()), "consumer_group": g, "forbidden": f}
                 for g, f in forbidden.items()]
    return canonical(rows)


def committed_offsets(golden: Golden) -> dict[tuple[str, str, int], tuple[int, tuple[int, int] | None, str]]:
    """(group, topic, queue id) -> (committed offset, the queue's (min, max) offsets as RocketMQ gave them in the
    manifest or None for a queue it does not have, status) for every offset of the store's
    config/consumerOffset.json; status: unknown_queue, below_min, beyond_max, caught_up or in_range."""
    table = fastjson_loads((golden.store / "config" / "consumerOffset.json").read_text())["offsetTable"]
    bounds = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in golden.manifest["queues"]}
    out = {}
    for key, per_queue in table.items():
        topic, group = key.split("@")
        for qid, offset in per_queue.items():
            b = bounds.get((topic, int(qid)))
            out[(group, topic, int(qid))] = (offset, b, "unknown_queue" if b is None else "below_min" if offset < b[0]
                                             else "beyond_max" if offset > b[1] else "caught_up" if offset == b[1]
                                             else "in_range")
    return out
