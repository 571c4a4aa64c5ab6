"""DLedger CommitLog stores (tests/golden/dledger-5.5.1/, written by RocketMQ 5.5.1's DLedgerCommitLog) read
through their entries: every record RocketMQ's getMessage serves is a row with the same physical offset and
fields, every entry DLedger's own ``get(index)`` returns is a row at its pos + 48, the log ends where RocketMQ's
CommitLog ends, a bad entry and a bad body are findings with file and byte position, splits inside a data file
resynchronise on entries, and what is not mirrored (recovery, rebuild, repair, queue checks) stays refused."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec import commitlog
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.lookup.dump import file_kind, segment_rows
from rocketstore_spark.lookup.query import record_at
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.engines import UnsupportedStore, Work
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.queues import read_queue
from rocketstore_spark.store.records import read_table
from rocketstore_spark.store.scan import scan_segment
from rocketstore_spark.store.segment_reader import SegmentReader

ROOT = Path(__file__).resolve().parents[1] / "golden" / "dledger-5.5.1"
SCENARIOS = ("clean", "crash", "switched", "corrupt-entry", "corrupt-record")
INTACT = ("clean", "crash", "switched", "corrupt-record")          # RocketMQ's restart keeps every entry
COLUMNS = ("topic", "queue_id", "queue_offset", "sys_flag", "flag", "body_crc", "born_timestamp", "store_timestamp",
           "reconsume_times", "prepared_transaction_offset", "body", "properties", "msg_id", "total_size",
           "transaction_type", "body_crc_ok")


def manifest(scenario: str) -> dict:
    return json.loads((ROOT / scenario / "manifest.json").read_text())


def store(scenario: str) -> Path:
    return ROOT / scenario / "store"


_TABLES: dict[str, tuple] = {}


def table(scenario: str):
    """(rows by physical offset, findings) of read_table over the store (read once per scenario)."""
    if scenario not in _TABLES:
        t, findings = read_table(str(store(scenario)), columns=COLUMNS)
        _TABLES[scenario] = ({r["physical_offset"]: r for r in t.to_pylist()}, findings)
    return _TABLES[scenario]


def ms(ts) -> int:
    return int(ts.timestamp() * 1000)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_message_rocketmq_serves_is_a_row_with_its_fields(scenario):
    rows, _ = table(scenario)
    served = [m for m in manifest(scenario)["messages"] if "physical_offset" in m]
    assert served
    for m in served:
        r = rows[m["physical_offset"]]
        assert m["stored_physical_offset"] == m["physical_offset"]
        assert (r["topic"], r["queue_id"], r["queue_offset"], r["sys_flag"], r["flag"], r["body_crc"],
                r["reconsume_times"], r["prepared_transaction_offset"], r["msg_id"], r["total_size"]) == \
               (m["topic"], m["queue_id"], m["queue_offset"], m["sys_flag"], m["flag"], m["body_crc"],
                m["reconsume_times"], m["prepared_transaction_offset"], m["msg_id"], m["size"]), m["physical_offset"]
        assert (ms(r["born_timestamp"]), ms(r["store_timestamp"])) == (m["born_timestamp"], m["store_timestamp"])
        assert hashlib.sha256(r["body"]).hexdigest() == m["body_sha256"]
        assert dict(r["properties"]) == m["properties"]


@pytest.mark.parametrize("scenario", INTACT)
def test_the_rows_are_dledgers_entries_and_the_log_ends_where_rocketmq_says(scenario):
    rows, findings = table(scenario)
    m = manifest(scenario)
    divide = m["divided_commitlog_offset"]
    assert sorted(o for o in rows if o >= divide) == [e["pos"] + 48 for e in m["entries"]]
    assert all(e["size"] == rows[e["pos"] + 48]["total_size"] + 48 for e in m["entries"])
    last = max(rows)
    assert last + rows[last]["total_size"] == m["commitlog_max_offset"] == m["ledger_after_load"]["committedPos"]
    assert min(rows) == m["commitlog_min_offset"] + (48 if divide == 0 else 0)
    # what getMessage does not serve: transaction records no queue takes (PREPARED/ROLLBACK), and after the
    # crash the last records whose queue entries RocketMQ's DLedger recovery cut (docs/format/dledger.md)
    served = {x["physical_offset"] for x in m["messages"] if "physical_offset" in x}
    unserved = [o for o in rows if o not in served]
    untyped = [o for o in unserved if rows[o]["transaction_type"] not in ("PREPARED", "ROLLBACK")]
    if scenario == "crash":
        cut = m["dispatched_during_load"]["end_physical_offset"] - 48 * m["dispatched_during_load"]["records"]
        assert untyped and all(o >= cut for o in untyped) and len(untyped) == 7
    else:
        assert not untyped
    assert [f.check for f in findings] == ["store.partial_engine"] or scenario == "corrupt-record"


def test_a_switched_store_is_its_old_commitlog_then_dledger():
    rows, findings = table("switched")
    m = manifest("switched")
    layout = discover(str(store("switched")))[0]
    assert [Path(s.path).parent.name for s in layout.segments] == ["commitlog", "data"]
    assert layout.segments[1].base_offset == m["divided_commitlog_offset"] == 65536
    classic = sorted(o for o in rows if o < 65536)
    assert classic and classic[0] == 0 and len(classic) + len(m["entries"]) == len(rows)


def test_a_bad_entry_header_is_a_finding_where_dledger_truncates():
    rows, findings = table("corrupt-entry")
    m = manifest("corrupt-entry")
    (surgery,) = m["surgery"]
    (bad,) = [f for f in findings if f.check == "commitlog.bad_entry"]
    entry_position = surgery["entry_pos"] % m["geometry"]["mapped_file_size_commitlog"]
    assert bad.file == str(store("corrupt-entry") / surgery["file"]) and bad.file_position == entry_position
    assert bad.physical_offset == surgery["entry_pos"] == m["commitlog_max_offset"]
    assert bad.evidence["entry_index"] == surgery["entry_index"]
    (resync,) = [f for f in findings if f.check == "commitlog.resynchronised"]
    assert resync.file_position > entry_position
    # the walk resumes on the next entry: every other record of the parent store is read
    parent, _ = table("crash")
    assert set(rows) == set(parent) - {surgery["entry_pos"] + 48}
    kept = {x["physical_offset"] for x in m["messages"] if "physical_offset" in x}
    assert max(kept) < surgery["entry_pos"]


def test_a_bad_body_inside_a_good_entry_is_a_crc_failure_rocketmq_serves_anyway():
    rows, _ = table("corrupt-record")
    m = manifest("corrupt-record")
    (surgery,) = m["surgery"]
    assert [o for o, r in rows.items() if not r["body_crc_ok"]] == [surgery["physical_offset"]]
    assert surgery["physical_offset"] in {x["physical_offset"] for x in m["messages"] if "physical_offset" in x}
    layout = discover(str(store("corrupt-record")))[0]
    seg = layout.segments[0]
    s = scan_segment(seg.path, seg.base_offset, check_crc=True, followed=True)
    assert s.crc_failures == 1 and s.first_crc_failure == surgery["physical_offset"]
    (crc,) = [f for f in s.findings if f.check == "commitlog.body_crc"]
    assert crc.file == str(store("corrupt-record") / surgery["file"])
    assert crc.file_position == surgery["physical_offset"]      # the record, 48 bytes into its entry at 1958


def test_the_segment_scan_walks_entries_to_the_blank():
    m = manifest("clean")
    layout = discover(str(store("clean")))[0]
    size = m["geometry"]["mapped_file_size_commitlog"]
    for k, seg in enumerate(layout.segments):
        s = scan_segment(seg.path, seg.base_offset, check_crc=True, followed=layout.followed(k))
        mine = [e for e in m["entries"] if e["pos"] // size * size == seg.base_offset]
        assert s.records == len(mine) and not s.findings and s.crc_failures == 0
        end = mine[-1]["pos"] + mine[-1]["size"] - seg.base_offset
        assert s.valid_end == end
        assert s.stop_reason == ("BLANK end-of-file record" if k == 0 else "zero fill (end of the written log)"), \
            s.stop_reason


def test_splits_inside_a_data_file_resynchronise_on_entries():
    rows, _ = table("clean")
    seg = discover(str(store("clean")))[0].segments[0]
    decoder = RecordDecoder(("queue_offset",))
    cuts = [0, 1, 47, 48, 49, 5000, 20011, 40000, 65535]
    read = []
    for start, end in zip(cuts, cuts[1:] + [None]):
        for decoded in SegmentReader(seg.path, seg.base_offset, decoder, start, end, followed=True):
            read.extend((seg.base_offset + decoded.positions).tolist())
    assert read == sorted(o for o in rows if o < 65536)
    assert len(set(read)) == len(read)


def test_a_record_is_found_by_its_physical_offset():
    rows, _ = table("clean")
    layout = discover(str(store("clean")))[0]
    for offset in sorted(rows)[::37]:
        assert record_at(layout, offset)["msg_id"] == rows[offset]["msg_id"]
    assert record_at(layout, sorted(rows)[3] - 48) is None          # an entry header is not a record
    seg = layout.segments[1]
    dumped = segment_rows(seg.path, start=sorted(rows)[-5], count=0)
    assert [r["physical_offset"] for r in dumped.rows] == sorted(rows)[-5:]
    assert file_kind(seg.path) == "commitlog"
    with pytest.raises(ValueError, match="a DLedger index file; only its data/ files"):
        file_kind(str(store("clean") / "dledger-n0" / "index" / f"{0:020d}"))     # not an IndexFile


def test_the_queues_are_rocketmqs_and_point_at_the_records():
    rows, _ = table("clean")
    served = {(x["topic"], x["queue_id"], x["queue_offset"]): x for x in manifest("clean")["messages"]
              if "physical_offset" in x}
    files = StoreMap.of_root(store("clean"))
    seen = 0
    for topic, qid in {(t, q) for t, q, _ in served}:
        for chunk in read_queue(str(files.queue_dir(topic, qid))):
            for offset, entry in zip(chunk.queue_offsets.tolist(), chunk.entries):
                x = served[(topic, qid, offset)]
                assert (int(entry["commit_log_offset"]), int(entry["size"])) == (x["physical_offset"], x["size"])
                assert rows[x["physical_offset"]]["queue_offset"] == offset
                seen += 1
    assert seen == len(served)


def test_what_is_not_mirrored_stays_refused():
    layout = discover(str(store("crash")))[0]
    (f,) = [f for f in layout.findings if f.check == "store.partial_engine"]
    assert "DLedger CommitLog (dledger-n0/)" in f.message
    for work in (Work.READ_COMMITLOG, Work.READ_QUEUES, Work.READ_CONFIG, Work.RECOVER, Work.CHECK_QUEUES,
                 Work.READ_INDEX, Work.REBUILD):
        layout.refuse(work)     # tests/recovery/test_dledger_recovery.py, tests/rebuild/test_dledger_rebuild.py
    for work in (Work.REPAIR,):
        with pytest.raises(UnsupportedStore, match="DLedger CommitLog"):
            layout.refuse(work)


def test_entries_are_walked_without_a_python_loop_per_message():
    """The data file of 100+ entries is one compiled walk per window: one batch holds every record."""
    seg = discover(str(store("clean")))[0].segments[0]
    batches = list(SegmentReader(seg.path, seg.base_offset, RecordDecoder(("queue_offset",)), followed=True))
    assert len(batches) == 1 and batches[0].n > 100
    assert np.all(np.diff(batches[0].positions) > 48)


@pytest.fixture(scope="module")
def big_data_file(tmp_path_factory):
    """A 6 MiB DLedger data file of our encoder's records (tests/builders.py): large enough for the
    interleaved lanes of header-only reads and audits (commitlog.walk_lanes), and its record positions."""
    from tests.builders import dledger_segment, synthetic_segment
    template, positions = synthetic_segment(6 << 20)
    data, records, _ = dledger_segment(template, positions, 6 << 20)
    path = tmp_path_factory.mktemp("dledger") / "store" / "dledger-n0" / "data" / f"{0:020d}"
    path.parent.mkdir(parents=True)
    path.write_bytes(data.tobytes())
    return path, records


def test_lanes_walk_entries_as_the_sequential_walk_does(big_data_file):
    path, records = big_data_file
    walked = {}
    for lanes in (4, 1):
        decoder = RecordDecoder(("queue_offset", "store_timestamp"), lanes=lanes)
        walked[lanes] = np.concatenate([d.positions for d in SegmentReader(str(path), 0, decoder)])
    assert np.array_equal(walked[4], records) and np.array_equal(walked[1], records)
    # the lanes themselves (not a fallback to the sequential walk): each lane resyncs on an entry start
    buf = np.fromfile(path, dtype=np.uint8)
    rows = len(records)
    counts, out = np.zeros(4, dtype=np.int64), np.empty(4 * rows, dtype=np.int64)
    n, end, stop = commitlog.walk_lanes(buf, 0, len(buf), 0, 0, len(buf), 4, rows, counts, out, 48)
    assert n == len(records) and stop == commitlog.STOP_BLANK and end == records[-1] + int(
        np.frombuffer(buf[records[-1]:records[-1] + 4].tobytes(), ">i4")[0])
    assert np.array_equal(np.concatenate([out[k * rows:k * rows + c] for k, c in enumerate(counts)]), records)
    s = scan_segment(str(path), 0, check_crc=False)
    assert s.records == len(records) and s.stop_reason == "BLANK end-of-file record"
    assert [f.check for f in s.findings] == ["commitlog.missing_next_segment"]     # the last file, and no next


def test_damage_in_a_big_data_file_is_found_and_read_past(big_data_file, tmp_path):
    path, records = big_data_file
    damaged = tmp_path / "store" / "dledger-n0" / "data" / path.name
    damaged.parent.mkdir(parents=True)
    data = bytearray(path.read_bytes())
    victim = int(records[len(records) // 2]) - 48          # an entry in the middle: its size no longer frames it
    data[victim + 4:victim + 8] = (int.from_bytes(data[victim + 4:victim + 8], "big") + 1).to_bytes(4, "big")
    damaged.write_bytes(bytes(data))
    decoder = RecordDecoder(("queue_offset",))
    reader = SegmentReader(str(damaged), 0, decoder)
    read = np.concatenate([d.positions for d in reader])
    assert np.array_equal(read, np.delete(records, len(records) // 2))
    (bad,) = [f for f in reader.result.findings if f.check == "commitlog.bad_entry"]
    assert bad.file_position == victim and bad.evidence["entry_index"] == len(records) // 2


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_index_units_and_checkpoint_are_dledgers(scenario):
    """The index files as DLedger wrote them: one unit per entry on disk (DLedger's recovery on the copy may have
    truncated its own view: corrupt-entry), each naming its entry as get(index) does; the checkpoint's
    endIndex/committedIndex as the manifest read them before the restart."""
    from rocketstore_spark.store.dledger import dledger_dirs, read_index_units, read_properties
    m = manifest(scenario)
    (directory,) = dledger_dirs(store(scenario))
    units = np.concatenate([u for _, u, _ in read_index_units(directory)])
    entries = m["entries"]
    assert len(units) >= len(entries)
    got = [(int(u["magic"]), int(u["pos"]), int(u["size"]), int(u["index"]), int(u["term"])) for u in units]
    assert got[:len(entries)] == [(e["magic"], e["pos"], e["size"], e["index"], e["term"]) for e in entries]
    assert [g[3] for g in got] == list(range(len(got)))
    assert read_properties(directory / "checkpoint") == m["dledger_checkpoint"]
    if scenario in INTACT:
        assert len(units) == len(entries)


def test_a_classic_segment_past_the_divide_is_a_finding_and_left_out(tmp_path):
    """RocketMQ reads offsets from dividedCommitlogOffset on from DLedger's data, never from commitlog/."""
    from tests.store_files import copy_store
    copied = copy_store(store("switched"), tmp_path / "store")
    stray = copied / "commitlog" / f"{65536:020d}"
    stray.write_bytes((copied / "dledger-n0" / "data" / f"{65536:020d}").read_bytes())
    layout = discover(str(copied))[0]
    (f,) = [f for f in layout.findings if f.check == "commitlog.beyond_divide"]
    assert f.file == str(stray) and f.evidence["divided_commitlog_offset"] == 65536
    assert str(stray) not in [s.path for s in layout.segments]
    rows, _ = table("switched")
    t, _ = read_table(str(copied), columns=("queue_offset",))
    assert t["physical_offset"].to_pylist() == sorted(rows)
