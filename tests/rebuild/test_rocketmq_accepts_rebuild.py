"""Real RocketMQ accepts the rebuilt files (issue #11): a golden store whose ``consumequeue/`` and ``index/`` are
our rebuild is started with RocketMQ's own DefaultMessageStore, and it answers getMessage, queryMessage and
getMin/MaxOffsetInQueue exactly as it does from the files it wrote itself; and with settings other than the
golden ones (ConsumeQueue files of 333 -> 340 bytes, 7 hash slots, 40 index entries, a shorter delay-level
table) our rebuild is byte for byte RocketMQ's own rebuild with the same settings.

The tests marked ``slow`` run RocketMQ (tests/golden/serve_check.py: the golden generator, built per version
with Maven and run on a JDK 17); ``make test-fast`` skips them.
"""
from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np
import pytest

from rocketstore_spark.codec.consumequeue import ENTRY_SIZE
from rocketstore_spark.rebuild.output import rebuild_store
from tests.golden import serve_check
from tests.golden.goldens import Golden, all_goldens
from tests.store_files import copy_store, tree_bytes

CLEAN = [g for g in all_goldens() if g.scenario == "clean"]
#: every family and every kind of damage once; the other eight crashed, damaged goldens are also marked long
#: (a RocketMQ run each: 4-10 s)
DAMAGED_FIRST = ("4.9.8/corrupt-body", "5.1.4/corrupt-window", "5.3.3/zeroed-page", "5.5.1/corrupt-body")
DAMAGED = [g if g.id in DAMAGED_FIRST else pytest.param(g, marks=pytest.mark.long)
           for g in all_goldens() if g.scenario in ("corrupt-body", "corrupt-window", "zeroed-page")]

#: settings unlike the golden ones (500-byte ConsumeQueue files, 64 slots, 256 entries, 18 delay levels):
#: 333 is rounded up to 17 entries; the 12-level table clamps the levels 13-18 of SCHEDULE_TOPIC_XXXX
# 200 entries an IndexFile: several files, each filled in well over a millisecond of RocketMQ's dispatch (its
# IndexFiles are named by the wall clock: 40-entry files fell two into one millisecond on an idle host, and
# RocketMQ then reopened the same file, in every one of three runs)
NON_DEFAULT = {"mappedFileSizeConsumeQueue": 333, "maxHashSlotNum": 7, "maxIndexNum": 200,
               "messageDelayLevel": "2s 4s 8s 16s 32s 1m 2m 4m 8m 16m 32m 1h"}
LAST_LEVEL_MS = 3_600_000
MAX_NUM = 64                       # queryMessage's maxNum (RocketMQ caps it at maxMsgsNumBatch, 64 by default)
DATA_DIRS = ("commitlog/", "consumequeue/", "index/")
CQ_ENTRY = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])     # written out: an independent reading
META = ("expect", "kind")            # what a query says for the checks, not sent to RocketMQ


def our_rebuild(g: Golden, settings: dict, work: Path) -> Path:
    """Our rebuild of a copy of ``g``'s store with ``settings``, in ``work/out`` (the copy holds no ConsumeQueues
    or IndexFiles: nothing contradicts the settings)."""
    source = copy_store(g.store, work / "source", without=("consumequeue", "index"))
    options = {**settings, "rocketmqVersion": g.version}
    result = rebuild_store(str(source), work / "out", options=options)
    assert not result.settings.conflicts and not result.findings
    assert {k: result.settings.sources[k] for k in settings} == dict.fromkeys(settings, "option")
    return work / "out"


def with_queues_from(g: Golden, rebuilt: Path, dst: Path) -> Path:
    """A copy of ``g``'s store whose consumequeue/ and index/ are moved in from ``rebuilt``."""
    store = copy_store(g.store, dst)
    for sub in ("consumequeue", "index"):
        shutil.rmtree(store / sub)
        shutil.move(str(rebuilt / sub), str(store / sub))
    return store


# ------------------------------------------------------------------------------------------ queries

def queued(g: Golden) -> list[dict]:
    """The records with a ConsumeQueue entry (transaction types NOT and COMMIT)."""
    return [m for m in g.messages if m["transaction_type"] in (0, 8)]


def key_queries(g: Golden, count: int = 50) -> list[dict]:
    """A sample of index keys (UNIQ_KEY, KEYS pieces, on 5.5.1 topic#T#TAGS) as queryMessage queries, each with
    the physical offset RocketMQ must return when no more than MAX_NUM index entries share its hash."""
    same_hash: dict[int, int] = {}
    for m in g.messages:
        for k in m["index_keys"]:
            same_hash[k["hash"]] = same_hash.get(k["hash"], 0) + 1
    # queryMessage returns at most MAX_NUM offsets of the entries with the key's hash (newest first): a record is
    # certainly among them when few entries share its hash (a margin for 4.x re-dispatching the last records)
    kinds: dict[str, list[dict]] = {"uniq": [], "keys": [], "tags": []}
    for m in g.messages:
        topic, tags = m["topic"], m["properties"].get("TAGS")
        for k in m["index_keys"]:
            key = k["key"].removeprefix(topic + "#")
            if m["uniq_key"] is not None and key == m["uniq_key"]:
                kind, query = "uniq", {"key": key}
            elif tags and key == "T#" + tags:
                kind, query = "tags", {"key": tags, "index_type": "T"}
            else:
                kind, query = "keys", {"key": key}
            kinds[kind].append({"op": "query", "topic": topic, **query, "max_num": MAX_NUM, "kind": kind,
                                "expect": m["physical_offset"] if same_hash[k["hash"]] <= MAX_NUM - 4 else None})
    rnd = random.Random(11)
    tags = list({(q["topic"], q["key"]): q for q in kinds["tags"]}.values())      # one per distinct tag key
    non_ascii = [q for q in kinds["keys"] if not q["key"].isascii()]
    sample = rnd.sample(tags, min(len(tags), count // 4)) + rnd.sample(non_ascii, min(3, len(non_ascii)))
    rest = count - len(sample)
    sample += rnd.sample(kinds["uniq"], rest // 2) + rnd.sample(kinds["keys"], rest - rest // 2)
    assert {"uniq", "keys"} <= {q["kind"] for q in sample}
    return sample


def queries(g: Golden) -> list[dict]:
    gets = [{"op": "get", "topic": m["topic"], "queue_id": m["queue_id"], "queue_offset": m["queue_offset"]}
            for m in queued(g)]
    queues = g.manifest["rebuild"]["queues"]
    offsets = [{"op": "offsets", "topic": q["topic"], "queue_id": q["queue_id"]} for q in queues]
    beyond = [{"op": "get", "topic": q["topic"], "queue_id": q["queue_id"], "queue_offset": q["max_offset"]}
              for q in queues]
    return gets + offsets + beyond + key_queries(g)


def ask(g: Golden, store: Path, qs: list[dict], settings: dict) -> dict:
    """RocketMQ's answers from ``store`` (run in place: it is a copy already)."""
    sent = [{k: v for k, v in q.items() if k not in META} for q in qs]
    answers = serve_check.serve(g.version, store, sent, settings=settings, in_place=True)
    assert answers["loaded"], answers.get("load_error")
    assert len(answers["answers"]) == len(qs)
    return answers


def data_files_touched(answers: dict) -> list[str]:
    return [f"{what}: {p}" for what in ("files_deleted", "files_changed", "files_created")
            for p in answers[what] if p.startswith(DATA_DIRS)]


def check_answers(g: Golden, qs: list[dict], answers: dict, label: str) -> None:
    """RocketMQ's answers are what the manifest says RocketMQ wrote."""
    # RocketMQ took the files as they are: nothing recovered, re-dispatched, truncated or deleted
    assert data_files_touched(answers) == [], label
    assert answers["queues_after_load"] == answers["queues"], label
    messages = {(m["topic"], m["queue_id"], m["queue_offset"]): m for m in queued(g)}
    expected_queues = {(q["topic"], q["queue_id"]): (q["min_offset"], q["max_offset"])
                       for q in g.manifest["rebuild"]["queues"]}
    found = 0
    for q, a in zip(qs, answers["answers"]):
        if q["op"] == "get" and (q["topic"], q["queue_id"], q["queue_offset"]) in messages:
            m = messages[(q["topic"], q["queue_id"], q["queue_offset"])]
            got = [(r["physical_offset"], r["size"], r["topic"], r["queue_id"], r["queue_offset"], r["msg_id"])
                   for r in a["messages"]]
            assert (a["status"], got) == ("FOUND", [(m["physical_offset"], m["total_size"], m["topic"],
                                                     m["queue_id"], m["queue_offset"], m["msg_id"])]), (label, q)
            found += 1
        elif q["op"] == "get":                                  # at the queue's max offset
            assert a["status"] in ("OFFSET_OVERFLOW_ONE", "NO_MESSAGE_IN_QUEUE") and not a["messages"], (label, q, a)
        elif q["op"] == "offsets":
            assert (a["min_offset"], a["max_offset"]) == expected_queues[(q["topic"], q["queue_id"])], (label, q, a)
        elif q["op"] == "query":
            assert a["physical_offsets"] == a.get("start_offsets", a["physical_offsets"]), (label, q, a)
            if q["expect"] is not None:
                assert q["expect"] in a["physical_offsets"], (label, q, a)
    assert found == len(messages)


def comparable(answers: dict) -> dict:
    """Everything RocketMQ answered and did, except the bookkeeping files it rewrites on every start and how
    long it took."""
    return {**{k: v for k, v in answers.items() if not k.startswith("files_") and not k.endswith("_seconds")},
            "data_files_touched": data_files_touched(answers)}


# ------------------------------------------------------------------------------------- differences

def first_cq_difference(ours: dict[str, bytes], theirs: dict[str, bytes]) -> str | None:
    """Where two consumequeue/ trees first differ: a file only one has, or the first differing entry."""
    for rel in sorted(set(ours) | set(theirs)):
        a, b = ours.get(rel), theirs.get(rel)
        if a == b:
            continue
        if a is None or b is None:
            return f"consumequeue/{rel}: only {'RocketMQ' if a is None else 'ours'} has it"
        if len(a) != len(b):
            return f"consumequeue/{rel}: {len(a)} bytes (ours), {len(b)} (RocketMQ)"
        i = next(i for i in range(len(a)) if a[i] != b[i]) // ENTRY_SIZE
        ea, eb = (np.frombuffer(x[i * ENTRY_SIZE:(i + 1) * ENTRY_SIZE], CQ_ENTRY)[0].tolist() for x in (a, b))
        return (f"consumequeue/{rel}: entry {i} (queue offset {int(rel.rsplit('/', 1)[1]) // ENTRY_SIZE + i}) "
                f"ours (offset, size, tagsCode) {ea}, RocketMQ {eb}")
    return None


def first_index_difference(ours: list[Path], theirs: list[Path], slots: int) -> str | None:
    """Where two IndexFile lists (in name order) first differ: count, header field, slot or entry."""
    for k, (a, b) in enumerate(zip(ours, theirs)):
        da, db = a.read_bytes(), b.read_bytes()
        if da == db:
            continue
        if len(da) != len(db):
            return f"IndexFile #{k} ({a.name} / {b.name}): {len(da)} bytes (ours), {len(db)} (RocketMQ)"
        i = next(i for i in range(len(da)) if da[i] != db[i])
        fields = [("beginTimestamp", 8), ("endTimestamp", 8), ("beginPhyOffset", 8), ("endPhyOffset", 8),
                  ("hashSlotCount", 4), ("indexCount", 4)]
        start = 0
        for name, width in fields:
            if i < start + width:
                where = (f"header {name}: ours {int.from_bytes(da[start:start + width], 'big', signed=True)}, "
                         f"RocketMQ {int.from_bytes(db[start:start + width], 'big', signed=True)}")
                break
            start += width
        else:
            where = f"slot {(i - 40) // 4}" if i < 40 + 4 * slots else f"entry {(i - 40 - 4 * slots) // 20 + 1}"
        return f"IndexFile #{k} ({a.name} / {b.name}) first differs at byte {i}: {where}"
    if len(ours) != len(theirs):
        return f"{len(ours)} IndexFiles (ours), {len(theirs)} (RocketMQ)"
    return None


# ------------------------------------------------------------------------------------------- tests

@pytest.mark.slow
@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.version)
def test_rocketmq_answers_from_our_rebuild_as_from_its_own_files(g, tmp_path):
    settings = g.settings
    rebuilt = our_rebuild(g, settings, tmp_path / "ours")
    ours = with_queues_from(g, rebuilt, tmp_path / "ours-store")
    original = copy_store(g.store, tmp_path / "original-store")
    qs = queries(g)
    from_original = ask(g, original, qs, settings)
    from_ours = ask(g, ours, qs, settings)
    check_answers(g, qs, from_original, "RocketMQ's own files")
    check_answers(g, qs, from_ours, "our rebuild")
    assert comparable(from_ours) == comparable(from_original)


@pytest.mark.slow
@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.version)
def test_with_other_settings_our_rebuild_is_rocketmqs_rebuild(g, tmp_path):
    rebuilt = our_rebuild(g, NON_DEFAULT, tmp_path / "ours")
    ours_index = sorted((rebuilt / "index").iterdir())
    # IndexFile names are RocketMQ's wall clock in ms: two files can still fall into one millisecond, and
    # RocketMQ then reopens the same file (fewer files than ours, or one whose header and entries mix two
    # files' worth); only a run whose IndexFiles differ from ours is retried, at most twice
    for attempt in range(3):
        theirs_dir = tmp_path / f"rocketmq-{attempt}"
        report = serve_check.rocketmq_rebuild(g.version, g.store, theirs_dir, NON_DEFAULT)
        assert report["loaded"]
        theirs_index = sorted((theirs_dir / "index").iterdir())
        if len(theirs_index) == len(ours_index) and \
                first_index_difference(ours_index, theirs_index, NON_DEFAULT["maxHashSlotNum"]) is None:
            break
    ours_cq, theirs_cq = tree_bytes(rebuilt / "consumequeue"), tree_bytes(theirs_dir / "consumequeue")
    assert first_cq_difference(ours_cq, theirs_cq) is None
    assert ours_cq == theirs_cq
    assert {len(b) for b in ours_cq.values()} == {340}                   # 333 rounded up to whole entries
    assert first_index_difference(ours_index, theirs_index, NON_DEFAULT["maxHashSlotNum"]) is None
    assert [p.read_bytes() for p in ours_index] == [p.read_bytes() for p in theirs_index]
    assert len(ours_index) >= 4                                           # the small geometry rolled over
    # the 12-level table was applied: levels 13-18 are clamped to the last one (1 h after the store time)
    clamped = [m for m in g.messages if m["topic"] == "SCHEDULE_TOPIC_XXXX" and m["queue_id"] >= 12]
    assert clamped
    for m in clamped:
        name = f"SCHEDULE_TOPIC_XXXX/{m['queue_id']}/{(m['queue_offset'] // 17) * 340:020d}"
        entry = np.frombuffer(theirs_cq[name], CQ_ENTRY)[m["queue_offset"] % 17]
        assert (int(entry["offset"]), int(entry["tags_code"])) == \
            (m["physical_offset"], m["store_timestamp"] + LAST_LEVEL_MS)
    # and RocketMQ serves from our files as from its own, with these settings
    ours = with_queues_from(g, rebuilt, tmp_path / "ours-store")
    own = with_queues_from(g, theirs_dir, tmp_path / "rocketmq-store")
    qs = queries(g)
    from_own, from_ours = ask(g, own, qs, NON_DEFAULT), ask(g, ours, qs, NON_DEFAULT)
    check_answers(g, qs, from_own, "RocketMQ's own files, other settings")
    check_answers(g, qs, from_ours, "our rebuild, other settings")
    assert comparable(from_ours) == comparable(from_own)


@pytest.mark.slow
@pytest.mark.parametrize("g", DAMAGED, ids=lambda g: getattr(g, "id", None))
def test_on_a_damaged_log_our_rebuild_is_rocketmqs_own_rebuild(g, tmp_path):
    """Issue #26 item 7: RocketMQ restarted on a copy of the crashed, damaged store without consumequeue/ and
    index/ (the abort file kept: its crash recovery, then the reput) writes what our default rebuild writes."""
    ours = rebuild_store(str(g.store), tmp_path / "ours", options={"rocketmqVersion": g.version})
    assert ours.mode == "release"
    ours_index = sorted((tmp_path / "ours" / "index").iterdir())
    slots = g.settings["maxHashSlotNum"]
    for attempt in range(3):             # IndexFile names are RocketMQ's wall clock: see the test above
        theirs_dir = tmp_path / f"rocketmq-{attempt}"
        report = serve_check.rocketmq_rebuild(g.version, g.store, theirs_dir, g.settings)
        assert report["loaded"] and report["abort_present"]
        theirs_index = sorted((theirs_dir / "index").iterdir())
        if first_index_difference(ours_index, theirs_index, slots) is None:
            break
    ours_cq, theirs_cq = tree_bytes(tmp_path / "ours" / "consumequeue"), tree_bytes(theirs_dir / "consumequeue")
    assert first_cq_difference(ours_cq, theirs_cq) is None
    assert ours_cq == theirs_cq
    assert first_index_difference(ours_index, theirs_index, slots) is None
    assert [p.read_bytes() for p in ours_index] == [p.read_bytes() for p in theirs_index]
    # RocketMQ's queues after its rebuild (it lists empty ones too) are ours
    assert {(q.topic, q.queue_id): q.state.max_offset for q in ours.queues} == \
        {(q["topic"], q["queue_id"]): q["max_offset"] for q in report["queues"] if q["max_offset"] > 0}


@pytest.mark.slow
@pytest.mark.parametrize("release", ["4.9.8", "5.5.1"])
def test_damage_a_clean_start_does_not_walk_is_rebuilt_as_rocketmq_rebuilds_it(release, tmp_path):
    """A clean shutdown, a bad magic in segment 0 of five: 4.9.8's walk (the last three segments) never reads
    it, and its reput skips the rest of segment 0 and reads on; 5.5.1's walk of a store without queues starts
    at segment 0 and cuts the log there (tests/rebuild/test_rebuild_release.py; 5.1.4 and 5.3.3 measured alike)."""
    from tests.rebuild.test_rebuild_release import SEGMENT, SMALL, old_damage_store
    store, placed, damaged = old_damage_store(tmp_path, release)
    ours = rebuild_store(str(store), tmp_path / "ours", options={"rocketmqVersion": release, **SMALL})
    report = serve_check.rocketmq_rebuild(release, store, tmp_path / "theirs", {"mappedFileSizeCommitLog": SEGMENT,
                                                                                **SMALL})
    assert report["loaded"] and not report["abort_present"]
    assert report["commitlog_max_offset"] == ours.restart.report.walk.process_offset == \
        (sum(placed[-1]) if release.startswith("4") else damaged)
    ours_cq, theirs_cq = tree_bytes(tmp_path / "ours" / "consumequeue"), tree_bytes(tmp_path / "theirs" / "consumequeue")
    assert first_cq_difference(ours_cq, theirs_cq) is None and ours_cq == theirs_cq
    ours_ix, theirs_ix = sorted((tmp_path / "ours" / "index").iterdir()), sorted((tmp_path / "theirs" / "index").iterdir())
    assert first_index_difference(ours_ix, theirs_ix, SMALL["maxHashSlotNum"]) is None
    assert [p.read_bytes() for p in ours_ix] == [p.read_bytes() for p in theirs_ix]


@pytest.mark.slow
def test_after_a_crash_recovery_rocketmq_indexes_the_last_indexed_record_again(tmp_path):
    """The PREPARED records after the last queued one are read again by the reput, and the last of them is
    indexed twice: RocketMQ 4.9.8's IndexFile is ours (5.5.1 measured alike)."""
    from tests.rebuild.test_rebuild_release import SEGMENT, SMALL, crashed_with_prepared_tail
    store, options, _ = crashed_with_prepared_tail(tmp_path, "4.9.8")
    rebuild_store(str(store), tmp_path / "ours", options=options)
    report = serve_check.rocketmq_rebuild("4.9.8", store, tmp_path / "theirs", {"mappedFileSizeCommitLog": SEGMENT,
                                                                                 **SMALL})
    assert report["loaded"] and report["abort_present"]
    assert tree_bytes(tmp_path / "ours" / "consumequeue") == tree_bytes(tmp_path / "theirs" / "consumequeue")
    assert [p.read_bytes() for p in sorted((tmp_path / "ours" / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((tmp_path / "theirs" / "index").iterdir())]


@pytest.mark.parametrize("g", CLEAN, ids=lambda g: g.version)
def test_a_forced_rebuild_over_files_of_other_settings_is_the_same_rebuild(g, tmp_path):
    # allow_conflicts over the store's own 500-byte ConsumeQueues and 64x256 IndexFiles: the same files as a
    # rebuild of a store without them, and every ConsumeQueue file reported as differing (its size at least)
    options = {**NON_DEFAULT, "rocketmqVersion": g.version}
    clean = our_rebuild(g, NON_DEFAULT, tmp_path / "clean")
    forced = rebuild_store(str(g.store), tmp_path / "forced", options=options, allow_conflicts=True)
    assert forced.settings.conflicts
    assert tree_bytes(tmp_path / "forced") == tree_bytes(clean)
    assert "identical" not in {d.status for d in forced.differences if d.kind == "consumequeue"}
