"""Findings: problems in a store reported as data (check id, severity, file, byte position, evidence).

Used by every layer above codec/; a finding is never an exception unless the user asked for ``strict``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field


class StoreError(Exception):
    """Raised instead of recording a finding when reading in strict mode, or when nothing can be read."""

    def __init__(self, finding: "Finding"):
        super().__init__(finding.render())
        self.finding = finding


@dataclass(frozen=True)
class Finding:
    check: str              # e.g. "commitlog.bad_magic"; catalogue in docs/checks.md
    severity: str           # "error" | "warning" | "info"
    file: str
    file_position: int | None
    message: str
    evidence: dict = field(default_factory=dict)

    def render(self) -> str:
        where = self.file if self.file_position is None else f"{self.file} @ byte {self.file_position}"
        return f"[{self.severity}] {self.check}: {where}: {self.message}"

    def as_row(self) -> dict:
        row = asdict(self)
        row["evidence"] = {k: str(v) for k, v in self.evidence.items()}
        return row
