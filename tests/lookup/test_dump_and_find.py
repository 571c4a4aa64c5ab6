"""``lookup.dump`` and ``lookup.query.find_in_stores``: the rows of one store file and the messages found
across stores are the records RocketMQ stored (the golden manifests: positions, queue offsets, body
digests), whatever encoding the body is asked in."""
from __future__ import annotations

import base64
import hashlib

import pytest

from rocketstore_spark.lookup.dump import dump_file, file_kind
from rocketstore_spark.lookup.query import encode_body, find_in_stores
from tests.golden.goldens import BY_ID


def test_the_kind_of_a_file_is_told_by_where_it_lies(tmp_path):
    store = BY_ID["5.5.1/clean"].store
    assert file_kind(str(store / "commitlog" / "00000000000000000000")) == "commitlog"
    assert file_kind(str(store / "consumequeue" / "TopicTest" / "0" / "00000000000000000000")) == "consumequeue"
    assert file_kind(str(store / "index" / "x")) == "index"
    with pytest.raises(ValueError, match="give --kind"):
        file_kind(str(store / "checkpoint"))


def test_a_segment_from_an_offset_with_its_bodies():
    g = BY_ID["5.5.1/clean"]
    second = g.manifest["segments"][1]
    want = [m for m in g.messages if m["segment"] == second["file"]]
    dump = dump_file(str(g.store / "commitlog" / second["file"]), start=want[3]["physical_offset"], count=2, body="hex")
    assert dump.kind == "commitlog" and dump.notes == []             # stopped at --count: no end-of-read findings
    assert [(r["physical_offset"], r["file_position"], r["queue_offset"]) for r in dump.rows] == \
        [(m["physical_offset"], m["file_position"], m["queue_offset"]) for m in want[3:5]]
    assert [hashlib.sha256(bytes.fromhex(r["body"])).hexdigest() for r in dump.rows] == \
        [m["body_sha256"] for m in want[3:5]]


def test_a_torn_segment_read_to_its_end_says_where_it_stops():
    g = BY_ID["4.9.8/torn-tail"]
    last = g.manifest["segments"][-1]
    dump = dump_file(str(g.store / "commitlog" / last["file"]), count=0)
    assert len(dump.rows) == last["records"] and dump.notes and "commitlog." in dump.notes[0]


def test_a_queue_file_from_a_queue_offset_and_an_index_file():
    g = BY_ID["5.5.1/clean"]
    queued = sorted((m for m in g.messages if (m["topic"], m["queue_id"]) == ("TopicTest", 1)
                     and m["transaction_type"] in (0, 8)), key=lambda m: m["queue_offset"])      # NOT_TYPE, COMMIT
    cq = sorted((g.store / "consumequeue" / "TopicTest" / "1").iterdir())[0]
    dump = dump_file(str(cq), start=2, count=3)
    assert [(r["queue_offset"], r["physical_offset"], r["size"]) for r in dump.rows] == \
        [(m["queue_offset"], m["physical_offset"], m["total_size"]) for m in queued[2:5]]
    ix = dump_file(str(sorted((g.store / "index").iterdir())[0]), start=3, count=2)
    assert [r["entry"] for r in ix.rows] == [3, 4] and ix.notes[0].startswith("header: ")
    slots = g.manifest["geometry"]["max_hash_slot_num"]
    assert all(r["slot"] == r["key_hash"] % slots for r in ix.rows)


def test_found_across_stores_with_the_body_in_each_encoding():
    stores = [BY_ID["4.9.8/clean"], BY_ID["5.5.1/clean"]]
    for how, decode in (("hex", bytes.fromhex), ("base64", base64.b64decode)):
        hits = find_in_stores([g.store for g in stores], body=how, physical_offset=0)
        assert [(h["store"], h["physical_offset"]) for h in hits] == [(str(g.store), 0) for g in stores]
        assert list(hits[0])[0] == "store" and list(hits[0])[-1] == "body"
        assert [hashlib.sha256(decode(h["body"])).hexdigest() for h in hits] == \
            [next(m for m in g.messages if m["physical_offset"] == 0)["body_sha256"] for g in stores]
    assert "body" not in find_in_stores([stores[0].store], physical_offset=0)[0]
    assert encode_body("é".encode() + b"\xff", "text") == "é\ufffd"
