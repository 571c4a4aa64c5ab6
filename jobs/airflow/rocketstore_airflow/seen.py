"""The error findings each store had at its last run, so that an alert names the new ones (outcome.py).

One small JSON file per store under the DAG's state directory, read and written by the ``evaluate`` task in
the Airflow worker. A retry of the same run compares with what the run before it had, not with what its own
first try wrote: a retried task must not swallow the news.
"""
from __future__ import annotations

import json
import os
from pathlib import Path


def seen_before(path: Path, run_id: str) -> set[str]:
    """The error finding keys of the store's previous run (none for a store never seen)."""
    if not path.exists():
        return set()
    doc = json.loads(path.read_text())
    return set(doc["before"] if doc["run_id"] == run_id else doc["errors"])


def remember(path: Path, run_id: str, errors: list[str], before: set[str]) -> None:
    """Records this run's error finding keys, and those it compared with (for a retry), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"run_id": run_id, "errors": sorted(errors), "before": sorted(before)}, indent=1))
    os.replace(tmp, path)
