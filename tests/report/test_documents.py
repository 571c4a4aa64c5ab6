"""``report.documents``: the verify's and the rebuild's JSON documents carry what the results hold — the
findings of a damaged store at the records the generator damaged, a clean store's queues rebuilt to
RocketMQ's own max offsets (the golden manifests) — and survive the one serialization."""
from __future__ import annotations

import json

from rocketstore_spark.rebuild.output import rebuild_store
from rocketstore_spark.documents import MADE_BY
from rocketstore_spark.report.documents import document_text, save_document, verify_document
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID


def test_the_verify_document_of_a_damaged_store(tmp_path):
    g = BY_ID["4.9.8/corrupt-body"]
    doc = verify_document([verify_store(str(g.store))])
    assert (doc["document_type"], doc["document_version"], doc["made_by"]) == ("rocketstore-spark/verify", 1, MADE_BY)
    [store] = doc["stores"]
    assert store["store"] == str(g.store) and store["rocketmq_version"].startswith("4.9")
    assert store["settings"]["release"] == store["rocketmq_version"]
    crc = sorted(f["physical_offset"] for f in store["findings"] if f["check"] == "commitlog.body_crc")
    assert crc == sorted(next(m for m in g.messages if m["physical_offset"] <= s["physical_offset"]
                              < m["physical_offset"] + m["total_size"])["physical_offset"] for s in g.manifest["surgery"])
    save_document(doc, str(tmp_path / "v.json"))
    assert (tmp_path / "v.json").read_text() == document_text(doc) + "\n"
    assert json.loads(document_text(doc)) == json.loads(json.dumps(doc, default=str))


def test_the_rebuild_document_of_a_clean_store(tmp_path):
    g = BY_ID["4.9.8/clean"]
    doc = json.loads(document_text(rebuild_store(str(g.store), tmp_path / "out").document()))
    assert doc["document_type"] == "rocketstore-spark/rebuild"
    assert doc["store"] == str(g.store) and doc["output"] == str(tmp_path / "out") and not doc["findings"]
    assert {(q["topic"], q["queue_id"]): q["max_offset"] for q in doc["queues"]} == \
        {(q["topic"], q["queue_id"]): q["max_offset"] for q in g.manifest["queues"] if q["max_offset"]}
    assert doc["differences"] and {d["status"] for d in doc["differences"]} == {"identical"}
    assert doc["records"] == len(g.messages) and doc["settings_sources"]["rocketmqVersion"]
