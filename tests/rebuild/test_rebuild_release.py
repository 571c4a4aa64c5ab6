"""On a damaged log the rebuild writes what the release writes when it restarts without consumequeue/ and index/
(issue #26 item 7), and ``resync`` writes every valid record and names the entries RocketMQ would not have.

What RocketMQ did is read from the goldens: the crash stores with a flipped body byte (``corrupt-body``,
``corrupt-window``) or a zeroed page (``zeroed-page``) record RocketMQ's real restart of a copy — the records
its recovery dispatched (``recovery.dispatched_during_load``: from the segment it starts at to where it cut
the log, whatever the queue files say) and the ConsumeQueues it left (``expected-recovery/``). A restart
without queue files dispatches the same records into empty queues, so every entry RocketMQ left for a record
of that range is an entry of the rebuild, at the same queue offset, and the rebuild holds nothing else but
the fillers before a queue's first entry. (Byte for byte against RocketMQ's own rebuild, IndexFiles included:
the slow test in test_rocketmq_accepts_rebuild.py.)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.store.layout import StoreMap
from rocketstore_spark.store.indexes import read_index_file
from rocketstore_spark.store.records import read_table
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID, all_goldens

DAMAGED = [g for g in all_goldens() if g.scenario in ("corrupt-body", "corrupt-window", "zeroed-page")]
QUEUED = (0, 8)                       # transaction types with a ConsumeQueue entry: NOT and COMMIT


def queue_entries(root: Path) -> dict[tuple[str, int], dict[int, tuple[int, int, int]]]:
    """Every queue's written entries (fillers and zero entries left out) under ``root``'s consumequeue/:
    (topic, queue id) -> queue offset -> (physical offset, size, tagsCode)."""
    files = StoreMap.of_root(root)
    out = {}
    for topic, queue_id, directory in files.queue_dirs():
        got = {}
        for path, byte_offset in StoreMap.queue_files(directory):
            e = consumequeue.decode_entries(Path(path).read_bytes())
            keep = np.flatnonzero(consumequeue.valid_mask(e) & ~consumequeue.is_filler(e))
            for k in keep.tolist():
                got[byte_offset // consumequeue.ENTRY_SIZE + k] = tuple(int(v) for v in e[k])
        if got:
            out[(topic, queue_id)] = got
    return out


def dispatched(g) -> tuple[int, int]:
    """[first, end) of the records RocketMQ's restart of ``g`` dispatched during its recovery."""
    d = g.manifest["recovery"]["dispatched_during_load"]
    return d["first_physical_offset"], d["end_physical_offset"]


@pytest.mark.parametrize("g", DAMAGED, ids=lambda g: g.id)
def test_the_rebuild_of_a_damaged_log_is_what_the_release_restart_writes(g, tmp_path):
    result = rebuild_store(str(g.store), tmp_path / "out", options={"rocketmqVersion": g.version})
    first, end = dispatched(g)
    assert result.restart.ranges[0] == (first, end, "recovery") and result.mode == "release"
    theirs = queue_entries(g.store.parent / "expected-recovery")
    # (RocketMQ cuts a queue by its write position: the entries after the cut stay in the file's bytes.) Its
    # restart kept the entries the running broker had written, so their tagsCode is the running broker's: a
    # 4.x crash recovery computes SCHEDULE_TOPIC_XXXX's without the delay table (loaded after it), which only
    # RocketMQ's own rebuild shows (the slow test); here, where each record's entry is
    want = {q: {o: e[:2] for o, e in entries.items() if first <= e[0] < end} for q, entries in theirs.items()}
    ours = queue_entries(tmp_path / "out")
    assert {q: {o: e[:2] for o, e in entries.items()} for q, entries in ours.items()} == \
        {q: entries for q, entries in want.items() if entries}
    # the IndexFiles hold the keys of exactly those records (RocketMQ's own keys per record, the manifest's);
    # the reput after the recovery starts at the end of the last queued record and puts the keys of the last
    # indexed record again when that lies at or after it (IndexService.buildIndex skips only records below it)
    inside = [m for m in g.records_on_disk if first <= m["physical_offset"] < end]
    reput_from = max(m["physical_offset"] + m["total_size"] for m in inside if m["transaction_type"] in QUEUED)
    indexed = [m for m in inside if m["index_keys"]]
    again = len(indexed[-1]["index_keys"]) if indexed and indexed[-1]["physical_offset"] >= reput_from else 0
    slots = g.manifest["geometry"]["max_hash_slot_num"]
    put = sum(read_index_file(str(p), slots).entry_count for p in (tmp_path / "out" / "index").iterdir())
    assert put == sum(len(m["index_keys"]) for m in inside) + again
    assert result.document()["restart"]["dispatched"][0] == {"from": first, "to": end, "phase": "recovery"}


TORN = [g for g in all_goldens() if g.scenario in ("torn-tail", "zeroed-page")]


@pytest.mark.parametrize("g", TORN, ids=lambda g: g.id)
def test_the_release_rebuild_reports_the_damage_its_restart_cuts_at(g, tmp_path):
    """The release's restart ends the log at the record the surgery tore or zeroed, so its rebuild dispatches
    nothing of it — yet reading the CommitLog met it, and says so (file and byte) as --resync does: the first
    record whose bytes the surgery zeroed, in the store RocketMQ wrote before it."""
    (surgery,) = g.manifest["surgery"]
    lo, hi = surgery["physical_offset"], surgery["physical_offset"] + surgery["length"]
    hit = min(m["physical_offset"] for m in g.parent.messages
              if m["physical_offset"] < hi and m["physical_offset"] + m["total_size"] > lo)
    release = rebuild_store(str(g.store), tmp_path / "release", options={"rocketmqVersion": g.version})
    errors = [f for f in release.findings if str(f.severity) == "error"]
    assert errors and min(f.physical_offset for f in errors) == hit
    resync = rebuild_store(str(g.store), tmp_path / "resync", options={"rocketmqVersion": g.version}, resync=True)
    assert {(f.check, f.file, f.file_position) for f in release.findings} == \
        {(f.check, f.file, f.file_position) for f in resync.findings if f.check != "rebuild.beyond_release"}


@pytest.mark.parametrize("g", DAMAGED, ids=lambda g: g.id)
def test_resync_names_the_entries_rocketmq_would_not_have(g, tmp_path):
    result = rebuild_store(str(g.store), tmp_path / "out", options={"rocketmqVersion": g.version}, resync=True)
    first, end = dispatched(g)
    # every queued record on disk (the CRC-failing ones too: a resynchronising reader does not check bodies)
    # outside what RocketMQ dispatched, per queue: how many, where written, physical offsets. A queue's entries
    # are written densely from its first QUEUEOFFSET: the record a zeroed page destroyed leaves no hole (the
    # next one is appended at the end: RocketMQ's "logic queue order maybe wrong")
    by_queue: dict = {}
    for m in g.records_on_disk:
        if m["transaction_type"] in QUEUED:
            by_queue.setdefault((m["topic"], m["queue_id"]), []).append(m)
    want: dict = {}
    for q, records in by_queue.items():
        for k, m in enumerate(records):
            if not first <= m["physical_offset"] < end:
                at = records[0]["queue_offset"] + k
                row = want.setdefault(q, [0, at, 0, m["physical_offset"], 0])
                row[0] += 1
                row[2], row[4] = at, m["physical_offset"]
    assert result.beyond == want and result.mode == "resync"
    beyond = [d for d in result.differences if d.kind == "beyond_release"]
    assert {(d.topic, d.queue_id): (d.entries_missing, d.first_queue_offset) for d in beyond} == \
        {q: (row[0], row[1]) for q, row in want.items()}
    # what the release's restart writes is the resynchronised rebuild less those entries
    release = rebuild_store(str(g.store), tmp_path / "release", options={"rocketmqVersion": g.version})
    assert release.beyond == {}
    # (where each record's entry is: resync computes every tagsCode with the delay table)
    ours, theirs = queue_entries(tmp_path / "out"), queue_entries(tmp_path / "release")
    less = {q: {o: e[:2] for o, e in entries.items() if first <= e[0] < end} for q, entries in ours.items()}
    assert {q: {o: e[:2] for o, e in entries.items()} for q, entries in theirs.items()} == \
        {q: entries for q, entries in less.items() if entries}


def test_the_cli_says_which_rebuild_it_wrote(tmp_path):
    import json
    g = BY_ID["4.9.8/corrupt-body"]
    first, end = dispatched(g)
    text = run("rebuild", g.store, "--output", tmp_path / "release")
    assert text.exit_code == 3
    assert "What RocketMQ 4.x writes when it restarts without consumequeue/ and index/" in text.stdout
    assert f"recovery dispatches [{first}, {end})" in text.stdout and "beyond_release" not in text.stdout
    resync = run("rebuild", g.store, "--output", tmp_path / "resync", "--resync", "--json")
    doc = json.loads(resync.stdout)
    assert resync.exit_code == 3 and doc["mode"] == "resync" and doc["document_version"] == 2
    rows = [d for d in doc["differences"] if d["kind"] == "beyond_release"]
    assert rows and {(r["topic"], r["queue_id"], r["entries_missing"]) for r in rows} == \
        {(b["topic"], b["queue_id"], b["entries"]) for b in doc["beyond_release"]}
    assert all("entries RocketMQ 4.x's own rebuild does not write" in r["detail"] for r in rows)


SEGMENT = 2048
SMALL = {"mappedFileSizeConsumeQueue": 80, "maxHashSlotNum": 4, "maxIndexNum": 16}


def old_damage_store(tmp_path, release: str) -> tuple[Path, list[tuple[int, int]], int]:
    """Five or six 2 KiB segments of 48 messages, shut down cleanly (no abort file), the magic of the third record of
    segment 0 overwritten: (store, every record's (physical offset, size), the damaged record's offset)."""
    from rocketstore_spark.codec.encode import Message
    from tests.builders import write_store
    store = tmp_path / "store"
    placed = write_store(store / "commitlog", [
        Message(topic="T", body=bytes([65 + i % 26]) * 100, queue_id=i % 2, properties={"KEYS": f"k{i}"},
                trailing_separator=not release.startswith("4")) for i in range(48)], segment_size=SEGMENT)
    assert len({phy // SEGMENT for phy, _ in placed}) in (5, 6)
    damaged = placed[2][0]
    seg = store / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    data[damaged + 4:damaged + 8] = b"\x12\x34\x56\x78"
    seg.write_bytes(bytes(data))
    return store, placed, damaged


@pytest.mark.parametrize("release", ["4.9.8", "5.1.4", "5.3.3", "5.5.1"])
def test_damage_before_a_clean_starts_walk_is_skipped_to_the_next_segment_or_cuts_the_log(tmp_path, release):
    """4.9.x and 5.0-5.3.1 walk the last three segments on a clean start and never read segment 0: the reput
    from the CommitLog minimum meets the bad magic there, skips the rest of segment 0 and reads every later
    segment. 5.3.2 and later start the walk of a store without queue files at segment 0, so the recovery
    ends the log at the bad record (docs/format/recovery.md)."""
    store, placed, damaged = old_damage_store(tmp_path, release)
    records = [phy for phy, _ in placed]
    options = {"rocketmqVersion": release, **SMALL}
    result = rebuild_store(str(store), tmp_path / "release", options=options)
    written = {e[0] for entries in queue_entries(tmp_path / "release").values() for e in entries.values()}
    skips = release < "5.3.2"
    assert written == {phy for phy in records if phy < damaged or (skips and phy >= SEGMENT)}
    if skips:
        assert [(f, at) for f, at, _ in result.restart.stops] == [(f"commitlog/{0:020d}", damaged)]
        assert result.restart.report.walk.process_offset == sum(placed[-1])
        # the damage the reput skipped past is a finding too (file and byte), as --resync reports it
        assert [(Path(f.file).name, f.file_position) for f in result.findings if str(f.severity) == "error"] == \
            [(f"{0:020d}", damaged)]
    else:
        assert result.restart.report.walk.process_offset == damaged and not result.restart.stops
    # resync: every record but the damaged one, each queue's entries dense from 0 (a missing queue offset
    # closes up: RocketMQ's "logic queue order maybe wrong" append); those RocketMQ does not dispatch, listed
    resync = rebuild_store(str(store), tmp_path / "resync", options=options, resync=True)
    want = {}
    for q in (0, 1):
        mine = [phy for i, phy in enumerate(records) if i % 2 == q and phy != damaged]
        extra = [(k, phy) for k, phy in enumerate(mine) if phy > damaged and not (skips and phy >= SEGMENT)]
        want[("T", q)] = [len(extra), extra[0][0], extra[-1][0], extra[0][1], extra[-1][1]]
    assert resync.beyond == want


def test_a_last_segment_closed_by_a_blank_with_no_segment_after_it_is_reported_as_resync_reports_it(tmp_path):
    """The log's last segment ends with a BLANK (RocketMQ rolled over) but the segment it rolled over to is gone:
    the restart's log ends at the BLANK, beyond every record the release's rebuild dispatches — and reading it
    still meets the BLANK and says the next segment is missing, as --resync (a walk of every byte) does."""
    from rocketstore_spark.codec.encode import Message
    from tests.builders import write_store
    store = tmp_path / "store"
    placed = write_store(store / "commitlog", [
        Message(topic="T", body=bytes([65 + i % 26]) * 100, queue_id=i % 2) for i in range(48)], segment_size=SEGMENT)
    last = max(phy for phy, _ in placed) // SEGMENT * SEGMENT
    (store / "commitlog" / f"{last:020d}").unlink()
    options = {"rocketmqVersion": "5.5.1", **SMALL}
    release = rebuild_store(str(store), tmp_path / "release", options=options)
    resync = rebuild_store(str(store), tmp_path / "resync", options=options, resync=True)
    missing = [(Path(f.file).name, f.check) for f in release.findings if f.check == "commitlog.missing_next_segment"]
    assert missing == [(f"{last - SEGMENT:020d}", "commitlog.missing_next_segment")]
    assert {(f.check, f.file, f.file_position) for f in release.findings} == \
        {(f.check, f.file, f.file_position) for f in resync.findings if f.check != "rebuild.beyond_release"}


def crashed_with_prepared_tail(tmp_path, release: str):
    """Five 2 KiB segments of 40 messages (two index keys each), the last three PREPARED transactions (indexed,
    never queued), crashed (abort file, checkpoint as of the last record): (store, options, placed)."""
    from rocketstore_spark.codec.commitlog import TRANSACTION_PREPARED
    from rocketstore_spark.codec.encode import Message
    from tests.verify.test_verify_properties import build
    msgs = [Message(topic="T", body=bytes([65 + i % 26]) * 100, queue_id=i % 2,
                    store_timestamp=1_795_000_000_000 + 1000 * i, born_timestamp=1_795_000_000_000 + 1000 * i - 5,
                    properties={"KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"},
                    sys_flag=TRANSACTION_PREPARED if i >= 37 else 0,
                    trailing_separator=not release.startswith("4")) for i in range(40)]
    store, options = build(tmp_path, {"messages": msgs, "segment_size": SEGMENT, "cq_entries": 4, "slots": 4,
                                      "index_num": 16, "release": release})
    (store / "abort").write_bytes(b"")
    return store, options, msgs


def test_the_reput_after_a_crash_recovery_indexes_the_last_indexed_record_again(tmp_path):
    """The reput starts at the end of the last queued record; the PREPARED records after it are read again, and
    IndexService.buildIndex skips only a record below the last one it indexed: that one's keys go in twice
    (RocketMQ 4.9.8 and 5.5.1 write the same IndexFile: test_rocketmq_accepts_rebuild.py)."""
    store, options, _ = crashed_with_prepared_tail(tmp_path, "4.9.8")
    result = rebuild_store(str(store), tmp_path / "out", options=options)
    (first, end, _), (reput_from, reput_end, _) = result.restart.ranges
    assert first < reput_from < end == reput_end
    records = [m for m in read_table(str(store), ("physical_offset", "transaction_type"))[0].to_pylist()
               if first <= m["physical_offset"] < end]
    assert records[-1]["transaction_type"] == "PREPARED" and records[-1]["physical_offset"] >= reput_from
    [index] = (tmp_path / "out" / "index").iterdir()
    assert read_index_file(str(index), 4).entry_count == 2 * len(records) + 2
