"""Findings history (driver): each audit or scrub run appends its findings and one summary row per store, with
its run id and time, to two Delta tables under one directory — ``DIR/findings`` (``spark.verify``'s
FINDINGS_SCHEMA: the verify job's ``--output`` tables and these can be one) and ``DIR/audit_runs`` (RUNS_SCHEMA)
— so trends are SQL over runs and any earlier state is a ``VERSION AS OF`` away (README: "Findings history").

``audit_runs``: ``mode`` is ``audit`` (every segment scanned, every cross-check run) or ``scrub``;
``segments_checked``/``bytes_checked`` what the run scanned of the CommitLog; ``cross_checks`` ``run`` (whole),
``resumed`` (on what was written since the last run) or ``carried`` (from the scrub state); errors, warnings and info count the store's findings.
"""
from __future__ import annotations

import datetime as dt

from rocketstore_spark.spark.verify import FINDINGS_SCHEMA

RUNS_SCHEMA = ("run_id STRING, run_time TIMESTAMP, store STRING, mode STRING, rocketmq_version STRING, "
               "at_risk BOOLEAN, errors INT, warnings INT, info INT, segments INT, segments_checked INT, "
               "bytes_checked BIGINT, cross_checks STRING, seconds DOUBLE")


def history_rows(run_id: str, run_time: dt.datetime, docs: list[dict], layouts=None,
                 seconds: float | None = None) -> tuple[list[dict], list[dict]]:
    """(findings rows, audit_runs rows) of a run's audit entries (``report.audit.audit_entry``, with a ``scrub``
    part for a scrub). For a full audit the segment figures come from ``layouts`` (each store's), the time is
    ``seconds`` for the whole run."""
    sizes = {layout.name: [s.size for s in layout.segments] for layout in (layouts or [])}
    findings, runs = [], []
    for d in docs:
        findings += [{"run_id": run_id, "run_time": run_time, "store": d["store"], **f} for f in d["findings"]]
        severities = [f["severity"] for f in d["findings"]]
        scrub = d.get("scrub")
        if scrub is not None:
            figures = ("scrub", scrub["segments"], len(scrub["checked"]), scrub["bytes_checked"],
                       scrub["cross_checks"], scrub["seconds"])
        else:
            seg = sizes.get(d["store"], [])
            figures = ("audit", len(seg), len(seg), sum(seg), "run", seconds)
        mode, segments, checked, checked_bytes, cross, secs = figures
        runs.append({"run_id": run_id, "run_time": run_time, "store": d["store"], "mode": mode,
                     "rocketmq_version": d["rocketmq_version"], "at_risk": d["at_risk"],
                     "errors": severities.count("error"), "warnings": severities.count("warning"),
                     "info": severities.count("info"), "segments": segments, "segments_checked": checked,
                     "bytes_checked": checked_bytes, "cross_checks": cross, "seconds": secs})
    return findings, runs


def append_history(spark, directory: str, run_id: str, run_time: dt.datetime, docs: list[dict], layouts=None,
                   seconds: float | None = None) -> None:
    """Append the run to ``directory``/findings and ``directory``/audit_runs (created on first use)."""
    findings, runs = history_rows(run_id, run_time, docs, layouts, seconds)
    spark.createDataFrame(findings, FINDINGS_SCHEMA).write.format("delta").mode("append").save(f"{directory}/findings")
    spark.createDataFrame(runs, RUNS_SCHEMA).write.format("delta").mode("append").save(f"{directory}/audit_runs")


def append_history_here(directory: str, run_id: str, run_time: dt.datetime, docs: list[dict], layouts=None,
                        seconds: float | None = None) -> None:
    """``append_history`` from a process without Spark (``rocketstore audit --history``): on a local session."""
    from rocketstore_spark.spark.session import command_session
    with command_session("rocketstore-audit-history", master="local[1]") as spark:
        append_history(spark, directory, run_id, run_time, docs, layouts, seconds)
