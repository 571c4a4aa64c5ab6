"""Batches written whole by compiled code (codec/batch_writer.py into codec/ipc_batch.py's messages): the layout
is right for every column, alone or with any others in any order, on every path (bodies gathered by the walk or
not, misplaced records left out, arenas that must grow, strings that are not UTF-8)."""
from __future__ import annotations

import zlib

import numba
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec import ipc_batch
from rocketstore_spark.codec.checked import CHECKED
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.encode import Message, encode_record
from rocketstore_spark.codec.record_schema import DECODED, arrow_schema

BASE = 1 << 30


# records that take every branch of every column: IPv4 and IPv6 hosts, TAGS/UNIQ_KEY present or not, several and
# empty KEYS pieces, duplicate-looking property names, non-ASCII properties, delayed and timer records, timestamps
# out of range, every transaction type, a compressed body, an empty body, a 5.x CRC property
_MESSAGES = [
    Message("T0", b"plain", properties={"TAGS": "a", "KEYS": "k1  k2 ", "UNIQ_KEY": "U0"}),
    Message("T1", b"", born_host=("2001:db8::1", 65535), store_host=("::1", 10911), sys_flag=1 << 2),
    Message("Tópico", b"x" * 300, properties={"TAGS": "étiquette", "A": "1", "A ": "2", "KEYS": "中 文"},
            sys_flag=2 << 2),
    Message("T3", zlib.compress(b"payload" * 50), sys_flag=0x001 | (3 << 2), born_timestamp=1 << 62),
    Message("SCHEDULE_TOPIC_XXXX", b"d", properties={"DELAY": "3", "TAGS": "t"}, store_timestamp=1_000_000),
    Message("rmq_sys_wheel_timer", b"t", properties={"TIMER_OUT_MS": "1795320999000"}),
    Message("T6", b"crc", properties={"TAGS": "b", "TAGS ": "c"}, crc32_property=True),
    Message("T7", b"dup", properties={"KEYS": "only"}, store_timestamp=-(1 << 60)),
]


def _varied_records() -> bytes:
    """_MESSAGES over and over (runs of equal hosts, several tiles of the walk)."""
    out = bytearray()
    for i in range(40):
        m = _MESSAGES[i % len(_MESSAGES)]
        out += encode_record(m, BASE + len(out))
    return bytes(out)


DATA = _varied_records()
WINDOW = np.frombuffer(DATA, dtype=np.uint8)


def decode(columns, **options):
    d = RecordDecoder(columns, **options).decode(WINDOW, 0, len(DATA), BASE, 0, len(DATA))
    d.batch.validate(full=True)
    return d


FULL = decode(DECODED).batch


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(DECODED), min_size=1, max_size=len(DECODED), unique=True))
def test_any_columns_in_any_order_hold_what_the_full_batch_holds(columns):
    batch = decode(columns).batch
    assert batch.schema.names == columns
    for name in columns:
        assert batch.column(name).equals(FULL.column(name)), name


def test_the_full_batch_holds_what_the_records_say():
    import datetime
    from rocketstore_spark.codec.javahash import java_hash
    rows = FULL.to_pylist()
    sizes = [len(encode_record(m, 0)) for m in _MESSAGES]
    for i, r in enumerate(rows):
        m = _MESSAGES[i % len(_MESSAGES)]
        assert (r["total_size"], r["body_length"], r["queue_id"], r["flag"], r["reconsume_times"]) == \
            (sizes[i % len(sizes)], len(m.body), m.queue_id, m.flag, m.reconsume_times)
        assert r["body"] == m.body and r["segment_base_offset"] == BASE and r["record_version"] == 1
        assert r["sys_flag"] & 0xC == m.sys_flag & 0xC and r["magic_code"] == -626843481
    utc = datetime.timezone.utc
    assert rows[0]["born_timestamp"] == datetime.datetime.fromtimestamp(1_700_000_000, utc)
    assert rows[0]["store_timestamp"] == datetime.datetime.fromtimestamp(1_700_000_000.123, utc)
    assert rows[0]["tags_code"] == java_hash("a") and rows[1]["tags_code"] == 0
    assert rows[0]["msg_id"] == f"C0A800010000{10911:04X}{BASE:016X}"
    assert [r["topic"] for r in rows[:8]] == ["T0", "T1", "Tópico", "T3", "SCHEDULE_TOPIC_XXXX",
                                              "rmq_sys_wheel_timer", "T6", "T7"]
    assert rows[0]["keys"] == ["k1", "k2"] and rows[0]["tags"] == "a" and rows[0]["uniq_key"] == "U0"
    assert rows[1]["tags"] is None and rows[1]["keys"] == [] and rows[1]["body"] == b""
    assert rows[1]["born_host"].endswith(":65535") and rows[0]["born_host"] == "192.168.0.10:54321"
    assert rows[2]["keys"] == ["中", "文"] and rows[2]["tags"] == "étiquette"
    assert dict(rows[2]["properties"]) == {"TAGS": "étiquette", "A": "1", "A ": "2", "KEYS": "中 文"}
    assert rows[3]["body_uncompressed"] == b"payload" * 50 and rows[3]["born_timestamp"] is None
    assert [r["transaction_type"] for r in rows[:4]] == ["NOT_TYPE", "PREPARED", "COMMIT", "ROLLBACK"]
    assert rows[4]["deliver_time"] is not None and rows[5]["deliver_time"] is not None
    assert rows[6]["properties_crc_ok"] is True and rows[0]["properties_crc_ok"] is None
    assert rows[7]["store_timestamp"] is None
    assert all(r["body_crc_ok"] for r in rows)
    assert [r["physical_offset"] - r["file_position"] for r in rows] == [BASE] * len(rows)


def test_arenas_too_small_grow_and_keep_every_buffer():
    decoder = RecordDecoder(DECODED)
    decoder._body_capacity = 64             # the walk outgrows the arena, then the writer does
    decoder._rest_capacity = 8
    batch = decoder.decode(WINDOW, 0, len(DATA), BASE, 0, len(DATA)).batch
    batch.validate(full=True)
    assert batch.equals(FULL)


def test_bodies_of_misplaced_records_are_left_out_with_them():
    # the third record says it lies elsewhere: the batch holds the others, their bodies and verdicts exact
    data, at = bytearray(), []
    for i in range(5):
        at.append(len(data))
        data += encode_record(Message(f"T{i}", bytes([65 + i]) * (100 + i)), BASE + len(data) + (7 if i == 2 else 0))
    window = np.frombuffer(bytes(data), dtype=np.uint8)
    for columns in (("body", "body_crc_ok", "topic"), ("body", "topic"), ("body_crc_ok", "body", "topic")):
        d = RecordDecoder(columns, check_crc=True).decode(window, 0, len(data), BASE, 0, len(data))
        d.batch.validate(full=True)
        assert d.misplaced.tolist() == [at[2]]
        got = d.batch.to_pydict()
        assert got["topic"] == ["T0", "T1", "T3", "T4"]
        assert got["body"] == [bytes([65 + i]) * (100 + i) for i in (0, 1, 3, 4)]
        if "body_crc_ok" in columns:
            assert got["body_crc_ok"] == [True] * 4


def test_malformed_utf8_in_keys_and_properties_is_replaced_like_java():
    good = encode_record(Message("T", b"b", properties={"KEYS": "ключ x", "TAGS": "t"}), BASE)
    bad = bytearray(good)
    bad[bytes(bad).index("ключ".encode())] = 0xFF
    window = np.frombuffer(bytes(bad), dtype=np.uint8)
    batch = RecordDecoder(("keys", "properties", "tags")).decode(window, 0, len(bad), BASE, 0, len(bad)).batch
    batch.validate(full=True)
    expected = b"\xff" + "ключ x".encode()[1:]
    keys = expected.decode("utf-8", "replace")
    row = batch.to_pylist()[0]
    assert row["keys"] == keys.split(" ") and dict(row["properties"])["KEYS"] == keys and row["tags"] == "t"


def test_a_callers_schema_is_the_batches_schema():
    columns = ("physical_offset", "topic", "tags")
    theirs = pa.schema([pa.field(f.name, f.type, nullable=True) for f in arrow_schema(columns)])
    batch = decode(columns, schema=theirs).batch
    assert batch.schema.equals(theirs) and batch.column("topic").equals(FULL.column("topic"))
    with pytest.raises(ValueError, match="topic"):
        RecordDecoder(columns, schema=pa.schema([("topic", pa.large_string())]))
    with pytest.raises(ValueError, match="tags"):            # a column we make null where it says never
        RecordDecoder(columns, schema=pa.schema([pa.field("tags", pa.string(), nullable=False)]))


def test_strict_decoding_reports_what_the_batch_says():
    # a body altered after its CRC was stored: the walk's verdict is the batch's, and the finding's
    data = bytearray(DATA)
    at = data.index(b"x" * 300)
    data[at] ^= 1
    window = np.frombuffer(bytes(data), dtype=np.uint8)
    d = RecordDecoder(DECODED, check_crc=True).decode(window, 0, len(data), BASE, 0, len(data))
    d.batch.validate(full=True)
    verdicts = d.batch.column("body_crc_ok").to_pylist()
    assert verdicts.count(False) == 1 and d.crc_failures.tolist() == [d.positions[verdicts.index(False)]]


def test_a_template_names_every_node_and_buffer_of_the_schema():
    schema = arrow_schema(DECODED)
    template = ipc_batch.Template(schema)
    assert (template.nodes, template.buffers) == tuple(map(sum, zip(*(ipc_batch.buffer_count(f.type)
                                                                       for f in schema))))
    assert len(template.metadata) % ipc_batch.ALIGN == 0
    assert len(template.metadata) == template.positions[ipc_batch.POS_METADATA_SIZE]
    assert ipc_batch.arena(1000).ctypes.data % ipc_batch.ALIGN == 0


@numba.njit
def _two_columns(out, metadata, positions, values, offsets, data):
    """A message of an int64 and a string column, laid out by hand."""
    n = values.shape[0]
    m = positions[ipc_batch.POS_METADATA_SIZE]
    ipc_batch.begin(out, metadata, positions, n)
    out[m:m + 8 * n] = values.view(np.uint8)
    ipc_batch.node(out, positions, 0, n, 0)
    ipc_batch.buffer(out, positions, 0, 0, 0)
    ipc_batch.buffer(out, positions, 1, 0, 8 * n)
    at = (8 * n + 7) // 8 * 8
    out[m + at:m + at + 4 * (n + 1)] = offsets.view(np.uint8)
    ipc_batch.node(out, positions, 1, n, 0)
    ipc_batch.buffer(out, positions, 2, at, 0)
    ipc_batch.buffer(out, positions, 3, at, 4 * (n + 1))
    at = (at + 4 * (n + 1) + 7) // 8 * 8
    out[m + at:m + at + data.shape[0]] = data
    ipc_batch.buffer(out, positions, 4, at, data.shape[0])
    ipc_batch.finish(out, positions, (at + data.shape[0] + 7) // 8 * 8)


def test_a_message_patched_by_compiled_code_reads_back_without_a_copy():
    schema = pa.schema([("a", pa.int64()), ("s", pa.string())])
    template = ipc_batch.Template(schema)
    arena = ipc_batch.arena(int(template.positions[ipc_batch.POS_METADATA_SIZE]) + 64)
    _two_columns(arena, template.metadata, template.positions, np.array([5, -6, 7], dtype=np.int64),
                 np.array([0, 1, 3, 6], dtype=np.int32), np.frombuffer(b"xyzabc", dtype=np.uint8))
    batch = template.read(arena)
    batch.validate(full=True)
    assert batch.to_pydict() == {"a": [5, -6, 7], "s": ["x", "yz", "abc"]}
    start, end = arena.ctypes.data, arena.ctypes.data + len(arena)
    assert start <= batch.column("s").buffers()[2].address < end


def test_a_batch_of_context_columns_only_has_the_records_length():
    from rocketstore_spark.codec.arrow import RepeatedColumn
    d = decode(())
    schema = pa.schema([("store", pa.string())])
    batch = d.select(schema, {"store": RepeatedColumn("s", pa.string())(d.n)})
    assert batch.num_rows == d.n == 40 and batch.column("store").to_pylist() == ["s"] * 40


# (column, which of its buffers, bytes a row its region is given, how it is written there): one of each way a
# region is written, each region too small for what the records put there
_UNDERSIZED = [
    ("queue_offset", 1, 1, "values through an int64 view"),
    ("born_timestamp", 1, 4, "timestamps"),
    ("tags", 0, 0, "a validity bitmap"),
    ("topic", 2, 1, "spans gathered by copy_at"),
    ("transaction_type", 2, 1, "8-byte stores"),
    ("born_host", 2, 4, "the host kernel's renderings"),
    ("msg_id", 2, 16, "the host kernel's 8-byte stores"),
    ("tags", 2, 0, "the property kernel's copies"),
    ("keys", 3, 1, "the property kernel's offsets"),
    ("properties", 8, 1, "the property kernel's copies of values"),
    ("body", 2, 1, "bodies gathered by the writer"),
    ("body_crc_ok", 1, 0, "a bitmap of verdicts"),
]


@pytest.mark.skipif(not CHECKED, reason="the bounds-checked mode: tests/fuzz/test_checked_mode.py runs it")
@pytest.mark.parametrize("column, buffer, per_row, how", _UNDERSIZED)
def test_the_checked_mode_refuses_a_write_past_an_undersized_region(column, buffer, per_row, how):
    from rocketstore_spark.codec import batch_writer
    decoder = RecordDecoder(("queue_id", column) if column != "queue_id" else ("topic", column))
    columns, rules = decoder._plan
    b = columns[list(decoder.columns).index(column), batch_writer.P_BUFFER] + buffer
    assert rules[b, batch_writer.R_ROLE] != batch_writer.ROLE_NONE
    rules = rules.copy()
    rules[b] = (batch_writer.ROLE_VALUES, per_row, 0, 1)
    decoder._plan = (columns, rules)
    with pytest.raises(IndexError, match="bounds-checked mode|out of bounds"):
        decoder.decode(WINDOW, 0, len(DATA), BASE, 0, len(DATA))
