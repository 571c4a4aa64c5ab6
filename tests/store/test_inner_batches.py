"""Unwrapped inner batches (codec.inner_batch through store.records.read_table) against what a RocketMQ 5.5.1
consumer receives from getMessage in tests/golden/batchcq-5.5.1/ (MessageDecoder.decodeMessage per record)."""
from __future__ import annotations

import hashlib

import pyarrow as pa
import pytest

from rocketstore_spark.codec import inner_batch
from rocketstore_spark.store.records import read_table
from tests.store.test_batchconsumequeue import SCENARIOS, batch_queues, manifest, store

COLUMNS = ("topic", "queue_id", "queue_offset", "sys_flag", "flag", "store_timestamp", "born_timestamp", "keys",
           "tags", "properties", "uniq_key", "body", "body_length", "body_uncompressed")


def ms(ts) -> int:
    return int(ts.timestamp() * 1000)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_unwrapped_rows_are_what_a_consumer_receives(scenario):
    table, findings = read_table(store(scenario), COLUMNS, unwrap_batches=True)
    rows = [r for r in table.to_pylist() if r["topic"] == "BatchTopic"]
    got = sorted((r["queue_id"], r["queue_offset"], r["physical_offset"], r["sys_flag"], r["flag"],
                  ms(r["store_timestamp"]), ms(r["born_timestamp"]), dict(r["properties"]), r["tags"],
                  r["properties"] and dict(r["properties"]).get("KEYS"), r["body_length"],
                  hashlib.sha256(r["body"]).hexdigest()) for r in rows)
    want = sorted((q["queue_id"], m["queue_offset"], m["commitlog_offset"], m["sys_flag"], m["flag"],
                   m["store_timestamp"], m["born_timestamp"], m["properties"], m["tags"], m["keys"], m["body_size"],
                   m["body_sha256"]) for q in batch_queues(scenario) for m in q["received"])
    assert len(got) == sum(q["max_offset"] - q["min_offset"] for q in batch_queues(scenario))
    assert got == want
    for r in rows:
        props = dict(r["properties"])
        assert r["keys"] == [k for k in props.get("KEYS", "").split(" ") if k]
        assert r["uniq_key"] == props.get("UNIQ_KEY")
        assert r["body_uncompressed"] is None


def test_outer_view_is_the_default_and_unchanged():
    outer, _ = read_table(store("clean"), COLUMNS)
    batches = [r for r in outer.to_pylist() if r["sys_flag"] & inner_batch.UNWRAP_FLAGS == inner_batch.UNWRAP_FLAGS]
    # RocketMQ's units: one per record, the inner batches those of batch size > 1 or with INNER_NUM
    units = {(q["queue_id"], u[1]): u for q in batch_queues("clean") for u in q["units"]}
    assert batches and all(units[(r["queue_id"], r["physical_offset"])][0] == r["queue_offset"] for r in batches)
    assert all(int(dict(r["properties"])["INNER_NUM"]) == units[(r["queue_id"], r["physical_offset"])][4]
               for r in batches)
    # a batch without inner batches comes back as it is
    plain = outer.filter(pa.compute.equal(outer.column("topic"), "PlainTopic")).to_batches()[0]
    assert inner_batch.unwrap(plain) is plain


def test_a_body_that_does_not_parse_stays_whole():
    outer, _ = read_table(store("clean"), COLUMNS)
    batch = outer.combine_chunks().to_batches()[0].slice(0, 1)
    assert batch.column("sys_flag")[0].as_py() & 0xC0 == 0xC0
    body = batch.column("body")[0].as_py()
    broken = body[:-1]                                   # the last inner message cut short
    damaged = batch.set_column(batch.schema.get_field_index("body"), "body", pa.array([broken], pa.binary()))
    assert inner_batch.unwrap(damaged).num_rows == 1
