"""Findings: problems in a store reported as data — check id, severity, file, byte position, evidence.

Every layer above the codecs reports damage through ``finding`` (driver or executor, wherever the file is
read); the check ids and their severities live in ``checks.CATALOGUE``. A finding is never an exception
unless the user asked for ``strict``, and then it travels inside ``StoreError``.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from rocketstore_spark.checks import CHECKS, Severity

__all__ = ["Finding", "Severity", "StoreError", "finding", "raise_first_error"]


class StoreError(Exception):
    """Raised instead of recording a finding when reading in strict mode."""

    def __init__(self, f: "Finding"):
        super().__init__(f.render())
        self.finding = f


@dataclass(frozen=True)
class Finding:
    check: str                   # an id of checks.CATALOGUE
    severity: Severity
    file: str
    file_position: int | None    # byte position inside ``file``; None when the finding is about the whole file
    message: str
    evidence: dict = field(default_factory=dict)

    def render(self) -> str:
        where = self.file if self.file_position is None else f"{self.file} @ byte {self.file_position}"
        return f"[{self.severity}] {self.check}: {where}: {self.message}"

    def as_row(self) -> dict:
        row = asdict(self)
        row["severity"] = str(self.severity)
        row["evidence"] = {k: str(v) for k, v in self.evidence.items()}
        return row


def finding(check: str, file: str, file_position: int | None, message: str, **evidence) -> Finding:
    """A Finding of a catalogued check (its severity comes from the catalogue)."""
    try:
        severity = CHECKS[check].severity
    except KeyError:
        raise ValueError(f"check {check!r} is not in checks.CATALOGUE") from None
    return Finding(check, severity, str(file), file_position, message, evidence)


def raise_first_error(findings) -> None:
    """``strict``: the first error finding of ``findings`` as a StoreError (warnings and info pass)."""
    for f in findings:
        if f.severity == Severity.ERROR:
            raise StoreError(f)
