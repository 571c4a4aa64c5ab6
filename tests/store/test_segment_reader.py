"""Bad input and splits: damage is a finding with file and byte position; reading goes on; splits agree."""
from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.findings import StoreError
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.records import read_table
from rocketstore_spark.store.segment_reader import SegmentReader
from tests.builders import write_segments

SEGMENT = 64 * 1024


def make_store(tmp_path, n=60, segment_size=SEGMENT):
    w = SegmentWriter(segment_size)
    placed = [w.append(Message(topic=f"T{i % 3}", body=bytes([i % 251]) * (50 + 37 * i % 900),
                               properties={"TAGS": f"t{i}", "KEYS": f"k{i}"})) for i in range(n)]
    write_segments(w, tmp_path / "commitlog")
    return placed


def patch(tmp_path, physical_offset, data: bytes, segment_size=SEGMENT):
    path = tmp_path / "commitlog" / f"{physical_offset // segment_size * segment_size:020d}"
    raw = bytearray(path.read_bytes())
    pos = physical_offset % segment_size
    raw[pos:pos + len(data)] = data
    path.write_bytes(bytes(raw))
    return str(path), pos


@pytest.mark.parametrize("damage,check", [
    (b"\xde\xad\xbe\xef" * 4, "commitlog.bad_magic"),                     # garbage over the header
    (struct.pack(">i", 0x7FFFFFF0), "commitlog.bad_length"),              # absurd TOTALSIZE
    (struct.pack(">i", 120), "commitlog.length_mismatch"),                # plausible but wrong TOTALSIZE
])
def test_damage_is_a_finding_and_reading_resumes(tmp_path, damage, check):
    placed = make_store(tmp_path)
    victim = placed[10][0]
    path, pos = patch(tmp_path, victim, damage)
    table, findings = read_table(tmp_path, columns=("topic",))
    offsets = table.column("physical_offset").to_pylist()
    assert victim not in offsets
    assert offsets == [p for p, _ in placed if p != victim]              # everything else reads on
    f = [f for f in findings if f.severity == "error"][0]
    assert (f.check, f.file, f.file_position) == (check, path, pos)
    assert path in f.render() and f"byte {pos}" in f.render()


def test_unknown_magic_and_strict_mode(tmp_path):
    placed = make_store(tmp_path)
    path, pos = patch(tmp_path, placed[5][0] + 4, struct.pack(">I", 0xDAA320AC))
    with pytest.raises(StoreError) as err:
        read_table(tmp_path, strict=True)
    # the finding names the record's first byte; the magic sits 4 bytes into it
    assert err.value.finding.file_position == pos - 4 and err.value.finding.check == "commitlog.bad_magic"


def test_non_utf8_topic_and_properties_are_replaced_not_fatal(tmp_path):
    placed = make_store(tmp_path, n=5)
    offset, size = placed[2]
    topic_pos = offset + 91 + (50 + 37 * 2 % 900) - 91 + 88 + 1     # body starts at 88 in an IPv4 record
    patch(tmp_path, topic_pos, b"\xff")
    props_start = offset + size - len("TAGS\x01t2\x02KEYS\x01k2\x02")
    patch(tmp_path, props_start + 5, b"\xfe")
    table, findings = read_table(tmp_path)
    rows = table.to_pylist()
    assert rows[2]["topic"] == "\ufffd2" and dict(rows[2]["properties"])["TAGS"] == "\ufffd2"
    assert findings == [] and [r["topic"] for r in rows[:2]] == ["T0", "T1"]


def test_truncated_segment_file(tmp_path):
    placed = make_store(tmp_path, n=20)
    path = tmp_path / "commitlog" / f"{0:020d}"
    cut = placed[7][0] + 30
    path.write_bytes(path.read_bytes()[:cut])
    layout = discover(tmp_path)[0]
    assert [f.check for f in layout.findings] == []              # one segment: nothing to compare with
    table, findings = read_table(tmp_path, columns=("topic",))
    assert table.num_rows == 7
    assert findings[0].check == "commitlog.bad_length" and findings[0].file_position == placed[7][0]


def test_discovery_reports_gaps_sizes_and_strays(tmp_path):
    make_store(tmp_path, n=200, segment_size=16 * 1024)
    cl = tmp_path / "commitlog"
    files = sorted(cl.iterdir())
    assert len(files) >= 5
    files[2].unlink()                                            # a gap
    files[3].write_bytes(files[3].read_bytes()[:1000])           # a wrong size
    (cl / "notes.txt").write_text("x")                           # a stray file
    checks = sorted(f.check for f in discover(tmp_path)[0].findings)
    assert checks == ["commitlog.gap", "commitlog.wrong_size", "store.stray_file"]
    assert {f.severity for f in discover(tmp_path)[0].findings} == {"error", "warning"}
    with pytest.raises(FileNotFoundError, match="notes.txt is a file, not a store"):
        discover(str(cl / "notes.txt"))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, SEGMENT - 1), max_size=6, unique=True))
def test_any_split_points_give_the_same_records(tmp_path_factory, cuts):
    tmp = tmp_path_factory.mktemp("s")
    placed = make_store(tmp, n=70)
    path = str(tmp / "commitlog" / f"{0:020d}")
    bounds = [0, *sorted(cuts), SEGMENT]
    seen = []
    for start, end in zip(bounds, bounds[1:]):
        for raw in SegmentReader(path, 0, RecordDecoder(()), start, end):
            seen.extend(int(p) for p in raw.positions)
    assert seen == [p for p, _ in placed if p < SEGMENT]


def test_segment_gone_after_planning_is_a_finding(tmp_path):
    make_store(tmp_path, n=5)
    path = tmp_path / "commitlog" / f"{0:020d}"
    reader = SegmentReader(str(path), 0, RecordDecoder(()))
    path.unlink()
    assert list(reader) == []
    f = reader.result.findings[0]
    assert f.check == "commitlog.unreadable" and f.file == str(path)
    with pytest.raises(StoreError, match="cannot open"):
        list(SegmentReader(str(path), 0, RecordDecoder(()), strict=True))


# ----------------------------------------------------------------------------- interleaved lanes

LANE_SEGMENT = 8 << 20          # room for 4 lanes of LANE_MIN_BYTES


@pytest.fixture(scope="module")
def lane_store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lanes")
    w = SegmentWriter(LANE_SEGMENT)
    placed = []
    i = 0
    while len(w.segments) == 1:                     # fill the first segment to its BLANK
        placed.append(w.append(Message(topic=f"T{i % 3}", body=bytes([i % 251]) * (i * 7919 % 3000),
                                       properties={"TAGS": f"t{i}"})))
        i += 1
    write_segments(w, tmp / "commitlog")
    return tmp, [p for p, _ in placed if p < LANE_SEGMENT]


def _read(path, lanes, start=0, end=None):
    decoder = RecordDecoder(("queue_offset",), batch_rows=65536, lanes=lanes)
    reader = SegmentReader(path, 0, decoder, start, end)
    batches = list(reader)
    positions = [int(p) for d in batches for p in d.positions]
    queue_offsets = [q for d in batches for q in d.batch.column("queue_offset").to_pylist()]
    return positions, queue_offsets, reader.result


def test_lanes_walk_takes_the_fast_path_and_agrees_with_the_plain_walk(lane_store):
    import numpy as np

    from rocketstore_spark.codec import commitlog
    tmp, placed = lane_store
    path = str(tmp / "commitlog" / f"{0:020d}")
    buf = np.fromfile(path, dtype=np.uint8)
    counts = np.zeros(4, dtype=np.int64)
    out = np.empty(4 * 65536, dtype=np.int64)
    count, next_pos, stop = commitlog.walk_lanes(buf, 0, len(buf), 0, 0, len(buf), 4, 65536, counts, out)
    assert count == len(placed) and counts.min() > 0                    # the fast path, every lane busy
    got = np.concatenate([out[k * 65536:k * 65536 + c] for k, c in enumerate(counts)])
    assert got.tolist() == placed
    assert _read(path, 4) == _read(path, 1) and _read(path, 4)[0] == placed


def test_lanes_fall_back_on_damage_with_the_same_findings(lane_store, tmp_path):
    import shutil
    src, placed = lane_store
    shutil.copytree(src / "commitlog", tmp_path / "commitlog")
    victim = placed[len(placed) * 2 // 3]
    path, pos = patch(tmp_path, victim, b"\xde\xad\xbe\xef" * 4, segment_size=LANE_SEGMENT)
    four, one = _read(path, 4), _read(path, 1)
    assert four[:2] == one[:2] and victim not in four[0]
    assert [(f.check, f.file_position) for f in four[2].findings] == [(f.check, f.file_position)
                                                                     for f in one[2].findings]
    assert four[2].findings[0].file_position == pos


@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(1, LANE_SEGMENT - 1), max_size=3, unique=True))
def test_lanes_with_any_split_points_give_the_same_records(lane_store, cuts):
    tmp, placed = lane_store
    path = str(tmp / "commitlog" / f"{0:020d}")
    bounds = [0, *sorted(cuts), LANE_SEGMENT]
    seen = []
    for start, end in zip(bounds, bounds[1:]):
        seen.extend(_read(path, 4, start, end)[0])
    assert seen == placed


def test_lanes_overflowing_with_small_records_fall_back_to_the_plain_walk(tmp_path):
    w = SegmentWriter(LANE_SEGMENT)
    placed = []
    while len(w.segments) == 1:                     # ~80 K records of ~100 bytes: more than a lane holds
        placed.append(w.append(Message(topic="T", body=b"x")))
    write_segments(w, tmp_path / "commitlog")
    path = str(tmp_path / "commitlog" / f"{0:020d}")
    expected = [p for p, _ in placed if p < LANE_SEGMENT]
    assert len(expected) > 4 * 16384
    assert _read(path, 4) == _read(path, 1) and _read(path, 4)[0] == expected


# ----------------------------------------------------------------------------- hostile segments

@pytest.mark.parametrize("end_marker", [bytes(8), struct.pack(">ii", 5000, -875286124)])
def test_records_after_a_zero_fill_or_blank_in_the_middle_are_read_and_reported(tmp_path, end_marker):
    placed = make_store(tmp_path, n=30)
    path, pos = patch(tmp_path, placed[10][0], end_marker)              # the log "ends" at record 10
    table, findings = read_table(tmp_path, columns=("topic",))
    offsets = table.column("physical_offset").to_pylist()
    assert offsets == [p for p, _ in placed if p != placed[10][0] and p < SEGMENT]
    (f,) = [f for f in findings if f.check == "commitlog.records_after_end"]
    later = [p for p, _ in placed[11:] if p < SEGMENT]
    assert (f.file, f.file_position, f.severity) == (path, pos, "error")          # where the log "ends"
    assert f.evidence["first_position"] == later[0] and f.evidence["count"] == len(later)
    assert f.evidence["last_position"] == later[-1]
    with pytest.raises(StoreError, match="records_after_end"):
        read_table(tmp_path, strict=True)


def test_segment_rocketmq_ends_where_its_walk_stops(tmp_path):
    from rocketstore_spark.store.scan import scan_segment
    placed = make_store(tmp_path, n=30)
    path, pos = patch(tmp_path, placed[10][0], bytes(8))
    s = scan_segment(path, 0)
    assert s.valid_end == pos and s.stop_reason == "zero fill (end of the written log)"
    assert s.records == len([p for p, _ in placed if p < SEGMENT]) - 1


def test_a_segment_copied_under_another_name_is_not_read_twice(tmp_path):
    placed = make_store(tmp_path, n=200, segment_size=16 * 1024)
    cl = tmp_path / "commitlog"
    files = sorted(cl.iterdir())
    copy = cl / f"{len(files) * 16 * 1024:020d}"
    copy.write_bytes(files[1].read_bytes())                              # segment 1 again, as the next one
    table, findings = read_table(tmp_path, columns=("topic",))
    offsets = table.column("physical_offset").to_pylist()
    assert offsets == [p for p, _ in placed] and len(set(offsets)) == len(offsets)
    (f,) = [f for f in findings if f.check == "commitlog.misplaced_records"]
    in_copy = [p for p, _ in placed if 16 * 1024 <= p < 32 * 1024]
    assert f.file == str(copy) and f.file_position == 0 and f.evidence["count"] == len(in_copy)
    assert (f.evidence["stored_first"], f.evidence["stored_last"]) == (in_copy[0], in_copy[-1])


def test_a_sparse_giant_segment_is_skipped_through_its_holes(tmp_path):
    placed = make_store(tmp_path, n=10)
    big = tmp_path / "commitlog" / f"{SEGMENT:020d}"
    with open(big, "wb") as f:
        f.truncate(64 << 30)                                             # 64 GiB of hole, no data
    table, findings = read_table(tmp_path, columns=("topic",))
    assert table.column("physical_offset").to_pylist() == [p for p, _ in placed]
    # the giant has the wrong size; holding no record, it does not make the first segment "unclosed"
    assert [f.check for f in findings] == ["commitlog.wrong_size"]
    reader = SegmentReader(str(big), SEGMENT, RecordDecoder(()), start=(32 << 30) + 5)
    assert list(reader) == [] and reader.result.records == 0


def test_strict_stops_on_every_error_finding_kind(tmp_path):
    placed = make_store(tmp_path, n=20)
    patch(tmp_path, placed[3][0] + 100, b"\xff")                          # a body byte: BODYCRC fails
    with pytest.raises(StoreError, match="commitlog.body_crc"):
        read_table(tmp_path, columns=("topic",), strict=True)
    table, findings = read_table(tmp_path, columns=("topic",))
    assert [f.check for f in findings] == []                             # not strict: a column, not a finding
    other = tmp_path / "other"
    make_store(other, n=200, segment_size=16 * 1024)
    sorted((other / "commitlog").iterdir())[2].unlink()                  # a gap: a layout error
    with pytest.raises(StoreError, match="commitlog.gap"):
        read_table(other, strict=True)
    assert read_table(other)[0].num_rows > 0


def test_a_segment_followed_by_another_must_end_with_a_blank(tmp_path):
    placed = make_store(tmp_path, n=200, segment_size=16 * 1024)
    cl = tmp_path / "commitlog"
    first = sorted(cl.iterdir())[0]
    last_in_first = max(p for p, _ in placed if p < 16 * 1024)
    path, pos = patch(tmp_path, last_in_first, bytes(16 * 1024 - last_in_first), segment_size=16 * 1024)
    table, findings = read_table(tmp_path, columns=("topic",))
    assert [(f.check, f.file, f.file_position) for f in findings] == [("commitlog.unclosed_segment", str(first),
                                                                       last_in_first)]
    assert table.num_rows == len(placed) - 1
    last = sorted(cl.iterdir())[-1]                                      # the last segment: a normal end
    assert not [f for f in findings if f.file == str(last)]


def test_a_blank_where_the_next_segments_first_record_would_have_fitted_is_reported(tmp_path):
    placed = make_store(tmp_path, n=200, segment_size=16 * 1024)
    in_first = [p for p, _ in placed if p < 16 * 1024]
    victim = in_first[len(in_first) // 2]
    path, pos = patch(tmp_path, victim, struct.pack(">ii", 16 * 1024 - victim, -875286124)
                      + bytes(16 * 1024 - victim - 8), segment_size=16 * 1024)
    table, findings = read_table(tmp_path, columns=("topic",))
    (f,) = findings
    assert (f.check, f.file, f.file_position, f.severity) == ("commitlog.early_blank", path, pos, "warning")
    assert f.evidence["room"] == 16 * 1024 - victim


def test_a_preallocated_empty_segment_after_the_last_one_does_not_make_it_unclosed(tmp_path):
    """RocketMQ preallocates the next segment: the last one with records ends in zero fill, normally."""
    placed = make_store(tmp_path, n=20)
    (tmp_path / "commitlog" / f"{SEGMENT:020d}").write_bytes(bytes(SEGMENT))
    table, findings = read_table(tmp_path, columns=("topic",))
    assert findings == [] and table.num_rows == len(placed)


def test_a_last_segment_closed_by_a_blank_without_its_successor_is_reported(tmp_path):
    """A BLANK is written as RocketMQ rolls over: the last segment ending with one names a next segment that
    must exist, if only empty (preallocated, nothing written yet). Here the store lost its newest segment."""
    placed = make_store(tmp_path, n=200, segment_size=16 * 1024)
    segments = sorted((tmp_path / "commitlog").iterdir())
    newest = segments[-1]
    newest.unlink()                                                      # copied without its newest segment
    last = segments[-2]
    kept = [p for p, _ in placed if p < int(newest.name)]
    blank = max(kept) + next(size for p, size in placed if p == max(kept)) - int(last.name)
    table, findings = read_table(tmp_path, columns=("topic",))
    assert table.num_rows == len(kept)
    (f,) = findings
    assert (f.check, f.severity, f.file, f.file_position) == ("commitlog.missing_next_segment", "warning",
                                                              str(last), blank)
    assert f.evidence["next_segment"] == newest.name
    # the same segment followed by an empty (preallocated) successor is a normal end
    newest.write_bytes(bytes(16 * 1024))
    assert read_table(tmp_path, columns=("topic",))[1] == []


def test_golden_stores_have_no_findings_beyond_their_planted_damage():
    from tests.golden.goldens import all_goldens
    for g in all_goldens():
        if g.manifest.get("surgery"):
            continue
        _, findings = read_table(g.store, columns=("topic",))
        assert findings == [], (g.id, [f.render() for f in findings])
