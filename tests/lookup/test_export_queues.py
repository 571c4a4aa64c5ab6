"""An export of a topic read through its ConsumeQueues (``lookup.queue_slice``) gives exactly the rows, in
the same order, of the full scan of the same slice — on every golden store, on a store whose queues cover it,
and on copies of it with damaged ConsumeQueues — and says how each store was read."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from rocketstore_spark.codec import consumequeue
from rocketstore_spark.codec.encode import Message
from rocketstore_spark.lookup.export import Slice, export_schema, iter_slice
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.store.discovery import discover
from tests.builders import write_store
from tests.golden.goldens import GOLDENS
from tests.store_files import copy_store

TOPICS = ("Orders", "Payments", "Audit", "Logs")


def sliced(store: Path, where: Slice, plans: list | None = None) -> pa.Table:
    return pa.concat_tables([export_schema().empty_table(), *iter_slice(discover([str(store)]), where, plans=plans)])


def scanned(store: Path, where: Slice) -> pa.Table:
    """The full scan's rows of ``where``: the slice without its topic (no ConsumeQueue read), then the topic."""
    t = sliced(store, Slice(**{**where.__dict__, "topic": None}))
    return t.filter(pc.equal(t["topic"], where.topic))


def assert_same_as_scan(store: Path, where: Slice) -> list:
    plans: list = []
    got = sliced(store, where, plans)
    want = scanned(store, where)
    assert got.num_rows == want.num_rows and got.equals(want), (store, where, plans[0].describe())
    return plans


def slices(topic: str, t: pa.Table) -> list[Slice]:
    """A topic alone and with each other filter, bounds taken from the store's own records."""
    mine = t.filter(pc.equal(t["topic"], topic))
    if not mine.num_rows:
        return [Slice(topic=topic)]
    phy = mine["physical_offset"].to_numpy()
    ms = pc.cast(mine["store_timestamp"], pa.int64()).to_numpy() // 1000
    keys = [k for k in pc.list_flatten(mine["keys"]).to_pylist() if k]
    tags = [x for x in mine["tags"].to_pylist() if x]
    return [Slice(topic=topic), Slice(topic=topic, queue_id=int(mine["queue_id"][0].as_py())),
            Slice(topic=topic, crc_ok_only=True, from_offset=int(phy[len(phy) // 3]) + 1,
                  to_offset=int(phy[2 * len(phy) // 3])),
            Slice(topic=topic, since_ms=int(np.median(ms)), until_ms=int(ms.max()), key=keys[0] if keys else None),
            Slice(topic=topic, tag=tags[0] if tags else None, queue_id=1)]


@pytest.mark.parametrize("g", GOLDENS, ids=lambda g: g.id)
def test_every_golden_store_exports_the_scans_rows(g):
    everything = sliced(g.store, Slice())
    topics = pc.value_counts(everything["topic"]).to_pylist()
    for topic in [*(c["values"] for c in sorted(topics, key=lambda c: -c["counts"])[:2]), "NoSuchTopic"]:
        for where in slices(topic, everything):
            assert_same_as_scan(g.store, where)


# ------------------------------------------------------------------------ a store its queues cover


def messages(n: int, prepared_at: int | None = None) -> list[Message]:
    rnd = np.random.default_rng(5)
    out = []
    for i in range(n):
        topic = TOPICS[int(rnd.integers(len(TOPICS)))]
        out.append(Message(topic=topic, queue_id=int(rnd.integers(4)), body=bytes(rnd.integers(0, 256, int(rnd.integers(10, 900)), dtype=np.uint8)),
                           store_timestamp=1_700_000_000_000 + 1000 * i,
                           sys_flag=4 if i == prepared_at else 0,          # a PREPARED half message: no entry
                           properties={"TAGS": f"tag{i % 3}", "KEYS": f"k{i % 50} other",
                                       "UNIQ_KEY": f"U{i:08d}"}))
    return out


@pytest.fixture(scope="module")
def queued(tmp_path_factory) -> Path:
    """A store of four topics over about twenty 64 KiB segments, ConsumeQueues rebuilt from it; one PREPARED
    record in its seventh segment."""
    root = tmp_path_factory.mktemp("queued")
    store = root / "store"
    placed = write_store(store / "commitlog", messages(1200))
    seventh = next(i for i, (offset, _) in enumerate(placed) if offset >= 6 * (1 << 16)) + 3
    shutil.rmtree(store / "commitlog")
    write_store(store / "commitlog", messages(1200, prepared_at=seventh))
    rebuild_store(str(store), root / "rebuilt", options={"rocketmqVersion": "5.3.3"})
    shutil.move(root / "rebuilt" / "consumequeue", store / "consumequeue")
    return store


def test_a_covered_store_is_read_through_its_queues_with_the_scans_rows(queued):
    everything = sliced(queued, Slice())
    for topic in TOPICS[:2]:
        for where in slices(topic, everything):
            plans = assert_same_as_scan(queued, where)
            assert plans[0].through_queues and not plans[0].fallbacks, plans[0].describe()
    plans = assert_same_as_scan(queued, Slice(topic="Orders"))
    text = plans[0].describe()
    assert text.startswith("read through the ConsumeQueue") and "1 of" in text      # the half message's segment
    assert sliced(queued, Slice(key="k3")).num_rows and plan_text(queued, Slice(key="k3")) == \
        "scanned: the slice names no topic"


def plan_text(store: Path, where: Slice) -> str:
    plans: list = []
    sliced(store, where, plans)
    return plans[0].describe()


def queue_file(store: Path, topic: str, queue_id: int) -> Path:
    return next((store / "consumequeue" / topic / str(queue_id)).iterdir())


def rewrite(path: Path, change) -> None:
    entries = consumequeue.decode_entries(path.read_bytes()).copy()
    change(entries)
    path.write_bytes(entries.tobytes())


def other_record(entries):
    entries["commit_log_offset"][5] = entries["commit_log_offset"][6]


def wrong_size(entries):
    entries["size"][4] += 8


def zeroed(entries):
    entries[10:14] = np.zeros(4, dtype=entries.dtype)


def cut(path: Path) -> None:
    """The file ends 30 entries before its last written one: the queue lags the log."""
    n = consumequeue.written_count(consumequeue.decode_entries(path.read_bytes()))
    path.write_bytes(path.read_bytes()[:consumequeue.ENTRY_SIZE * (n - 30)])


def dispatch_lag(store: Path, lag: int) -> None:
    """Every queue loses its entries from offset ``lag`` on, as when dispatch lags the log at a crash."""
    files = [f for t in (store / "consumequeue").iterdir() for q in t.iterdir() for f in q.iterdir()]
    for f in files:
        entries = consumequeue.decode_entries(f.read_bytes())
        entries = entries[:consumequeue.written_count(entries)]
        f.write_bytes(entries[entries["commit_log_offset"] < lag].tobytes())


def test_records_past_the_dispatched_ones_are_scanned(queued, tmp_path):
    store = copy_store(queued, tmp_path / "store")
    everything = sliced(store, Slice())
    lag = int(everything["physical_offset"][-60].as_py())               # 60 records not dispatched
    dispatch_lag(store, lag)
    for where in slices("Orders", everything):
        plans = assert_same_as_scan(store, where)
    segment = lag // (1 << 16)
    # the segment of the lag: read through the queues up to it, then scanned; later ones scanned whole
    assert plans[0].covered[segment] == lag % (1 << 16) and (plans[0].covered[segment + 1:] < 0).all()


DAMAGE = {
    "an entry naming another record": lambda s: rewrite(queue_file(s, "Orders", 1), other_record),
    "an entry with a wrong size": lambda s: rewrite(queue_file(s, "Orders", 2), wrong_size),
    "zeroed entries": lambda s: rewrite(queue_file(s, "Orders", 0), zeroed),
    "a truncated queue file (dispatch lag)": lambda s: cut(queue_file(s, "Orders", 3)),
    "another topic's truncated queue file": lambda s: cut(queue_file(s, "Logs", 0)),
    "entries swapped between topics": lambda s: swap_with_a_neighbour(s),
    "a missing queue directory": lambda s: shutil.rmtree(s / "consumequeue" / "Orders" / "2"),
    "another topic's missing queue directory": lambda s: shutil.rmtree(s / "consumequeue" / "Audit" / "1"),
    "a missing topic directory": lambda s: shutil.rmtree(s / "consumequeue" / "Orders"),
    "no ConsumeQueues": lambda s: shutil.rmtree(s / "consumequeue"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_queues_give_the_scans_rows(queued, damage, tmp_path):
    store = copy_store(queued, tmp_path / "store")
    DAMAGE[damage](store)
    everything = sliced(store, Slice())
    for where in slices("Orders", everything):
        assert_same_as_scan(store, where)


def swap_with_a_neighbour(store: Path) -> None:
    """Swap an entry of Orders/1 with one of Logs/0 for a record between the same neighbours: every queue still
    ascends and all claims still tile the log, but each entry now names a record of the other topic."""
    a_path, b_path = queue_file(store, "Orders", 1), queue_file(store, "Logs", 0)
    a, b = (consumequeue.decode_entries(p.read_bytes()).copy() for p in (a_path, b_path))
    a, b = (e[:consumequeue.written_count(e)] for e in (a, b))
    ao, bo = a["commit_log_offset"].astype(np.int64), b["commit_log_offset"].astype(np.int64)
    for i in range(1, len(a) - 1):
        j = int(np.searchsorted(bo, ao[i]))
        for j in (j - 1, j):
            if 0 < j < len(b) - 1 and ao[i - 1] < bo[j] < ao[i + 1] and bo[j - 1] < ao[i] < bo[j + 1]:
                a[i], b[j] = b[j].copy(), a[i].copy()
                a_path.write_bytes(a.tobytes())
                b_path.write_bytes(b.tobytes())
                return
    raise AssertionError("no entries to swap")


def test_an_entry_that_fails_its_check_falls_back_and_says_so(queued, tmp_path):
    store = copy_store(queued, tmp_path / "store")
    swap_with_a_neighbour(store)
    for where in (Slice(topic="Orders"), Slice(topic="Logs"), Slice(topic="Orders", queue_id=1)):
        plans = assert_same_as_scan(store, where)
        assert plans[0].through_queues and len(plans[0].fallbacks) == 1
        assert "scanned from where an entry failed its check (an entry names a record of another" in \
            plans[0].describe()


def test_the_cli_says_how_each_store_was_read(queued, tmp_path):
    from tests.cli.helpers import run
    result = run("export", queued, "--topic", "Orders", "--output", tmp_path / "o.parquet")
    assert result.exit_code == 0 and "read through the ConsumeQueue" in result.stderr
    result = run("export", queued, "--tag", "tag1", "--output", tmp_path / "t.parquet")
    assert result.exit_code == 0 and "scanned: the slice names no topic" in result.stderr
    result = run("export", queued, "--topic", "Orders", "--output", tmp_path / "o.jsonl", "--json")
    assert json.loads(result.stdout)["read"][0]["through_consumequeue"] is True
