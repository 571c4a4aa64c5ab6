"""How far long in-process work has read (the CLI's progress bars; any thread).

Readers report as they go: ``advance(path, position, size)`` after each decoded window of a CommitLog segment
(``store.segment_reader``) — the file, the byte reached and the file's size: the reader's own counters, no
estimate. Whoever shows progress installs a sink for the duration with ``reporting(sink)``; without one,
``advance`` costs one global read. A sink may be called from several threads (the recovery scans two
segments at once) and must be thread-safe.
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator

Sink = Callable[[str, int, int], None]
_sink: Sink | None = None


def advance(path: str, position: int, size: int) -> None:
    """``path`` has been read up to ``position`` of its ``size`` bytes."""
    sink = _sink
    if sink is not None:
        sink(path, position, size)


@contextlib.contextmanager
def reporting(sink: Sink) -> Iterator[None]:
    """Send every ``advance`` to ``sink`` while the block runs."""
    global _sink
    previous, _sink = _sink, sink
    try:
        yield
    finally:
        _sink = previous
