"""verify_store on every golden store: each fault planted by regenerate.py's surgery is reported with the
right check id and position, nothing else above info level is, and queue bounds and consumer-offset
statuses agree with what RocketMQ's own store code computed (the manifests)."""
from __future__ import annotations

import pytest

from rocketstore_spark.checks import Severity
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import GOLDENS, Golden, committed_offsets


@pytest.fixture(scope="module")
def verdicts():
    return {}


def verdict_of(golden: Golden, cache: dict):
    if golden.id not in cache:
        cache[golden.id] = verify_store(str(golden.store))
    return cache[golden.id]


def planted(golden: Golden) -> tuple[set, list]:
    """(findings that must be there: (check, file, file_position, queue_offset or None), predicates that
    allow consequences of the same faults) from the manifest's surgery and RocketMQ's own view."""
    m = golden.manifest
    must, allowed = set(), []
    log_max = m["commitlog"]["max_offset"]          # RocketMQ's CommitLog end after its own recovery
    if m["abort_present"]:
        must.add(("store.abort_present", "abort", None, None))
    for s in m["surgery"]:
        action, file = s["action"], s["file"]
        if action == "flip_body_byte":
            record = next(r for r in m["messages"]
                          if r["physical_offset"] <= s["physical_offset"] < r["physical_offset"] + r["total_size"])
            must.add(("commitlog.body_crc", file, record["file_position"], None))
        elif action == "zero_range":
            seg = next(x for x in m["segments"] if f"commitlog/{x['file']}" == file)
            assert seg["stop_reason"] not in ("blank", "zero")
            must.add(("commitlog.length_mismatch", file, seg["valid_end"], None))
            # the torn record's queue entry and index keys point past RocketMQ's end of the log, and a
            # checkpoint that had flushed it is ahead of what is left
            allowed.append(lambda f: f.check in ("consumequeue.entry_past_end", "index.wrong_entry")
                           and f.physical_offset >= log_max)
            newest = max(r["store_timestamp"] for r in m["messages"])
            for field, position in (("physicMsgTimestamp", 0), ("logicsMsgTimestamp", 8)):
                if m["checkpoint"][field] > newest:
                    must.add(("checkpoint.ahead_of_log", "checkpoint", position, None))
        elif action == "zero_page":
            # the first record the page touched fails (RocketMQ's walk ends there); reading resumes at the first
            # intact record after the page (RocketMQ's decoding of the parent store, whose bytes those are)
            seg = next(x for x in m["segments"] if f"commitlog/{x['file']}" == file)
            must.add(("commitlog.length_mismatch", file, seg["valid_end"], None))
            page_end = s["physical_offset"] + s["length"]
            resumed = min(r["physical_offset"] for r in golden.records_on_disk if r["physical_offset"] >= page_end)
            must.add(("commitlog.resynchronised", file, resumed - seg["base_offset"], None))
            # consequences: QUEUEOFFSETs missing after the page, and queue entries and index keys for records
            # past RocketMQ's end of the log (lost in the page, or now at other queue positions)
            allowed.append(lambda f, page_end=page_end: f.check == "commitlog.queue_offset_gap"
                           and f.physical_offset >= page_end)
            allowed.append(lambda f: f.check in ("consumequeue.entry_mismatch", "consumequeue.extra_entry",
                                                 "consumequeue.entry_past_end", "index.wrong_entry")
                           and f.physical_offset >= log_max)
        elif action in ("zero_cq_entries", "delete_file") and file.startswith("consumequeue/"):
            name = file.rsplit("/", 1)[1]
            queue_offset = (int(name) + s.get("file_position", 0)) // 20
            must.add(("consumequeue.lagging", file, s.get("file_position", 0), queue_offset))
        elif action == "delete_file" and file.startswith("index/"):
            must.add(("index.lagging", None, None, None))
            allowed.append(lambda f: f.check == "checkpoint.index_ahead")
        elif action == "truncate_file" and file.startswith("index/"):
            must.add(("index.bad_header", file, 0, None))
            # entries lost with the cut half: chains through them and the keys they held
            allowed.append(lambda f, file=file: f.file == file and f.check in ("index.unreachable_entries",
                                                                                "index.missing_key"))
        else:
            raise AssertionError(f"no expectation for surgery {s}")
    return must, allowed


def key(f, with_file=True):
    return (f.check, f.file if with_file else None, f.file_position if with_file else None,
            f.queue_offset if f.check == "consumequeue.lagging" else None)


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_planted_faults_reported_and_nothing_else(golden: Golden, verdicts):
    v = verdict_of(golden, verdicts)
    must, allowed = planted(golden)
    found = [f for f in v.findings if f.severity != Severity.INFO and not f.check.startswith("offsets.")]
    keys = {key(f) for f in found} | {key(f, False) for f in found}
    assert must <= keys, f"missing: {must - keys}"
    unexpected = [f.render() for f in found if key(f) not in must and key(f, False) not in must
                  and not any(a(f) for a in allowed)]
    assert not unexpected


@pytest.mark.parametrize("golden", [g for g in GOLDENS if g.scenario in ("clean", "propcrc")],
                         ids=lambda g: g.id)
def test_clean_stores_report_nothing_above_info(golden: Golden, verdicts):
    v = verdict_of(golden, verdicts)
    assert [f.render() for f in v.findings if f.severity != Severity.INFO] == []
    assert {f.check for f in v.findings} <= {"store.lock_present"}


LOADED_AS_WRITTEN = ("clean", "consumer-offsets", "index-deleted", "index-truncated", "propcrc")


@pytest.mark.parametrize("golden", [g for g in GOLDENS if g.scenario in LOADED_AS_WRITTEN], ids=lambda g: g.id)
def test_queue_bounds_are_rocketmqs(golden: Golden, verdicts):
    """Stores shut down cleanly whose queues were not cut: RocketMQ's min and max offsets after it loaded
    them. (Queues the manifest lists at (0, 0) without any file are ones RocketMQ's schedule service only
    looked up.)"""
    v = verdict_of(golden, verdicts)
    ours = {(q.topic, q.queue_id): (q.min_offset, q.max_offset) for q in v.queues}
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in golden.manifest["queues"]}
    assert {k: b for k, b in theirs.items() if k in ours or b != (0, 0)} == ours


@pytest.mark.parametrize("golden", [g for g in GOLDENS if g.scenario == "consumer-offsets"], ids=lambda g: g.id)
def test_consumer_offset_statuses_follow_rocketmqs_bounds(golden: Golden, verdicts):
    v = verdict_of(golden, verdicts)
    committed = committed_offsets(golden)
    bounds = {(t, q): b for (_, t, q), (_, b, _) in committed.items()}
    expected = {k: status for k, (_, _, status) in committed.items()}
    got = {(x.consumer_group, x.topic, x.queue_id): x.status for x in v.offsets.lags}
    assert got == expected
    checks = {(f.check, f.evidence["consumer_group"], f.topic, f.queue_id) for f in v.findings
              if f.check.startswith("offsets.")}
    assert checks == {(f"offsets.{s}", g, t, q) for (g, t, q), s in expected.items()
                      if s in ("below_min", "beyond_max", "unknown_queue")}
    for x in v.offsets.lags:
        if x.status in ("in_range", "below_min"):
            lo, hi = bounds[(x.topic, x.queue_id)]
            assert x.lag == hi - max(lo, x.consumer_offset) > 0
            assert x.expired == max(0, lo - x.consumer_offset)
            # the oldest unconsumed message is the record RocketMQ's queue holds at that offset
            start = max(lo, x.consumer_offset)
            record = next(r for r in golden.messages if r["topic"] == x.topic and r["queue_id"] == x.queue_id
                          and r["queue_offset"] == start)
            assert x.oldest_unconsumed_timestamp == record["store_timestamp"]
            assert x.lag_ms >= 0
