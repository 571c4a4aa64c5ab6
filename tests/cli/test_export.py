"""``rocketstore export`` (issue #13): a topic / queue / key / tag / time / offset slice of one or more stores
to Parquet or JSON lines, each message with what publishing it again needs; the records are RocketMQ's own
(the golden manifests), bodies byte for byte."""
from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json

import pyarrow.parquet as pq
import pytest

from tests.cli.helpers import run
from tests.golden.goldens import BY_ID


def pieces(keys: str | None) -> list[str]:
    return [k for k in (keys or "").split(" ") if k]


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat()


@pytest.mark.parametrize("gid", ["4.9.8/clean", "5.5.1/corrupt-body"])
def test_a_topic_and_time_slice_to_parquet_holds_rocketmqs_records(gid, tmp_path):
    g = BY_ID[gid]
    times = sorted(m["store_timestamp"] for m in g.messages if m["topic"] == "TopicTest")
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    result = run("export", g.store, "--topic", "TopicTest", "--since", iso(lo), "--until", iso(hi),
                 "--output", tmp_path / "slice.parquet", "--json")
    want = [m for m in g.messages if m["topic"] == "TopicTest" and lo <= m["store_timestamp"] <= hi]
    assert result.exit_code == 0 and json.loads(result.output)["messages"] == len(want)
    t = pq.read_table(tmp_path / "slice.parquet")
    assert t["physical_offset"].to_pylist() == [m["physical_offset"] for m in want]
    assert [hashlib.sha256(b).hexdigest() for b in t["body"].to_pylist()] == [m["body_sha256"] for m in want]
    assert t["queue_offset"].to_pylist() == [m["queue_offset"] for m in want]
    assert set(t["store"].to_pylist()) == {str(g.store)}


def test_a_key_slice_of_two_stores_to_json_lines(tmp_path):
    stores = [BY_ID["4.9.8/clean"], BY_ID["5.5.1/clean"]]
    key = "order-18"
    result = run("export", *(g.store for g in stores), "--topic", "OrderTopic", "--key", key,
                 "--output", tmp_path / "k.jsonl")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (tmp_path / "k.jsonl").read_text().splitlines()]
    want = [(str(g.store), m) for g in stores for m in g.messages
            if m["topic"] == "OrderTopic" and key in pieces(m["keys"])]
    assert len(rows) == len(want) >= 2
    for row, (store, m) in zip(rows, want):
        assert row["store"] == store and row["physical_offset"] == m["physical_offset"]
        assert hashlib.sha256(base64.b64decode(row["body"])).hexdigest() == m["body_sha256"]
        assert row["properties"]["KEYS"] == m["keys"] and row["topic"] == "OrderTopic"


def test_crc_ok_only_and_an_offset_range_leave_out_the_damaged_record(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    bad = [m for m in g.messages if not m["body_crc_ok"]]
    assert bad
    lo = bad[0]["physical_offset"]
    result = run("export", g.store, "--from-offset", lo, "--crc-ok-only", "--output", tmp_path / "x.parquet",
                 "--json")
    # left out, and said: each record RocketMQ's manifest marks as failing BODYCRC is a finding (exit 3)
    assert result.exit_code == 3
    assert [(f["check"], f["physical_offset"]) for f in json.loads(result.stdout)["findings"]] == \
        [("commitlog.body_crc", m["physical_offset"]) for m in g.messages
         if m["physical_offset"] >= lo and not m["body_crc_ok"]]
    got = pq.read_table(tmp_path / "x.parquet")["physical_offset"].to_pylist()
    assert got == [m["physical_offset"] for m in g.messages if m["physical_offset"] >= lo and m["body_crc_ok"]]


@pytest.mark.parametrize("gid", ["5.5.1/corrupt-body", "4.9.8/torn-tail", "5.1.4/zeroed-page"])
def test_what_the_reading_met_is_reported_with_file_and_byte(gid, tmp_path):
    """An export over damage still writes every record it can read, names the damage and exits 3: each body
    RocketMQ's manifest marks as failing BODYCRC, and the record the surgery tore or zeroed."""
    g = BY_ID[gid]
    result = run("export", g.store, "--output", tmp_path / "all.parquet", "--json")
    assert result.exit_code == 3, result.output
    found = json.loads(result.stdout)["findings"]
    crc = [f["physical_offset"] for f in found if f["check"] == "commitlog.body_crc"]
    assert crc == [m["physical_offset"] for m in g.messages if not m["body_crc_ok"]]
    for f in found:
        seg = int(f["file"].rsplit("/", 1)[1])
        assert f["physical_offset"] == seg + f["file_position"]
    assert any(f["severity"] == "error" for f in found)
    damaged = [f for f in found if f["check"] != "commitlog.body_crc"]
    (surgery,) = g.manifest["surgery"] if not gid.endswith("corrupt-body") else [None]
    if surgery is not None:
        # the first record whose bytes the surgery zeroed (in the store it was copied from): where the reading
        # met it
        lo, hi = surgery["physical_offset"], surgery["physical_offset"] + surgery["length"]
        hit = min(m["physical_offset"] for m in g.parent.messages if m["physical_offset"] < hi
                  and m["physical_offset"] + m["total_size"] > lo)
        assert min(f["physical_offset"] for f in damaged) == hit
    text = run("export", g.store, "--output", tmp_path / "all2.parquet").stdout
    assert "What the reading met" in text and all(f["check"] in text for f in found)


def test_bad_targets_and_empty_slices(tmp_path):
    g = BY_ID["5.5.1/clean"]
    inside = run("export", g.store, "--output", g.store / "x.parquet")
    assert inside.exit_code == 2 and "inside the store" in inside.output
    (tmp_path / "there.parquet").write_bytes(b"")
    assert run("export", g.store, "--output", tmp_path / "there.parquet").exit_code == 2
    nothing = run("export", g.store, "--topic", "NoSuchTopic", "--output", tmp_path / "none.parquet")
    assert nothing.exit_code == 3 and pq.read_table(tmp_path / "none.parquet").num_rows == 0
