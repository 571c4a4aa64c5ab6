"""scan_segment's record checks beyond structure and BODYCRC: the 5.x __CRC32# property and store times."""
from __future__ import annotations

from rocketstore_spark.codec.audit import EARLIEST_PLAUSIBLE_MS
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.store.scan import scan_segment
from tests.builders import write_segments


def one_segment(tmp_path, messages, size=1 << 16):
    w = SegmentWriter(size)
    placed = [w.append(m) for m in messages]
    return write_segments(w, tmp_path / "commitlog")[0], placed


def test_a_record_whose_crc32_property_does_not_match_is_reported_at_its_position(tmp_path):
    msgs = [Message("T", body=b"x" * 10, properties={"TAGS": "a", "KEYS": f"k{i}"}, crc32_property=True)
            for i in range(5)]
    path, placed = one_segment(tmp_path, msgs)
    clean = scan_segment(str(path), 0, check_properties_crc=True)
    assert clean.properties_crc_failures == 0 and not clean.findings
    data = bytearray(path.read_bytes())
    victim, size = placed[3]
    where = data.index(b"k3", victim)          # a property byte of the fourth record: BODYCRC still matches
    data[where] ^= 0x01
    path.write_bytes(bytes(data))
    s = scan_segment(str(path), 0, check_properties_crc=True)
    assert s.properties_crc_failures == 1 and s.crc_failures == 0
    [f] = s.findings
    assert (f.check, f.file_position, f.physical_offset) == ("commitlog.properties_crc", victim, victim)
    assert scan_segment(str(path), 0).findings == []          # off by default, like RocketMQ's forceVerifyPropCRC


def test_store_times_going_back_or_implausible_are_reported_once_per_segment(tmp_path):
    t = 1_795_000_000_000
    times = [t, t + 5, t + 3, t + 9, t + 1, EARLIEST_PLAUSIBLE_MS - 1, t + 20]
    path, placed = one_segment(tmp_path, [Message("T", body=b"b", store_timestamp=ts) for ts in times])
    s = scan_segment(str(path), 0, check_times=True)
    back = [f for f in s.findings if f.check == "commitlog.time_backwards"]
    odd = [f for f in s.findings if f.check == "commitlog.time_implausible"]
    assert len(back) == 1 and len(odd) == 1
    steps = [i for i in range(1, len(times)) if times[i] < times[i - 1]]
    assert back[0].evidence["records"] == len(steps) and back[0].file_position == placed[steps[0]][0]
    assert back[0].evidence["largest_step_ms"] == max(times[i - 1] - times[i] for i in steps)
    assert odd[0].evidence["records"] == 1 and odd[0].file_position == placed[5][0]
    assert scan_segment(str(path), 0).findings == []
