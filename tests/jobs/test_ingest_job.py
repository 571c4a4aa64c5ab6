"""jobs/ingest.py with a real local Spark session: incremental runs over a store that grows (our encoder appends,
one run meets a half-written last record) equal one run over the final store; re-runs add nothing; a store
changed under the watermark is refused and re-ingested from the cut; vanished stores, newer tables, racing runs
and failed writes leave the table as it was."""
from __future__ import annotations

import json
import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from jobs import ingest as job
from rocketstore_spark.codec.encode import Message, SegmentWriter
from rocketstore_spark.spark.ingest import ingest_store, open_table
from rocketstore_spark.store.discovery import discover
from tests.builders import write_segments

pytestmark = pytest.mark.spark

SEGMENT = 64 << 10
DAY_MS = 86_400_000


def messages(n: int, seed: int, first_ms: int = 1_700_000_000_000) -> list[Message]:
    """Messages of 6 topics over two days, bodies of 20 B to 3 KiB, keys and tags."""
    rnd = random.Random(seed)
    return [Message(topic=f"T{rnd.randrange(6)}", body=rnd.randbytes(rnd.randrange(20, 3000)),
                    queue_id=rnd.randrange(4), store_timestamp=first_ms + i * (2 * DAY_MS // n),
                    born_timestamp=first_ms + i * (2 * DAY_MS // n) - 5,
                    properties={"TAGS": rnd.choice("ABC"), "KEYS": f"k{seed}-{i}", "UNIQ_KEY": f"{seed:04X}{i:08X}"})
            for i in range(n)]


class GrowingStore:
    """A store our encoder appends to, written out after each step (files of the full segment size, zeros
    after the data, as a broker preallocates them)."""

    def __init__(self, root: Path):
        self.root = root
        self.writer = SegmentWriter(SEGMENT)
        self.placed: list[tuple[int, int]] = []

    def append(self, batch: list[Message], half_written_last: bool = False) -> None:
        self.placed += [self.writer.append(m) for m in batch]
        write_segments(self.writer, self.root / "commitlog")
        if half_written_last:             # the broker was still writing the last record: its second half is zeros
            offset, size = self.placed[-1]
            path = self.root / "commitlog" / f"{offset // SEGMENT * SEGMENT:020d}"
            data = bytearray(path.read_bytes())
            cut = offset % SEGMENT + size // 2
            data[cut:] = bytes(len(data) - cut)
            path.write_bytes(bytes(data))

    @property
    def layout(self):
        return discover(str(self.root))[0]


def rows(spark, table) -> list[dict]:
    return [r.asDict(recursive=True) for r in spark.read.format("delta").load(str(table)).orderBy("physical_offset")
            .collect()]


def version(spark, table) -> int:
    return spark.sql(f"DESCRIBE HISTORY delta.`{table}`").agg(F.max("version")).first()[0]


def run(spark, table, layout, bodies=False, **kw):
    open_table(spark, str(table), bodies)
    return ingest_store(spark, str(table), layout, bodies, **kw)


@pytest.mark.long
def test_three_runs_over_a_growing_store_equal_one_run_over_the_final_store(spark, tmp_path, capsys):
    store = GrowingStore(tmp_path / "store")
    table, reference = tmp_path / "table", tmp_path / "reference"
    store.append(messages(150, 1))
    first = run(spark, table, store.layout, bodies=True)
    assert (first.status, first.messages, first.start_offset) == ("ingested", 150, 0)
    assert first.end_offset == sum(store.placed[-1])

    store.append(messages(200, 2), half_written_last=True)
    second = run(spark, table, store.layout, bodies=True)
    assert second.start_offset == first.end_offset
    assert second.messages == 199 and second.end_offset == store.placed[-1][0]      # the torn record waits
    assert second.tail is not None and "incomplete" in second.tail and not second.damaged

    store.append(messages(120, 3))                                                   # the torn record is whole now
    third = run(spark, table, store.layout, bodies=True)
    assert third.start_offset == second.end_offset and third.messages == 121 and not third.damaged
    assert third.end_offset == sum(store.placed[-1]) and third.tail is None

    one = run(spark, reference, store.layout, bodies=True)
    assert one.messages == 470
    got, want = rows(spark, table), rows(spark, reference)
    assert [r["physical_offset"] for r in got] == [o for o, _ in store.placed]
    assert got == want                                                               # row for row, every column
    assert len({r["store_date"] for r in got}) == 3 and got[0]["body"] is not None

    before = version(spark, table)
    again = run(spark, table, store.layout, bodies=True)                             # unchanged store
    assert (again.status, again.messages) == ("unchanged", 0) and version(spark, table) == before
    assert rows(spark, table) == want


@pytest.mark.long
def test_the_job_reports_and_snapshots_side_tables(spark, tmp_path, capsys):
    from tests.golden.goldens import BY_ID
    g = BY_ID["5.5.1/consumer-offsets"]
    table = tmp_path / "table"
    assert job.main(spark, ["--store", str(g.store), "--table", str(table)]) == 0
    out = capsys.readouterr().out
    assert f"{g.store}: {len(g.messages)} message(s) ingested, physical offsets 0 .. " in out
    assert job.main(spark, ["--store", str(g.store), "--table", str(table)]) == 0
    assert f"{g.store}: nothing new since physical offset" in capsys.readouterr().out
    snap = table / "_snapshots"
    runs = spark.read.format("delta").load(str(snap / "ingest_runs")).orderBy("run_time").collect()
    assert [(r.status, r.messages) for r in runs] == [("ingested", len(g.messages)), ("unchanged", 0)]
    lag = spark.read.format("delta").load(str(snap / "consumer_lag"))
    assert lag.select("run_id").distinct().count() == 2 and lag.where("lag IS NOT NULL").count() > 0
    queues = spark.read.format("delta").load(str(snap / "queues")).where(f"run_id = '{runs[0].run_id}'").collect()
    assert {(q.topic, q.queue_id, q.max_offset) for q in queues} >= \
        {(q["topic"], q["queue_id"], q["max_offset"]) for q in g.manifest["queues"]}
    for name in ("segments", "topics", "subscription_groups"):
        assert spark.read.format("delta").load(str(snap / name)).select("run_id").distinct().count() == 2
    # the README's Spark SQL examples, on this table (its store's messages are of 2026-11-22)
    import re
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    sql = re.search(r"## Incremental ingest into Delta Lake.*?```sql\n(.*?)```", readme, re.S).group(1)
    statements = [s.strip() for s in re.sub(r"--[^\n]*", "", sql.replace("/tmp/ingest", str(table))).split(";")]
    results = [spark.sql(s).collect() for s in statements if s]
    per_hour, as_of_1 = results[0], results[1]
    assert sum(r.messages for r in per_hour) == len(g.messages) and as_of_1[0][0] == len(g.messages)
    assert [r.status for r in results[3]] == ["ingested", "unchanged"] and results[4]


@pytest.mark.long
def test_a_log_cut_below_the_watermark_is_refused_then_reingested_from_the_cut(spark, tmp_path):
    store = GrowingStore(tmp_path / "store")
    table, reference = tmp_path / "table", tmp_path / "reference"
    store.append(messages(200, 4))
    run(spark, table, store.layout)
    before = version(spark, table)
    # a repair cut the log at message 120 (zeros from there), then the broker wrote other messages
    keep = 120
    cut = sum(store.placed[keep - 1])
    repaired = GrowingStore(tmp_path / "store")
    shutil.rmtree(store.root / "commitlog")
    repaired.writer = SegmentWriter(SEGMENT)
    replay = messages(200, 4)[:keep]
    repaired.append(replay + messages(150, 5, first_ms=1_700_100_000_000))
    assert sum(repaired.placed[keep - 1]) == cut
    refused = run(spark, table, repaired.layout)
    assert refused.status == "refused" and "below the watermark changed" in refused.message
    assert f"--restart-at {repaired.layout.name}=OFFSET" in refused.message
    assert version(spark, table) == before                                           # nothing written

    wrong = run(spark, table, repaired.layout, restart_at=cut + 1)
    assert wrong.status == "refused" and "no ingested record of this store ends there" in wrong.message
    again = run(spark, table, repaired.layout, restart_at=cut)
    assert again.status == "ingested" and again.messages == 150
    run(spark, reference, repaired.layout)
    assert rows(spark, table) == rows(spark, reference)


def test_segments_deleted_by_retention_below_the_watermark_are_fine(spark, tmp_path):
    store = GrowingStore(tmp_path / "store")
    table = tmp_path / "table"
    store.append(messages(150, 6))
    run(spark, table, store.layout)
    store.append(messages(60, 7))
    os.remove(store.root / "commitlog" / f"{0:020d}")                                # retention
    later = run(spark, table, store.layout)
    assert (later.status, later.messages) == ("ingested", 60)
    assert [r["physical_offset"] for r in rows(spark, table)] == [o for o, _ in store.placed]


def test_bad_input_vanished_store_newer_table_and_bodies_mismatch(spark, tmp_path, capsys):
    store = GrowingStore(tmp_path / "store")
    store.append(messages(30, 8))
    table = tmp_path / "table"
    assert job.main(spark, ["--store", str(store.root), "--table", str(table), "--no-snapshots"]) == 0
    shutil.rmtree(store.root)                                                        # vanished between runs
    with pytest.raises(SystemExit) as exit_:
        job.check(["--store", str(store.root), "--table", str(table)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == f"ingest: {store.root}: no such file or directory"
    other = GrowingStore(tmp_path / "other")
    other.append(messages(10, 9))
    before = version(spark, table)
    assert job.main(spark, ["--store", str(other.root), "--table", str(table), "--bodies"]) == 2
    assert "created without message bodies: run without --bodies" in capsys.readouterr().err
    spark.sql(f"ALTER TABLE delta.`{table}` SET TBLPROPERTIES ('rocketstore.ingest.format' = '2')")
    assert job.main(spark, ["--store", str(other.root), "--table", str(table)]) == 2
    assert "written by a newer version of the ingest (table format 2" in capsys.readouterr().err
    assert version(spark, table) == before + 1 and len(rows(spark, table)) == 30     # only the ALTER


@pytest.mark.long
def test_two_runs_of_one_store_at_once_one_wins_nothing_duplicated(spark, tmp_path):
    store = GrowingStore(tmp_path / "store")
    store.append(messages(80, 10))
    table = tmp_path / "table"
    open_table(spark, str(table), False)
    started, go = tmp_path / "started", tmp_path / "go"

    def hold(batch):                        # the first run's write waits, its Delta transaction open, for "go"
        import os
        import time
        open(started, "a").close()
        t = time.time()
        while not os.path.exists(go) and time.time() - t < 120:
            time.sleep(0.05)
        return batch

    results = {}
    slow = threading.Thread(target=lambda: results.update(slow=ingest_store(spark, str(table), store.layout, False,
                                                                            batches=hold)))
    slow.start()
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline:
        time.sleep(0.1)
    fast = ingest_store(spark, str(table), store.layout, False)
    go.touch()
    slow.join(180)
    assert fast.status == "ingested" and fast.messages == 80
    assert results["slow"].status == "conflict" and "another ingest of this store committed" in \
        results["slow"].message
    assert [r["physical_offset"] for r in rows(spark, table)] == [o for o, _ in store.placed]


def test_a_failed_write_commits_nothing_and_the_next_run_reads_it_all(spark, tmp_path):
    store = GrowingStore(tmp_path / "store")
    store.append(messages(60, 11))
    table = tmp_path / "table"
    run(spark, table, store.layout)
    store.append(messages(90, 12))
    before, middle = version(spark, table), store.placed[100][0]

    def fail(batch):                        # a disk that fills, an executor lost: the write dies half way
        if batch.column("physical_offset").to_numpy().max() >= middle:
            raise OSError(28, "No space left on device")
        return batch

    with pytest.raises(Exception, match="No space left on device"):
        run(spark, table, store.layout, batches=fail)
    assert version(spark, table) == before and len(rows(spark, table)) == 60
    after = run(spark, table, store.layout)
    assert after.messages == 90
    assert [r["physical_offset"] for r in rows(spark, table)] == [o for o, _ in store.placed]


def live_files(table) -> list[tuple]:
    """(partition values, statistics) of the table's files now, from its Delta log (adds less removes)."""
    adds = {}
    for log in sorted((Path(table) / "_delta_log").glob("*.json")):
        for line in log.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                adds[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                adds.pop(action["remove"]["path"])
    return sorted((json.dumps(a["partitionValues"], sort_keys=True), a["stats"]) for a in adds.values())


@pytest.mark.long
def test_the_arrow_writer_commits_what_the_spark_writer_does(spark, tmp_path):
    """The same store ingested by the ingest's own writer (pyarrow in the workers, committed through Delta's
    transaction) and by Spark's Delta writer, twice as it grows: equal rows, files, partition values and
    statistics (a null store_timestamp to the null partition, strings past Delta's 32-character cut)."""
    store = GrowingStore(tmp_path / "st'o re")
    batch = messages(120, 21)
    batch[7].store_timestamp = 300_000_000_000_000              # past year 9999: a null store_timestamp
    batch[9].topic = "Topic-" + "\u00e9\u4e2d" * 20 + "-tail"    # 46 characters, two of them non-ASCII
    batch[11].properties["TAGS"] = "t" * 40
    store.append(batch)
    tables = {w: tmp_path / w for w in ("arrow", "spark")}
    for grow in (False, True):
        if grow:
            store.append(messages(50, 22, first_ms=1_700_000_000_000 + 2 * DAY_MS), half_written_last=True)
        got = {w: run(spark, t, store.layout, writer=w) for w, t in tables.items()}
        assert got["arrow"] == got["spark"].__class__(**{**vars(got["spark"]), "seconds": got["arrow"].seconds})
    assert rows(spark, tables["arrow"]) == rows(spark, tables["spark"])
    assert len(rows(spark, tables["arrow"])) == 169
    assert live_files(tables["arrow"]) == live_files(tables["spark"])
    assert any('"store_date": null' in p for p, _ in live_files(tables["arrow"]))
    import pyarrow.parquet as pq                                  # the files' own columns too, partitions last
    columns = {w: {tuple(pq.read_schema(f).names) for f in t.glob("store=*/*/*.parquet")} for w, t in tables.items()}
    assert columns["arrow"] == columns["spark"] and len(columns["arrow"]) == 1
    history = {w: spark.sql(f"DESCRIBE HISTORY delta.`{t}`").where("version = 2")
               .select("operation", "operationParameters.predicate", "userMetadata").first() for w, t in tables.items()}
    assert history["arrow"] == history["spark"]
