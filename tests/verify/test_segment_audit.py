"""The fused audit pass (codec.audit.AuditDecoder) behind scan_segment: planted faults at known positions,
across many reader windows and past the per-call output capacity, and the same findings as the column
decoder (codec.decoder.RecordDecoder with its CRC verdicts) driven by the same reader; the same audit made
inside the dispatch's walk (DispatchDecoder's ``audit``) gives the scan's summary."""
from __future__ import annotations

import struct

import pytest

from rocketstore_spark.codec import audit
from rocketstore_spark.codec.audit import AuditDecoder
from rocketstore_spark.codec.commitlog import POS_PHYSICAL_OFFSET, POS_STORE_TIMESTAMP_BH
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.dispatch_kernel import DispatchDecoder
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.findings import CAP
from rocketstore_spark.store.scan import segment_audit, summarize
from rocketstore_spark.store.segment_reader import SegmentReader
from tests.builders import write_segments

N = 6000                       # more than audit.OUT_ROWS failures in one window


def segment(tmp_path, n=N, size=1 << 20, pad=0, **message):
    w = SegmentWriter(size)
    placed = [w.append(Message("T", body=f"body-{i:06d}".encode() + b"x" * pad, store_timestamp=1_795_000_000_000 + i,
                               **message))
              for i in range(n)]
    path = write_segments(w, tmp_path / "commitlog")[0]
    assert all(offset + length <= size for offset, length in placed), "the test wants one segment"
    return path, [offset for offset, _ in placed]


def corrupt_bodies(path, positions):
    data = bytearray(path.read_bytes())
    for p in positions:
        data[data.index(b"body-", p) + 5] ^= 0x01
    path.write_bytes(bytes(data))


def misplace(path, positions):
    data = bytearray(path.read_bytes())
    for p in positions:
        data[p + POS_PHYSICAL_OFFSET:p + POS_PHYSICAL_OFFSET + 8] = struct.pack(">q", p + 12345)
    path.write_bytes(bytes(data))


def read(path, decoder, window, crc_failures=None):
    """The scan's result; ``crc_failures``: a list that gets every failing record's position, batch by batch
    (the findings list only the first ``CAP`` of a check in full)."""
    reader = SegmentReader(str(path), 0, decoder, window=window, followed=False)
    for decoded in reader:
        if crc_failures is not None:
            crc_failures += [int(p) for p in decoded.crc_failures]
    return reader.result


def assert_capped(findings, check, positions):
    """``positions`` as findings of ``check``: the first CAP in full, then one counting the rest, naming the
    first and the last of them."""
    got = [f for f in findings if f.check == check]
    assert [f.file_position for f in got[:CAP]] == positions[:CAP]
    [summary] = got[CAP:]
    assert summary.evidence["omitted"] == len(positions) - CAP and summary.file_position == positions[CAP]
    assert summary.evidence["last_file_position"] == positions[-1]


def test_every_failing_body_is_found_at_its_position_across_windows_and_full_outputs(tmp_path):
    path, starts = segment(tmp_path)
    bad = starts[::2] + [starts[-1]]                     # 3001 failures, every other record and the last
    corrupt_bodies(path, bad)
    decoder = AuditDecoder()
    crc = []
    res = read(path, decoder, window=64 << 10, crc_failures=crc)       # ~4 records per KiB: dozens of windows
    assert crc == bad
    assert_capped(res.findings, "commitlog.body_crc", bad)
    assert res.records == N and decoder.state[audit.S_RECORDS] == N
    assert decoder.state[audit.S_CRC_FAILURES] == len(bad) and decoder.state[audit.S_FIRST_CRC_POS] == bad[0]
    assert decoder.state[audit.S_FIRST_TS] == 1_795_000_000_000
    assert decoder.state[audit.S_LAST_TS] == 1_795_000_000_000 + N - 1

    everything = starts                                  # > OUT_ROWS failures in one window
    corrupt_bodies(path, [p for p in everything if p not in set(bad)])
    crc = []
    res = read(path, AuditDecoder(), window=64 << 20, crc_failures=crc)
    assert crc == everything
    assert_capped(res.findings, "commitlog.body_crc", everything)


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "lanes"])
def test_misplaced_runs_are_left_out_and_reported_as_the_column_decoder_does(tmp_path, check_crc):
    path, starts = segment(tmp_path, size=16 << 20, pad=1500)    # 9 MiB: lanes without BODYCRC
    runs = [starts[3:6], starts[9:10], starts[4999:5100], starts[-2:]]
    misplace(path, [p for run in runs for p in run])
    corrupt_bodies(path, [starts[7], starts[4999]])      # the second one is misplaced: not checked
    for window in (64 << 10, 64 << 20):
        ours = read(path, AuditDecoder(check_crc=check_crc, check_times=True), window)
        theirs = read(path, RecordDecoder((), check_crc=check_crc), window)
        assert ours.records == theirs.records == len(starts) - sum(map(len, runs))
        assert ours.findings == theirs.findings
        mis = [f for f in ours.findings if f.check == "commitlog.misplaced_records"]
        assert [(f.file_position, f.evidence["count"]) for f in mis] == [(r[0], len(r)) for r in runs]
        crc = [f.file_position for f in ours.findings if f.check == "commitlog.body_crc"]
        assert crc == ([starts[7]] if check_crc else [])


def test_properties_crc_failures_are_counted_all_and_listed_first(tmp_path):
    path, starts = segment(tmp_path, n=300, properties={"KEYS": "k"}, crc32_property=True)
    corrupt = starts[10:250]
    data = bytearray(path.read_bytes())
    for p in corrupt:
        data[data.index(b"KEYS\x01k", p) + 5] ^= 0x01        # a property byte: BODYCRC still matches
    path.write_bytes(bytes(data))
    decoder = AuditDecoder(check_properties_crc=True, prop_failure_limit=20)
    res = read(path, decoder, window=16 << 10)
    assert decoder.state[audit.S_PROP_FAILURES] == len(corrupt)
    assert decoder.prop_failures.tolist() == corrupt[:20]
    assert not res.findings                               # BODYCRC passes everywhere


@pytest.mark.parametrize("check_crc", [True, False], ids=["crc", "no-crc"])
def test_the_dispatch_walk_scans_a_segment_as_the_scan_does(tmp_path, check_crc):
    """The dispatch with ``audit`` (``store.spill.scan_range``'s ``scans``: one walk for a segment's dispatch and
    its scan) gives the scan's summary and findings, in the same order, though its batches end elsewhere than
    the scan's calls: BODYCRC failures past the first (one on the record that ends a misplaced run), misplaced
    runs (one across a batch bound), ``__CRC32#`` failures, store times going back and implausible."""
    path, starts = segment(tmp_path, size=16 << 20, pad=1500, properties={"KEYS": "k"}, crc32_property=True)
    runs = [starts[3:6], starts[995:1003], starts[4999:5100]]
    misplace(path, [p for run in runs for p in run])
    corrupt_bodies(path, [starts[7], starts[1003], starts[4999], starts[-1]])      # 4999: misplaced, not checked
    data = bytearray(path.read_bytes())
    for k, ts in ((2000, 1_795_000_000_000), (3000, 0)):
        at = starts[k] + POS_STORE_TIMESTAMP_BH + 8                 # after an IPv4 born host and port
        data[at:at + 8] = struct.pack(">q", ts)
    path.write_bytes(bytes(data))
    for window in (64 << 10, 64 << 20):
        scan = segment_audit(check_crc, True, True)
        theirs = summarize(str(path), 0, read(path, scan, window), scan)
        audited = segment_audit(check_crc, True, True)
        dispatch = DispatchDecoder(batch_rows=1000, audit=audited)           # batches of 1000 records
        ours = summarize(str(path), 0, read(path, dispatch, window), audited)
        assert ours == theirs
        checks = [(f.check, f.file_position) for f in ours.findings]
        # in file position order: a run is reported by the placed record after it, before that record's failure
        expected = [("commitlog.misplaced_records", run[0]) for run in runs]
        if check_crc:
            expected = [expected[0], ("commitlog.body_crc", starts[7]), expected[1], ("commitlog.body_crc", starts[1003]),
                        expected[2], ("commitlog.body_crc", starts[-1])]
        assert [c for c in checks if c[0] in ("commitlog.body_crc", "commitlog.misplaced_records")] == expected
        assert ("commitlog.time_backwards", starts[2000]) in checks and ("commitlog.time_implausible", starts[3000]) in checks
        assert ours.properties_crc_failures == 5 and ours.records == len(starts) - sum(map(len, runs))
