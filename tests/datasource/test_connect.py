"""Every source on a real local Spark Connect session (``get_spark(remote="local[2]")``), against RocketMQ's
manifests: registration and reading need no SparkContext and no JVM on the client side.

The Connect session runs in a child interpreter: a local Connect server is a classic SparkContext of its
own, and this process already has one (the session fixture). SPARK_TESTING makes PySpark bind the server to
an ephemeral port (its own mechanism for parallel test runs) instead of 15002. The child prints one JSON
document; the assertions are made here.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.golden.goldens import BY_ID, fastjson_loads

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
MARK = "CONNECT-RESULT "

CHILD = r'''
import hashlib, json, sys
from pyspark.sql import functions as F
from rocketstore_spark.datasource import is_connect
from rocketstore_spark.datasource.commitlog import pushdown_is_scan_scoped
from rocketstore_spark.spark.session import get_spark

paths = json.loads(sys.argv[1])
spark = get_spark("rocketstore-connect-test", remote="local[2]", delta=False)
read = spark.read.format
out = {"session": type(spark).__module__, "is_connect": is_connect(spark),
       "pushdown": pushdown_is_scan_scoped(spark)}

msgs = read("rocketmq").load(paths["clean"])
out["count"] = msgs.count()
out["topic_test"] = msgs.where("topic = 'TopicTest'").count()
out["messages"] = [[r.physical_offset, r.topic, r.queue_id, r.queue_offset, r.store_ms, r.msg_id,
                    hashlib.sha256(r.body).hexdigest()]
                   for r in msgs.select("physical_offset", "topic", "queue_id", "queue_offset",
                                        F.unix_millis("store_timestamp").alias("store_ms"), "msg_id", "body")
                   .collect()]
out["segments"] = [[r.base_offset, r.records, r.valid_end, r.crc_failures, r.first_crc_failure]
                   for r in read("rocketmq_segments").load(paths["corrupt"]).collect()]
out["consumequeue"] = [[r.topic, r.queue_id, r.queue_offset, r.physical_offset, r.size, r.tags_code]
                       for r in read("rocketmq_consumequeue").load(paths["clean"]).collect()]
cp = read("rocketmq_checkpoint").load(paths["clean"]).select(
    F.unix_millis("physic_msg_timestamp").alias("physic"), F.unix_millis("min_timestamp").alias("min"),
    "logics_physical_offset", "abort_present").collect()
out["checkpoint"] = [r.asDict() for r in cp]
out["consumer_offsets"] = [[r.topic, r.consumer_group, r.queue_id, r.consumer_offset]
                           for r in read("rocketmq_consumer_offsets").load(paths["offsets"]).collect()]
from rocketstore_spark.spark.rebuild import rebuild
rebuilt = rebuild(spark, paths["clean"], paths["rebuild"])
out["rebuild"] = {"statuses": sorted({d.status for d in rebuilt.differences}), "findings": rebuilt.findings,
                  "queues": len(rebuilt.queues)}
try:
    read("rocketmq").option("splitsise", "1").load(paths["clean"]).count()
    out["option_error"] = None
except Exception as e:
    out["option_error"] = [type(e).__name__, str(e)]
spark.stop()
print("''' + MARK + '''" + json.dumps(out), flush=True)
'''


@pytest.fixture(scope="module")
def connect(tmp_path_factory):
    clean, corrupt, offsets = BY_ID["5.5.1/clean"], BY_ID["4.9.8/corrupt-body"], BY_ID["5.5.1/consumer-offsets"]
    rebuild_out = tmp_path_factory.mktemp("connect") / "rebuilt"
    paths = {"clean": str(clean.store), "corrupt": str(corrupt.store), "offsets": str(offsets.store),
             "rebuild": str(rebuild_out)}
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "MASTER")
           and not k.startswith("PYSPARK_GATEWAY")}
    env["SPARK_TESTING"] = "1"
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(paths)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    lines = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
    assert proc.returncode == 0 and lines, f"Connect child failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    print(f"Connect child: {time.monotonic() - started:.1f} s")
    return {**json.loads(lines[-1][len(MARK):]), "rebuild_out": rebuild_out}


def test_the_session_is_connect_without_pushdown(connect):
    assert connect["session"].startswith("pyspark.sql.connect.")
    assert connect["is_connect"] is True
    assert connect["pushdown"] is False


def test_rocketmq_rows_are_rocketmqs(connect):
    messages = BY_ID["5.5.1/clean"].messages
    assert connect["count"] == len(messages)
    assert connect["topic_test"] == sum(m["topic"] == "TopicTest" for m in messages)
    want = [[m["physical_offset"], m["topic"], m["queue_id"], m["queue_offset"], m["store_timestamp"], m["msg_id"],
             m["body_sha256"]] for m in messages]
    assert sorted(connect["messages"]) == sorted(want)


def test_segments_consumequeue_checkpoint_offsets(connect):
    corrupt = BY_ID["4.9.8/corrupt-body"].manifest
    flipped = {s["physical_offset"] for s in corrupt["surgery"]}
    segments = sorted(connect["segments"])
    assert [s[:3] for s in segments] == [[s["base_offset"], s["records"], s["valid_end"]] for s in corrupt["segments"]]
    assert sum(s[3] for s in segments) == len(flipped)
    assert {s[4] for s in segments if s[4] is not None} == flipped

    clean = BY_ID["5.5.1/clean"]
    want = sorted([m["topic"], m["queue_id"], m["queue_offset"], m["physical_offset"], m["total_size"], m["tags_code"]]
                  for m in clean.messages if m["transaction_type"] in (0, 8))
    assert sorted(connect["consumequeue"]) == want

    cp = clean.manifest["checkpoint"]
    assert connect["checkpoint"] == [{"physic": cp["physicMsgTimestamp"], "min": cp["minTimestamp"],
                                      "logics_physical_offset": cp["logicsPhysicalOffset"],
                                      "abort_present": clean.manifest["abort_present"]}]

    store = BY_ID["5.5.1/consumer-offsets"].store
    table = fastjson_loads((store / "config" / "consumerOffset.json").read_text())["offsetTable"]
    want = sorted([k.split("@")[0], k.split("@")[1], int(q), o] for k, qs in table.items() for q, o in qs.items())
    assert want and sorted(connect["consumer_offsets"]) == want


def test_an_unknown_option_is_a_readable_error(connect):
    kind, message = connect["option_error"]
    assert kind == "AnalysisException"
    assert "rocketmq: unknown option(s) splitsise; the options are: path" in message


def test_the_spark_rebuild_runs_on_connect_and_writes_rocketmqs_files(connect):
    """The rebuild job asks the session for its cores without a SparkContext; its files are RocketMQ's."""
    expected = BY_ID["5.5.1/clean"].store.parent / "expected-rebuild"
    out = connect["rebuild_out"]
    assert connect["rebuild"]["statuses"] == ["identical"] and connect["rebuild"]["findings"] == []
    queue_files = sorted(p.relative_to(out / "consumequeue") for p in (out / "consumequeue").rglob("*") if p.is_file())
    assert queue_files == sorted(p.relative_to(expected / "consumequeue")
                                 for p in (expected / "consumequeue").rglob("*") if p.is_file())
    assert all((out / "consumequeue" / f).read_bytes() == (expected / "consumequeue" / f).read_bytes()
               for f in queue_files)
    assert [p.read_bytes() for p in sorted((out / "index").iterdir())] == \
        [p.read_bytes() for p in sorted((expected / "index").iterdir())]
