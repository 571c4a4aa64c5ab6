"""The Spark rebuild and verify jobs on BatchCQ stores (tests/golden/batchcq-5.5.1, written by RocketMQ 5.5.1 with
the topic attribute queue.type=BatchCQ; manifests are RocketMQ's own views), with a real local Spark session:
every batchconsumequeue/ file the Spark rebuild writes is byte-identical to RocketMQ's own rebuild, its whole
output to `rocketstore rebuild`'s; the Spark verify finds what `rocketstore verify` finds, on RocketMQ's stores
and on copies with damaged units or a property RocketMQ's dispatch cannot parse."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from rocketstore_spark.codec.encode import Message
from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.rocketmq.batch_queues import BatchQueueError
from rocketstore_spark.verify.store import verify_store
from tests.builders import write_store
from tests.cli.helpers import run

pytestmark = pytest.mark.spark

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "batchcq-5.5.1"


def _manifest(scenario: str) -> dict:
    return json.loads((GOLDEN / scenario / "manifest.json").read_text())


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _rebuilt(result) -> list:
    return [[(q.topic, q.queue_id, list(q.files), q.max_offset) for q in result.batch_queues],
            [(d.kind, d.store_file, d.rebuilt_file, d.status, d.detail) for d in result.differences]]


@pytest.mark.parametrize("scenario", ("clean", "crash"))
def test_the_spark_rebuild_writes_rocketmqs_batch_consume_queues(spark, scenario, tmp_path, capsys):
    from rocketstore_spark.spark.rebuild import rebuild
    store = str(GOLDEN / scenario / "store")
    # small scan tasks: each BatchCQ queue's units come from several of them
    result = rebuild(spark, store, tmp_path / "spark", split_size=16 << 10)
    ours = _files(tmp_path / "spark")
    # RocketMQ's own rebuild (its queues deleted, restarted; after the crash only what that restart dispatches)
    expected = {f["path"]: f["sha256"] for f in _manifest(scenario)["rebuild"]["files"]}
    assert expected and {p: hashlib.sha256(b).hexdigest() for p, b in ours.items()
                         if p.startswith("batchconsumequeue/")} == expected
    # the whole output, the queues written and the comparison with the store as `rocketstore rebuild` has them
    ref = rebuild_store(store, tmp_path / "ref")
    assert ours == _files(tmp_path / "ref") and _rebuilt(result) == _rebuilt(ref)
    assert [(q.topic, q.queue_id) for q in result.queues] == [("PlainTopic", 1)]        # nothing of BatchTopic
    assert sorted(result.findings) == sorted({f.render() for f in ref.findings})
    if scenario == "crash":
        # the job with --resync (every valid record, the units before the restart's dispatch start too) against
        # `rocketstore rebuild --resync`: the same files, exit status and count of files against the store's
        from jobs import rebuild as job
        code = job.main(spark, ["--store", store, "--output", str(tmp_path / "job"), "--resync"])
        out = capsys.readouterr().out
        cli = run("rebuild", store, "--output", tmp_path / "cli", "--resync")
        assert _files(tmp_path / "job") == _files(tmp_path / "cli") and code == cli.exit_code == 3
        against = re.compile(r"Against the store: .*")
        assert against.search(out).group(0) == against.search(cli.output).group(0)
        assert "3 BatchConsumeQueue(s) in 9 file(s)" in out


def _damaged(target: Path) -> Path:
    """RocketMQ's clean store with a unit changed (BatchTopic/0), a queue's last unit zeroed (BatchTopic/1), a
    unit written twice (BatchTopic/2), a BatchConsumeQueue directory for a topic that is not BatchCQ and a
    ConsumeQueue of the BatchCQ topic (PlainTopic/1's files as consumequeue/BatchTopic/0)."""
    shutil.copytree(GOLDEN / "clean" / "store", target)
    files = _manifest("clean")["files"]

    def edit(f: dict, at: int, data: bytes) -> None:
        path = target / f["path"]
        buf = bytearray(path.read_bytes())
        buf[at:at + len(data)] = data
        path.write_bytes(bytes(buf))
    queue = {q: [f for f in files if f["path"].startswith(f"batchconsumequeue/BatchTopic/{q}/")] for q in (0, 1, 2)}
    edit(queue[0][1], 2 * 46 + 37, bytes([bytes.fromhex(queue[0][1]["units"][2])[37] ^ 1]))
    edit(queue[1][-1], (len(queue[1][-1]["units"]) - 1) * 46, bytes(46))
    edit(queue[2][-1], len(queue[2][-1]["units"]) * 46, bytes.fromhex(queue[2][-1]["units"][-1]))
    (target / "batchconsumequeue" / "PlainTopic" / "0").mkdir(parents=True)
    shutil.copytree(target / "consumequeue" / "PlainTopic" / "1", target / "consumequeue" / "BatchTopic" / "0")
    return target


def _classic_only(target: Path) -> Path:
    """RocketMQ's clean store without batchconsumequeue/ and with an empty ConsumeQueue directory of the BatchCQ
    topic: the finding comes without any BatchConsumeQueue to check."""
    shutil.copytree(GOLDEN / "clean" / "store", target)
    shutil.rmtree(target / "batchconsumequeue")
    (target / "consumequeue" / "BatchTopic" / "2").mkdir(parents=True)
    return target


def _unparsable(target: Path) -> Path:
    """A BatchCQ store of our encoder whose log holds an INNER_BASE RocketMQ cannot parse (queue 1) before an
    INNER_NUM it cannot parse (queue 0): RocketMQ's dispatch parses INNER_NUM first, so that one is the
    finding, whichever queue a task checks."""
    batch = [Message("B", b"x" * 40, queue_id=k % 2, properties={"INNER_NUM": "2", "INNER_BASE": str(2 * (k // 2))})
             for k in range(12)]
    batch[3].properties["INNER_BASE"] = "x3"
    batch[8].properties["INNER_NUM"] = "n8"
    write_store(target / "commitlog", batch, segment_size=1 << 12)
    (target / "config").mkdir()
    (target / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {"B": {
        "topicName": "B", "readQueueNums": 2, "writeQueueNums": 2, "attributes": {"queue.type": "BatchCQ"}}}}))
    (target / "batchconsumequeue" / "B" / "0").mkdir(parents=True)
    return target


def _key(f) -> str:
    return json.dumps(f.as_row(), sort_keys=True)         # (evidence comes back from Spark as a map: any order)


def test_the_spark_verify_finds_what_rocketstore_verify_finds(spark, tmp_path):
    from rocketstore_spark.spark.verify import verify
    stores = [GOLDEN / "clean" / "store", GOLDEN / "crash" / "store", _damaged(tmp_path / "damaged"),
              _unparsable(tmp_path / "unparsable"), _classic_only(tmp_path / "classic")]
    run = verify(spark, [str(s) for s in stores])            # a task per core and store: several per queue
    checks = []
    for rep, store in zip(run.stores, stores):
        ref = verify_store(str(store))
        assert sorted(map(_key, rep.findings)) == sorted(map(_key, ref.findings)), store
        assert [(q["topic"], q["queue_id"], q["max_offset"], q["records"]) for q in rep.queues] == \
            [(q.topic, q.queue_id, q.max_offset, q.records) for q in ref.queues]
        checks.append(sorted(f.check for f in rep.findings if f.check.startswith(("batchcq.", "queue.",
                                                                                "consumequeue."))))
    # RocketMQ's stores: nothing (BatchTopic's records are not expected in consumequeue/); each damage found
    assert checks[:2] == [[], []]
    assert checks[2] == ["batchcq.classic_queue_of_batch_topic", "batchcq.extra_unit", "batchcq.lagging",
                         "batchcq.not_batch_topic", "batchcq.unit_mismatch"] + ["consumequeue.extra_entry"] * 15
    assert [(f.check, f.file) for f in run.stores[4].findings if f.check.startswith("batchcq.")] == [
        ("batchcq.classic_queue_of_batch_topic", "consumequeue/BatchTopic/2")]
    [bad] = [f for f in run.stores[3].findings if f.check.startswith("batchcq.")]
    assert "INNER_NUM of the record" in bad.message


def test_the_spark_rebuild_raises_what_rocketstore_rebuild_raises(spark, tmp_path):
    from rocketstore_spark.spark.rebuild import rebuild
    store = str(_unparsable(tmp_path / "store"))
    with pytest.raises(BatchQueueError) as theirs:
        rebuild_store(store, tmp_path / "ref")
    with pytest.raises(BatchQueueError) as ours:
        rebuild(spark, store, tmp_path / "spark", split_size=1 << 10)
    assert str(ours.value) == str(theirs.value) and "INNER_NUM" in str(ours.value)
    assert not (tmp_path / "spark" / "batchconsumequeue").exists()
