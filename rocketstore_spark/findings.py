"""Findings: problems in a store reported as data — check id, severity, file, byte position, evidence.

Every layer above the codecs reports damage through ``finding`` (driver or executor, wherever the file is
read); the check ids and their severities live in ``checks.CATALOGUE``. A finding is never an exception
unless the user asked for ``strict``, and then it travels inside ``StoreError``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Callable, Sequence

from rocketstore_spark.checks import CHECKS, Severity

__all__ = ["COVERAGE_NOTES", "Finding", "FindingCap", "Severity", "StoreError", "about_the_store", "any_problem",
           "capped", "finding", "omitted", "raise_first_error"]

# the findings schema: one row per finding, the same in DataFrames, JSON and Delta tables
FIELDS = ("check", "severity", "file", "file_position", "physical_offset", "topic", "queue_id", "queue_offset",
          "message", "evidence")
# a unit of work (one queue, one IndexFile) reports at most this many findings of a check in full (``capped``)
CAP = 20


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
    # where in the store's data, when known (verify's findings locate records and queue entries)
    physical_offset: int | None = None
    topic: str | None = None
    queue_id: int | None = None
    queue_offset: int | None = None

    def render(self) -> str:
        where = self.file if self.file_position is None else f"{self.file} @ byte {self.file_position}"
        return f"[{self.severity}] {self.check}: {where}: {self.message}"

    def as_row(self) -> dict:
        """The finding as a row of the findings schema (``FIELDS``; evidence values as strings)."""
        row = asdict(self)
        row["severity"] = str(self.severity)
        row["evidence"] = {k: str(v) for k, v in self.evidence.items()}
        return {k: row[k] for k in FIELDS}

    def to_json(self) -> str:
        return json.dumps(self.as_row(), ensure_ascii=False)

    @classmethod
    def from_row(cls, row: dict) -> "Finding":
        """Inverse of ``as_row`` (evidence stays strings): how findings travel from Spark tasks."""
        return cls(row["check"], Severity(row["severity"]), row["file"], row["file_position"], row["message"],
                   dict(row.get("evidence") or {}), row.get("physical_offset"), row.get("topic"), row.get("queue_id"),
                   row.get("queue_offset"))


def finding(check: str, file: str, file_position: int | None, message: str, *, physical_offset: int | None = None,
            topic: str | None = None, queue_id: int | None = None, queue_offset: int | None = None,
            **evidence) -> Finding:
    """A Finding of a catalogued check (its severity comes from the catalogue); the keyword-only location
    fields say which record or queue entry it is about, the other keywords are evidence."""
    try:
        severity = CHECKS[check].severity
    except KeyError:
        raise ValueError(f"check {check!r} is not in checks.CATALOGUE") from None
    return Finding(check, severity, str(file), file_position, message, evidence,
                   None if physical_offset is None else int(physical_offset), topic,
                   None if queue_id is None else int(queue_id), None if queue_offset is None else int(queue_offset))


# warnings about what rocketstore-spark does not do on a store, not about the store: no exit 3 for them alone
COVERAGE_NOTES = frozenset({"store.partial_engine"})


def about_the_store(findings) -> list:
    """``findings`` without ``COVERAGE_NOTES``: what a command met in the store itself."""
    return [f for f in findings if f.check not in COVERAGE_NOTES]


def any_problem(findings) -> bool:
    """Whether any finding is above info level (a warning or an error), ``COVERAGE_NOTES`` aside: what makes a
    check exit 3 and an audited store at risk."""
    return any(f.severity != Severity.INFO for f in about_the_store(findings))


def distinct(findings) -> list[Finding]:
    """``findings`` in order, each (check, file, byte, message) once: what several reads of one range met."""
    seen: set = set()
    out = []
    for f in findings:
        key = (f.check, f.file, f.file_position, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def raise_first_error(findings) -> None:
    """``strict``: the first error finding of ``findings`` as a StoreError (warnings and info pass)."""
    for f in findings:
        if f.severity == Severity.ERROR:
            raise StoreError(f)


def omitted(first: Finding, last: Finding, count: int) -> Finding:
    """The one finding that stands for ``count`` findings of a check left out: the first of them, with the count
    (``omitted``) and where the last of them is in its evidence."""
    tail = f"; the last at byte {last.file_position}: {last.message}" if count > 1 else ""
    evidence = {**first.evidence, "omitted": count}
    if count > 1:
        evidence.update(last_file_position=last.file_position, last_physical_offset=last.physical_offset,
                        last_queue_offset=last.queue_offset)
    return Finding(first.check, first.severity, first.file, first.file_position,
                   f"{count} more like this, not listed; the first of them: {first.message}{tail}",
                   evidence, first.physical_offset, first.topic, first.queue_id, first.queue_offset)


class FindingCap:
    """The findings of one unit of work (a segment, a queue, an IndexFile, a config file) as they come, at most
    ``limit`` of each check in full; past that, one more finding of the check (``omitted``) counts the rest and
    names the first and the last of them. Memory follows the cap, not the input (a damaged file can hold
    millions of bad entries). Wherever findings are made."""

    def __init__(self, limit: int = CAP):
        self.limit = limit
        self.kept: list[Finding] = []
        self._seen: dict[str, int] = {}
        self._over: dict[str, list] = {}            # check -> [first left out, last left out, how many]

    def add(self, f: Finding) -> bool:
        """Take ``f``; True when it is kept in full."""
        n = self._seen[f.check] = self._seen.get(f.check, 0) + 1
        if n <= self.limit:
            self.kept.append(f)
            return True
        over = self._over.get(f.check)
        if over is None:
            self._over[f.check] = [f, f, 1]
        else:
            over[1], over[2] = f, over[2] + 1
        return False

    def extend(self, findings) -> None:
        for f in findings:
            self.add(f)

    def carry(self, check: str, first: Finding, last: Finding, count: int) -> None:
        """``count`` findings of ``check`` past the cap, the first and the last of them given, as if they had been
        added (after the kept ones): a unit of work resumed from where an earlier pass over its start ended."""
        self._seen[check] = self._seen.get(check, 0) + count
        self._over[check] = [first, last, count]

    def over(self) -> list[tuple[str, Finding, Finding, int]]:
        """(check, first left out, last left out, how many) of each check past the cap (``carry`` takes them)."""
        return [(check, first, last, count) for check, (first, last, count) in self._over.items()]

    def summaries(self) -> list[Finding]:
        """One finding per check that went past the cap (``omitted``)."""
        return [omitted(first, last, count) for first, last, count in self._over.values()]

    def findings(self) -> list[Finding]:
        return self.kept + self.summaries()


class CappedRun:
    """The findings of one check over indices that arrive in chunks (a file read a chunk at a time): ``add(make,
    indices)`` per chunk, ``make`` built on that chunk's data; then ``findings()`` as ``capped`` gives them for
    all the indices at once. Only the findings listed (and the last seen) are made; memory follows the cap."""

    def __init__(self, limit: int = CAP):
        self.limit = limit
        self.first: list[Finding] = []          # the first limit + 1
        self.last: Finding | None = None
        self.count = 0

    def add(self, make: Callable[[int], Finding], indices: Sequence[int]) -> None:
        n = len(indices)
        if not n:
            return
        need = self.limit + 1 - len(self.first)
        if need > 0:
            self.first += [make(int(i)) for i in indices[:need]]
        if self.count + n > self.limit:
            self.last = make(int(indices[n - 1]))
        self.count += n

    def findings(self) -> list[Finding]:
        if self.count <= self.limit:
            return self.first
        return self.first[:self.limit] + [omitted(self.first[self.limit], self.last, self.count - self.limit)]


def capped(make: Callable[[int], Finding], indices: Sequence[int], limit: int = CAP) -> list[Finding]:
    """``make(i)`` for the first ``limit`` of ``indices``; if there are more, one finding standing for the rest
    (``omitted``: the first of them, the count, where the last is). Only the findings listed are made."""
    run = CappedRun(limit)
    run.add(make, indices)
    return run.findings()
