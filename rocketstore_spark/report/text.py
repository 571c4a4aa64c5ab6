"""Plain-text tables for terminals and job logs (driver): fixed column widths, long values elided in the
middle so both ends of a topic or path stay readable, numbers right-aligned, no colour codes.

    print(render_table(["topic", "messages"], [("TopicTest", 289)], numeric={"messages"}))
"""
from __future__ import annotations

import datetime as dt

ELLIPSIS = "…"


def elide(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by replacing its middle with an ellipsis."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = (width - 1) // 2 + (width - 1) % 2
    return text[:head] + ELLIPSIS + text[len(text) - (width - 1 - head):]


def utc_time(ms: int | None) -> str | None:
    """A store timestamp (ms since the epoch) as UTC text to the millisecond; None stays None."""
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S.%f")[:-3]


def cell(value) -> str:
    """A value as table text: thousands separators for integers, milliseconds for times, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return str(value)


def render_table(headers: list[str], rows: list[tuple], numeric: set[str] = frozenset(),
                 max_width: int = 40, indent: str = "  ") -> str:
    """``rows`` under ``headers``; each column as wide as its widest cell, at most ``max_width``."""
    text = [[cell(v) for v in row] for row in rows]
    widths = [min(max_width, max([len(h)] + [len(r[i]) for r in text])) for i, h in enumerate(headers)]

    def line(values):
        out = []
        for i, v in enumerate(values):
            v = elide(v, widths[i])
            out.append(v.rjust(widths[i]) if headers[i] in numeric else v.ljust(widths[i]))
        return (indent + "  ".join(out)).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(r) for r in text])
