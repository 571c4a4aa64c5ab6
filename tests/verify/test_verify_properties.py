"""Property tests of verify over stores from our encoder (Hypothesis): a complete, consistent store verifies
clean under any broker geometry, and one corrupted byte anywhere in a ConsumeQueue file, an IndexFile or a
checked field of a CommitLog record is reported — at that entry's position for the fixed-size files — or is
provably harmless (a place RocketMQ never reads); no corruption crashes a check.

The ConsumeQueues and IndexFiles of these stores are written by our rebuild, which is byte-identical to
RocketMQ's own on the golden stores (tests/rebuild)."""
from __future__ import annotations

import os
import shutil
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.checks import Severity
from rocketstore_spark.codec import checkpoint, commitlog, consumequeue, indexfile
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.verify.store import verify_store
from tests.builders import write_segments

# examples per test: sized for CI; VERIFY_EXAMPLES=500 for a local soak
EXAMPLES = int(os.environ.get("VERIFY_EXAMPLES", "0")) or None
WORDS = st.sampled_from(["alpha", "beta", "gamma", "键", "😀", "k1", "k2", ""])


@st.composite
def store_specs(draw):
    """Messages (three topics, three queues, TAGS/KEYS/UNIQ_KEY, some PREPARED/ROLLBACK) and broker
    geometry: segment size, ConsumeQueue file size, IndexFile slots and entries, release."""
    n = draw(st.integers(5, 60))
    t0 = 1_795_000_000_000
    times = sorted(draw(st.lists(st.integers(0, 120_000), min_size=n, max_size=n)))
    msgs = []
    for k in range(n):
        props = {}
        if draw(st.booleans()):
            props["TAGS"] = draw(st.sampled_from(["TagA", "TagB", "TagA||TagB", "标签"]))
        if draw(st.booleans()):
            props["KEYS"] = " ".join(draw(st.lists(WORDS, max_size=3)))
        if draw(st.booleans()):
            props["UNIQ_KEY"] = f"{draw(st.integers(0, 2**64)):032X}"
        msgs.append(Message(topic=draw(st.sampled_from(["OrderTopic", "TopicTest", "%RETRY%g"])),
                            body=draw(st.binary(max_size=300)), queue_id=draw(st.integers(0, 2)),
                            sys_flag=draw(st.sampled_from([0, 0, 0, 0x4, 0x8, 0xC])),
                            store_timestamp=t0 + times[k], born_timestamp=t0 + times[k] - 5, properties=props))
    return {"messages": msgs, "segment_size": draw(st.sampled_from([2048, 4096, 65536])),
            "cq_entries": draw(st.sampled_from([4, 7, 300_000])), "slots": draw(st.sampled_from([1, 4, 16])),
            "index_num": draw(st.sampled_from([6, 17, 400])),
            "release": draw(st.sampled_from(["4.9.8", "5.1.4", "5.3.3", "5.5.1"]))}


def build(tmp_path, spec) -> tuple:
    """A consistent store under ``tmp_path/store``: CommitLog from the encoder, ConsumeQueues and IndexFiles
    from the rebuild, a checkpoint as of the last record. Returns (store path, options)."""
    store = tmp_path / "store"
    if store.exists():
        shutil.rmtree(store)
    w = SegmentWriter(spec["segment_size"])
    for m in spec["messages"]:
        w.append(m)
    write_segments(w, store / "commitlog")
    options = {"rocketmqVersion": spec["release"], "mappedFileSizeConsumeQueue": 20 * spec["cq_entries"],
               "maxHashSlotNum": spec["slots"], "maxIndexNum": spec["index_num"]}
    out = tmp_path / "rebuilt"
    if out.exists():
        shutil.rmtree(out)
    rebuild_store(str(store), str(out), options=options)
    for sub in ("consumequeue", "index"):
        if (out / sub).exists():
            shutil.move(str(out / sub), str(store / sub))
    last = max(m.store_timestamp for m in spec["messages"])
    # the broker's index checkpoint is the newest IndexFile's end timestamp when it flushed it
    newest = sorted((store / "index").iterdir())[-1] if (store / "index").exists() else None
    index_ts = int(indexfile.decode_header(newest.read_bytes()[:40])["end_timestamp"]) if newest else 0
    (store / "checkpoint").write_bytes(checkpoint.encode(physic_msg_timestamp=last, logics_msg_timestamp=last,
                                                         index_msg_timestamp=index_ts))
    return store, options


def problems(verdict):
    return [f for f in verdict.findings if f.severity != Severity.INFO]


@settings(max_examples=EXAMPLES or 25)
@given(spec=store_specs())
def test_a_consistent_store_verifies_clean(tmp_path_factory, spec):
    store, options = build(tmp_path_factory.mktemp("s"), spec)
    v = verify_store(str(store), options=options)
    assert [f.render() for f in problems(v)] == []
    dispatched = [m for m in spec["messages"] if m.sys_flag not in (0x4, 0xC)]
    assert sum(q.entries for q in v.queues) == len(dispatched)
    assert {(q.topic, q.queue_id): q.max_offset for q in v.queues} == \
        {(t, q): sum(1 for m in dispatched if (m.topic, m.queue_id) == (t, q))
         for t, q in {(m.topic, m.queue_id) for m in dispatched}}


def _files(store):
    cq = sorted(p for p in (store / "consumequeue").rglob("*") if p.is_file())
    ix = sorted((store / "index").iterdir()) if (store / "index").exists() else []
    return cq, ix


def _flip(path, position, xor):
    data = bytearray(path.read_bytes())
    data[position] ^= xor
    path.write_bytes(bytes(data))


def _consume_queue_verdict(store, path, position, v):
    rel = str(path.relative_to(store))
    raw = consumequeue.decode_entries(path.read_bytes())
    entry = position // 20 * 20
    hit = [f for f in problems(v) if f.file == rel and f.file_position == entry]
    if hit:
        return
    # not reported: only harmless if RocketMQ never reads the entry — an invalid entry after the last valid
    # one ends the queue there (ConsumeQueue.recover)
    valid = consumequeue.valid_mask(raw)
    k = entry // 20
    assert not valid[k] and not valid[k:].any(), (rel, position, [f.render() for f in problems(v)])


def _index_verdict(store, path, position, v, first_file: bool):
    rel = str(path.relative_to(store))
    data = path.read_bytes()
    header = indexfile.decode_header(data[:indexfile.HEADER_SIZE])
    slots = v.settings.geometry.hash_slot_num
    entries_start = indexfile.HEADER_SIZE + 4 * slots
    mine = [f for f in problems(v) if f.file == rel]
    if position < indexfile.HEADER_SIZE:
        assert mine, (rel, position, "header")
    elif position < entries_start:
        slot_pos = position // 4 * 4
        assert [f for f in mine if f.file_position == slot_pos], (rel, position, [f.render() for f in mine])
    else:
        i = (position - entries_start) // 20
        count = min(int(header["index_count"]), v.settings.geometry.index_num)
        if i == 0 or i >= count:
            return                                   # entry 0 and entries past index_count are never read
        if first_file and (position - entries_start) % 20 in range(12, 16) and i == 1:
            return   # entry 1's time difference of the store's first file: timed from a header no file keeps
        start = entries_start + 20 * i
        assert [f for f in mine if f.file_position is not None and start <= f.file_position < start + 20], \
            (rel, position, [f.render() for f in mine])


@settings(max_examples=EXAMPLES or 60)
@given(spec=store_specs(), where=st.floats(0, 1, exclude_max=True), which=st.integers(0, 10**6),
       xor=st.integers(1, 255))
def test_a_corrupted_queue_or_index_byte_is_reported_at_its_entry_or_harmless(tmp_path_factory, spec, where, which,
                                                                               xor):
    store, options = build(tmp_path_factory.mktemp("s"), spec)
    cq, ix = _files(store)
    targets = cq + ix
    path = targets[which % len(targets)]
    position = int(where * path.stat().st_size)
    _flip(path, position, xor)
    v = verify_store(str(store), options=options)
    if path in cq:
        _consume_queue_verdict(store, path, position, v)
    else:
        _index_verdict(store, path, position, v, first_file=path == ix[0])


def _checked_field(segment: bytes, position: int) -> str | None:
    """The name of the checked field of the record holding ``position`` (None: a field no check covers)."""
    p = 0
    while p + 8 <= len(segment):
        total, magic = struct.unpack_from(">ii", segment, p)
        if magic == commitlog.BLANK_MAGIC or total <= 0:
            return None
        if p <= position < p + total:
            off = position - p
            sys_flag = struct.unpack_from(">i", segment, p + commitlog.POS_SYS_FLAG)[0]
            bh = 20 if sys_flag & commitlog.SysFlag.BORNHOST_V6 else 8
            sh = 20 if sys_flag & commitlog.SysFlag.STOREHOST_V6 else 8
            body_len_at = commitlog.POS_BODY_LENGTH_BH_SH + bh + sh
            body_len = struct.unpack_from(">i", segment, p + body_len_at)[0]
            topic_at = body_len_at + 4 + body_len
            topic_len = segment[p + topic_at]
            # BODYCRC of an empty body: RocketMQ checks no CRC there (checkMessageAndReturnSize), nor do we.
            # A PREPARED or ROLLBACK record gets no ConsumeQueue entry: nothing holds its queue or, without
            # keys, its topic to be checked against
            queued = sys_flag & 0xC in (0, 0x8)
            fields = [("total_size", 0, 4), ("magic", 4, 8), ("body_crc", 8, 12 if body_len > 0 else 8),
                      ("queue_id", 12, 16 if queued else 12), ("queue_offset", 20, 28 if queued else 20), ("physical_offset", 28, 36), ("body_length", body_len_at, body_len_at + 4),
                      ("body", body_len_at + 4, topic_at), ("topic_length", topic_at, topic_at + 1),
                      ("topic", topic_at + 1, topic_at + 1 + (topic_len if queued else 0)),
                      ("properties_length", topic_at + 1 + topic_len, topic_at + 3 + topic_len)]
            return next((name for name, lo, hi in fields if lo <= off < hi), None)
        p += total
    return None


@settings(max_examples=EXAMPLES or 40)
@given(spec=store_specs(), where=st.floats(0, 1, exclude_max=True), xor=st.integers(1, 255))
def test_a_corrupted_checked_commitlog_field_is_reported(tmp_path_factory, spec, where, xor):
    store, options = build(tmp_path_factory.mktemp("s"), spec)
    segments = sorted((store / "commitlog").iterdir())
    path = segments[int(where * len(segments))]
    position = int((where * len(segments)) % 1 * path.stat().st_size)
    field = _checked_field(path.read_bytes(), position)
    _flip(path, position, xor)
    v = verify_store(str(store), options=options)           # never raises
    if field is not None:
        assert problems(v), (path.name, position, field)
