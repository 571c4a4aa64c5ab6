"""Every golden store (written by RocketMQ) decodes to exactly its manifest, every field (pure codec)."""
from __future__ import annotations

import hashlib
import ipaddress
import re

import pytest

from rocketstore_spark.codec.record_schema import DECODED
from rocketstore_spark.store.records import read_table
from tests.codec.test_commitlog import millis
from tests.golden.goldens import GOLDENS


def host(address_hex: str, port: int) -> str:
    ip = ipaddress.ip_address(bytes.fromhex(address_hex))
    if ip.version == 4:
        return f"{ip}:{port}"
    groups = ":".join(f"{int(address_hex[i:i + 4], 16):x}" for i in range(0, 32, 4))   # Java's form
    return f"[{groups}]:{port}"


def expected_row(m: dict) -> dict:
    return {
        "physical_offset": m["physical_offset"], "file_position": m["file_position"],
        "total_size": m["total_size"], "magic_code": m["magic_code"], "body_crc": m["body_crc"],
        "queue_id": m["queue_id"], "flag": m["flag"], "queue_offset": m["queue_offset"],
        "stored_physical_offset": m["stored_physical_offset"], "sys_flag": m["sys_flag"],
        "born_timestamp": m["born_timestamp"], "store_timestamp": m["store_timestamp"],
        "born_host": host(m["born_host_address"], m["born_host_port"]),
        "store_host": host(m["store_host_address"], m["store_host_port"]),
        "reconsume_times": m["reconsume_times"], "prepared_transaction_offset": m["prepared_transaction_offset"],
        "body_length": m["body_length"], "body_sha256": m["body_sha256"], "topic": m["topic"],
        "properties": m["properties"], "tags": m["properties"].get("TAGS"),
        "keys": [k for k in (m["keys"] or "").split(" ") if k], "uniq_key": m["uniq_key"], "msg_id": m["msg_id"],
        "transaction_type": ["NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK"][m["transaction_type"] >> 2],
        "body_crc_ok": m["body_crc_ok"], "tags_code": m["tags_code"],
        # RocketMQ's verdict with forceVerifyPropCRC where the record carries __CRC32#, else no verdict
        "properties_crc_ok": m.get("prop_crc_ok"),
        "record_version": 1 if m["magic_code"] == -626843481 else 2,
        # RocketMQ's tagsCode of a SCHEDULE_TOPIC_XXXX record is its delivery time
        "deliver_time": m["tags_code"] if m["topic"] == "SCHEDULE_TOPIC_XXXX" else None,
        "body_uncompressed": GENERATOR_BODY if m["sys_flag"] & 1 else None,
    }


GENERATOR_BODY = "the generator's body"


def is_generator_body(body: bytes) -> bool:
    """Generator.Writer.body(i, 5000), the raw body the generator compressed: 'golden message i | ' repeated."""
    m = re.match(rb"golden message (\d+) \| ", body)
    unit = m.group(0) if m else b"-"
    return body == (unit * (5000 // len(unit) + 1))[:5000]


def actual_row(r: dict) -> dict:
    r = dict(r)
    r["born_timestamp"] = millis(r["born_timestamp"])
    r["store_timestamp"] = millis(r["store_timestamp"])
    r["body_sha256"] = hashlib.sha256(r.pop("body")).hexdigest()
    r["properties"] = dict(r["properties"])
    r["deliver_time"] = millis(r["deliver_time"]) if r["deliver_time"] is not None else None
    if r["body_uncompressed"] is not None and is_generator_body(r["body_uncompressed"]):
        r["body_uncompressed"] = GENERATOR_BODY
    for k in ("segment_base_offset", "store"):
        r.pop(k, None)
    return r


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_codec_decodes_golden_store_exactly(golden):
    table, findings = read_table(golden.store)
    assert set(table.column("store").to_pylist()) == {str(golden.store)}
    got = [actual_row(r) for r in table.to_pylist()]
    want = [expected_row(m) for m in sorted(golden.records_on_disk, key=lambda m: m["physical_offset"])]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g == w, g["physical_offset"]
    # where RocketMQ's own walk of a segment stopped on damage, ours reports a finding at that byte
    damaged = {(s["file"], s["valid_end"]) for s in golden.manifest["segments"]
               if s["stop_reason"].startswith("invalid record")}
    reported = {(f.file.rsplit("/", 1)[-1], f.file_position) for f in findings if f.check.startswith("commitlog.")
                and f.severity == "error"}
    assert damaged <= reported


@pytest.mark.parametrize("column", DECODED)
def test_each_column_alone_decodes_as_in_the_full_read(column):
    # a narrow read fills only the header fields its columns need (record_schema.header_fields_for): a field missing
    # from that map would show here as an error or as different values
    store = next(g for g in GOLDENS if g.id == "5.5.1/propcrc").store
    full, _ = read_table(store)
    alone, _ = read_table(store, columns=(column,))
    assert alone.column(column).equals(full.column(column))
