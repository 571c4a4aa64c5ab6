"""The audit of stores (driver; ``rocketstore audit``): every check (``verify.store``) and the recovery report
(``recovery.report``) per store, folded into one JSON-ready document — the health per area, all findings, what
a restart would do, the settings followed — and, on request, the pages of the HTML report (``report.html``).
Read-only, in-process.

``audit_document(entries)`` (``documents.header``: type rocketstore-spark/audit, version 1) holds ``stores``, one
``audit_entry`` per store:

    store, rocketmq_version, rocketmq_release   the store, the release followed and how a person reads it
    settings        every setting as resolved, where each came from, the release and its family
                    (``rocketmq.settings.BrokerSettings.to_json``)
    at_risk         whether a finding is a warning or an error, or a restart would lose or cut anything
    areas           per check area: error, warning and info counts
    findings        every finding (the findings schema)
    recovery        the recovery report (``recovery.report``); None for a bare CommitLog directory, or when the
                    store's engine gets no verdict (``recovery_refused`` then says why)
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from rocketstore_spark.checks import CHECKS
from rocketstore_spark.documents import header
from rocketstore_spark.findings import any_problem
from rocketstore_spark.recovery.report import harmful, recovery_report
from rocketstore_spark.rocketmq.recovery import QueueFeed
from rocketstore_spark.rocketmq.settings import with_layout_dirs
from rocketstore_spark.report.html import gather
from rocketstore_spark.store.discovery import StoreLayout
from rocketstore_spark.store.engines import UnsupportedStore
from rocketstore_spark.verify.store import StoreVerdict, verify_store

DOCUMENT_TYPE = "rocketstore-spark/audit"
DOCUMENT_VERSION = 1


def audit_entry(verdict: StoreVerdict, recovery: dict | None, recovery_refused: str | None = None) -> dict:
    """One store's part of the audit (module docstring) from its verdict and recovery report."""
    areas: dict[str, dict] = {}
    for f in verdict.findings:
        a = areas.setdefault(CHECKS[f.check].area, {"error": 0, "warning": 0, "info": 0})
        a[str(f.severity)] += 1
    risk = any_problem(verdict.findings) or bool(recovery and harmful(recovery))
    entry = {"store": verdict.store, "rocketmq_version": str(verdict.settings.release),
             "rocketmq_release": verdict.settings.release_label, "settings": verdict.settings.to_json(),
             "at_risk": risk, "areas": areas, "findings": [f.as_row() for f in verdict.findings],
             "recovery": recovery}
    if recovery_refused is not None:
        entry["recovery_refused"] = recovery_refused
    return entry


def audit_document(entries: list[dict]) -> dict:
    """The audit of ``entries`` (``audit_entry`` each) as one JSON-ready document."""
    return header(DOCUMENT_TYPE, DOCUMENT_VERSION) | {"stores": entries}


@dataclass
class Audit:
    docs: list[dict] = field(default_factory=list)      # ``audit_entry`` a store
    pages: list = field(default_factory=list)           # report.html.StorePage a store, when asked for
    at_risk: bool = False                               # problems found or data at risk in any store

    def document(self) -> dict:
        return audit_document(self.docs)


def audit_stores(layouts: list[StoreLayout], *, options: dict | None = None, broker_conf: str | None = None,
                 work_dir: str | None = None, pages: bool = False) -> Audit:
    """Audit each store; ``options``, ``broker_conf``: the settings (``rocketmq.settings.resolve``);
    ``work_dir``: where the queue check spills (``verify.store``); ``pages``: gather the HTML report's pages.
    A store is at risk when a finding is above info level or its restart would lose or cut anything; a store
    given as bare files (no root) has no recovery report, nor has one whose engine we do not read."""
    out = Audit()
    for layout in layouts:
        opts = with_layout_dirs(layout, options)
        # the recovery report on a thread of its own while the checks run (both read the log; their compiled
        # kernels release the GIL); its unreachable records are counted from verify's queue records (one
        # dispatch of the log, not two: ``QueueFeed``)
        feed = QueueFeed() if layout.files.root is not None else None

        def recover():
            try:
                return recovery_report(layout.name, options=opts, broker_conf=broker_conf, queue_feed=feed)
            finally:
                feed.withdraw()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-recovery") as side:
            report = side.submit(recover) if feed is not None else None
            try:
                v = verify_store(layout.name, options=opts, broker_conf=broker_conf, work_dir=work_dir,
                                 queue_feed=feed)
            finally:
                if feed is not None:
                    feed.close(complete=False)      # a verify that failed or fed nothing: the report dispatches
            rec, refused = None, None
            if report is not None:
                try:
                    rec = report.result()[0]
                except UnsupportedStore as e:           # store.unsupported_engine is among the findings already
                    refused = str(e)
        out.docs.append(audit_entry(v, rec, refused))
        out.at_risk |= out.docs[-1]["at_risk"]
        if pages:
            out.pages.append(gather(layout, v, rec))
    return out
