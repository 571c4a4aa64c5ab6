"""The audit's JSON document: every check and the recovery report per store, with the settings they followed
(driver or CLI; built from results, reads nothing).

``audit_document(entries)`` (``documents.header``: type rocketstore-spark/audit, version 1) holds ``stores``, one
``audit_entry`` per store:

    store, rocketmq_version, rocketmq_release   the store, the release followed and how a person reads it
    settings        every setting as resolved, where each came from, the release and its family
                    (``rocketmq.settings.BrokerSettings.to_json``)
    at_risk         whether a finding is a warning or an error, or a restart would lose or cut anything
    areas           per check area: error, warning and info counts
    findings        every finding (the findings schema)
    recovery        the recovery report (``recovery.report``), None for a bare CommitLog directory
"""
from __future__ import annotations

from rocketstore_spark.checks import CHECKS, Severity
from rocketstore_spark.documents import header
from rocketstore_spark.recovery.report import harmful
from rocketstore_spark.verify.store import StoreVerdict

DOCUMENT_TYPE = "rocketstore-spark/audit"
DOCUMENT_VERSION = 1


def audit_entry(verdict: StoreVerdict, recovery: dict | None) -> dict:
    """One store's part of the audit (module docstring) from its verdict and recovery report."""
    areas: dict[str, dict] = {}
    for f in verdict.findings:
        a = areas.setdefault(CHECKS[f.check].area, {"error": 0, "warning": 0, "info": 0})
        a[str(f.severity)] += 1
    risk = any(f.severity != Severity.INFO for f in verdict.findings) or bool(recovery and harmful(recovery))
    return {"store": verdict.store, "rocketmq_version": str(verdict.settings.release),
            "rocketmq_release": verdict.settings.release_label, "settings": verdict.settings.to_json(),
            "at_risk": risk, "areas": areas, "findings": [f.as_row() for f in verdict.findings],
            "recovery": recovery}


def audit_document(entries: list[dict]) -> dict:
    """The audit of ``entries`` (``audit_entry`` each) as one JSON-ready document."""
    return header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {"stores": entries}
