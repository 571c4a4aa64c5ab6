"""The recovery report against RocketMQ's own recovery of every golden store (manifest key ``recovery``: real
recovery on a copy — load(), start(), dispatch caught up, shutdown() — and ``queues``, the queue bounds
afterwards): where the CommitLog ends, which files go, every queue's max offset, what is lost."""
from __future__ import annotations

from collections import Counter

import pytest

from rocketstore_spark.recovery.report import recovery_report
from tests.golden.goldens import BY_ID, Golden, all_goldens, fastjson_loads

GOLDENS = all_goldens()


@pytest.fixture(scope="module")
def reports():
    return {}


def report_of(g: Golden, cache: dict) -> dict:
    if g.id not in cache:
        cache[g.id] = recovery_report(str(g.store))[0]
    return cache[g.id]


@pytest.mark.parametrize("golden", [g for g in GOLDENS if g.version == "5.3.3"],
                         ids=[g.id for g in GOLDENS if g.version == "5.3.3"])
def test_the_5_3_2_family_given_its_version_recovers_as_rocketmq_5_3_3(golden: Golden):
    doc, rec = recovery_report(str(golden.store), options={"rocketmqVersion": "5.3.3"})[0], golden.manifest["recovery"]
    assert doc["rocketmq_version"] == "5.3.2-5.3.x"
    assert doc["process_offset"] == rec["commitlog_max_offset"]
    assert deleted_files(doc) == rocketmq_deleted_files(rec)


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_the_cut_and_the_deleted_files_are_rocketmqs(golden: Golden, reports):
    doc, rec = report_of(golden, reports), golden.manifest["recovery"]
    # the family the store's files show: a 5.x store before 5.4.0 cannot be told from 5.0-5.3.1 by its files
    # (test_the_5_3_2_family_given_its_version_recovers_as_rocketmq_5_3_3 gives the version)
    assert doc["rocketmq_version"] == {"4.9.8": "4.9.x", "5.1.4": "5.0-5.3.1", "5.3.3": "5.0-5.3.1",
                                       "5.5.1": "5.5.x"}[golden.version]
    assert doc["shutdown"] == ("abnormal" if golden.manifest["abort_present"] else "normal")
    assert doc["process_offset"] == rec["commitlog_max_offset"]
    assert deleted_files(doc) == rocketmq_deleted_files(rec)


def deleted_files(doc: dict) -> list[str]:
    """The CommitLog, ConsumeQueue and IndexFile files a recovery report says go."""
    return sorted(doc["commitlog_files_deleted"] + doc["index_files_deleted"]
                  + [f for q in doc["consumequeues"] for f in q["files_deleted"]])


def rocketmq_deleted_files(rec: dict) -> list[str]:
    """The CommitLog, ConsumeQueue and IndexFile files RocketMQ's recovery deleted (a ``recover`` result)."""
    return sorted(f for f in rec["files_deleted"] if f.split("/")[0] in ("commitlog", "consumequeue", "index"))


def queue_ends(doc: dict, rocketmq_queues: list[dict]) -> tuple[dict, dict]:
    """(our max offset per queue, RocketMQ's for the same queues and every non-empty one)."""
    ours = {(q["topic"], q["queue_id"]): q["max_offset"] for q in doc["consumequeues"]}
    theirs = {(q["topic"], q["queue_id"]): q["max_offset"] for q in rocketmq_queues}
    return ours, {k: v for k, v in theirs.items() if k in ours or v}


def lost_records(records: list[dict], process_offset: int) -> list[dict]:
    """What disappears: every intact, CRC-correct record at or after RocketMQ's end."""
    return [r for r in records if r["physical_offset"] >= process_offset and r["body_crc_ok"]]


CRASHED = [g for g in GOLDENS if g.manifest["abort_present"]]


@pytest.mark.parametrize("golden", CRASHED, ids=[g.id for g in CRASHED])
def test_the_walk_starts_where_rocketmq_started(golden: Golden, reports):
    """RocketMQ's abnormal recovery dispatches every valid record from the segment it starts at up to where it
    stops (manifest ``recovery.dispatched_during_load``: a probe first in RocketMQ's own dispatcher list), so
    the first record it dispatched opens its start file."""
    doc, seen = report_of(golden, reports), golden.manifest["recovery"]["dispatched_during_load"]
    assert doc["start_file"] == f"{seen['first_physical_offset']:020d}"
    assert doc["process_offset"] == seen["end_physical_offset"]


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_every_queue_ends_where_rocketmq_left_it(golden: Golden, reports):
    """Including the queues a crash re-dispatches into (cq-lag-crash), and those RocketMQ's schedule service
    only looked up (listed at 0 without files)."""
    ours, theirs = queue_ends(report_of(golden, reports), golden.manifest["queues"])
    assert ours == theirs


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_every_queue_starts_where_rocketmq_left_it(golden: Golden, reports):
    """The min offset too (getMinOffsetInQueue after the restart): a queue whose every entry expired with the
    segments RocketMQ's cleaner deleted keeps its offsets (5.x: min = max; 4.9.x: 0)."""
    doc = report_of(golden, reports)
    ours = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in doc["consumequeues"]}
    theirs = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"]) for q in golden.manifest["queues"]}
    assert ours == {k: v for k, v in theirs.items() if k in ours or v[1]}


@pytest.mark.parametrize("golden", GOLDENS, ids=[g.id for g in GOLDENS])
def test_the_stop_and_what_is_lost(golden: Golden, reports):
    doc, m = report_of(golden, reports), golden.manifest
    po = doc["process_offset"]
    # records_on_disk: after a zeroed page too, where RocketMQ's own walk of the damaged store stops before them
    lost = lost_records(golden.records_on_disk, po)
    assert doc["lost"]["messages"] == len(lost)
    assert doc["lost"]["topics"] == dict(Counter(r["topic"] for r in lost))
    if lost:
        assert doc["lost"]["first_physical_offset"] == min(r["physical_offset"] for r in lost)
    # per queue: every lost record counted, the queue offsets only of those with a queue entry (not the
    # PREPARED/ROLLBACK ones: transaction types 4 and 12)
    want = {}
    for r in lost:
        want.setdefault((r["topic"], r["queue_id"]), []).append(r["queue_offset"] if r["transaction_type"] in (0, 8)
                                                                else None)
    got = {(q["topic"], q["queue_id"]): (q["messages"], q["first_queue_offset"], q["last_queue_offset"])
           for q in doc["lost"]["queues"]}
    assert got == {k: (len(v), min((o for o in v if o is not None), default=None),
                       max((o for o in v if o is not None), default=None)) for k, v in want.items()}
    seg = next(s for s in m["segments"] if s["base_offset"] <= po < s["base_offset"] + s["file_size"])
    assert doc["stop"]["file"] == f"commitlog/{seg['file']}" and doc["stop"]["file_position"] == po - seg["base_offset"]
    flips = [s for s in m["surgery"] if s["action"] == "flip_body_byte" and s["physical_offset"] >= po - 2048]
    if golden.scenario == "corrupt-body":
        # RocketMQ stops at the record whose body was flipped inside its window, not at the one outside it
        [flip] = flips
        record = next(r for r in m["messages"] if r["physical_offset"] == po)
        assert record["physical_offset"] <= flip["physical_offset"] < po + record["total_size"]
        assert "BODYCRC" in doc["stop"]["reason"] and doc["lost"]["messages"] > 0
    if golden.scenario == "corrupt-window":
        # the flip lies in a segment before the last: RocketMQ stops at that record, the later segments go
        [flip] = m["surgery"]
        assert po == flip["physical_offset"] and "BODYCRC" in doc["stop"]["reason"]
        assert doc["stop"]["file"] != doc["commitlog_files_deleted"][-1]
        # lost: the rest of that segment and valid records in the next one
        assert doc["lost"]["last_physical_offset"] >= seg["base_offset"] + seg["file_size"]
    if golden.scenario == "zeroed-page":
        # RocketMQ stops at the first record the page touched (which may start well before the page)
        [page] = m["surgery"]
        touched = next(r for r in golden.parent.messages if r["physical_offset"] == po)
        assert po <= page["physical_offset"] < po + touched["total_size"]
        assert doc["lost"]["first_physical_offset"] >= page["physical_offset"] + page["length"]


def test_consumer_offsets_past_the_end_after_recovery():
    g = BY_ID["5.5.1/consumer-offsets"]
    doc = recovery_report(str(g.store))[0]
    table = fastjson_loads((g.store / "config" / "consumerOffset.json").read_text())["offsetTable"]
    ends = {(q["topic"], q["queue_id"]): q["max_offset"] for q in g.manifest["queues"]}
    want = sorted((k.split("@")[1], k.split("@")[0], int(qid)) for k, per in table.items() for qid, o in per.items()
                  if (k.split("@")[0], int(qid)) in ends and o > ends[(k.split("@")[0], int(qid))])
    assert sorted((x["consumer_group"], x["topic"], x["queue_id"]) for x in doc["consumer_offsets_past_end"]) == want
    assert want


def test_the_release_family_can_be_overridden():
    """docs/format/recovery.md worked example: by the 4.9.x/5.3.x timestamp rule, 5.5.1's crashed store would
    be walked from segment 131,072 (its first record is older than the checkpoint's minimum), not 262,144."""
    g = BY_ID["5.5.1/crash"]
    assert recovery_report(str(g.store))[0]["start_file"] == "00000000000000262144"
    doc = recovery_report(str(g.store), release_family="4.9.x")[0]
    assert doc["rocketmq_version"] == "4.9.x" and doc["start_file"] == "00000000000000131072"
    # crash-stale: RocketMQ 5.5.1 started at 262,144 (recovery.dispatched_during_load), where its
    # logicsPhysicalOffset points; the timestamp rule of the older families would have walked one more segment
    g = BY_ID["5.5.1/crash-stale"]
    assert g.manifest["recovery"]["dispatched_during_load"]["first_physical_offset"] == 262144
    assert recovery_report(str(g.store))[0]["start_file"] == "00000000000000262144"
    assert recovery_report(str(g.store), release_family="4.9.x")[0]["start_file"] == "00000000000000131072"
    with pytest.raises(ValueError, match="release family"):
        recovery_report(str(g.store), release_family="6.x")
