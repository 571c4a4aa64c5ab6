"""The scrub's resumed segment scans (``verify.scrub``, ``store.scan.Carried``) against whole scans: a segment
written in steps as a broker writes it (records appended into a preallocated, zero-filled file: the same size,
a new modification time; a BLANK when it rolls, and the next segment), scrubbed after each step, gives exactly
the verdict and findings of a fresh whole scan — with BODYCRC and ``__CRC32#`` failures before and after the
resume position (past the cap, split across it), a store time going back at it, an implausible one — while
only the new tail is read; bytes changed below the resume position, a truncated segment, a scan that stopped at
damage are scanned whole."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.findings import CAP
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store import digests
from rocketstore_spark.store.digests import PrefixDigests
from rocketstore_spark.store.layout import offset_name
from rocketstore_spark.verify.scrub import ROTATION, check_segment, plan_segments, record_prefix
from rocketstore_spark.verify.store import store_root
from tests.verify.test_scrub import as_json
from tests.verify.test_scrub_resume import built, grow, messages, scrub

SEG = 1 << 16
T0 = 1_795_000_000_000


def written(n: int, *, bad_body=(), bad_props=(), times=None) -> tuple[SegmentWriter, list[int]]:
    """``n`` 5.x records (``__CRC32#`` on) in segments of SEG bytes: (writer, each record's physical offset).
    ``bad_body``: records whose BODYCRC is wrong; ``bad_props``: records whose FLAG is flipped after encoding
    (their ``__CRC32#`` fails); ``times``: index -> store time (else T0 + 10 ms a record)."""
    w = SegmentWriter(SEG)
    offsets = []
    for k in range(n):
        ts = (times or {}).get(k, T0 + 10 * k)
        offsets.append(w.append(Message(topic=f"T{k % 3}", body=bytes([k % 251]) * (60 + k % 50), queue_id=k % 2,
                                        store_timestamp=ts, born_timestamp=ts - 3, crc32_property=True,
                                        body_crc=12345 if k in bad_body else None,
                                        properties={"TAGS": "A", "KEYS": f"k{k}"}))[0])
    for k in bad_props:
        base = offsets[k] - offsets[k] % SEG
        w.segments[base][offsets[k] % SEG + 19] ^= 0x01
    return w, offsets


class Broker:
    """A bare CommitLog under ``root`` written as a broker writes it: each segment preallocated (zeros) and
    filled up to a point; the files keep their size and move their modification time."""

    def __init__(self, root: Path, w: SegmentWriter, offsets: list[int]):
        self.root, self.w, self.offsets, self.clock = root, w, offsets, 1_700_000_000_000_000_000
        (root / "commitlog").mkdir(parents=True, exist_ok=True)

    def fill(self, upto: int) -> None:
        """The log holds its first ``upto`` records (a segment left for the next one ends with its BLANK)."""
        end = self.offsets[upto] if upto < len(self.offsets) else self.w.physical_offset
        for base, data in self.w.segments.items():
            if base >= end and base > 0:
                continue
            cut = SEG if end >= base + SEG else end - base
            path = self.root / "commitlog" / offset_name(base)
            now = bytes(data[:cut]) + bytes(SEG - cut)
            if not path.exists() or path.read_bytes() != now:
                path.write_bytes(now)
                self.clock += 1_000_000_000
                os.utime(path, ns=(self.clock, self.clock))

    def path(self, base: int) -> Path:
        return self.root / "commitlog" / offset_name(base)


def scrub_segments(root: Path, state: dict, run: int) -> tuple[dict, dict]:
    """One scrub run's segment part as ``report.scrub`` runs it (plan, scans, prefix digests): (the new state,
    name -> (task, record) of the segments scanned)."""
    layout = discover(str(root))[0]
    prefixes = PrefixDigests()
    plan = plan_segments(layout, store_root(layout), state or None, run, ROTATION, prefixes)
    scanned = {}
    for t in plan.tasks:
        rec = as_json(check_segment(t, run))
        record_prefix(rec, t.path, prefixes)
        scanned[t.name] = (t, rec)
    segments = {name: plan.carried.get(name) or scanned[name][1] for name in plan.order}
    return {"segments": segments, "credit": plan.credit, "rotation": ROTATION}, scanned


def whole(task) -> dict:
    """A fresh whole scan of the task's segment."""
    return as_json(check_segment(SimpleNamespace(**{**vars(task), "resume": None}), 0))


def assert_whole_answer(rec: dict, task) -> None:
    """The record says what a whole scan says: verdict, every finding row in order, and what it carries on (its
    audit state but the clock)."""
    want = whole(task)
    assert rec["verdict"] == want["verdict"]
    assert rec["findings"] == want["findings"]
    assert ("resume" in rec) == ("resume" in want)
    if "resume" in rec:
        got, exp = dict(rec["resume"]), dict(want["resume"])
        got.pop("digest", None)
        assert got.pop("state")[1:] == exp.pop("state")[1:] and got == exp


def steps(root: Path, broker: Broker, points: list[int]) -> list[dict]:
    """Fill up to each point and scrub: each scanned segment's record, checked against a whole scan."""
    state, out = {}, []
    for run, upto in enumerate(points, 1):
        broker.fill(upto)
        state, scanned = scrub_segments(root, state, run)
        for t, rec in scanned.values():
            assert_whole_answer(rec, t)
        out.append({name: rec for name, (_, rec) in scanned.items()})
    return out


def test_a_segment_growing_in_place_is_resumed_and_answers_as_its_whole_scan(tmp_path):
    """Steps at records 70, 140, 170, then the segment full (BLANK) and the next one begun, then grown: BODYCRC
    failures before and after each step (past the cap: 12 + 12 + 3), ``__CRC32#`` failures 15 + 15 split at the
    first step, a store time going back exactly at it, an implausible one in the second segment's new part."""
    w0, offsets0 = written(400)
    per_seg = sum(1 for o in offsets0 if o < SEG)
    bad_body = set(range(2, 70, 6)) | set(range(71, 140, 6)) | {141, 150, 160}
    bad_props = set(range(5, 65, 4)) | set(range(70, 130, 4))
    times = {70: T0 + 10 * 69 - 5000, per_seg + 30: 1000}
    w, offsets = written(400, bad_body=bad_body, bad_props=bad_props, times=times)
    assert len(bad_body) > CAP and len(bad_props) > CAP and per_seg > 180
    broker = Broker(tmp_path / "store", w, offsets)
    first, second = offset_name(0), offset_name(SEG)
    runs = steps(tmp_path / "store", broker, [70, 140, 170, per_seg + 10, per_seg + 40])
    name0, name1 = f"commitlog/{first}", f"commitlog/{second}"
    assert [r[name0]["resumed_from"] for r in runs[:4]] == [None] + [offsets[k] for k in (70, 140, 170)]
    assert runs[3][name1]["resumed_from"] is None                             # new
    assert runs[4][name1]["resumed_from"] == offsets[per_seg + 10] - SEG
    v = runs[2][name0]["verdict"]
    assert v["crc_failures"] == len(bad_body & set(range(170))) and v["properties_crc_failures"] == len(bad_props)
    assert v["stop_reason"] == "zero fill (end of the written log)"
    checks = [f["check"] for f in runs[1][name0]["findings"]]
    assert checks.count("commitlog.time_backwards") == 1 and checks.count("commitlog.body_crc") == CAP + 1
    assert runs[3][name0]["verdict"]["stop_reason"] == "BLANK end-of-file record"
    assert "resume" not in runs[3][name0]                            # followed: it will not grow again
    odd = [f for f in runs[4][name1]["findings"] if f["check"] == "commitlog.time_implausible"]
    assert len(odd) == 1 and "resume" not in runs[4][name1]          # judged against the clock: whole next time


def test_the_last_segment_with_its_blank_and_no_next_one_yet_resumes_when_the_next_appears(tmp_path):
    """A BLANK written and the next segment not yet there (``commitlog.missing_next_segment``), then the next
    segment written: the full segment is resumed at its BLANK (followed now), the finding gone."""
    w, offsets = written(400)
    per_seg = sum(1 for o in offsets if o < SEG)
    broker = Broker(tmp_path / "store", w, offsets)
    broker.fill(per_seg)                                   # the BLANK, the next segment not yet written
    for base in list(w.segments)[1:]:
        broker.path(base).unlink(missing_ok=True)
    state, scanned = scrub_segments(tmp_path / "store", {}, 1)
    rec = scanned[f"commitlog/{offset_name(0)}"][1]
    assert [f["check"] for f in rec["findings"]] == ["commitlog.missing_next_segment"] and "resume" in rec
    broker.fill(per_seg + 5)
    state, scanned = scrub_segments(tmp_path / "store", state, 2)
    t, rec = scanned[f"commitlog/{offset_name(0)}"]
    assert t.reason == "followed" and rec["resumed_from"] == offsets[per_seg - 1] + _size(w, offsets, per_seg - 1)
    assert rec["findings"] == [] and rec["size"] - rec["resumed_from"] < 200
    assert_whole_answer(rec, t)


def _size(w: SegmentWriter, offsets: list[int], k: int) -> int:
    """The size of record ``k`` (its TOTALSIZE)."""
    data = w.segments[offsets[k] - offsets[k] % SEG]
    return int.from_bytes(data[offsets[k] % SEG:offsets[k] % SEG + 4], "big")


def test_bytes_changed_below_the_resume_position_are_scanned_whole(tmp_path):
    """A body byte flipped below where the last scan ended, as the broker appends: the prefix digest differs,
    the segment is scanned whole and finds the BODYCRC failure."""
    w, offsets = written(300)
    broker = Broker(tmp_path / "store", w, offsets)
    broker.fill(80)
    state, _ = scrub_segments(tmp_path / "store", {}, 1)
    w.segments[0][offsets[10] + 120] ^= 0xFF                # a body byte of record 10
    broker.fill(120)
    _, scanned = scrub_segments(tmp_path / "store", state, 2)
    t, rec = scanned[f"commitlog/{offset_name(0)}"]
    assert t.reason == "modified" and t.resume is None and rec["resumed_from"] is None
    assert rec["verdict"]["crc_failures"] == 1 and rec["verdict"]["first_crc_failure"] == offsets[10]
    assert_whole_answer(rec, t)


def test_a_truncated_segment_and_one_that_stopped_at_damage_are_scanned_whole(tmp_path):
    w, offsets = written(300)
    broker = Broker(tmp_path / "store", w, offsets)
    broker.fill(80)
    seg = broker.path(0)
    state, _ = scrub_segments(tmp_path / "store", {}, 1)
    with open(seg, "r+b") as f:                              # cut down (resized): whole
        f.truncate(offsets[60])
    state, scanned = scrub_segments(tmp_path / "store", state, 2)
    t, rec = scanned[f"commitlog/{offset_name(0)}"]
    assert t.reason == "resized" and rec["resumed_from"] is None
    assert_whole_answer(rec, t)
    # damage where the log ends (a half-written record): no resume recorded, the next growth scanned whole
    data = bytearray(bytes(w.segments[0][:offsets[90]]) + bytes(SEG - offsets[90]))
    data[offsets[89] + 4:offsets[89] + 8] = b"\x00\x00\x00\x01"
    seg.write_bytes(bytes(data))
    state, scanned = scrub_segments(tmp_path / "store", state, 3)
    assert "resume" not in scanned[f"commitlog/{offset_name(0)}"][1]
    broker.fill(120)
    _, scanned = scrub_segments(tmp_path / "store", state, 4)
    t, rec = scanned[f"commitlog/{offset_name(0)}"]
    assert rec["resumed_from"] is None
    assert_whole_answer(rec, t)


def test_the_scrub_of_a_store_growing_in_place_resumes_reads_the_tail_once_and_answers_as_the_audit(tmp_path,
                                                                                                     monkeypatch):
    """Through ``scrub_stores`` (the cross-checks resumed too): the last segment, grown in place, is resumed;
    ``bytes_checked`` counts what was read of it; the run's prefix digests read its bytes below the log's end
    once (the plan's, the record's and the cross-checks' digests share them)."""
    from tests.verify.test_scrub_resume import audit, same
    store, w = built(tmp_path)
    state = tmp_path / "state.json"
    scrub(store, state)
    last = offset_name(w.current)
    grow(tmp_path, store, w, messages(60, 3))
    assert offset_name(w.current) == last                   # grown in place
    hashed = []
    real = digests.hash_range

    def counting(h, path, position, length):
        hashed.append((path, position, min(length, os.path.getsize(path) - position)))
        real(h, path, position, length)
    monkeypatch.setattr(digests, "hash_range", counting)
    entry = scrub(store, state)
    s = entry["scrub"]
    checked = {c["segment"]: c for c in s["checked"]}
    assert checked[f"commitlog/{last}"].get("resumed_from", 0) > 0 and s["cross_checks"] == "resumed"
    size = (store / "commitlog" / last).stat().st_size
    assert s["bytes_checked"] == size - checked[f"commitlog/{last}"]["resumed_from"]
    tail = [(at, n) for p, at, n in hashed if p.endswith(f"commitlog/{last}")]
    assert sum(n for _, n in tail) == w.position and len({at for at, _ in tail}) == len(tail)
    same(entry, audit(store))


@pytest.mark.spark
def test_through_spark_the_resumed_scans_answer_as_in_process(spark, tmp_path):
    """The same steps with the scans on executors (``spark.scrub``): the same records."""
    from rocketstore_spark.spark.scrub import scrub as spark_scrub
    w, offsets = written(300, bad_body={5, 75}, times={70: T0})
    stores = {}
    for how in ("here", "spark"):
        root = tmp_path / how
        broker = Broker(root, w, offsets)
        for upto in (70, 120):
            broker.fill(upto)
            layouts = discover(str(root))
            if how == "spark":
                doc = spark_scrub(spark, layouts, str(tmp_path / f"{how}.json")).audit.docs[0]
            else:
                from rocketstore_spark.report.scrub import scrub_stores
                doc = scrub_stores(layouts, str(tmp_path / f"{how}.json")).audit.docs[0]
        stores[how] = doc
        assert doc["scrub"]["checked"][0]["resumed_from"] == offsets[70]
    assert stores["here"]["findings"] == stores["spark"]["findings"]
    assert stores["here"]["scrub"]["bytes_checked"] == stores["spark"]["scrub"]["bytes_checked"]


@settings(max_examples=20, deadline=None)
@given(points=st.lists(st.integers(1, 399), min_size=2, max_size=4, unique=True).map(sorted),
       bad_body=st.sets(st.integers(0, 399), max_size=30), bad_props=st.sets(st.integers(0, 399), max_size=30),
       back=st.sets(st.integers(1, 399), max_size=5))
def test_growth_at_any_points_answers_as_whole_scans(points, bad_body, bad_props, back):
    """Any steps, any BODYCRC and ``__CRC32#`` failures, store times going back anywhere (at a step too): every
    scanned segment's record is the whole scan's, and a segment that could be resumed was."""
    w, offsets = written(400, bad_body=bad_body, bad_props=bad_props, times={k: T0 + 10 * k - 777 for k in back})
    with tempfile.TemporaryDirectory() as tmp:
        runs = steps(Path(tmp), Broker(Path(tmp), w, offsets), points)
    first = f"commitlog/{offset_name(0)}"
    for before, now in zip(runs, runs[1:]):
        if first in now and "resume" in before.get(first, {}):
            assert now[first]["resumed_from"] == before[first]["resume"]["position"]
