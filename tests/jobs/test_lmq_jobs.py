"""The Spark rebuild job on LMQ multi-dispatch stores (tests/golden/lmq-5.5.1, written by RocketMQ 5.5.1 with
enableLmq + enableMultiDispatch; manifests are RocketMQ's own views), with a real local Spark session: every
%LMQ% ConsumeQueue file byte-identical to RocketMQ's own rebuild, and a name RocketMQ passes over is a finding.
(The Spark verify job on the same stores: tests/jobs/test_verify_job.py, in its run over every golden.)"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore_spark.rebuild.output import rebuild_store

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lmq-5.5.1"


@pytest.mark.parametrize("scenario", ("clean", "cut"))
def test_the_spark_rebuild_writes_rocketmqs_lmq_queues(spark, scenario, tmp_path):
    from rocketstore_spark.spark.rebuild import rebuild
    manifest = json.loads((GOLDEN / scenario / "manifest.json").read_text())
    store = str(GOLDEN / scenario / "store")
    result = rebuild(spark, store, tmp_path / "spark", split_size=16 << 10)
    ours = {str(p.relative_to(tmp_path / "spark")): p.read_bytes()
            for p in (tmp_path / "spark" / "consumequeue").glob("%LMQ%*/*/*")}
    if scenario == "clean":
        # RocketMQ's own rebuild (consumequeue/ deleted, restart): every %LMQ% file byte for byte, and no other
        expected = {rel: bytes.fromhex(h) for rel, h in manifest["rebuild"]["lmq_queue_files"].items()}
        assert expected and ours == expected
    # the whole output as the in-process rebuild writes it (itself RocketMQ's: tests/rebuild/test_lmq_golden.py)
    ref = rebuild_store(store, tmp_path / "ref")
    theirs = {str(p.relative_to(tmp_path / "ref")): p.read_bytes()
              for p in (tmp_path / "ref" / "consumequeue").glob("*/*/*")}
    assert {str(p.relative_to(tmp_path / "spark")): p.read_bytes()
            for p in (tmp_path / "spark" / "consumequeue").glob("*/*/*")} == theirs
    assert [(q.topic, q.queue_id, q.max_offset) for q in result.queues] == \
        [(q.topic, q.queue_id, q.state.max_offset) for q in ref.queues]
    # the names with '/' RocketMQ passes over: findings naming segment and byte, never a directory
    skipped = sorted(f for f in result.findings if "rebuild.lmq_not_dispatched" in f)
    assert skipped and skipped == sorted({f.render() for f in ref.findings if f.check == "rebuild.lmq_not_dispatched"})
    assert not any("bad" in p.name or "escape" in p.name for p in (tmp_path / "spark").rglob("*"))
