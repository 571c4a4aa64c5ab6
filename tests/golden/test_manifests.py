"""Internal consistency of every golden manifest, and of the manifests with the committed store bytes.

These tests use only the standard library and the spec's reference formulas (store-format.md §9), never
the toolkit's codecs: they check that the ground truth is sound before anything is compared against it.
"""
from __future__ import annotations

import hashlib
import shutil
import struct
from collections import defaultdict
from pathlib import Path

import pytest

from tests.golden.goldens import GOLDENS, Golden, fastjson_loads

DELAY_MS = [1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000,
            540000, 600000, 1200000, 1800000, 3600000, 7200000]
V1_MAGIC, V2_MAGIC = -626843481, -626843477


def java_hash(s: str) -> int:
    h = 0
    b = s.encode("utf-16-be")
    for i in range(0, len(b), 2):
        h = (31 * h + ((b[i] << 8) | b[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def index_hash(key: str) -> int:
    h = java_hash(key)
    return 0 if h == -(1 << 31) else abs(h)


def segment_bytes(golden: Golden, segment: str, _cache={}) -> bytes:
    """A CommitLog segment's bytes, read once per file. Keyed by the file's path, not the golden's id: the fresh
    stores test_regenerate checks share the committed ones' ids ("4.9.8/consumer-offsets"), and their bytes
    differ wherever RocketMQ's run did (4.9.8 delivers the delayed messages fallen due while its cleaner runs)."""
    key = (golden.store.resolve(), segment)
    if key not in _cache:
        _cache[key] = (golden.store / "commitlog" / segment).read_bytes()
    return _cache[key]


#: every check with the scenarios it applies to (None: all); test_regenerate runs them on fresh output too
CHECKS: list[tuple[object, object]] = []


def golden_param(ids=None):
    chosen = [g for g in GOLDENS if ids is None or g.scenario in ids]
    mark = pytest.mark.parametrize("golden", chosen, ids=[g.id for g in chosen])

    def register(fn):
        CHECKS.append((fn, ids))
        return mark(fn)
    return register


def test_both_rocketmq_lines_present():
    versions = {g.version.split(".")[0] for g in GOLDENS}
    assert versions == {"4", "5"}, versions
    scenarios = {g.scenario for g in GOLDENS}
    for required in ("clean", "crash", "torn-tail", "corrupt-body", "cq-lag-clean", "cq-lag-crash",
                     "index-deleted", "index-truncated", "consumer-offsets", "crash-stale", "corrupt-window",
                     "zeroed-page"):
        assert required in scenarios


@golden_param()
def test_files_match_manifest(golden: Golden):
    """Every file RocketMQ left is committed unchanged (a bad checkout or an LFS pointer would fail here)."""
    listed = {f["path"]: f for f in golden.manifest["files"] + (golden.config_manifest or {}).get("files", [])}
    on_disk = {str(p.relative_to(golden.store)) for p in golden.store.rglob("*") if p.is_file()}
    assert set(listed) == on_disk
    for rel, f in listed.items():
        data = (golden.store / rel).read_bytes()
        assert len(data) == f["size"], rel
        assert hashlib.sha256(data).hexdigest() == f["sha256"], rel


@golden_param()
def test_records_tile_the_segments(golden: Golden):
    """Records are back to back from position 0 and end where RocketMQ's walk stopped."""
    by_segment = defaultdict(list)
    for m in golden.messages:
        by_segment[m["segment"]].append(m)
    for seg in golden.manifest["segments"]:
        records = sorted(by_segment[seg["file"]], key=lambda m: m["file_position"])
        assert len(records) == seg["records"]
        position = 0
        for m in records:
            assert m["file_position"] == position
            assert m["physical_offset"] == seg["base_offset"] + position
            position += m["total_size"]
        assert position == seg["valid_end"]
        if seg["stop_reason"] == "blank":
            assert seg["blank"]["total_size"] == seg["file_size"] - seg["blank"]["file_position"]


def fixed_length(m: dict) -> int:
    """A record's length up to and with its PROPERTIESLENGTH field (store-format.md §2), from the manifest's fields."""
    topic_len_size = 1 if m["magic_code"] == V1_MAGIC else 2
    hosts = (20 if m["sys_flag"] & 0x10 else 8) + (20 if m["sys_flag"] & 0x20 else 8)
    return 72 + hosts + m["body_length"] + topic_len_size + len(m["topic"].encode()) + 2


@golden_param()
def test_record_fields_follow_the_layout(golden: Golden):
    """TOTALSIZE formula, magic/version, stored physical offset, msgId and CRC, per store-format.md §2."""
    for m in golden.messages:
        assert m["stored_physical_offset"] == m["physical_offset"]
        assert m["magic_code"] in (V1_MAGIC, V2_MAGIC)
        fixed = fixed_length(m)
        # PROPERTIESLENGTH from the bytes themselves; the map must serialise to exactly that many bytes,
        # with or without the final 0x02 (RocketMQ 4.9.8 drops it, 5.x keeps it: see tests/golden/README.md)
        raw = segment_bytes(golden, m["segment"])
        props_len = struct.unpack_from(">h", raw, m["file_position"] + fixed - 2)[0]
        serialised = sum(len(k.encode()) + len(v.encode()) + 2 for k, v in m["properties"].items())
        assert props_len in (serialised, serialised - 1), m["physical_offset"]
        assert m["total_size"] == fixed + props_len, m["physical_offset"]
        assert (len(m["topic"].encode()) > 127) == (m["magic_code"] == V2_MAGIC)
        msg_id = m["store_host_address"] + struct.pack(">iq", m["store_host_port"], m["physical_offset"]).hex()
        assert m["msg_id"] == msg_id.upper()
        assert m["body_crc_ok"] == (m["body_crc"] == m["computed_body_crc"])


def test_a_check_reads_the_store_it_is_given_not_a_committed_one_of_the_same_id(tmp_path: Path):
    """test_regenerate applies CHECKS to fresh stores whose ids are the committed ones': the layout check must
    read the fresh bytes. (It once read the committed bytes, cached under the same id: a fresh 4.9.8
    consumer-offsets store with one more delayed delivery than the committed one failed at a record the
    committed store does not have, and every fresh record the two share went unchecked.)"""
    committed = next(g for g in GOLDENS if g.id == "4.9.8/consumer-offsets")
    test_record_fields_follow_the_layout(committed)          # the committed segments are read (and cached) first
    (tmp_path / "store" / "commitlog").mkdir(parents=True)
    shutil.copy(committed.path / "manifest.json", tmp_path)
    for seg in committed.manifest["segments"]:
        shutil.copy(committed.store / "commitlog" / seg["file"], tmp_path / "store" / "commitlog")
    copy = Golden(committed.version, committed.scenario, tmp_path)
    assert copy.id == committed.id
    # the copy's last record with properties gets PROPERTIESLENGTH 0, the committed store keeps its own
    victim = max((m for m in copy.messages if m["properties"]), key=lambda m: m["physical_offset"])
    segment = tmp_path / "store" / "commitlog" / victim["segment"]
    raw = bytearray(segment.read_bytes())
    struct.pack_into(">h", raw, victim["file_position"] + fixed_length(victim) - 2, 0)
    segment.write_bytes(bytes(raw))
    with pytest.raises(AssertionError, match=str(victim["physical_offset"])):
        test_record_fields_follow_the_layout(copy)


@golden_param()
def test_derived_values_match_spec_formulas(golden: Golden):
    """tagsCode (§3.4) and index key hashes (§5.3) as RocketMQ derived them equal the spec's formulas."""
    for m in golden.messages:
        props = m["properties"]
        if m["topic"] == "SCHEDULE_TOPIC_XXXX" and "DELAY" in props:
            level = min(int(props["DELAY"]), len(DELAY_MS))
            assert m["tags_code"] == m["store_timestamp"] + DELAY_MS[level - 1]
        else:
            assert m["tags_code"] == (java_hash(props["TAGS"]) if props.get("TAGS") else 0)
        for k in m["index_keys"]:
            assert k["hash"] == index_hash(k["key"])
        if m["transaction_type"] == 0xC:
            assert m["index_keys"] == []


@golden_param(["clean", "propcrc"])
def test_queue_offsets_are_dense_and_match_rocketmq_bounds(golden: Golden):
    counts = defaultdict(list)
    for m in golden.messages:
        if m["transaction_type"] in (0x4, 0xC):
            assert m["queue_offset"] == 0        # PREPARED / ROLLBACK take no queue offset
        else:
            counts[(m["topic"], m["queue_id"])].append(m["queue_offset"])
    bounds = {(q["topic"], q["queue_id"]): q for q in golden.manifest["queues"]}
    assert set(counts) <= set(bounds)
    for key in set(bounds) - set(counts):
        # 4.9.8's ScheduleMessageService registers a queue per delay level at load: empty ones
        assert key[0] == "SCHEDULE_TOPIC_XXXX" and bounds[key]["max_offset"] == 0, key
    for key, offsets in counts.items():
        assert offsets == list(range(len(offsets))), key
        assert bounds[key]["min_offset"] == 0
        assert bounds[key]["max_offset"] == len(offsets)


def read_cq(path: Path) -> list[tuple[int, int, int]]:
    data = path.read_bytes()
    return [struct.unpack_from(">qiq", data, i) for i in range(0, len(data) - 19, 20)]


@golden_param(["clean", "propcrc"])
def test_rebuilt_consume_queues_point_at_the_manifest_records(golden: Golden):
    """RocketMQ's own rebuild: entry L of each queue is (offset, size, tagsCode) of the record with QUEUEOFFSET L."""
    rebuilt = golden.path / "expected-rebuild" / "consumequeue"
    by_queue = defaultdict(dict)
    for m in golden.messages:
        if m["transaction_type"] not in (0x4, 0xC):
            by_queue[(m["topic"], int(m["queue_id"]))][m["queue_offset"]] = m
    seen = set()
    for qdir in rebuilt.glob("*/*"):
        key = (qdir.parent.name, int(qdir.name))
        seen.add(key)
        entries = []
        for f in sorted(qdir.iterdir()):
            base = int(f.name) // 20
            for i, e in enumerate(read_cq(f)):
                entries.append((base + i, e))
        for logical, (offset, size, tags_code) in entries:
            if size == 0:
                continue
            m = by_queue[key][logical]
            assert (offset, size, tags_code) == (m["physical_offset"], m["total_size"], m["tags_code"])
    assert seen == set(by_queue)
    assert (golden.path / "expected-rebuild" / "index").is_dir()


@golden_param(["clean", "cq-lag-clean", "index-deleted", "index-truncated", "propcrc"])
def test_clean_shutdown_recovery_keeps_the_log(golden: Golden):
    rec = golden.manifest["recovery"]
    assert not golden.manifest["abort_present"]
    assert rec["loaded"]
    assert not any(p.startswith("commitlog/") for p in rec["files_deleted"])
    last = max(golden.messages, key=lambda m: m["physical_offset"])
    assert golden.manifest["commitlog"]["max_offset"] == last["physical_offset"] + last["total_size"]


@golden_param(["crash", "cq-lag-crash", "crash-stale"])
def test_crash_recovery_keeps_every_valid_record(golden: Golden):
    assert golden.manifest["abort_present"]
    last = max(golden.messages, key=lambda m: m["physical_offset"])
    assert golden.manifest["commitlog"]["max_offset"] == last["physical_offset"] + last["total_size"]
    assert "abort" in golden.manifest["recovery"]["files_deleted"]


@golden_param(["torn-tail"])
def test_torn_tail_is_truncated_at_the_torn_record(golden: Golden):
    torn = golden.manifest["surgery"][0]["physical_offset"]
    assert all(m["physical_offset"] < torn for m in golden.messages)
    assert golden.manifest["commitlog"]["max_offset"] == torn


@golden_param(["corrupt-body"])
def test_corrupt_body_recovery_stops_at_the_first_bad_crc_in_its_window(golden: Golden):
    flipped = sorted(s["physical_offset"] for s in golden.manifest["surgery"])
    bad = sorted(m["physical_offset"] for m in golden.messages if not m["body_crc_ok"])
    assert bad == flipped
    # the old segment's damage lies before the recovery window; the newer one is where RocketMQ stops
    assert golden.manifest["commitlog"]["max_offset"] == flipped[-1]


def data_segments(golden: Golden) -> list[dict]:
    return [s for s in golden.manifest["segments"] if s["records"]]


def start_segment(golden: Golden) -> int:
    """Index (among the segments with records) of the segment RocketMQ's abnormal recovery started at: the one
    holding the first record it dispatched."""
    first = golden.manifest["recovery"]["dispatched_during_load"]["first_physical_offset"]
    return next(i for i, s in enumerate(data_segments(golden)) if s["base_offset"] == first)


@golden_param(["crash-stale", "corrupt-window"])
def test_stale_checkpoint_lags_the_log_by_three_segments(golden: Golden):
    """RocketMQ's own recovery walked from a segment three or more before the last one with records, and the
    checkpoint's times (4.x, 5.0-5.3) or logicsPhysicalOffset (5.5) lie before that walk's later segments."""
    segs, cp = data_segments(golden), golden.manifest["checkpoint"]
    assert golden.manifest["abort_present"]
    assert len(segs) - 1 - start_segment(golden) >= 3
    newer = [m for m in golden.messages if m["store_timestamp"] > cp["physicMsgTimestamp"]]
    assert min(m["physical_offset"] for m in newer) < segs[-3]["base_offset"]
    if "logicsPhysicalOffset" in cp:
        assert cp["logicsPhysicalOffset"] < segs[-3]["base_offset"]


@golden_param(["corrupt-window"])
def test_corrupt_window_recovery_stops_before_the_last_segment(golden: Golden):
    [flip] = golden.manifest["surgery"]
    assert [m["physical_offset"] for m in golden.messages if not m["body_crc_ok"]] == [flip["physical_offset"]]
    segs = data_segments(golden)
    flipped = next(i for i, s in enumerate(segs) if f"commitlog/{s['file']}" == flip["file"])
    assert start_segment(golden) < flipped < len(segs) - 1
    assert golden.manifest["commitlog"]["max_offset"] == flip["physical_offset"]
    assert {f"commitlog/{s['file']}" for s in golden.manifest["segments"][flipped + 1:]} <= \
        set(golden.manifest["recovery"]["files_deleted"])


@golden_param(["zeroed-page"])
def test_zeroed_page_recovery_stops_at_the_first_record_it_touched(golden: Golden):
    [page] = golden.manifest["surgery"]
    assert page["file_position"] % 4096 == 0 and page["length"] == 4096
    data = segment_bytes(golden, page["file"].split("/")[1])
    assert data[page["file_position"]:page["file_position"] + 4096] == bytes(4096)
    segs = data_segments(golden.parent)
    assert page["file"] == f"commitlog/{segs[-1]['file']}"
    touched = next(m for m in golden.parent.messages
                   if m["physical_offset"] <= page["physical_offset"] < m["physical_offset"] + m["total_size"])
    assert golden.manifest["commitlog"]["max_offset"] == touched["physical_offset"]
    # intact records after the page exist, and RocketMQ's walk never reached them
    after = [m for m in golden.records_on_disk if m["physical_offset"] >= page["physical_offset"] + page["length"]]
    assert after and not set(m["physical_offset"] for m in after) & {m["physical_offset"] for m in golden.messages}


@golden_param(["crash", "torn-tail", "corrupt-body", "cq-lag-crash", "cq-lag-clean", "index-deleted",
               "index-truncated", "crash-stale", "corrupt-window", "zeroed-page"])
def test_expected_recovery_bytes_are_what_rocketmq_left(golden: Golden):
    after = {f["path"]: f["sha256"] for f in golden.manifest["recovery"]["files_after"]
             if f["path"].startswith(("consumequeue/", "index/"))}
    kept = golden.path / "expected-recovery"
    on_disk = {str(p.relative_to(kept)): hashlib.sha256(p.read_bytes()).hexdigest()
               for p in kept.rglob("*") if p.is_file()}
    assert on_disk == after


@golden_param(["consumer-offsets"])
def test_consumer_offsets_cover_every_case(golden: Golden):
    text = (golden.store / "config" / "consumerOffset.json").read_text()
    assert (golden.store / "config" / "consumerOffset.json.bak").exists()
    assert "{0:" in text.replace("\t", "").replace("\n", "").replace(" ", "")   # fastjson's unquoted int keys
    table = fastjson_loads(text)["offsetTable"]
    bounds = {(q["topic"], q["queue_id"]): q for q in golden.manifest["queues"]}
    assert golden.manifest["commitlog"]["min_offset"] > 0        # RocketMQ's cleaner expired the oldest segment
    cases = defaultdict(set)
    for key, per_queue in table.items():
        topic, group = key.split("@")
        for qid, offset in per_queue.items():
            b = bounds.get((topic, int(qid)))
            if b is None:
                cases["unknown topic"].add(group)
            elif offset < b["min_offset"]:
                cases["below min"].add(group)
            elif offset > b["max_offset"]:
                cases["beyond max"].add(group)
            elif offset == b["max_offset"]:
                cases["caught up"].add(group)
            else:
                cases["in range"].add(group)
    assert cases["unknown topic"] == {"golden_ghost"}
    assert cases["below min"] == {"golden_below_min"}
    assert cases["beyond max"] == {"golden_beyond_max"}
    assert "golden_caught_up" in cases["caught up"]
    assert "golden_in_range" in cases["in range"]


@golden_param(["consumer-offsets"])
def test_config_files_hold_what_rocketmq_was_given(golden: Golden):
    """topics.json, subscriptionGroup.json, delayOffset.json (and .bak) hold the tables of config-manifest.json,
    read with the standard library alone: the config ground truth is sound before our parsers meet it."""
    given = golden.config_manifest
    config = golden.store / "config"
    for state, suffix in (("current", ""), ("bak", ".bak")):
        topics = fastjson_loads((config / f"topics.json{suffix}").read_text())["topicConfigTable"]
        assert topics == {t["topicName"]: {k: v for k, v in t.items() if k != "perm2String"}
                          for t in given["topics"][state]}
        doc = fastjson_loads((config / f"subscriptionGroup.json{suffix}").read_text())
        groups = {g["groupName"]: g for g in given["subscription_groups"][state]["groups"]}
        assert set(doc["subscriptionGroupTable"]) == set(groups)
        for name, g in doc["subscriptionGroupTable"].items():
            assert {k: g[k] for k in groups[name]} == groups[name], name
        assert doc.get("forbiddenTable") == given["subscription_groups"][state].get("forbidden")
        delay = fastjson_loads((config / f"delayOffset.json{suffix}").read_text())
        assert delay["offsetTable"] == given["delay_offsets"][state]
        assert ("dataVersion" in delay) == golden.version.startswith("5.")
    assert {t["perm2String"] for t in given["topics"]["current"]} >= {"RW-", "R--", "-W-", "---", "--X", "RWX"}


@golden_param(["propcrc"])
def test_crc32_property_verified_by_rocketmq(golden: Golden):
    assert all(m["prop_crc_ok"] and m["properties"]["__CRC32#"] for m in golden.messages)
