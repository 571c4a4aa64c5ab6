"""The scrub's resumed cross-checks (``verify.cross``) against the full audit, on RocketMQ's own stores whose
checkpoint and offsets moved, and on stores from our encoder that grow
as a broker's do: the CommitLog appended (its last segment rewritten with the same bytes first, a new one after),
the ConsumeQueues and IndexFiles the rebuild writes for it (byte-identical to RocketMQ's) written over only
where they differ — old files keep their bytes and times, the files a broker appends to change. After growth
the scrub resumes and answers as the audit does; damage in the new part and in the old part is found, and an
old file changed under the verified point is never trusted (the whole check runs again)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rocketstore_spark.codec import checkpoint, indexfile
from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.report.audit import audit_stores
from rocketstore_spark.report.scrub import scrub_stores
from rocketstore_spark.rocketmq.recovery import QueueFileReads
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.layout import StoreMap, offset_name
from rocketstore_spark.verify import queues
from rocketstore_spark.store.indexes import SlotCounts, read_index_file, store_slot_count
from rocketstore_spark.verify.cross import file_stat
from rocketstore_spark.verify.scrub import load_state
from tests.golden.goldens import BY_ID
from tests.verify.test_scrub import as_json, rows, same_answer
from tests.verify.test_scrub import audit as audit_golden
from tests.verify.test_scrub import scrub as scrub_golden

T0 = 1_795_000_000_000
OPTIONS = {"rocketmqVersion": "5.5.1", "mappedFileSizeConsumeQueue": 20 * 7, "maxHashSlotNum": 4, "maxIndexNum": 17}


def messages(start: int, n: int) -> list[Message]:
    return [Message(topic=("OrderTopic", "TopicTest")[k % 2], body=bytes([k % 251]) * (20 + k % 90), queue_id=k % 3,
                    store_timestamp=T0 + 1000 * k, born_timestamp=T0 + 1000 * k - 5,
                    properties={"TAGS": ("TagA", "TagB")[k % 2], "KEYS": f"order-{k}", "UNIQ_KEY": f"{k:032X}"})
            for k in range(start, start + n)]


def write_changed(path: Path, data: bytes) -> None:
    """As a broker leaves a file: untouched (bytes and time) when it holds these bytes already."""
    if not path.exists() or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def grow(tmp: Path, store: Path, writer: SegmentWriter, new: list[Message], topics=None) -> None:
    """Append ``new`` to the store's CommitLog and write its queues and IndexFiles where they changed (of the
    queues, only those of ``topics`` when given: the others lag)."""
    for m in new:
        writer.append(m)
    writer.appended += new
    for base, data in writer.segments.items():
        write_changed(store / "commitlog" / offset_name(base), bytes(data))
    out = tmp / "rebuilt"
    shutil.rmtree(out, ignore_errors=True)
    rebuild_store(str(store), str(out), options=OPTIONS, resync=True)
    for sub in ("consumequeue", "index"):
        for f in sorted((out / sub).rglob("*")):
            if f.is_file() and (topics is None or sub != "consumequeue" or f.relative_to(out / sub).parts[0] in topics):
                write_changed(store / sub / f.relative_to(out / sub), f.read_bytes())
    shutil.rmtree(out)
    newest = sorted((store / "index").iterdir())[-1]
    last = writer.appended[-1].store_timestamp
    index_ts = int(indexfile.decode_header(newest.read_bytes()[:40])["end_timestamp"])
    (store / "checkpoint").write_bytes(checkpoint.encode(physic_msg_timestamp=last, logics_msg_timestamp=last,
                                                         index_msg_timestamp=index_ts))


def built(tmp: Path) -> tuple[Path, SegmentWriter]:
    store = tmp / "store"
    w = SegmentWriter(4096)
    w.appended = []
    grow(tmp, store, w, messages(0, 60))
    return store, w


def audit(store):
    return audit_stores(discover(str(store)), options=OPTIONS).docs[0]


def scrub(store, state):
    return scrub_stores(discover(str(store)), str(state), options=OPTIONS).audit.docs[0]


def same(got, want):
    assert rows(got["findings"]) == rows(want["findings"])
    assert as_json(got["recovery"]) == as_json(want["recovery"]) and got["at_risk"] == want["at_risk"]


def queue_file(store: Path, topic: str, queue_id: int, k: int) -> Path:
    return sorted((store / "consumequeue" / topic / str(queue_id)).iterdir())[k]


def flip_entry(path: Path, entry: int, keep_time: bool = False) -> None:
    """Add 1 to the size field of entry ``entry`` of a ConsumeQueue file."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[entry * ENTRY_SIZE + 11] ^= 0x01
    path.write_bytes(bytes(data))
    if keep_time:
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


@pytest.mark.parametrize("part_slots", [None, 3])
def test_after_growth_the_scrub_resumes_and_answers_as_the_audit(tmp_path, monkeypatch, part_slots):
    """``part_slots`` 3: queues checked 3 queue offsets at a time, so a resumed check starts inside a part."""
    if part_slots:
        monkeypatch.setattr(queues, "PART_SLOTS", part_slots)
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    first = scrub(store, state)
    assert first["scrub"]["cross_checks"] == "run"
    same(first, audit(store))
    old_queue_files = {p: p.stat().st_mtime_ns for p in (store / "consumequeue").rglob("*") if p.is_file()}
    grow(tmp_path, store, w, messages(60, 25))
    assert any(p.stat().st_mtime_ns == t for p, t in old_queue_files.items())      # the closed files stayed
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    want = audit(store)
    same(entry, want)
    assert not [f for f in want["findings"] if f["check"].startswith(("consumequeue.", "index."))]
    # damage in the new part: an entry the growth wrote
    grow(tmp_path, store, w, messages(85, 20))
    newest = queue_file(store, "OrderTopic", 0, -1)
    flip_entry(newest, (len(newest.read_bytes().rstrip(b"\0")) - 1) // ENTRY_SIZE)     # its last entry: new
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    want = audit(store)
    assert [f["check"] for f in want["findings"] if f["check"].startswith("consumequeue.")] == \
        ["consumequeue.entry_mismatch"]
    same(entry, want)
    # the queue with a finding is not resumed from: the next run checks whole
    grow(tmp_path, store, w, messages(105, 5))
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "run" and "had findings" in entry["scrub"]["cross_checks_whole_because"]
    same(entry, audit(store))


def test_an_old_queue_file_changed_under_the_verified_point_is_checked_whole(tmp_path):
    """The mutation test: a closed ConsumeQueue file (its entries all below the verified point) changed in
    place. Trusting the state would miss it; the scrub sees its time moved and checks whole."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    flip_entry(queue_file(store, "TopicTest", 1, 0), 2)
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "run"
    assert "below its queue's last checked entry, changed" in entry["scrub"]["cross_checks_whole_because"]
    want = audit(store)
    assert "consumequeue.entry_mismatch" in {f["check"] for f in want["findings"]}
    same(entry, want)


def test_the_active_queue_file_and_the_log_below_the_verified_point_are_digested(tmp_path):
    """The file a broker appends to changes time every run: its bytes up to the last checked entry are compared
    (an entry there changed is found); the CommitLog segment that holds the last run's end likewise."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 4))
    active = queue_file(store, "OrderTopic", 0, -1)
    flip_entry(active, 0)
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "run", entry["scrub"]
    assert "up to the queue's last checked one changed" in entry["scrub"]["cross_checks_whole_because"]
    same(entry, audit(store))


def test_an_old_index_file_changed_in_place_is_checked_again(tmp_path):
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    old = sorted((store / "index").iterdir())[0]
    data = bytearray(old.read_bytes())
    g = indexfile.Geometry(OPTIONS["maxHashSlotNum"], OPTIONS["maxIndexNum"])
    data[g.entries_start + indexfile.ENTRY_SIZE * 2 + 7] ^= 0x01          # entry 2's physical offset
    old.write_bytes(bytes(data))
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed"
    want = audit(store)
    assert "index.wrong_entry" in {f["check"] for f in want["findings"]}
    same(entry, want)


def test_queues_that_lag_behind_the_growth_are_found_and_the_recovery_report_is_the_audits(tmp_path):
    """The log grown, one topic's queues written and the other's not: the lagging queues are findings in the
    new part, and the recovery report (which reads again only the records above the last run's end for what
    a restart leaves unreachable) says what the audit's says."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 40), topics={"OrderTopic"})
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed"
    want = audit(store)
    assert "consumequeue.lagging" in {f["check"] for f in want["findings"]}
    assert want["recovery"]["unreachable"]
    same(entry, want)


@pytest.mark.parametrize("gid", ["5.5.1/clean", "5.5.1/crash", "5.5.1/index-deleted", "4.9.8/corrupt-body"])
def test_on_rocketmq_stores_whose_checkpoint_moved_the_scrub_resumes_and_answers_as_the_audit(gid, tmp_path):
    """RocketMQ's own stores (a crash, IndexFiles deleted, BODYCRC damage among them): a file changed but no
    record written (the checkpoint flushed again, the offsets committed again): resumed, the audit's answer."""
    store = tmp_path / "store"
    shutil.copytree(BY_ID[gid].store, store)
    state = tmp_path / "state.json"
    first = scrub_golden(store, state)
    assert first["scrub"]["cross_checks"] == "run"
    for f in [store / "checkpoint", *store.rglob("consumerOffset.json")]:
        if f.exists():
            os.utime(f)
    entry = scrub_golden(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    same_answer(entry, audit_golden(store))


def test_an_old_queue_file_changed_in_place_with_its_time_put_back_is_not_trusted(tmp_path):
    """The trust in a closed queue file is its size, times and inode: rewritten in place with its modification
    time set back as it was, its change time (which no call sets back) still moved — checked whole."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    flip_entry(queue_file(store, "TopicTest", 1, 0), 2, keep_time=True)
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "run", entry["scrub"]
    assert "below its queue's last checked entry, changed" in entry["scrub"]["cross_checks_whole_because"]
    want = audit(store)
    assert "consumequeue.entry_mismatch" in {f["check"] for f in want["findings"]}
    same(entry, want)


def test_an_old_index_file_changed_below_its_count_with_its_time_put_back_is_checked_again(tmp_path):
    """An IndexFile that is neither the newest nor was is trusted by its size, times, inode and header (no
    bytes read): one changed below its entry count, its header and modification time kept, is checked again
    (its change time moved) and the finding is the audit's."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    old = sorted((store / "index").iterdir())[0]
    st = old.stat()
    data = bytearray(old.read_bytes())
    g = indexfile.Geometry(OPTIONS["maxHashSlotNum"], OPTIONS["maxIndexNum"])
    count = int(indexfile.decode_header(bytes(data[:40]))["index_count"])
    assert count > 3
    data[g.entries_start + indexfile.ENTRY_SIZE * 2 + 7] ^= 0x01          # entry 2's physical offset
    old.write_bytes(bytes(data))
    os.utime(old, ns=(st.st_atime_ns, st.st_mtime_ns))
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed"
    want = audit(store)
    assert "index.wrong_entry" in {f["check"] for f in want["findings"]}
    same(entry, want)


def test_a_closed_queue_file_the_recovery_report_knows_changed_in_place_with_its_time_put_back_is_read_again(
        tmp_path):
    """The recovery report takes a closed queue file's summary from the state (``QueueFileReads``) when its size,
    times and inode are the recorded ones. One made invalid in place (an entry's size zeroed: the queue's
    recovery ends there) with its modification time put back still shows by its change time: read again, and
    the report is the audit's."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    before = scrub(store, state)
    closed = queue_file(store, "TopicTest", 1, 0)
    assert closed != queue_file(store, "TopicTest", 1, -1)
    cross = load_state(str(state))["stores"][os.path.abspath(str(store))]["cross"]
    assert str(closed.relative_to(store)) in cross["queue_files"]        # the summary the next run would trust
    for key, q in cross["resume"]["queues"].items():       # the queue checks' summaries: of closed files only
        assert q["resume"]["summaries"] and set(q["resume"]["summaries"]) <= set(q["resume"]["counts"]), key
    st = closed.stat()
    data = bytearray(closed.read_bytes())
    data[2 * ENTRY_SIZE + 8:2 * ENTRY_SIZE + 12] = bytes(4)       # entry 2's size: 0, an invalid entry
    closed.write_bytes(bytes(data))
    os.utime(closed, ns=(st.st_atime_ns, st.st_mtime_ns))
    entry = scrub(store, state)
    want = audit(store)
    ends = {(q["topic"], q["queue_id"]): q["max_offset_on_disk"] for q in want["recovery"]["consumequeues"]}
    was = {(q["topic"], q["queue_id"]): q["max_offset_on_disk"] for q in before["recovery"]["consumequeues"]}
    assert ends[("TopicTest", 1)] == 2 != was[("TopicTest", 1)]
    same(entry, want)


def test_an_older_index_file_rewritten_in_place_with_its_time_put_back_has_its_slot_count_inferred_again(tmp_path):
    """The settings take an older IndexFile's inferred slot count from the state (``SlotCounts``) while its size,
    times and inode are the recorded ones: one whose entries were overwritten in place (they fit no slot count
    now) with its modification time put back is inferred again."""
    store, _ = built(tmp_path)
    paths = [str(p) for p in sorted((store / "index").iterdir())]
    assert len(paths) > 2
    first = SlotCounts(identity=file_stat)
    assert store_slot_count(paths, first) == OPTIONS["maxHashSlotNum"]
    assert set(first.found) == set(paths[:-1])                 # the newest is inferred every run
    old = Path(paths[0])
    st = old.stat()
    data = bytearray(old.read_bytes())
    data[indexfile.HEADER_SIZE:] = b"\xff" * (len(data) - indexfile.HEADER_SIZE)
    old.write_bytes(bytes(data))
    os.utime(old, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = SlotCounts(first.found, identity=file_stat)
    assert again.slots(str(old), closed=True) is None is read_index_file(str(old)).geometry
    assert again.slots(paths[1], closed=True) == OPTIONS["maxHashSlotNum"]


def test_the_recovery_report_takes_the_scrubs_scans_of_the_segments_it_scanned(tmp_path, monkeypatch):
    """The recovery report's walk of the last segments takes the scans the scrub just made of them (BODYCRC
    checked, as RocketMQ's recovery checks by default) rather than scanning them again: after growth with a body
    damaged in the new part (a restart stops there), it scans none and says what the audit's says."""
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    last = sorted((store / "commitlog").iterdir())[-1]
    data = bytearray(last.read_bytes())
    body = data.rfind(bytes([84]) * 104)                    # message 84's body, the last one appended
    assert body > 0
    data[body] ^= 0xFF
    last.write_bytes(bytes(data))
    from rocketstore_spark.rocketmq import recovery
    scanned = []
    real = recovery.scan_segment
    monkeypatch.setattr(recovery, "scan_segment", lambda path, *a, **k: scanned.append(path) or real(path, *a, **k))
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    assert str(last.relative_to(store)) in {c["segment"] for c in entry["scrub"]["checked"]}
    assert scanned == []
    monkeypatch.setattr(recovery, "scan_segment", real)
    want = audit(store)
    assert "commitlog.body_crc" in {f["check"] for f in want["findings"]}
    assert want["recovery"]["stop"]["reason"].startswith("BODYCRC") and want["recovery"]["commitlog_bytes_cut"]
    same(entry, want)


@pytest.mark.parametrize("case", ["clean", "damaged", "tags", "invalid", "lagging", "gap"])
def test_the_queues_checked_on_in_one_pass_are_what_check_queue_gives_each(tmp_path, monkeypatch, case):
    """The resumed queue checks run in one pass over every queue (``verify.queues.check_resumed_queues``): each
    verdict — counts, bounds, findings, the resume the next run starts from — is the one ``check_queue`` gives
    the queue on its own, after a clean growth (every queue through the pass), a new entry damaged, queues
    lagging, a new entry's size, tagsCode, or validity (an invalid entry before the last valid one) changed, and
    a QUEUEOFFSET gap in the new records (those queues left to ``check_queue``)."""
    from rocketstore_spark.verify import store as verify_store_module
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    if case == "gap":
        w.queue_offsets[("OrderTopic", 0)] += 1         # the next record of that queue skips a QUEUEOFFSET
    grow(tmp_path, store, w, messages(60, 25), topics={"OrderTopic"} if case == "lagging" else None)
    if case in ("damaged", "tags", "invalid"):
        # the newest file of a queue holding two entries or more (both new: 25 records over 6 queues)
        newest, last = next((f, n) for f in (queue_file(store, t, q, -1) for t in ("OrderTopic", "TopicTest")
                                             for q in range(3))
                            if (n := (len(f.read_bytes().rstrip(b"\0")) - 1) // ENTRY_SIZE) >= 1)
        if case == "damaged":
            flip_entry(newest, last)                                    # its size
        else:
            data = bytearray(newest.read_bytes())
            if case == "tags":
                data[last * ENTRY_SIZE + 19] ^= 0x01
            else:
                data[(last - 1) * ENTRY_SIZE + 8:(last - 1) * ENTRY_SIZE + 12] = bytes(4)
            newest.write_bytes(bytes(data))
    real, alone = verify_store_module.check_resumed_queues, queues.check_queue
    compared, left = [], []
    monkeypatch.setattr(queues, "check_queue", lambda topic, queue_id, *a: left.append((topic, queue_id)) or
                        alone(topic, queue_id, *a))

    def both(given, root, log, file_size, locate, expired_min_is_max=True, consume_queue_ext=False,
             queue_reads=None):
        got = real(given, root, log, file_size, locate, expired_min_is_max, consume_queue_ext, queue_reads)
        monkeypatch.setattr(queues, "check_queue", alone)
        # as when the recovery report beside it summarized every queue's last file first (only the new entries
        # are read here then)
        first = QueueFileReads()
        for _, _, queue_dir, _, _ in given:
            files = [p for p, _ in StoreMap.queue_files(queue_dir)] if queue_dir is not None else []
            if files:
                first.summary(files[-1])
        reread, read_held = [], queues.read_held
        monkeypatch.setattr(queues, "read_held", lambda path: reread.append(path) or read_held(path))
        after_report = real(given, root, log, file_size, locate, expired_min_is_max, consume_queue_ext, first)
        monkeypatch.setattr(queues, "read_held", read_held)
        summarized = set(first._last_files)
        assert summarized and not summarized & set(reread)          # the report's summary taken, not read again
        for (topic, queue_id, queue_dir, records, resume), v, r in zip(given, got, after_report):
            want = queues.check_queue(topic, queue_id, queue_dir, root, records, log, file_size, locate,
                                      expired_min_is_max, consume_queue_ext, resume)
            assert as_json(v.__dict__) == as_json(want.__dict__), (topic, queue_id)
            assert as_json(r.__dict__) == as_json(want.__dict__), (topic, queue_id)
            compared.append(bool(want.findings))
        return got
    monkeypatch.setattr(verify_store_module, "check_resumed_queues", both)
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed", entry["scrub"]
    assert len(compared) == 6 and (any(compared) == (case != "clean")), compared
    # the pass answered for the queues without findings; check_queue for the others (never a clean one)
    assert len(left) == sum(compared), (left, compared)
    same(entry, audit(store))


def test_a_scrub_run_lists_each_queue_directory_once(tmp_path, monkeypatch):
    """The queue check, the state it records, the refusal, the recovery report and the settings each want every
    queue directory's files: a run lists each once (``store.layout.listed_once``); outside a run a listing is
    made afresh (a file added since shows)."""
    from rocketstore_spark.store import layout as store_layout
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    grow(tmp_path, store, w, messages(60, 25))
    listed = []
    real = store_layout.StoreMap._queue_files
    monkeypatch.setattr(store_layout.StoreMap, "_queue_files", staticmethod(lambda d: listed.append(str(d)) or real(d)))
    entry = scrub(store, state)
    assert entry["scrub"]["cross_checks"] == "resumed"
    assert sorted(listed) == sorted({str(d) for d in (store / "consumequeue").glob("*/*")}), listed
    same(entry, audit(store))
    queue_dir = store / "consumequeue" / "TopicTest" / "1"
    before = store_layout.StoreMap.queue_files(queue_dir)
    (queue_dir / offset_name(10 ** 9)).write_bytes(bytes(OPTIONS["mappedFileSizeConsumeQueue"]))
    assert len(store_layout.StoreMap.queue_files(queue_dir)) == len(before) + 1
