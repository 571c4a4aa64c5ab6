"""Keeping a check's findings readable: the first few occurrences in full, then one finding with the count.

A damaged file can hold millions of bad entries; a report listing each is useless and its size unbounded. A
unit of work (one queue, one IndexFile) reports at most ``LIMIT`` findings of each check in full, and when
there are more, one more finding of that check saying how many were left out and where the first of them
is. Runs wherever the check runs (Spark executor, CLI).
"""
from __future__ import annotations

from typing import Callable, Sequence

from rocketstore_spark.findings import Finding

LIMIT = 20


def capped(make: Callable[[int], Finding], indices: Sequence[int], limit: int = LIMIT) -> list[Finding]:
    """``make(i)`` for the first ``limit`` of ``indices``; if there are more, the next one's finding with
    ``omitted`` (how many more, counting itself) in its evidence and a message saying so."""
    n = len(indices)
    out = [make(int(i)) for i in indices[:limit]]
    if n > limit:
        f = make(int(indices[limit]))
        more = n - limit
        out.append(Finding(f.check, f.severity, f.file, f.file_position,
                           f"{more} more like this, not listed; the first of them: {f.message}",
                           {**f.evidence, "omitted": more}, f.physical_offset, f.topic, f.queue_id, f.queue_offset))
    return out
