"""Encoding CommitLog records and segments: the inverse of the decoder (docs/format/commitlog.md).

``SegmentWriter`` appends in memory the way RocketMQ's ``doAppend`` does: PHYSICALOFFSET is the write
position, QUEUEOFFSET is assigned per (topic, queue) except for PREPARED/ROLLBACK records (0, not
advanced), and a record that does not leave 8 bytes in the file closes it with a BLANK record and goes to
the next file. Pure (no files: tests/builders.py writes stores, bench/ generates large ones); runs
wherever called.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field

from rocketstore_spark.codec.commitlog import (BLANK_MAGIC, MAGIC_V1, MAGIC_V2, TRANSACTION_MASK,
                                               TRANSACTION_PREPARED, TRANSACTION_ROLLBACK)
from rocketstore_spark.codec.crc32 import rmq_crc32

CRC32_PROPERTY = "__CRC32#"
CRC32_RESERVED_LEN = len(CRC32_PROPERTY) + 1 + 10 + 1


@dataclass
class Message:
    topic: str
    body: bytes = b""
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0                  # assigned by SegmentWriter
    sys_flag: int = 0                      # host IPv6 bits are derived from the addresses
    born_timestamp: int = 1_700_000_000_000
    born_host: tuple[str, int] = ("192.168.0.10", 54321)
    store_timestamp: int = 1_700_000_000_123
    store_host: tuple[str, int] = ("192.168.0.1", 10911)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    body_crc: int | None = None            # None: computed, as the broker does
    version: int | None = None             # None: 2 when the topic is longer than 127 bytes (5.x rule)
    trailing_separator: bool = True        # 5.x ends properties with 0x02; 4.9.8 does not
    crc32_property: bool = False           # 5.x enabledAppendPropCRC


def properties_string(props: dict[str, str], trailing_separator: bool = True) -> bytes:
    s = "".join(f"{k}\x01{v}\x02" for k, v in props.items())
    if s and not trailing_separator:
        s = s[:-1]
    return s.encode("utf-8")


def _host(addr: tuple[str, int]) -> tuple[bytes, bool]:
    ip = ipaddress.ip_address(addr[0])
    return ip.packed + struct.pack(">i", addr[1]), ip.version == 6


def encode_record(m: Message, physical_offset: int) -> bytes:
    born, born_v6 = _host(m.born_host)
    store, store_v6 = _host(m.store_host)
    sys_flag = (m.sys_flag & ~0x30) | (0x10 if born_v6 else 0) | (0x20 if store_v6 else 0)
    topic = m.topic.encode("utf-8")
    version = m.version or (2 if len(topic) > 127 else 1)
    props = properties_string(m.properties, m.trailing_separator)
    if m.crc32_property:
        if props and not props.endswith(b"\x02"):
            props += b"\x02"
        props += b"\0" * CRC32_RESERVED_LEN
    body_crc = rmq_crc32(m.body) if m.body_crc is None else m.body_crc
    head = struct.pack(">iiiiiqqiq", 0, MAGIC_V1 if version == 1 else MAGIC_V2, body_crc, m.queue_id, m.flag,
                       m.queue_offset, physical_offset, sys_flag, m.born_timestamp)
    rest = (born + struct.pack(">q", m.store_timestamp) + store
            + struct.pack(">iqi", m.reconsume_times, m.prepared_transaction_offset, len(m.body)) + m.body
            + (struct.pack(">b", len(topic)) if version == 1 else struct.pack(">h", len(topic))) + topic
            + struct.pack(">h", len(props)) + props)
    record = bytearray(head + rest)
    struct.pack_into(">i", record, 0, len(record))
    if m.crc32_property:
        crc = rmq_crc32(bytes(record[:-CRC32_RESERVED_LEN]))
        digits = "".join(str(crc // 10 ** i % 10) for i in range(10))      # least significant digit first
        record[-CRC32_RESERVED_LEN:] = f"{CRC32_PROPERTY}\x01{digits}\x02".encode()
    return bytes(record)


def encode_blank(remaining: int) -> bytes:
    """A BLANK record: only its 8 header bytes are defined."""
    return struct.pack(">ii", remaining, BLANK_MAGIC)


class SegmentWriter:
    """Appends messages into CommitLog segment files of ``segment_size`` bytes (in memory)."""

    def __init__(self, segment_size: int, base_offset: int = 0):
        self.segment_size = segment_size
        self.segments: dict[int, bytearray] = {base_offset: bytearray(segment_size)}
        self.current = base_offset
        self.position = 0
        self.queue_offsets: dict[tuple[str, int], int] = {}

    @property
    def physical_offset(self) -> int:
        return self.current + self.position

    def append(self, m: Message) -> tuple[int, int]:
        """Appends ``m`` (its queue_offset assigned); returns (physical offset, record size)."""
        tx = m.sys_flag & TRANSACTION_MASK
        key = (m.topic, m.queue_id)
        m.queue_offset = 0 if tx in (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK) else self.queue_offsets.get(key, 0)
        record = encode_record(m, self.physical_offset)
        if len(record) + 8 > self.segment_size - self.position:
            if len(record) + 8 > self.segment_size:
                raise ValueError(f"record of {len(record)} bytes cannot fit a {self.segment_size}-byte segment")
            self.segments[self.current][self.position:self.position + 8] = encode_blank(self.segment_size - self.position)
            self.current += self.segment_size
            self.position = 0
            self.segments[self.current] = bytearray(self.segment_size)
            record = encode_record(m, self.physical_offset)
        offset = self.physical_offset
        self.segments[self.current][self.position:self.position + len(record)] = record
        self.position += len(record)
        if tx not in (TRANSACTION_PREPARED, TRANSACTION_ROLLBACK):
            self.queue_offsets[key] = m.queue_offset + 1
        return offset, len(record)
