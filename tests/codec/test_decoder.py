"""The record decoder, sans-I/O: plain byte strings in, Arrow batches and the walk's stop out."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec.commitlog import TRANSACTION_TYPES, Stop
from rocketstore_spark.codec.decoder import BODY_CAPACITY_MIN, DEFAULT_BATCH_ROWS, FIXED_WIDTH_BATCH_ROWS, RecordDecoder
from rocketstore_spark.codec.encode import Message, encode_blank, encode_record
from rocketstore_spark.codec.record_schema import DECODED

BASE = 1 << 30          # the segment's base offset: records carry base + position as PHYSICALOFFSET


def records(n: int, base: int = BASE, start: int = 0) -> tuple[bytes, list[int]]:
    out, positions = bytearray(), []
    for i in range(n):
        positions.append(start + len(out))
        out += encode_record(Message(topic=f"T{i}", body=bytes([i]) * (10 + i), queue_id=i % 4, queue_offset=i,
                                     properties={"TAGS": f"t{i}", "KEYS": f"k{i} x"}), base + start + len(out))
    return bytes(out), positions


def window(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def test_a_window_of_records_decodes_every_column_and_ends_at_the_blank():
    data, positions = records(5)
    tail = encode_blank(4096 - len(data))
    seg = window(data + tail + bytes(4096 - len(data) - len(tail)))
    d = RecordDecoder(DECODED).decode(seg, 0, len(seg), BASE, 0, len(seg))
    assert d.stop == Stop.BLANK and d.next_position == len(data)
    assert d.positions.tolist() == positions
    rows = d.batch.to_pylist()
    assert [r["topic"] for r in rows] == [f"T{i}" for i in range(5)]
    assert [r["physical_offset"] for r in rows] == [BASE + p for p in positions]
    assert [r["keys"] for r in rows] == [[f"k{i}", "x"] for i in range(5)]
    assert all(r["body_crc_ok"] and r["stored_physical_offset"] == r["physical_offset"] for r in rows)
    assert d.batch.schema.names == list(DECODED)


def test_columns_come_in_the_requested_order_and_only_those():
    data, _ = records(3)
    seg = window(data + bytes(8))
    d = RecordDecoder(("tags", "queue_id", "file_position")).decode(seg, 0, len(seg), BASE, 0, len(seg))
    assert d.batch.schema.names == ["tags", "queue_id", "file_position"]
    assert d.batch.column("tags").to_pylist() == ["t0", "t1", "t2"]
    assert d.stop == Stop.ZERO


def test_a_record_past_the_window_asks_for_more_and_decodes_from_a_later_window():
    data, positions = records(4)
    cut = positions[2] + 30                                  # the third record continues past the window
    d = RecordDecoder(("queue_offset",)).decode(window(data[:cut]), 0, len(data), BASE, 0, len(data))
    assert d.stop == Stop.NEED_MORE and d.next_position == positions[2] and d.n == 2
    later = window(data[positions[2]:])                      # the caller maps a window from there
    d2 = RecordDecoder(("queue_offset",)).decode(later, positions[2], len(data), BASE, positions[2], len(data))
    assert d2.batch.column("queue_offset").to_pylist() == [2, 3]
    assert d2.stop == Stop.LIMIT and d2.next_position == len(data)          # the range ends at the limit


def test_windows_at_any_file_position_give_file_positions():
    data, positions = records(3, start=1000)
    d = RecordDecoder(("file_position", "physical_offset")).decode(window(data), 1000, 1000 + len(data), BASE,
                                                                   1000, 1000 + len(data))
    assert d.batch.column("file_position").to_pylist() == positions
    assert d.batch.column("physical_offset").to_pylist() == [BASE + p for p in positions]


@pytest.mark.parametrize("damage,stop", [
    (struct.pack(">ii", 200, 0x12345678), Stop.BAD_MAGIC),
    (struct.pack(">i", 10), Stop.BAD_LENGTH),
    (struct.pack(">i", 95), Stop.LENGTH_MISMATCH),
])
def test_damage_stops_the_walk_where_the_damaged_record_starts(damage, stop):
    data, positions = records(4)
    raw = bytearray(data)
    raw[positions[2]:positions[2] + len(damage)] = damage
    d = RecordDecoder(("queue_offset",)).decode(window(bytes(raw)), 0, len(raw), BASE, 0, len(raw))
    assert d.stop == stop and d.stop.is_damage and d.next_position == positions[2]
    assert d.batch.column("queue_offset").to_pylist() == [0, 1]


def test_limit_ends_the_walk_at_the_first_record_starting_past_it():
    data, positions = records(5)
    d = RecordDecoder(("queue_offset",)).decode(window(data), 0, len(data), BASE, 0, positions[3])
    assert d.stop == Stop.LIMIT and d.next_position == positions[3] and d.n == 3


def test_batch_budget_splits_a_window_into_several_calls():
    data, positions = records(10)
    dec = RecordDecoder(("topic",), batch_rows=4)
    seen, stops, pos = [], [], 0
    while not stops or stops[-1] == Stop.LIMIT:
        d = dec.decode(window(data), 0, len(data), BASE, pos, len(data) + 1)
        seen += d.batch.column("topic").to_pylist()
        stops.append(d.stop)
        pos = d.next_position
    assert seen == [f"T{i}" for i in range(10)]
    assert stops == [Stop.LIMIT, Stop.LIMIT, Stop.END_OF_FILE]           # 4 + 4 + 2 rows


def test_bodies_and_headers_are_exact_across_tiles_of_any_size():
    """The walk takes headers and bodies a tile (TILE_BYTES / TILE_RECORDS) at a time: records larger than a
    tile, runs of small ones filling a tile by count, a body buffer that must grow, and a wrong BODYCRC in the
    middle of a tile all come out as a whole-batch pass would give them."""
    from rocketstore_spark.codec.tiles import TILE_BYTES, TILE_RECORDS
    # the bodies outgrow the decoder's first body buffer (BODY_CAPACITY_MIN): it grows mid-batch
    sizes = ([0, TILE_BYTES + 7, 3, 2 * TILE_BYTES, 1] + [5] * (TILE_RECORDS + 3) + [TILE_BYTES - 100] * 3
             + [17 * k for k in range(200)] + [BODY_CAPACITY_MIN // 2 + 1] * 3 + [9] * 40)
    out, positions, bodies = bytearray(), [], []
    for i, size in enumerate(sizes):
        body = bytes((i * 31 + j) & 0xFF for j in range(min(size, 64))) * (size // 64 + 1)
        bodies.append(body[:size])
        positions.append(len(out))
        out += encode_record(Message(topic=f"T{i % 7}", body=bodies[-1], queue_offset=i,
                                     properties={"TAGS": f"t{i}"}), BASE + len(out))
    # the run of small records fills a tile by count, not by bytes
    assert positions[5 + TILE_RECORDS] - positions[5] < TILE_BYTES
    bad = positions[TILE_RECORDS // 2 + 5]
    out[bad + 8:bad + 12] = struct.pack(">i", 12345)                       # a BODYCRC that does not match
    seg = window(bytes(out) + bytes(8))
    dec = RecordDecoder(("file_position", "queue_offset", "body", "body_crc_ok", "topic", "tags"),
                        batch_bytes=1 << 30)
    d = dec.decode(seg, 0, len(seg), BASE, 0, len(seg))
    assert d.stop == Stop.ZERO and d.n == len(sizes)
    got = d.batch.to_pydict()
    assert got["file_position"] == positions and got["queue_offset"] == list(range(len(sizes)))
    assert got["body"] == bodies
    assert got["body_crc_ok"] == [p != bad for p in positions]
    assert got["topic"] == [f"T{i % 7}" for i in range(len(sizes))]
    assert got["tags"] == [f"t{i}" for i in range(len(sizes))]


def test_batch_size_follows_row_width():
    assert RecordDecoder(("body", "queue_id")).batch_rows == DEFAULT_BATCH_ROWS
    narrow = RecordDecoder(("body_crc_ok", "queue_id"))
    assert narrow.batch_rows == FIXED_WIDTH_BATCH_ROWS and narrow.lanes > 1
    assert RecordDecoder(("queue_id",), batch_rows=10).batch_rows == 10


def test_unknown_and_context_columns_are_refused():
    with pytest.raises(ValueError, match="unknown CommitLog column"):
        RecordDecoder(("queue_idd",))
    with pytest.raises(ValueError, match="filled by the reader"):
        RecordDecoder(("store", "topic"))


def test_header_fields_nobody_asked_for_are_not_there():
    data, _ = records(2)
    d = RecordDecoder(("queue_id",), extra_fields=("store_timestamp",)).decode(window(data), 0, len(data), BASE,
                                                                                0, len(data))
    assert d.header.store_timestamp.tolist() == [1_700_000_000_123] * 2
    with pytest.raises(AttributeError, match="was not decoded"):
        d.header.body_pos


def test_timestamps_no_datetime_can_hold_become_null():
    data = encode_record(Message(topic="T", born_timestamp=(1 << 62), store_timestamp=-(1 << 60)), BASE)
    ok = encode_record(Message(topic="T"), BASE + len(data))
    seg = window(data + ok)
    d = RecordDecoder(("born_timestamp", "store_timestamp")).decode(seg, 0, len(seg), BASE, 0, len(seg))
    rows = d.batch.to_pylist()
    assert rows[0] == {"born_timestamp": None, "store_timestamp": None}
    assert rows[1]["store_timestamp"].year == 2023


def test_deliver_time_of_timer_records_and_every_compression_type():
    import lz4.frame
    import zlib
    import zstandard
    from rocketstore_spark.codec.encode import Message, encode_record
    raw = b"payload " * 700
    bodies = {0x001: zlib.compress(raw, 5), 0x301: zlib.compress(raw, 5), 0x101: lz4.frame.compress(raw),
              0x201: zstandard.ZstdCompressor().compress(raw), 0x401: zlib.compress(raw), 0x000: raw,
              0x101 | 0x1000: b"not an lz4 frame"}
    messages = [Message("T", body, sys_flag=flag) for flag, body in bodies.items()]
    messages += [Message("rmq_sys_wheel_timer", b"t", properties={"TIMER_OUT_MS": "1795320999000"}),
                 Message("rmq_sys_wheel_timer", b"t", properties={"TIMER_OUT_MS": "soon"}),
                 Message("T", b"t", properties={"TIMER_OUT_MS": "1795320999000"}),     # a fired copy: not due
                 Message("SCHEDULE_TOPIC_XXXX", b"d", properties={"DELAY": "3"}, store_timestamp=1_000_000)]
    data, offset = b"", 0
    for m in messages:
        rec = encode_record(m, offset)
        data, offset = data + rec, offset + len(rec)
    window = np.frombuffer(data, dtype=np.uint8)
    decoded = RecordDecoder(["body_uncompressed", "deliver_time"]).decode(window, 0, len(data), 0, 0, len(data))
    got = decoded.batch.to_pydict()
    # ZLIB (legacy type 0 and type 3), LZ4 frame, ZSTD; type 4 is unknown, a damaged frame is null
    assert got["body_uncompressed"][:7] == [raw, raw, raw, raw, None, None, None]
    assert got["body_uncompressed"][7:] == [None] * 4
    when = [None if t is None else int(t.timestamp() * 1000) for t in got["deliver_time"]]
    assert when == [None] * 7 + [1795320999000, None, None, 1_000_000 + 10_000]      # level 3 = 10s


def test_property_strings_beyond_ascii_decode_as_utf8_and_bad_bytes_as_replacement():
    # one batch with valid non-ASCII UTF-8 and one with a byte that is not UTF-8: the batch-wide ASCII
    # shortcut must not skip the validation of either
    props = {"TAGS": "étiquette", "KEYS": "clé ключ", "UNIQ_KEY": "唯一", "WAIT": "true"}
    good = encode_record(Message(topic="T", body=b"b", properties=props), BASE)
    d = RecordDecoder(("properties", "tags", "keys", "uniq_key")).decode(window(good), 0, len(good), BASE, 0,
                                                                        len(good))
    row = d.batch.to_pylist()[0]
    assert dict(row["properties"]) == props
    assert (row["tags"], row["keys"], row["uniq_key"]) == ("étiquette", ["clé", "ключ"], "唯一")
    bad = bytearray(good)
    at = bytes(bad).index("étiquette".encode())
    bad[at] = 0xFF                                          # "\xffétiquette"[1:]: the é's first byte replaced
    d = RecordDecoder(("properties", "tags")).decode(window(bytes(bad)), 0, len(bad), BASE, 0, len(bad))
    expected = bytes(bad[at:at + len("étiquette".encode())]).decode("utf-8", "replace")
    row = d.batch.to_pylist()[0]
    assert row["tags"] == expected == dict(row["properties"])["TAGS"] and "\ufffd" in expected


def test_topics_beyond_ascii_decode_as_utf8_and_bad_bytes_as_replacement():
    # the ASCII shortcut must not skip the validation of a topic that is not ASCII
    good = encode_record(Message(topic="Tópico_主题", body=b"b"), BASE)
    bad = bytearray(good)
    bad[bytes(bad).index("主".encode())] = 0xFF             # 主's first byte: it and its two others replaced
    for data, topic in ((good, "Tópico_主题"), (bytes(bad), "Tópico_\ufffd\ufffd\ufffd题")):
        d = RecordDecoder(("topic",)).decode(window(data), 0, len(data), BASE, 0, len(data))
        assert d.batch.column("topic").to_pylist() == [topic]


def test_transaction_type_names_every_kind_of_sys_flag():
    out, positions = bytearray(), []
    for kind in (0, 1, 2, 3, 2, 0):
        positions.append(len(out))
        out += encode_record(Message(topic="T", body=b"b", sys_flag=kind << 2), BASE + len(out))
    d = RecordDecoder(("transaction_type", "sys_flag")).decode(window(bytes(out)), 0, len(out), BASE, 0, len(out))
    assert d.positions.tolist() == positions
    assert d.batch.column("transaction_type").to_pylist() == [TRANSACTION_TYPES[k] for k in (0, 1, 2, 3, 2, 0)]


def test_select_adds_context_columns_of_the_batch_length_in_the_schema_order():
    import pyarrow as pa
    from rocketstore_spark.codec.arrow import RepeatedColumn
    data, positions = records(3)
    d = RecordDecoder(("queue_id", "segment_base_offset")).decode(window(data), 0, len(data), BASE, 0, len(data))
    store = RepeatedColumn("broker-a", pa.string())
    assert len(store(7)) == 7                                # built longer once; later batches are slices
    schema = pa.schema([("segment_base_offset", pa.int64(), False), ("store", pa.string()),
                        ("queue_id", pa.int32(), False)])
    batch = d.select(schema, {"store": store(d.n)})
    assert batch.schema == schema
    assert batch.to_pydict() == {"segment_base_offset": [BASE] * 3, "store": ["broker-a"] * 3,
                                 "queue_id": [0, 1, 2]}


def java_host(host: tuple[str, int]) -> str:
    """InetSocketAddress.toString's address part as RocketMQ's decoder prints it: IPv6 bracketed, every group
    in lower-case hex without leading zeros, no '::' shortening."""
    import ipaddress
    ip = ipaddress.ip_address(host[0])
    if ip.version == 4:
        return f"{ip}:{host[1]}"
    packed = ip.packed
    return "[" + ":".join(f"{int.from_bytes(packed[i:i + 2], 'big'):x}" for i in range(0, 16, 2)) + f"]:{host[1]}"


_hosts = st.one_of(
    st.tuples(st.ip_addresses(v=4).map(str), st.integers(0, 65535)),
    st.tuples(st.ip_addresses(v=6).map(str), st.integers(0, 65535)),
    st.sampled_from([("0.0.0.0", 0), ("255.255.255.255", 65535), ("10.0.0.1", 9), ("::", 1),
                     ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535)]))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_hosts, _hosts, st.integers(1, 3)), min_size=1, max_size=12),
       st.integers(0, 2**62))
def test_hosts_and_msg_ids_render_as_java_prints_them_in_runs_of_repeated_hosts(runs, base):
    """Hosts are copied from the previous record when their bytes repeat (decoder shortcut): every record,
    repeated or not, IPv4 or IPv6, renders as Java does, and msg_id is hex(store address, port, offset)."""
    import ipaddress
    messages = [Message(topic="T", body=b"x", born_host=born, store_host=stored)
                for born, stored, repeat in runs for _ in range(repeat)]
    data, positions = bytearray(), []
    for m in messages:
        positions.append(len(data))
        data += encode_record(m, base + len(data))
    batch = RecordDecoder(["born_host", "store_host", "msg_id"]).decode(
        window(bytes(data)), 0, len(data), base, 0, len(data)).batch.to_pydict()
    assert batch["born_host"] == [java_host(m.born_host) for m in messages]
    assert batch["store_host"] == [java_host(m.store_host) for m in messages]
    assert batch["msg_id"] == [(ipaddress.ip_address(m.store_host[0]).packed
                                + struct.pack(">iq", m.store_host[1], base + p)).hex().upper()
                               for m, p in zip(messages, positions)]


def test_the_longest_host_renderings_fit_their_buffers():
    """The longest host a record can hold: IPv6 with every group ffff and a port field of 0xFFFFFFFF (damage —
    Java's InetSocketAddress refuses ports above 65535; we print the stored field unsigned), 52 characters. A
    batch of them, each rendered afresh or copied from the previous record, stays inside its output buffers."""
    groups = ["ffff"] * 8
    hosts = [(":".join(groups), -1), (":".join(groups[:7] + ["fffe"]), -1)]
    messages = [Message(topic="T", body=b"x", born_host=hosts[k % 3 == 0], store_host=hosts[0]) for k in range(200)]
    data = bytearray()
    for m in messages:
        data += encode_record(m, len(data))
    batch = RecordDecoder(["born_host", "store_host"]).decode(window(bytes(data)), 0, len(data), 0, 0,
                                                              len(data)).batch
    rendered = "[" + ":".join(groups) + "]:4294967295"
    assert len(rendered) == 52
    assert batch["store_host"].to_pylist() == [rendered] * len(messages)
    assert batch["born_host"].to_pylist() == [rendered if k % 3 else rendered.replace("ffff]", "fffe]")
                                              for k in range(len(messages))]


@pytest.mark.parametrize("check_crc", [False, True])
def test_records_decoded_at_given_positions_are_the_walks_and_bad_positions_are_rejected(check_crc):
    data, positions = records(12)
    seg = window(data + encode_blank(64))
    decoder = RecordDecoder(DECODED, check_crc=check_crc)
    walked = decoder.decode(seg, 0, len(seg), BASE, 0, len(seg))
    wanted = [positions[k] for k in (1, 4, 5, 11)]
    # a position inside a record, the BLANK, and a window that starts past the first record asked for
    at = decoder.decode_at(seg[positions[1]:], positions[1], len(seg), BASE,
                           np.array(sorted([*wanted, positions[4] + 3, len(data)])))
    assert at.positions.tolist() == wanted and at.rejected.tolist() == [positions[4] + 3, len(data)]
    assert at.next_position == positions[11] + (len(data) - positions[11])
    assert at.batch.equals(walked.batch.take([1, 4, 5, 11]))
    # a record whose stored PHYSICALOFFSET names another place is misplaced, as in the walk
    other = decoder.decode_at(seg, 0, len(seg), BASE + 8, np.array(wanted))
    assert other.n == 0 and other.misplaced.tolist() == wanted
