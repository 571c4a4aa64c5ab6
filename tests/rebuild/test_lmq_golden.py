"""LMQ multi-dispatch against RocketMQ 5.5.1's own stores (tests/golden/lmq-5.5.1, written with enableLmq +
enableMultiDispatch by RocketMQ's DefaultMessageStore; manifests are RocketMQ's view after its own rebuild and
restart): the rebuild writes every %LMQ% ConsumeQueue file byte-identical to RocketMQ's, a queue name read from
the data never becomes a path unvalidated, and no work is refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec.lmq import SKIP_COUNT, SKIP_OFFSET, SKIP_SLASH, lmq_entries
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.store.engines import Work
from rocketstore_spark.verify.store import verify_store

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lmq-5.5.1"
SCENARIOS = ("clean", "crash", "torn", "cut")


def _units(out: Path, topic: str, queue_id: int, lo: int, hi: int, file_size: int) -> list:
    rows = []
    for off in range(lo, hi):
        byte = off * 20
        path = out / "consumequeue" / topic / str(queue_id) / f"{byte // file_size * file_size:020d}"
        raw = path.read_bytes()[byte % file_size:byte % file_size + 20]
        rows.append([off, int.from_bytes(raw[:8], "big", signed=True), int.from_bytes(raw[8:12], "big", signed=True),
                     int.from_bytes(raw[12:], "big", signed=True)])
    return rows


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rebuilt_lmq_queues_are_rocketmqs(scenario, tmp_path):
    manifest = json.loads((GOLDEN / scenario / "manifest.json").read_text())
    out = tmp_path / "out"
    result = rebuild_store(str(GOLDEN / scenario / "store"), out)
    # RocketMQ's own rebuild (consumequeue/ deleted, restart): every %LMQ% file byte for byte, and no other
    expected = manifest["rebuild"]["lmq_queue_files"]
    assert expected
    ours = {str(p.relative_to(out)): p.read_bytes() for p in (out / "consumequeue").glob("%LMQ%*/*/*")}
    assert set(ours) == set(expected)
    for rel, hexed in expected.items():
        assert ours[rel] == bytes.fromhex(hexed), rel
    # every queue's units, LMQ or not, as RocketMQ's ConsumeQueue and getMessage give them
    size = manifest["geometry"]["mapped_file_size_consume_queue"]
    for q in manifest["rebuild"]["queues"]:
        units = _units(out, q["topic"], q["queue_id"], q["min_offset"], q["max_offset"], size)
        assert units == q["units"], (q["topic"], q["queue_id"])
        assert [u[1] for u in units] == [m[0] for m in q["messages"]]
    # the names with '/' RocketMQ passes over: a finding with file and byte, never a directory
    skipped = [f for f in result.findings if f.check == "rebuild.lmq_not_dispatched"]
    assert skipped and all(f.file and "commitlog" in f.file and f.file_position is not None for f in skipped)
    assert all(int(Path(f.file).name) + f.file_position == f.physical_offset for f in skipped)
    assert not any("bad" in p.name or "escape" in p.name for p in out.rglob("*"))


@pytest.mark.parametrize("scenario", ("clean", "crash"))
def test_verify_checks_the_lmq_queues_and_their_lag(scenario):
    """Every queue, %LMQ% ones included, checked against its records with nothing to report, its bounds those
    RocketMQ's restart gives; the lag follows lmqConsumerOffset.json as the broker's LmqConsumerOffsetManager
    decodes it."""
    manifest = json.loads((GOLDEN / scenario / "manifest.json").read_text())
    verdict = verify_store(str(GOLDEN / scenario / "store"))
    assert not [f for q in verdict.queues for f in q.findings]
    ours = {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in verdict.queues}
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in manifest["recovery"]["queues"]}
    assert ours == theirs and any(t.startswith("%LMQ%") for t, _ in ours)
    lags = {(x.topic, x.consumer_group, x.queue_id): x for x in verdict.offsets.lags}
    assert {k: x.consumer_offset for k, x in lags.items()} == {(t, g, q): o for t, g, q, o in manifest["consumer_offsets"]}
    for (topic, _, queue_id), x in lags.items():
        assert x.max_offset == theirs[(topic, queue_id)][1]
        assert x.status == ("beyond_max" if x.consumer_offset > x.max_offset else "in_range")
    assert [f.check for f in verdict.findings if f.check.startswith("offsets.")] == ["offsets.beyond_max"]


def test_rebuild_after_the_cut_holds_what_rocketmqs_recovery_keeps(tmp_path):
    """cut: a record's body zeroed, so RocketMQ's recovery cuts the log there and truncates every queue, %LMQ%
    ones too; the rebuild (the release's restart dispatch) holds exactly the units its restart serves."""
    manifest = json.loads((GOLDEN / "cut" / "manifest.json").read_text())
    recovered = manifest["recovery"]
    out = tmp_path / "out"
    rebuild_store(str(GOLDEN / "cut" / "store"), out)
    size = manifest["geometry"]["mapped_file_size_consume_queue"]
    assert any(f.startswith("consumequeue/%LMQ%") for f in recovered["files_deleted"])     # the cut reached them
    for q in recovered["queues"]:
        assert _units(out, q["topic"], q["queue_id"], q["min_offset"], q["max_offset"], size) == q["units"]


def test_verify_reports_lmq_entries_the_records_no_longer_name():
    """torn: zeroed bytes in a record's properties; RocketMQ's rebuild no longer dispatches it to the %LMQ% queues
    it named (the manifest's rebuild view), so the store's entries from there on are findings with file and byte."""
    verdict = verify_store(str(GOLDEN / "torn" / "store"))
    lmq = [f for q in verdict.queues if q.topic.startswith("%LMQ%") for f in q.findings]
    assert lmq and all(f.file and f.file_position is not None for f in lmq)
    assert {f.check for f in lmq} >= {"consumequeue.entry_mismatch"}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_recovery_report_follows_the_lmq_queues(scenario):
    """The predicted restart leaves every queue, %LMQ% ones included, with the bounds RocketMQ's own restart gives;
    on the cut store the lost messages of each %LMQ% queue are those RocketMQ's crash view holds past the cut
    record (the damaged record itself is not a valid message, as in its topic queue)."""
    manifest = json.loads((GOLDEN / scenario / "manifest.json").read_text())
    doc, report = recovery_report(str(GOLDEN / scenario / "store"))
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in manifest["recovery"]["queues"]}
    assert {(q.topic, q.queue_id): (q.final_min_offset, q.final_max_offset) for q in report.queues} == theirs
    lost = {(q["topic"], q["queue_id"]): q for q in doc["lost"]["queues"] if q["topic"].startswith("%LMQ%")}
    if scenario != "cut":
        assert not lost
        return
    cut = manifest["recovery"]["commitlog_max_offset"]
    crash = json.loads((GOLDEN / "crash" / "manifest.json").read_text())["recovery"]["queues"]
    expected = {}
    for q in crash:
        past = [u for u in q["units"] if u[1] > cut]
        if q["topic"].startswith("%LMQ%") and past:
            expected[(q["topic"], q["queue_id"])] = (len(past), past[0][0], past[-1][0])
    assert expected and {k: (q["messages"], q["first_queue_offset"], q["last_queue_offset"])
                         for k, q in lost.items()} == expected


def test_nothing_is_refused_for_lmq():
    """Every work follows the %LMQ% queues as RocketMQ dispatches them (the Spark jobs: tests/jobs/test_lmq_jobs.py
    and test_verify_job.py; the repair: tests/recovery/test_repair_lmq.py)."""
    layout = discover(str(GOLDEN / "clean" / "store"))[0]
    for work in Work:
        layout.refuse(work)


def test_a_clean_lmq_store_verifies_with_the_engine_a_warning_that_alone_is_no_problem():
    """LMQ is an engine we read (its queues checked as RocketMQ dispatches them): a store.partial_engine warning
    naming what is still refused, which alone is no problem. On RocketMQ's own clean store the one problem verify
    reports is the offset the generator committed past a queue's end (manifest: consumer_offsets_written)."""
    from rocketstore_spark.findings import any_problem
    from tests.cli.helpers import run
    manifest = json.loads((GOLDEN / "clean" / "manifest.json").read_text())
    layout = discover(str(GOLDEN / "clean" / "store"))[0]
    engines = [f for f in layout.findings if f.check.endswith("_engine")]
    assert [f.check for f in engines] == ["store.partial_engine"] and "so refused: nothing" in engines[0].message
    assert not any_problem(engines)
    result = run("verify", GOLDEN / "clean" / "store", "--json")
    problems = [(f["check"], f["topic"], f["queue_offset"]) for store in json.loads(result.stdout)["stores"] for f in store["findings"]
                if f["severity"] in ("error", "warning") and f["check"] != "store.partial_engine"]
    beyond = [o for o in manifest["consumer_offsets_written"] if o.endswith("=9999")]
    assert problems == [("offsets.beyond_max", "%LMQ%gamma", 9999)] and beyond == ["%LMQ%gamma@%LMQ%beyond/0=9999"]
    assert result.exit_code == 3

def _window(records: list[tuple[bytes, bytes]]):
    """A buffer of (topic, properties) records and their spans."""
    buf, tp, tl, pp, pl = b"", [], [], [], []
    for topic, props in records:
        tp.append(len(buf)); tl.append(len(topic)); buf += topic
        pp.append(len(buf)); pl.append(len(props)); buf += props
    a = lambda v: np.array(v, np.int64)        # noqa: E731
    return np.frombuffer(buf, np.uint8), a(pp), a(pl), a(tp), a(tl)


def _props(dispatch: bytes, offsets: bytes) -> bytes:
    return b"INNER_MULTI_DISPATCH\x01" + dispatch + b"\x02INNER_MULTI_QUEUE_OFFSET\x01" + offsets + b"\x02"


def test_kernel_follows_multi_dispatch_lmq_queue():
    buf, pp, pl, tp, tl = _window([
        (b"T", _props(b"%LMQ%a,%LMQ%b,", b"3,4")),           # trailing empty piece dropped, as String.split
        (b"T", _props(b"%LMQ%a,%LMQ%b", b"3")),              # counts differ: nothing
        (b"T", _props(b"%LMQ%a,x/y,%LMQ%c", b"5,6,7")),      # '/': passed over, the rest dispatched
        (b"T", _props(b"%LMQ%a,%LMQ%b,%LMQ%c", b"8,zz,9")),   # Long.parseLong throws: no name from there on
        (b"%RETRY%g", _props(b"%LMQ%a", b"1")),               # retry topics are not multi-dispatched
        (b"T", _props(b"  ", b"1")),                          # blank
        (b"T", _props(b"plain", b"2")),                       # not %LMQ%: the record's own queue id
    ])
    qid = np.array([7] * 7, np.int32)
    rows, npos, nlen, offs, qids, bad, codes = lmq_entries(buf, pp, pl, tp, tl, qid, np.ones(7, np.bool_), True)
    names = [bytes(buf[p:p + n]).decode() for p, n in zip(npos, nlen)]
    assert list(zip(rows.tolist(), names, offs.tolist(), qids.tolist())) == [
        (0, "%LMQ%a", 3, 0), (0, "%LMQ%b", 4, 0), (2, "%LMQ%a", 5, 0), (2, "%LMQ%c", 7, 0), (3, "%LMQ%a", 8, 0),
        (6, "plain", 2, 7)]
    assert list(zip(bad.tolist(), codes.tolist())) == [(1, SKIP_COUNT), (2, SKIP_SLASH), (3, SKIP_OFFSET)]
    # not eligible (no entry of its own): nothing
    assert len(lmq_entries(buf, pp, pl, tp, tl, qid, np.zeros(7, np.bool_), True)[0]) == 0
