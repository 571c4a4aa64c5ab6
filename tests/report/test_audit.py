"""``report.audit``: a damaged store is at risk with RocketMQ's recovery verdict beside its findings (the
corrupt-body golden: the generator flipped body bytes; RocketMQ's own recovery of a copy ends the log at the
manifest's max offset), a clean one is healthy; the areas count every finding once."""
from __future__ import annotations

from collections import Counter

from rocketstore_spark.checks import CHECKS
from rocketstore_spark.findings import Finding, Severity, any_problem
from rocketstore_spark.report.audit import audit_stores
from rocketstore_spark.store.discovery import discover
from tests.golden.goldens import all_goldens

BY_ID = {g.id: g for g in all_goldens()}


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
