"""``report.audit``: a damaged store is at risk with RocketMQ's recovery verdict beside its findings (the
corrupt-body golden: the generator flipped body bytes; RocketMQ's own recovery of a copy ends the log at the
manifest's max offset), a clean one is healthy; the areas count every finding once; the document carries its
type, version, the release of rocketstore-spark that made it and, per store, the settings its checks followed."""
from __future__ import annotations

from collections import Counter

from rocketstore_spark.checks import CHECKS
from rocketstore_spark.documents import MADE_BY
from rocketstore_spark.findings import Finding, Severity, any_problem
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.report.audit import audit_document, audit_entry, audit_stores
from rocketstore_spark.store.discovery import discover
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import BY_ID
from tests.store_files import copy_store


def test_a_damaged_and_a_clean_store():
    bad, good = BY_ID["4.9.8/corrupt-body"], BY_ID["5.5.1/propcrc"]
    audit = audit_stores(discover(str(bad.store)) + discover(str(good.store)))
    assert audit.at_risk and audit.pages == []
    damaged, clean = audit.docs
    assert damaged["store"] == str(bad.store) and damaged["at_risk"] and not clean["at_risk"]
    assert damaged["recovery"]["process_offset"] == bad.manifest["recovery"]["commitlog_max_offset"]
    crc = sorted(f["physical_offset"] for f in damaged["findings"] if f["check"] == "commitlog.body_crc")
    assert crc == sorted(next(m for m in bad.messages if m["physical_offset"] <= s["physical_offset"]
                              < m["physical_offset"] + m["total_size"])["physical_offset"] for s in bad.manifest["surgery"])
    for doc in audit.docs:
        counted = Counter((CHECKS[f["check"]].area, f["severity"]) for f in doc["findings"])
        assert {(a, s): n for a, c in doc["areas"].items() for s, n in c.items() if n} == dict(counted)


def test_pages_on_request_and_what_counts_as_a_problem():
    g = BY_ID["5.5.1/clean"]
    audit = audit_stores(discover(str(g.store)), pages=True)
    assert not audit.at_risk and len(audit.pages) == 1
    info = Finding("commitlog.body_crc", Severity.INFO, "f", 0, "m")
    assert not any_problem([]) and not any_problem([info])
    assert any_problem([info, Finding("commitlog.body_crc", Severity.WARNING, "f", 0, "m")])


def test_the_audit_document_carries_its_settings_and_release():
    g = BY_ID["4.9.8/crash"]
    v = verify_store(str(g.store))
    rec, _ = recovery_report(str(g.store))
    doc = audit_document([audit_entry(v, rec)])
    assert (doc["document_type"], doc["document_version"], doc["made_by"]) == ("rocketstore-spark/audit", 1, MADE_BY)
    (store,) = doc["stores"]
    assert store["store"] == v.store and store["settings"]["release"] == store["rocketmq_version"] == "4.9.8"
    assert store["settings"]["release_family"] == "4.9.x" and store["at_risk"] is True     # a crash loses data
    assert store["recovery"]["document_type"] == "rocketstore-spark/recovery-report"
    assert sum(sum(a.values()) for a in store["areas"].values()) == len(store["findings"])


def test_a_store_of_another_engine_gets_findings_and_no_recovery_verdict(tmp_path):
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path / "store")
    for n in (0, 1):                       # two DLedger directories: which is this broker's log is not known
        (store / f"dledger-{n}" / "data").mkdir(parents=True)
    audit = audit_stores(discover(str(store)))
    (doc,) = audit.docs
    assert audit.at_risk and doc["recovery"] is None
    assert "cannot predict a restart: the store uses DLedger CommitLog" in doc["recovery_refused"]
    assert doc["findings"][0]["check"] == "store.unsupported_engine"


def test_a_batch_cq_store_gets_its_recovery_verdict():
    """RocketMQ 5.5.1's crashed BatchCQ store: audited with its recovery report (the BatchConsumeQueues' bounds
    as RocketMQ's restart leaves them), the engine's warning naming what is still refused."""
    from tests.store.test_batchconsumequeue import batch_queues, store
    (doc,) = audit_stores(discover(str(store("crash")))).docs
    assert "recovery_refused" not in doc
    assert [(q["topic"], q["queue_id"], q["min_offset"], q["max_offset"])
            for q in doc["recovery"]["batchconsumequeues"]] == [
        (q["topic"], q["queue_id"], q["min_offset"], q["max_offset"]) for q in batch_queues("crash")]
    assert [f["check"] for f in doc["findings"] if f["check"].endswith("_engine")] == ["store.partial_engine"]


def test_a_dledger_store_gets_its_recovery_verdict(tmp_path):
    """DLedger's log is read and its restart predicted (tests/recovery/test_dledger_recovery.py): the audit
    carries the report and the engine's warning naming what is still refused."""
    store = copy_store(BY_ID["5.5.1/corrupt-body"].store, tmp_path / "store")
    (store / "dledger-n0" / "data").mkdir(parents=True)
    (doc,) = audit_stores(discover(str(store))).docs
    assert doc["recovery"]["document_type"] == "rocketstore-spark/recovery-report"
    assert doc["findings"][0]["check"] == "store.partial_engine"


def test_the_audit_counts_unreachable_messages_from_verify_s_records_as_the_report_does(tmp_path, monkeypatch):
    """The audit's recovery report takes its unreachable messages from the queue records verify dispatched
    (``rocketmq.recovery.QueueFeed``): the same document as ``recovery_report`` alone, which dispatches the log
    itself — on RocketMQ's lagging queues (a clean start leaves their tail unreachable) and on a store whose
    queues are gone (every message unreachable) — without a second dispatch of the log."""
    import shutil

    from rocketstore_spark.rocketmq.recovery import Simulation
    gone = copy_store(BY_ID["5.1.4/clean"].store, tmp_path / "store")
    shutil.rmtree(gone / "consumequeue")
    stores = [str(BY_ID["4.9.8/cq-lag-clean"].store), str(BY_ID["5.5.1/cq-lag-clean"].store), str(gone)]
    alone = [recovery_report(s)[0] for s in stores]
    assert all(doc["unreachable"]["messages"] for doc in alone)
    dispatched = []
    original = Simulation._unreachable
    monkeypatch.setattr(Simulation, "_unreachable", lambda self, *a: dispatched.append(a) or original(self, *a))
    audit = audit_stores([layout for s in stores for layout in discover(s)])
    assert [d["recovery"] for d in audit.docs] == alone and dispatched == []


def test_the_audit_s_recovery_report_takes_verify_s_segment_scans(monkeypatch):
    """The audit's recovery report walks the segment scans verify made (``QueueFeed.offer_scans``) instead of
    scanning the last segments again: the same document as ``recovery_report`` alone — a walk stopped by a
    BODYCRC failure, a crash's backward search over several segments — with no segment scanned by it."""
    from rocketstore_spark.rocketmq import recovery
    stores = [str(BY_ID[g].store) for g in ("4.9.8/corrupt-body", "5.3.3/crash-stale", "5.5.1/clean")]
    alone = [recovery_report(s)[0] for s in stores]
    scanned = []
    original = recovery.scan_segment
    monkeypatch.setattr(recovery, "scan_segment", lambda *a, **k: scanned.append(a[0]) or original(*a, **k))
    audit = audit_stores([layout for s in stores for layout in discover(s)])
    assert [d["recovery"] for d in audit.docs] == alone and scanned == []
