"""The audit of stores (driver; ``rocketstore audit``): every check (``verify.store``) and the recovery
report (``recovery.report``) per store, folded into one JSON-ready document a store — the health per area,
all findings, what a restart would do — and, on request, the pages of the HTML report (``report.html``).
Read-only, in-process.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rocketstore_spark.checks import CHECKS
from rocketstore_spark.findings import any_problem
from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.report.html import gather
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.verify.store import verify_store


@dataclass
class Audit:
    docs: list[dict] = field(default_factory=list)      # one a store: store, release, at_risk, areas, findings, recovery
    pages: list = field(default_factory=list)           # report.html.StorePage a store, when asked for
    at_risk: bool = False                               # problems found or data at risk in any store


def audit_stores(layouts: list[StoreLayout], *, options: dict | None = None, broker_conf: str | None = None,
                 work_dir: str | None = None, pages: bool = False) -> Audit:
    """Audit each store; ``options``, ``broker_conf``: the settings (``rocketmq.settings.resolve``);
    ``work_dir``: where the queue check spills (``verify.store``); ``pages``: gather the HTML report's pages.
    A store is at risk when a finding is above info level or its restart would lose or cut anything; a store
    given as bare files (no root) has no recovery report."""
    out = Audit()
    for layout in layouts:
        v = verify_store(layout.name, options=options, broker_conf=broker_conf, work_dir=work_dir)
        rec = recovery_report(layout.name, options=options, broker_conf=broker_conf)[0] \
            if layout.files.root is not None else None
        areas: dict[str, dict] = {}
        for f in v.findings:
            a = areas.setdefault(CHECKS[f.check].area, {"error": 0, "warning": 0, "info": 0})
            a[str(f.severity)] += 1
        risk = any_problem(v.findings) or bool(rec and harmful(rec))
        out.at_risk |= risk
        out.docs.append({"store": layout.name, "rocketmq_version": str(v.settings.release),
                         "rocketmq_release": v.settings.release_label, "at_risk": risk,
                         "areas": areas, "findings": [f.as_row() for f in v.findings], "recovery": rec})
        if pages:
            out.pages.append(gather(layout, v, rec))
    return out
