"""One store's verdict for the night, from the documents our CLI wrote, and the run's decision: alert or not.

Plain Python over JSON (no Airflow, no Spark): the DAG's ``evaluate`` and ``decide`` tasks call it in the
Airflow worker, and the tests call it directly. An alert is raised for any of three reasons, each named in
the alert:

- ``data at risk``: the audit's recovery report says a restart of the broker now would lose messages, or
  leave messages unreachable by consumers (``recovery.lost`` / ``recovery.unreachable`` of
  ``rocketstore audit --json``);
- ``new error findings``: findings of severity ``error`` that the store did not have at its last run
  (``seen.py``), so a known, unrepaired error alerts once, not every night;
- ``consumer lag``: a consumer group's queue more than ``max_lag`` messages behind
  (``rocketstore offsets --json``).

Warnings do not alert on their own; they are counted in the alert when there is one.
"""
from __future__ import annotations

CLEAN, PROBLEMS = 0, 3           # the CLI's and the jobs' exit statuses that are answers, not failures


def finding_key(f: dict) -> str:
    """What makes two runs' findings the same finding: the check and where it points."""
    return f"{f['check']}|{f.get('file') or ''}|{f.get('file_position')}"


def error_findings(audit_doc: dict) -> list[dict]:
    return [f for s in audit_doc["stores"] for f in s["findings"] if f["severity"] == "error"]


def messages_at_risk(audit_doc: dict) -> dict:
    """Messages a restart now would lose, and those it would leave unreachable, over the document's stores."""
    lost = unreachable = 0
    for s in audit_doc["stores"]:
        if s.get("recovery"):
            lost += s["recovery"]["lost"]["messages"] or 0
            unreachable += s["recovery"]["unreachable"]["messages"] or 0
    return {"lost": lost, "unreachable": unreachable}


def lagging_queues(offsets_doc: dict, max_lag: int) -> list[dict]:
    """The consumer queues more than ``max_lag`` messages behind, most behind first."""
    over = [q for q in offsets_doc["queues"] if q.get("lag") is not None and q["lag"] > max_lag]
    return sorted(over, key=lambda q: (-q["lag"], q["consumer_group"], q["topic"], q["queue_id"]))


def store_outcome(store: str, audit_doc: dict, offsets_doc: dict, seen_before: set[str], max_lag: int,
                  statuses: dict[str, int | None]) -> dict:
    """The verdict of one store: the facts the alert needs, and ``reasons`` (empty: nothing to alert on).

    ``seen_before`` holds the keys of the error findings of the store's previous run; ``statuses`` the exit
    statuses of its audit, offsets, ingest (None: not run) and summary."""
    errors = error_findings(audit_doc)
    new = [f for f in errors if finding_key(f) not in seen_before]
    risk = messages_at_risk(audit_doc)
    lag = lagging_queues(offsets_doc, max_lag)
    findings = [f for s in audit_doc["stores"] for f in s["findings"]]
    reasons = []
    if risk["lost"] or risk["unreachable"]:
        reasons.append(f"data at risk: a restart now would lose {risk['lost']} message(s) and leave "
                       f"{risk['unreachable']} unreachable")
    if new:
        reasons.append(f"{len(new)} new error finding(s)")
    if lag:
        reasons.append(f"consumer lag over {max_lag} message(s) in {len(lag)} queue(s) (worst {lag[0]['lag']})")
    return {"store": store, "reasons": reasons, "statuses": statuses, "at_risk": risk,
            "new_errors": new, "errors": len(errors),
            "warnings": sum(f["severity"] == "warning" for f in findings),
            "lagging": lag, "error_keys": sorted({finding_key(f) for f in errors})}


def needs_alert(outcomes: list[dict]) -> bool:
    return any(o["reasons"] for o in outcomes)
