"""CommitLog codec: spec byte vectors, encoder/decoder round trips, derived values."""
from __future__ import annotations

import datetime as dt
import struct
import zlib

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec.encode import Message, encode_record
from rocketstore_spark.codec.javahash import index_hash, java_hash
from rocketstore_spark.store.records import read_table
from tests.builders import write_store as _write_store
from tests.strategies import messages

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

# a v1 record, cross-checked against RocketMQ's MessageDecoder (docs/format/commitlog.md, test vectors)
SPEC_V1 = bytes.fromhex(
    "000000bfdaa320a769c865ed00000001000000000000000000000005000000"
    "00400000b0000000000000018bcfe56800c0a8000a0000d431"
    "0000018bcfe5687bc0a8000100002a9f000000000000000000000000"
    "0000000e48656c6c6f20526f636b65744d5109546f70696354657374004d"
    "4b455953014b455931204b4559320254414753015461674102554e49515f4b455901"
    "433041383030304131463930313233343536373834374237363030303030303102"
    "574149540174727565" "02")

SPEC_MESSAGE = dict(topic="TopicTest", body=b"Hello RocketMQ", queue_id=1, queue_offset=5,
                    born_timestamp=1_700_000_000_000, born_host=("192.168.0.10", 54321),
                    store_timestamp=1_700_000_000_123, store_host=("192.168.0.1", 10911),
                    properties={"KEYS": "KEY1 KEY2", "TAGS": "TagA", "UNIQ_KEY": "C0A8000A1F901234567847B760000001",
                                "WAIT": "true"})


def test_encoder_writes_the_spec_vector():
    assert encode_record(Message(**SPEC_MESSAGE), 1_073_742_000) == SPEC_V1


def test_crc32_property_vector():
    """5.x record with __CRC32#, digits least-significant first, over the record minus 20 bytes."""
    m = Message(topic="TopicTest", body=b"Hello RocketMQ", born_host=("192.168.0.10", 54321),
                store_host=("192.168.0.1", 10911), properties={"TAGS": "TagA"}, crc32_property=True)
    rec = encode_record(m, 0)
    assert len(rec) == 144
    assert rec[-20:] == b"__CRC32#\x018442288870\x02"
    assert zlib.crc32(rec[:124]) & 0x7FFFFFFF == 788822448


def test_v2_record_for_long_topic():
    rec = encode_record(Message(topic="A" * 128, body=b"Hello RocketMQ", properties={"TAGS": "TagA"}), 0)
    assert len(rec) == 244 and rec[4:8] == bytes.fromhex("DAA320AB") and rec[102:104] == b"\x00\x80"


def write_store(tmp_path, msgs, segment_size=1 << 16):
    return _write_store(tmp_path / "commitlog", msgs, segment_size)


def millis(ts) -> int:
    """Exact epoch milliseconds; naive datetimes (what Spark's collect returns) are in local time."""
    if ts.tzinfo is None:
        ts = ts.astimezone(dt.timezone.utc)
    return (ts - EPOCH) // dt.timedelta(milliseconds=1)


def expected_tags_code(m: Message) -> int:
    tags = m.properties.get("TAGS")
    return java_hash(tags) if tags else 0


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(messages(), min_size=1, max_size=25))
def test_round_trip_every_field(tmp_path_factory, msgs):
    tmp = tmp_path_factory.mktemp("store")
    placed = write_store(tmp, msgs)
    table, findings = read_table(tmp)
    assert findings == []
    rows = table.to_pylist()
    assert len(rows) == len(msgs)
    for m, (offset, size), r in zip(msgs, placed, rows):
        assert r["physical_offset"] == offset == r["stored_physical_offset"]
        assert r["total_size"] == size
        assert r["topic"] == m.topic and r["body"] == m.body and r["body_length"] == len(m.body)
        assert r["record_version"] == (2 if len(m.topic.encode()) > 127 else 1)
        assert r["queue_id"] == m.queue_id and r["flag"] == m.flag and r["queue_offset"] == m.queue_offset
        assert r["reconsume_times"] == m.reconsume_times
        assert r["prepared_transaction_offset"] == m.prepared_transaction_offset
        assert millis(r["born_timestamp"]) == m.born_timestamp
        assert millis(r["store_timestamp"]) == m.store_timestamp
        # RocketMQ drops properties with an empty value when parsing (docs/format/commitlog.md)
        assert dict(r["properties"]) == {k: v for k, v in m.properties.items() if v}
        assert r["tags"] == (m.properties.get("TAGS"))
        assert r["keys"] == [k for k in m.properties.get("KEYS", "").split(" ") if k]
        assert r["tags_code"] == expected_tags_code(m)
        assert r["body_crc_ok"] is True
        assert r["transaction_type"] == ["NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK"][(m.sys_flag & 0xC) >> 2]
        store_ip = bytes(__import__("ipaddress").ip_address(m.store_host[0]).packed)
        assert r["msg_id"] == (store_ip + struct.pack(">iq", m.store_host[1], offset)).hex().upper()


def test_property_parsing_follows_rocketmq_rules(tmp_path):
    """Properties (docs/format/commitlog.md): pieces shorter than 3 ignored, empty names/values dropped, 0x01 allowed in values, duplicates
    overwrite, a final piece without 0x02 accepted."""
    raw = "A\x01\x02\x01x\x02ab\x02k\x01v\x01w\x02dup\x011\x02dup\x012\x02TAGS\x01T1\x02last\x01end"
    m = Message(topic="T", properties={})
    rec = bytearray(encode_record(m, 0))
    props = raw.encode()
    rec = rec[:-2] + struct.pack(">h", len(props)) + props
    struct.pack_into(">i", rec, 0, len(rec))
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(rec) + bytes(4096))
    table, _ = read_table(tmp_path)
    row = table.to_pylist()[0]
    assert dict(row["properties"]) == {"k": "v\x01w", "dup": "2", "TAGS": "T1", "last": "end"}
    assert row["tags"] == "T1" and row["tags_code"] == java_hash("T1")


def _string2message_properties(raw: bytes) -> dict[bytes, bytes]:
    """RocketMQ's MessageDecoder.string2messageProperties, written from its source: split on 0x02, pieces
    shorter than 3 ignored, the first 0x01 splits a piece into a non-empty name and value, later names win."""
    out: dict[bytes, bytes] = {}
    for piece in raw.split(b"\x02"):
        kv = piece.find(b"\x01")
        if len(piece) >= 3 and 0 < kv < len(piece) - 1:
            out[piece[:kv]] = piece[kv + 1:]
    return out


# names that share their first bytes or differ only past the eighth (the decoder tells names apart by length and
# first word, then byte by byte)
_PROPERTY_BYTES = st.lists(st.sampled_from([b"\x01", b"\x02", b"TAGS", b"KEYS", b"a", b"b c", b" ", b"xyzxyzxyz",
                                            b"UNIQ_KEY", b"UNIQ_KEYS", b"TAGSX", b"DELAY", b"y"]),
                           max_size=40).map(b"".join)


@settings(max_examples=300, deadline=None)
@given(_PROPERTY_BYTES)
def test_properties_split_like_rocketmq_at_every_offset(raw):
    """Separators at every position relative to the decoder's 8-byte search steps."""
    from rocketstore_spark.codec.decoder import RecordDecoder
    rec = bytearray(encode_record(Message(topic="T", properties={}), 0))
    rec = rec[:-2] + struct.pack(">h", len(raw)) + raw
    struct.pack_into(">i", rec, 0, len(rec))
    buf = np.frombuffer(bytes(rec), dtype=np.uint8)
    row = RecordDecoder(("properties", "tags", "keys", "uniq_key")).decode(buf, 0, len(buf), 0, 0,
                                                                         len(buf)).batch.to_pylist()[0]
    expected = _string2message_properties(raw)
    assert row["properties"] == [(k.decode(), v.decode()) for k, v in expected.items()]
    assert row["tags"] == (expected[b"TAGS"].decode() if b"TAGS" in expected else None)
    assert row["uniq_key"] == (expected[b"UNIQ_KEY"].decode() if b"UNIQ_KEY" in expected else None)
    assert row["keys"] == [k.decode() for k in expected.get(b"KEYS", b"").split(b" ") if k]


def test_delay_topic_tags_code_is_delivery_time(tmp_path):
    """Delay level 3 stored at 1,700,000,000,123 → tagsCode 1,700,000,010,123; levels clamp to 18."""
    msgs = [Message(topic="SCHEDULE_TOPIC_XXXX", queue_id=2, properties={"DELAY": "3", "TAGS": "x"}),
            Message(topic="SCHEDULE_TOPIC_XXXX", queue_id=17, properties={"DELAY": "25"}),
            Message(topic="OtherTopic", properties={"DELAY": "3", "TAGS": "x"})]
    write_store(tmp_path, msgs)
    codes = read_table(tmp_path, columns=("tags_code",))[0].column("tags_code").to_pylist()
    assert codes == [1_700_000_010_123, 1_700_000_000_123 + 7_200_000, java_hash("x")]


def test_timer_records_among_others_decode_every_string_column(tmp_path):
    """A 5.x timer record (rmq_sys_wheel_timer with TIMER_OUT_MS) read with its delivery time and the string
    columns together: the records after it keep their own properties (the timer parse once overwrote the
    address every property copy reads from: wrong bytes or a crash)."""
    msgs = [Message(topic="rmq_sys_wheel_timer", properties={"TIMER_OUT_MS": "1700000000000", "TAGS": "a"}),
            Message(topic="T", properties={"TAGS": "hello", "KEYS": "k1 k2", "UNIQ_KEY": "U1"}),
            Message(topic="rmq_sys_wheel_timer", properties={"TAGS": "b", "TIMER_OUT_MS": "-5"}),
            Message(topic="T", properties={"TAGS": "world"})]
    write_store(tmp_path, msgs)
    rows = read_table(tmp_path, columns=("properties", "tags", "keys", "uniq_key", "deliver_time"))[0].to_pylist()
    assert [dict(r["properties"]) for r in rows] == [m.properties for m in msgs]
    assert [r["tags"] for r in rows] == ["a", "hello", "b", "world"]
    assert [r["keys"] for r in rows] == [[], ["k1", "k2"], [], []]
    assert [r["uniq_key"] for r in rows] == [None, "U1", None, None]
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    assert [r["deliver_time"] for r in rows] == [epoch + dt.timedelta(milliseconds=1_700_000_000_000), None,
                                                 epoch + dt.timedelta(milliseconds=-5), None]


def test_java_hash_vectors():
    """Java String.hashCode vectors (docs/format/indexfile.md)."""
    assert java_hash("TopicTest#KEY1") == -1_656_969_516
    assert java_hash("TopicTest#😀") == 4_515_557
    assert java_hash("TopicTest#键") == 1_247_052_652
    assert index_hash("polygenelubricants") == 0
    assert index_hash("TopicTest#KEY2") == 1_656_969_515


def test_segment_writer_closes_segments_with_blank(tmp_path):
    msgs = [Message(topic="T", body=bytes(300)) for _ in range(10)]
    placed = write_store(tmp_path, msgs, segment_size=1024)
    files = sorted((tmp_path / "commitlog").iterdir())
    size = placed[0][1]                                         # 91 + 300 + len("T") = 392
    per_segment = 1 + (1024 - size - 8) // size                 # a record must leave 8 bytes for a BLANK
    assert size == 392 and per_segment == 2 and len(files) == 5
    first = files[0].read_bytes()
    end = per_segment * size
    assert struct.unpack_from(">ii", first, end) == (1024 - end, -875286124)
    assert placed[per_segment][0] == 1024                       # the next record starts the next file
    table, findings = read_table(tmp_path, columns=("queue_offset",))
    assert table.column("queue_offset").to_pylist() == list(range(10)) and findings == []
    assert np.array_equal(table.column("physical_offset").to_numpy(), [p for p, _ in placed])


def test_crc32_property_verdict(tmp_path):
    """The __CRC32# property covers the whole record (minus itself): a flipped QUEUEOFFSET byte fails it while
    BODYCRC still passes; records without the property get no verdict."""
    msgs = [Message(topic="T", body=b"abc", properties={"TAGS": "a"}, crc32_property=True),
            Message(topic="T", body=b"def", properties={"TAGS": "b"}, crc32_property=True),
            Message(topic="T", body=b"ghi", properties={"TAGS": "c"})]
    placed = write_store(tmp_path, msgs)
    seg = tmp_path / "commitlog" / f"{0:020d}"
    raw = bytearray(seg.read_bytes())
    raw[placed[1][0] + 27] ^= 0x01                          # last byte of QUEUEOFFSET
    seg.write_bytes(bytes(raw))
    table, _ = read_table(tmp_path, columns=("properties_crc_ok", "body_crc_ok", "properties"))
    assert table.column("properties_crc_ok").to_pylist() == [True, False, None]
    assert table.column("body_crc_ok").to_pylist() == [True, True, True]
    assert dict(table.column("properties").to_pylist()[0])["TAGS"] == "a"


@given(st.binary(max_size=5000), st.integers(0, 64))
def test_both_crc32_implementations_equal_zlib(data, skip):
    from rocketstore_spark.codec.crc32 import crc32_span, rmq_crc32_span
    arr = np.frombuffer(data, dtype=np.uint8)
    start = min(skip, len(arr))
    want = zlib.crc32(data[start:])
    assert int(crc32_span(arr, start, len(arr) - start)) == want
    assert int(rmq_crc32_span(arr, start, len(arr) - start)) == want & 0x7FFFFFFF


def test_crc32_uses_libdeflate():
    # the pinned deflate package is a dependency: falling back to the slow table would be a silent regression
    from rocketstore_spark.codec import native
    assert native.HAVE_LIBDEFLATE


def test_an_empty_body_has_no_crc_check(tmp_path):
    """RocketMQ verifies BODYCRC only for a non-empty body: whatever an empty body's stored CRC, it passes."""
    from rocketstore_spark.store.scan import scan_segment
    write_store(tmp_path, [Message(topic="T", body=b"", body_crc=12345), Message(topic="T", body=b"x", body_crc=7)])
    table, _ = read_table(tmp_path, columns=("body_crc_ok",))
    assert table.column("body_crc_ok").to_pylist() == [True, False]
    summary = scan_segment(str(tmp_path / "commitlog" / f"{0:020d}"), 0)
    assert summary.crc_failures == 1 and [f.check for f in summary.findings] == ["commitlog.body_crc"]


def test_delay_levels_parse_like_java_integer_parse_int(tmp_path):
    """RocketMQ reads DELAY with Integer.parseInt, clamps it to the highest level and uses it when > 0."""
    levels = ["+3", "2147483647", "-2", "0", "2147483648", "3x", ""]
    msgs = [Message(topic="SCHEDULE_TOPIC_XXXX", properties={"DELAY": v, "TAGS": "x"}) for v in levels]
    write_store(tmp_path, msgs)
    codes = read_table(tmp_path, columns=("tags_code",))[0].column("tags_code").to_pylist()
    st = 1_700_000_000_123
    assert codes == [st + 10_000, st + 7_200_000, java_hash("x"), java_hash("x"), java_hash("x"), java_hash("x"),
                     java_hash("x")]
