"""The compiled dispatch rules (codec.dispatch_kernel): IndexFile key hashes without building key strings,
against Java's hashCode of the concatenated key, through both APIs (the DispatchDecoder on CommitLog windows,
dispatch.index_keys on Arrow tables), non-ASCII and malformed UTF-8 included."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from rocketstore_spark.codec import dispatch_kernel as kernel
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.encode import Message
from rocketstore_spark.codec.javahash import index_hash
from rocketstore_spark.rocketmq import dispatch
from rocketstore_spark.rocketmq.releases import Release
from rocketstore_spark.store.segment_reader import SegmentReader
from tests.builders import write_store

ALPHABET = ["a", "b", "Z", "é", "中", "😀", " ", "#", "\ufffd"]
TYPES = {"NOT_TYPE": 0x0, "PREPARED": 0x4, "COMMIT": 0x8, "ROLLBACK": 0xC}


def text(rng: random.Random, longest: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, longest)))


def messages(seed: int, n: int = 400) -> list[Message]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        props = {}
        for name, chance in (("UNIQ_KEY", 0.7), ("KEYS", 0.7), ("TAGS", 0.6)):
            value = text(rng, 10)
            if rng.random() < chance and value:
                props[name] = value
        kind = rng.choice(list(TYPES))
        out.append(Message(topic=rng.choice(["TopicA", "t中", "x😀y", "TopicA2"]), queue_id=rng.randint(0, 3),
                           sys_flag=TYPES[kind], store_timestamp=1_700_000_000_000 + i, properties=props))
    return out


def expected_keys(msgs: list[Message], offsets: list[int], index_tags: bool) -> list[tuple[int, int, int]]:
    """(index hash of the key string, physical offset, store ms) in put order: the rules, written plainly."""
    out = []
    for m, phy in zip(msgs, offsets):
        if m.sys_flag & 0xC == 0xC:
            continue
        keys = []
        if "UNIQ_KEY" in m.properties:
            keys.append(m.topic + "#" + m.properties["UNIQ_KEY"])
        keys += [m.topic + "#" + k for k in m.properties.get("KEYS", "").split(" ") if k]
        if index_tags and m.properties.get("TAGS"):
            keys.append(m.topic + "#T#" + m.properties["TAGS"])
        out += [(index_hash(k), phy, m.store_timestamp) for k in keys]
    return out


@pytest.mark.parametrize("index_tags", [True, False])
def test_both_apis_put_javas_keys_in_order(tmp_path, index_tags):
    msgs = messages(3)
    placed = write_store(tmp_path / "commitlog", msgs, segment_size=1 << 20)
    want = expected_keys(msgs, [p for p, _ in placed], index_tags)
    path = str(tmp_path / "commitlog" / f"{0:020d}")

    decoder = kernel.DispatchDecoder(index_tags=index_tags, batch_rows=97)        # many windows
    windows = [d.batch for d in SegmentReader(path, 0, decoder)]
    got = [(int(h), int(p), int(t)) for w in windows
           for h, p, t in zip(w.key_hash, w.key_physical_offset, w.key_store_timestamp)]
    assert got == want
    queued = np.concatenate([w.queued for w in windows])
    assert queued.tolist() == [m.sys_flag & 0xC in (0x0, 0x8) for m in msgs]
    topics = [decoder.topics[t] for w in windows for t in w.topic]
    assert topics == [m.topic for m in msgs]

    table = pa.Table.from_batches([d.batch for d in SegmentReader(path, 0, RecordDecoder(dispatch.DISPATCH_COLUMNS))])
    keys = dispatch.index_keys(table, Release((5, 5, 0) if index_tags else (5, 3, 0)))
    assert list(zip(keys["key_hash"].to_pylist(), keys["physical_offset"].to_pylist(),
                    keys["store_timestamp"].to_pylist())) == want


def test_malformed_utf8_hashes_as_javas_decoder_replaces_it():
    """Java's UTF-8 decoder replaces each maximal invalid subpart with one U+FFFD (as Python's does)."""
    topic = b"top\xffic\xe4\xb8"
    values = [b"\xff", b"a\xe0\x80b", b"\xf0\x9f\x98", b"\xed\xa0\x80z", b"ok\xc3", b"\xf0\x9f\x98\x80!"]
    data = np.frombuffer(topic + b"".join(values), dtype=np.uint8)
    offsets = np.cumsum([len(topic)] + [len(v) for v in values]).astype(np.int64)
    n = len(values)
    ids, firsts, topic_hashes = kernel.local_topics(data, np.zeros(n, np.int64), np.full(n, len(topic), np.int64))
    assert ids.tolist() == [0] * n and firsts.tolist() == [0]
    none = np.zeros(n, np.bool_)
    _, kinds, hashes = kernel.index_keys(np.ones(n, np.bool_), topic_hashes[ids], data, offsets, np.ones(n, np.bool_),
                                         data[:0], np.zeros(1, np.int64), np.zeros(n + 1, np.int64), data,
                                         np.r_[offsets[:1], offsets], none, False, False)
    assert kinds.tolist() == [kernel.KIND_UNIQ_KEY] * n
    name = topic.decode("utf-8", "replace")
    assert hashes.tolist() == [index_hash(name + "#" + v.decode("utf-8", "replace")) for v in values]
