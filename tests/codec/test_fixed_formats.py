"""ConsumeQueue, IndexFile, checkpoint and config JSON codecs: round trips, and RocketMQ's own files."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore_spark.codec import checkpoint, config_json, consumequeue, indexfile
from rocketstore_spark.codec.javahash import index_hash
from tests.golden.goldens import BY_ID, GOLDENS, fastjson_loads
from tests.strategies import INT32, INT64


@given(st.lists(st.tuples(INT64, INT32, INT64), max_size=50))
def test_consumequeue_round_trip(entries):
    data = consumequeue.encode_entries(*zip(*entries)) if entries else b""
    decoded = consumequeue.decode_entries(data)
    assert [tuple(int(x) for x in e) for e in decoded] == entries


def test_consumequeue_end_and_fillers():
    data = consumequeue.encode_entries([0, 0, 500, 0, 900], [0x7FFFFFFF, 0x7FFFFFFF, 120, 0, 50], [0, 0, 7, 0, 0])
    e = consumequeue.decode_entries(data)
    assert consumequeue.written_count(e) == 3                # the all-zero entry ends the data
    assert consumequeue.is_filler(e).tolist() == [True, True, False, False, False]


@given(st.integers(1, 64), st.lists(st.tuples(INT32, INT64, INT32, INT32), max_size=30),
       st.fixed_dictionaries({"begin_timestamp": INT64, "end_timestamp": INT64, "begin_phy_offset": INT64,
                              "end_phy_offset": INT64, "hash_slot_count": INT32, "index_count": INT32}))
def test_indexfile_round_trip(slots, entries, header):
    geometry = indexfile.Geometry(slots, len(entries) + 2)
    slot_values = np.arange(slots, dtype=np.int32)
    data = indexfile.encode(header, slot_values, np.array(entries, dtype=indexfile.ENTRY_DTYPE), geometry)
    assert len(data) == geometry.file_size
    assert indexfile.geometry_from_size(len(data), slots) == geometry
    assert {k: int(v) for k, v in zip(indexfile.HEADER_DTYPE.names, indexfile.decode_header(data).item())} == header
    assert indexfile.decode_slots(data, geometry).tolist() == slot_values.tolist()
    got = indexfile.decode_entries(data, geometry, len(entries))
    assert [tuple(int(x) for x in e) for e in got] == entries


@pytest.mark.parametrize("golden", [g for g in GOLDENS if g.scenario == "clean"], ids=lambda g: g.id)
def test_golden_index_files_hold_rocketmqs_keys(golden):
    """Every index entry RocketMQ wrote carries the hash of a key the manifest says it indexed, and every
    chain (slot -> prev_index) stays inside its file."""
    geometry = indexfile.Geometry(64, 256)
    hashes = {(k["hash"], m["physical_offset"]) for m in golden.messages for k in m["index_keys"]}
    seen = set()
    for f in sorted((golden.store / "index").iterdir()):
        data = f.read_bytes()
        h = indexfile.decode_header(data)
        entries = indexfile.decode_entries(data, geometry, int(h["index_count"]))[1:]
        for e in entries:
            seen.add((int(e["key_hash"]), int(e["phy_offset"])))
            assert 0 <= e["prev_index"] < h["index_count"]
        slots = indexfile.decode_slots(data, geometry)
        assert slots.max() < h["index_count"]
        assert int(h["end_phy_offset"]) == int(entries["phy_offset"][-1])
    assert seen == hashes


@given(st.fixed_dictionaries({k: st.integers(0, 1 << 62) for k in checkpoint.DTYPE.names}))
def test_checkpoint_round_trip(fields):
    data = checkpoint.encode(**fields)
    assert len(data) == checkpoint.FILE_SIZE
    decoded = checkpoint.decode(data)
    assert {k: decoded[k] for k in fields} == fields
    assert decoded["min_timestamp"] == max(0, min(fields["physic_msg_timestamp"], fields["logics_msg_timestamp"]) - 3000)


def test_checkpoint_vector():
    """Checkpoint test vector (docs/format/checkpoint.md)."""
    d = checkpoint.decode(bytes.fromhex("0000018BCFE5687B0000018BCFE568640000018BCF4CD180"))
    assert d["physic_msg_timestamp"] == 1_700_000_000_123 and d["min_timestamp"] == 1_699_999_997_100
    assert d["min_timestamp_index"] == 1_699_990_000_000


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.id)
def test_golden_checkpoints_match_storecheckpoint(golden):
    d = checkpoint.decode((golden.store / "checkpoint").read_bytes())
    names = {"physicMsgTimestamp": "physic_msg_timestamp", "logicsMsgTimestamp": "logics_msg_timestamp",
             "indexMsgTimestamp": "index_msg_timestamp", "masterFlushedOffset": "master_flushed_offset",
             "confirmPhyOffset": "confirm_phy_offset", "logicsPhysicalOffset": "logics_physical_offset",
             "minTimestamp": "min_timestamp", "minTimestampIndex": "min_timestamp_index"}
    for java, ours in names.items():
        if java in golden.manifest["checkpoint"]:
            assert d[ours] == golden.manifest["checkpoint"][java], java


@given(st.dictionaries(st.from_regex(r"[A-Za-z0-9_%|-]{1,20}@[A-Za-z0-9_-]{1,20}", fullmatch=True),
                       st.dictionaries(st.integers(0, 1023), st.integers(0, 1 << 62), min_size=1, max_size=5),
                       max_size=5))
def test_config_json_round_trip(table):
    rows = config_json.consumer_offsets(config_json.dumps(table))
    want = [(k.split("@")[0], k.split("@")[1], q, o) for k, qs in table.items() for q, o in qs.items()]
    assert sorted(rows) == sorted(want)


@pytest.mark.parametrize("version", ["4.9.8", "5.5.1"])
def test_golden_consumer_offsets_parse(version):
    text = (BY_ID[f"{version}/consumer-offsets"].store / "config" / "consumerOffset.json").read_text()
    rows = config_json.consumer_offsets(text)
    table = fastjson_loads(text)["offsetTable"]
    assert len(rows) == sum(len(v) for v in table.values()) > 10


def test_index_hash_of_golden_keys():
    g = BY_ID["5.5.1/clean"]
    keys = [k for m in g.messages for k in m["index_keys"]]
    assert any("#T#" in k["key"] for k in keys)              # 5.5.1 indexes TAGS too
    assert all(index_hash(k["key"]) == k["hash"] for k in keys)


@given(st.binary(max_size=64))
def test_java_hash_of_any_bytes_replaces_malformed_utf8_as_java_does(data):
    """Java's (and Python's) UTF-8 decoder puts one U+FFFD for each maximal invalid subpart: E4 B8 41 is
    U+FFFD then 'A', not two U+FFFD."""
    import numpy as np

    from rocketstore_spark.codec.javahash import java_hash, java_hash_span
    arr = np.frombuffer(data, dtype=np.uint8)
    assert int(java_hash_span(arr, 0, len(arr))) == java_hash(data.decode("utf-8", "replace"))


def test_java_hash_truncated_sequence_vector():
    import numpy as np

    from rocketstore_spark.codec.javahash import java_hash_span
    assert int(java_hash_span(np.frombuffer(b"\xe4\xb8A", dtype=np.uint8), 0, 3)) == 31 * 0xFFFD + ord("A")
