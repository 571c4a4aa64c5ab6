"""store.watermark: the ingested record is recognised again, any other record (or none) is not, and what lies
at a watermark is told apart (nothing yet, a BLANK, an incomplete record, a complete one)."""
from __future__ import annotations

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.watermark import Tail, mismatches, record_identity, tail_at
from tests.builders import write_segments


def _store(tmp_path, messages, segment_size=4096):
    w = SegmentWriter(segment_size)
    placed = [w.append(m) for m in messages]
    write_segments(w, tmp_path / "commitlog")
    return w, placed, discover(str(tmp_path))[0]


def test_the_same_record_matches_and_another_at_the_same_offset_does_not(tmp_path):
    _, placed, layout = _store(tmp_path / "a", [Message("T", b"x" * 100, properties={"KEYS": "k1"})] * 3)
    offset = placed[-1][0]
    ingested = record_identity(layout, offset)
    assert ingested["total_size"] == placed[-1][1] and ingested["properties"] == {"KEYS": "k1"}
    assert mismatches(ingested, record_identity(layout, offset)) == []
    # another broker's store at the same path: same sizes and offsets, another store time
    _, _, other = _store(tmp_path / "b", [Message("T", b"x" * 100, properties={"KEYS": "k1"},
                                                   store_timestamp=1_700_000_000_999)] * 3)
    assert mismatches(ingested, record_identity(other, offset)) == ["store_timestamp"]
    assert record_identity(layout, offset + 1) is None                       # inside a record
    assert len(mismatches(ingested, None)) > 10


def test_what_lies_at_a_watermark(tmp_path):
    w, placed, layout = _store(tmp_path, [Message("T", b"y" * 900) for _ in range(6)])
    ends = [o + s for o, s in placed]
    assert tail_at(layout, ends[-1]) == Tail.NOTHING                         # zeros after the last record
    assert tail_at(layout, ends[2]) == Tail.RECORD
    first_segment_end = max(e for e in ends if e < 4096)
    assert tail_at(layout, first_segment_end) == Tail.BLANK
    segment = tmp_path / "commitlog" / f"{placed[-1][0] // 4096 * 4096:020d}"
    data = bytearray(segment.read_bytes())
    start = placed[-1][0] % 4096
    data[start + placed[-1][1] // 2:] = bytes(len(data) - start - placed[-1][1] // 2)   # half written
    segment.write_bytes(bytes(data))
    layout = discover(str(tmp_path))[0]
    assert tail_at(layout, placed[-1][0]) == Tail.INCOMPLETE
    assert record_identity(layout, placed[-1][0]) is None
    assert tail_at(layout, 10 * 4096) == Tail.NOTHING                        # no such segment
