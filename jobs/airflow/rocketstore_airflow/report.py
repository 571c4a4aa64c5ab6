"""The alert's text (the ``alert`` task, in the Airflow worker): why, per store, then what the store summary
printed, so that whoever reads the report file, the task log or a Slack message needs nothing else to start.
Plain Python."""
from __future__ import annotations

from pathlib import Path

MAX_FINDINGS = 20                 # per store; the audit's JSON document, named in the alert, has them all
MAX_QUEUES = 10


def _finding(f: dict) -> str:
    where = f["file"] or "-"
    if f.get("file_position") is not None:
        where += f" @ byte {f['file_position']:,}"
    if f.get("physical_offset") is not None:
        where += f" (physical offset {f['physical_offset']:,})"
    return f"    [{f['severity']}] {f['check']}: {where}: {f['message']}"


def _store_section(o: dict) -> list[str]:
    out = [f"Store {o['store']}"]
    out += [f"  - {r}" for r in o["reasons"]] or ["  - nothing to alert on"]
    out.append(f"  {o['errors']} error finding(s), {o['warnings']} warning(s) in all")
    if o["new_errors"]:
        out.append("  New error findings:")
        out += [_finding(f) for f in o["new_errors"][:MAX_FINDINGS]]
        if len(o["new_errors"]) > MAX_FINDINGS:
            out.append(f"    … {len(o['new_errors']) - MAX_FINDINGS} more in {o['audit_json']}")
    if o["lagging"]:
        out.append("  Consumer queues behind:")
        out += [f"    {q['consumer_group']} on {q['topic']} queue {q['queue_id']}: {q['lag']:,} message(s) behind"
                for q in o["lagging"][:MAX_QUEUES]]
    out.append(f"  Audit document: {o['audit_json']}")
    summary = Path(o["summary_txt"]) if o.get("summary_txt") else None
    if summary and summary.exists():
        out += ["", "  Store summary (jobs/store_summary.py):"]
        out += [f"    {line}" if line else "" for line in summary.read_text().rstrip().splitlines()]
    return out


def alert_title(outcomes: list[dict], unchecked: list[str] = ()) -> str:
    flagged = sum(bool(o["reasons"]) for o in outcomes) + len(unchecked)
    return f"rocketstore: {flagged} of {len(outcomes) + len(unchecked)} RocketMQ store(s) need attention"


def alert_text(outcomes: list[dict], unchecked: list[str], run_id: str) -> str:
    """The stores whose checks did not finish, those with a reason to alert, then the others in one line each."""
    out = [alert_title(outcomes, unchecked), f"Airflow run {run_id}", ""]
    for store in unchecked:
        out += [f"Store {store}", "  - its checks did not finish: see the task logs of its store_checks group", ""]
    for o in (o for o in outcomes if o["reasons"]):
        out += _store_section(o) + [""]
    calm = [o["store"] for o in outcomes if not o["reasons"]]
    if calm:
        out += ["Nothing to alert on in:"] + [f"  {s}" for s in calm]
    return "\n".join(out).rstrip() + "\n"
