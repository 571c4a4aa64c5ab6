"""The audit's JSON document carries its type, version, the release of rocketstore-spark that made it and, per
store, the settings its checks followed."""
from rocketstore_spark.documents import MADE_BY
from rocketstore_spark.recovery.report import recovery_report
from rocketstore_spark.report.audit import audit_document, audit_entry
from rocketstore_spark.verify.store import verify_store
from tests.golden.goldens import all_goldens


def test_the_audit_document_carries_its_settings_and_release():
    g = next(g for g in all_goldens() if g.id == "4.9.8/crash")
    v = verify_store(str(g.store))
    rec, _ = recovery_report(str(g.store))
    doc = audit_document([audit_entry(v, rec)])
    assert (doc["document_type"], doc["document_version"], doc["made_by"]) == ("rocketstore-spark/audit", 1, MADE_BY)
    (store,) = doc["stores"]
    assert store["store"] == v.store and store["settings"]["release"] == store["rocketmq_version"] == "4.9.8"
    assert store["settings"]["release_family"] == "4.9.x" and store["at_risk"] is True     # a crash loses data
    assert store["recovery"]["document_type"] == "rocketstore-spark/recovery-report"
    assert sum(sum(a.values()) for a in store["areas"].values()) == len(store["findings"])
