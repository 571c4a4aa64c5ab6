"""A queue checked in parts gives the verdict of the queue checked whole (issue #26: memory that follows the part,
not the largest queue).

``verify.queues.check_queue`` reads a queue's files PART_SLOTS entries at a time in file order, then compares
dispatch and the files PART_SLOTS queue offsets at a time; the records come in chunks. Queues built by RocketMQ's
placement (``rocketmq.consumequeue.build_queue``, whose output is RocketMQ's byte for byte: tests/rebuild) are
damaged at random — oversized, misnamed, overlapping and tail-zeroed files, a file lost between two runs of
invalid entries (a run across a gap), invalid runs across part boundaries, entries pointing elsewhere, QUEUEOFFSETs
that repeat, jump and restart in the records — and checked whole (one part, the records in one piece) and in
parts of 1 to 25 queue offsets with the records in random chunks: the same verdict, findings (and their caps)
included. Then a store's queue groups split into a spill file per queue (``verify.store.Dispatched.split_group``)
give the verdict of the groups held whole; a queue of 1 M records is checked in a fraction of what holding it
takes; and no room for the split files is a refusal (exit 2), not a traceback."""
from __future__ import annotations

import errno
import tracemalloc

import numpy as np
import pytest

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.rocketmq import consumequeue as cq
from rocketstore_spark.store import spill
from rocketstore_spark.verify import queues, store as verify_module
from rocketstore_spark.verify.queues import LogBounds, check_queue
from rocketstore_spark.verify.store import verify_store
from tests.cli.helpers import run
from tests.golden.goldens import BY_ID

TOPIC, QUEUE_ID = "Hot", 3
PER_FILE = 8                                    # entries a ConsumeQueue file holds
FILE_SIZE = PER_FILE * consumequeue.ENTRY_SIZE
DAMAGE = ("oversized", "misnamed", "tail_zeroed", "offsets", "invalid_runs", "overlapping", "run_across_gap",
          "mixed")
SEEDS = range(3)


def locate(physical_offset: int) -> tuple[str, int]:
    return "commitlog/00000000000000000000", physical_offset


def make_records(rng, damage: str) -> dict[str, np.ndarray]:
    n = int(rng.integers(120, 220))
    size = rng.integers(60, 300, n)
    phy = 5_000 + np.r_[0, np.cumsum(size)[:-1]]
    qo = np.arange(n, dtype=np.int64) + (int(rng.integers(0, 3)) * PER_FILE if rng.random() < 0.5 else 0)
    if damage in ("offsets", "mixed"):
        for _ in range(int(rng.integers(2, 6))):
            i = int(rng.integers(1, n))
            kind = rng.choice(["repeat", "jump", "reset", "back"])
            if kind == "repeat":
                qo[i:] -= qo[i] - qo[i - 1]
            elif kind == "jump":
                qo[i:] += int(rng.integers(2, 30))
            elif kind == "reset":
                qo[i:] -= qo[i]
            else:
                qo[i:] -= int(rng.integers(1, 5))
    return {"queue_offset": qo, "physical_offset": phy.astype(np.int64), "size": size.astype(np.int64),
            "tags_code": rng.integers(-5, 5, n).astype(np.int64)}


def write_queue(rng, queue_dir, records, damage: str) -> None:
    """The files RocketMQ writes for ``records``, then damaged; some records never reach the files (lagging)."""
    keep = len(records["queue_offset"]) - int(rng.integers(0, 15))
    _, files = cq.build_queue(*(records[c][:keep] for c in ("queue_offset", "physical_offset", "size", "tags_code")),
                              FILE_SIZE)
    data = {int(name): bytearray(body) for name, body in files}
    names = sorted(data)
    middle = lambda: names[int(rng.integers(1, len(names) - 1))]        # noqa: E731

    def entries(name):
        return consumequeue.decode_entries(bytes(data[name])).copy()

    def put(name, e):
        data[name] = bytearray(e.tobytes())

    def invalid_run(name, start, count):            # entries RocketMQ's recovery stops at (offset < 0, size 0)
        e = entries(name)
        e["size"][start:start + count] = 0 if rng.random() < 0.5 else -1
        e["commit_log_offset"][start:start + count] *= -1 if rng.random() < 0.5 else 1
        put(name, e)

    if damage in ("oversized", "mixed"):           # a file longer than the file size: it overlaps the next
        name = middle()
        extra = entries(names[-1])[:int(rng.integers(1, PER_FILE))]
        extra["commit_log_offset"] += int(rng.integers(-50, 50)) if rng.random() < 0.5 else 1 << 40   # past the end
        data[name] += extra.tobytes()
    if damage in ("misnamed", "mixed"):            # a name off the file size grid: overlap or gap
        name = middle()
        data[name + consumequeue.ENTRY_SIZE * int(rng.integers(1, PER_FILE))] = data.pop(name)
        if rng.random() < 0.5:                      # one moved past the queue's end: entries dispatch never writes
            name = middle()
            data[name + 1000 * FILE_SIZE] = data.pop(name)
        names = sorted(data)
    if damage in ("tail_zeroed", "mixed"):         # zeros where entries were, valid files after them
        name = middle()
        cut = int(rng.integers(1, PER_FILE))
        data[name][cut * consumequeue.ENTRY_SIZE:] = bytes(len(data[name]) - cut * consumequeue.ENTRY_SIZE)
    if damage in ("invalid_runs", "mixed"):        # runs of every length across file (and part) boundaries
        for _ in range(int(rng.integers(2, 5))):
            name = middle()
            start, count = int(rng.integers(0, PER_FILE)), int(rng.integers(1, 2 * PER_FILE))
            invalid_run(name, start, min(count, PER_FILE - start))
            nxt = names[names.index(name) + 1]
            if count > PER_FILE - start:
                invalid_run(nxt, 0, min(PER_FILE, count - (PER_FILE - start)))
        name = middle()                              # entries pointing elsewhere: more than the cap of them
        e = entries(name)
        e["commit_log_offset"] += 1
        put(name, e)
    if damage in ("overlapping", "mixed"):         # a second file over another's queue offsets, entries changed
        name = middle()
        copy = entries(name)
        copy["commit_log_offset"][::2] += 7
        data[name + consumequeue.ENTRY_SIZE * int(rng.integers(1, PER_FILE))] = bytearray(copy.tobytes())
        names = sorted(data)
    if damage in ("run_across_gap", "mixed"):      # invalid tail, a lost file, invalid head: one run in file order
        k = int(rng.integers(1, len(names) - 2))
        before, lost, after = names[k - 1], names[k], names[k + 1]
        invalid_run(before, int(rng.integers(1, PER_FILE)), PER_FILE)
        invalid_run(after, 0, int(rng.integers(1, PER_FILE)))
        del data[lost]
    if rng.random() < 0.3:                           # a last file cut short
        last = max(data)
        data[last] = data[last][:len(data[last]) - consumequeue.ENTRY_SIZE * int(rng.integers(1, 4))]
    queue_dir.mkdir(parents=True)
    for name, body in data.items():
        (queue_dir / f"{name:020d}").write_bytes(bytes(body))


def chunks(rng, records):
    n = len(records["queue_offset"])
    cuts = np.unique(np.r_[0, rng.integers(0, n, int(rng.integers(1, 12))), n])
    return [{c: v[a:b] for c, v in records.items()} for a, b in zip(cuts[:-1], cuts[1:])]


def verdict(v) -> tuple:
    return (v.files, v.min_offset, v.max_offset, v.entries, v.expired, v.records, v.dispatch_max_offset,
            [f.as_row() for f in v.findings])


def check(monkeypatch, part: int, queue_dir, root, records, log):
    monkeypatch.setattr(queues, "PART_SLOTS", part)
    return check_queue(TOPIC, QUEUE_ID, str(queue_dir), str(root), records, log, FILE_SIZE, locate)


def cases(tmp_path):
    for damage in DAMAGE:
        for seed in SEEDS:
            rng = np.random.default_rng([seed, DAMAGE.index(damage)])
            records = make_records(rng, damage)
            root = tmp_path / f"{damage}-{seed}"
            queue_dir = root / "consumequeue" / TOPIC / str(QUEUE_ID)
            write_queue(rng, queue_dir, records, damage)
            end = int(records["physical_offset"][-1] + records["size"][-1])
            # some logs start after the queue's first records (expired entries); some end before its last
            log = LogBounds(int(records["physical_offset"][int(rng.integers(0, 20))]) if seed == 1 else 0,
                            end - (int(records["size"][-1]) if seed == 2 else 0))
            yield damage, seed, rng, root, queue_dir, records, log


def test_a_queue_checked_in_parts_gives_the_verdict_of_the_queue_checked_whole(tmp_path, monkeypatch):
    seen: dict[str, set] = {}
    for damage, seed, rng, root, queue_dir, records, log in cases(tmp_path):
        whole = check(monkeypatch, 1 << 40, queue_dir, root, records, log)
        checks = {f.check for f in whole.findings}
        seen[damage] = seen.get(damage, set()) | checks
        for part in (1, 2, int(rng.integers(3, 26))):
            parts = check(monkeypatch, part, queue_dir, root, chunks(rng, records), log)
            assert verdict(parts) == verdict(whole), (damage, seed, part)
    # the damage is there to be found (a comparison of two empty verdicts proves nothing)
    everywhere = set().union(*seen.values())
    assert {"consumequeue.file_size", "consumequeue.file_gap", "consumequeue.invalid_entry",
            "consumequeue.not_increasing", "consumequeue.entry_mismatch", "consumequeue.extra_entry",
            "consumequeue.missing_entry", "consumequeue.lagging", "consumequeue.entry_past_end",
            "commitlog.queue_offset_gap", "commitlog.queue_offset_repeat",
            "commitlog.queue_offset_reset"} <= everywhere, everywhere
    assert {"consumequeue.invalid_entry", "consumequeue.file_gap"} <= seen["run_across_gap"]
    assert {"consumequeue.extra_entry", "consumequeue.entry_mismatch"} <= seen["overlapping"] | seen["mixed"]


def test_overlapping_files_and_a_run_across_a_gap(tmp_path, monkeypatch):
    """The two cases a part-wise check got wrong before: a file holding queue offsets another file holds too
    (each entry compared, the first in file order against dispatch), and one run of invalid entries from the end
    of a file over a lost file into the next (one finding, counted whole, wherever the parts cut it)."""
    n = 6 * PER_FILE
    size = np.full(n, 100, np.int64)
    records = {"queue_offset": np.arange(n, dtype=np.int64), "physical_offset": np.arange(n, dtype=np.int64) * 100,
               "size": size, "tags_code": np.zeros(n, np.int64)}
    _, files = cq.build_queue(*records.values(), FILE_SIZE)
    data = {int(name): consumequeue.decode_entries(body).copy() for name, body in files}
    root = tmp_path / "store"
    queue_dir = root / "consumequeue" / TOPIC / str(QUEUE_ID)
    queue_dir.mkdir(parents=True)
    over = data[FILE_SIZE].copy()
    over["commit_log_offset"] += 1                             # offsets 11..18, over file 1's 8..15 and file 2's
    data[FILE_SIZE + 3 * consumequeue.ENTRY_SIZE] = over
    data[3 * FILE_SIZE]["size"][5:] = 0                        # offsets 29-31 invalid,
    del data[4 * FILE_SIZE]                                    # 32-39 lost,
    data[5 * FILE_SIZE]["size"][:2] = 0                        # 40-41 invalid: one run of 5 in file order
    past = np.concatenate([data[0], data[0]]).astype(consumequeue.ENTRY_DTYPE)   # past the queue's end:
    data[100 * consumequeue.ENTRY_SIZE] = past                 # an oversized file at 100-115
    data[104 * consumequeue.ENTRY_SIZE] = data[0].copy()       # and a misnamed one over it at 104-111
    for name, e in data.items():
        (queue_dir / f"{name:020d}").write_bytes(e.tobytes())
    log = LogBounds(0, n * 100)
    whole = check(monkeypatch, 1 << 40, queue_dir, root, records, log)
    runs = [f for f in whole.findings if f.check == "consumequeue.invalid_entry"]
    assert [(f.queue_offset, f.evidence["entries"]) for f in runs] == [(29, 5)]
    # at 11-15 the first entry in file order is file 1's (right); at 16-18 the overlapping file's (wrong)
    mismatched = [f.queue_offset for f in whole.findings if f.check == "consumequeue.entry_mismatch"]
    assert mismatched == [16, 17, 18]
    # entries where dispatch writes none: by queue offset, then file order; 24 of them, 20 listed
    extra = [f for f in whole.findings if f.check == "consumequeue.extra_entry"]
    assert [(f.queue_offset, f.file[-3:]) for f in extra[:20]] == [(100, "000"), (101, "000"), (102, "000"),
                                                                   (103, "000")] + \
        [(q, name) for q in range(104, 112) for name in ("000", "080")]
    assert len(extra) == 21 and extra[20].evidence["omitted"] == 4 and extra[20].evidence["last_queue_offset"] == 115
    missing = [f.queue_offset for f in whole.findings if f.check == "consumequeue.missing_entry"]
    assert missing == list(range(32, 40))
    for part in range(1, 26):
        rng = np.random.default_rng(part)
        parts = check(monkeypatch, part, queue_dir, root, chunks(rng, records), log)
        assert verdict(parts) == verdict(whole), part


SPLIT_GOLDENS = ("5.5.1/cq-lag-crash", "4.9.8/crash-stale", "5.3.3/consumer-offsets", "5.1.4/torn-tail",
                 "4.9.8/cq-lag-clean")


def test_queue_groups_split_into_a_file_per_queue_give_the_verdict_of_groups_held_whole(tmp_path, monkeypatch):
    """Every queue group split (``SPLIT_ROWS`` 0), read back 7 records at a time, each queue checked 5 queue
    offsets at a time: the verdict of the groups held whole; the spill directory is gone afterwards."""
    work = tmp_path / "work"
    work.mkdir()
    split = verify_module.Dispatched.split_group
    queues_split = []

    def counted(self, *args):
        out = split(self, *args)
        queues_split.extend(out)
        return out
    for gid in SPLIT_GOLDENS:
        g = BY_ID[gid]
        whole = verify_store(str(g.store), work_dir=str(work))
        monkeypatch.setattr(verify_module, "SPLIT_ROWS", 0)
        monkeypatch.setattr(spill, "READ_ROWS", 7)
        monkeypatch.setattr(queues, "PART_SLOTS", 5)
        monkeypatch.setattr(verify_module.Dispatched, "split_group", counted)
        parts = verify_store(str(g.store), work_dir=str(work))
        monkeypatch.undo()
        assert [(q.topic, q.queue_id, *verdict(q)) for q in parts.queues] == \
               [(q.topic, q.queue_id, *verdict(q)) for q in whole.queues], gid
        assert [f.as_row() for f in parts.findings] == [f.as_row() for f in whole.findings], gid
        assert list(work.iterdir()) == []
    assert len(queues_split) > 20


def test_a_queue_of_a_million_records_is_checked_in_a_fraction_of_what_holding_it_takes(tmp_path, monkeypatch):
    """Memory follows PART_SLOTS, not the queue: the records come in chunks, as read back from a spill file."""
    n, per_file = 1_000_000, 300_000
    file_size = per_file * consumequeue.ENTRY_SIZE
    root = tmp_path / "store"
    queue_dir = root / "consumequeue" / TOPIC / str(QUEUE_ID)
    queue_dir.mkdir(parents=True)
    for first in range(0, n, per_file):
        qo = np.arange(first, min(n, first + per_file))
        (queue_dir / f"{first * consumequeue.ENTRY_SIZE:020d}").write_bytes(
            cq.entries(qo * 100, np.full(len(qo), 100), qo % 7).tobytes().ljust(file_size, b"\0"))

    def records(step: int):
        for first in range(0, n, step):
            qo = np.arange(first, min(n, first + step), dtype=np.int64)
            yield {"queue_offset": qo, "physical_offset": qo * 100, "size": np.full(len(qo), 100), "tags_code": qo % 7}

    def peak(part: int, step: int):
        monkeypatch.setattr(queues, "PART_SLOTS", part)
        tracemalloc.start()
        try:
            v = check_queue(TOPIC, QUEUE_ID, str(queue_dir), str(root), records(step), LogBounds(0, n * 100),
                            file_size, locate)
            return v, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    whole, held = peak(1 << 40, n)                  # the queue held: the memory the check took before #26
    parts, bounded = peak(1 << 16, 1 << 16)
    assert verdict(parts) == verdict(whole)
    assert parts.entries == parts.records == n and not parts.findings
    print(f"peak traced memory: {held / 2**20:.0f} MiB whole, {bounded / 2**20:.0f} MiB in parts of 65,536")
    assert held > 150 << 20 and bounded < 32 << 20, (held, bounded)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES])
def test_no_room_to_split_a_queue_group_is_a_refusal(tmp_path, monkeypatch, code):
    """The work directory fills up (or turns read-only) while a large queue group is split: exit 2 naming the
    directory and what to do, no traceback, nothing left behind."""
    import os
    monkeypatch.setattr(verify_module, "SPLIT_ROWS", 0)

    def full(path, mode="r", *args, **kwargs):
        if "a" in mode:
            raise OSError(code, os.strerror(code), str(path))
        return open(path, mode, *args, **kwargs)
    monkeypatch.setattr(verify_module, "open", full, raising=False)
    r = run("audit", BY_ID["5.5.1/clean"].store, "--work-dir", tmp_path)
    assert r.exit_code == 2, r.output
    assert f"{tmp_path}: " in r.stderr and "the queue check's spill files" in r.stderr and "--work-dir" in r.stderr
    assert "Traceback" not in r.output and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("queue_ids", [(0, 8), (-3, 5), (0, 70_000)])     # a radix-sorted code; the 64-bit keys
def test_queue_order_is_the_stable_order_of_the_queue_keys(queue_ids):
    """``verify.store._queue_order`` (a 16-bit code where the group's queues allow one) orders records as a
    stable sort of ``dispatch.queue_keys`` does, negative queue ids (damage) included."""
    from rocketstore_spark.rocketmq import dispatch
    from rocketstore_spark.verify.store import _queue_order
    rng = np.random.default_rng(7)
    topic = rng.integers(0, 20, 50_000).astype(np.int32)
    queue_id = rng.integers(*queue_ids, 50_000).astype(np.int32)
    order, queues = _queue_order(topic, queue_id)
    key = dispatch.queue_keys(topic, queue_id)
    expected = np.argsort(key, kind="stable")
    assert np.array_equal(order, expected)
    sorted_key = key[expected]
    starts = np.flatnonzero(np.r_[True, sorted_key[1:] != sorted_key[:-1]])
    assert queues == [(*dispatch.queue_of(sorted_key[a]), int(a), int(b))
                      for a, b in zip(starts, np.r_[starts[1:], len(key)])]
