"""What the CLI prints: rich tables on a terminal (plain text when piped), JSON on stdout with ``--json``,
diagnostics on stderr."""
from __future__ import annotations

import contextlib
import os
import sys
import threading

import click
from rich.console import Console
from rich.table import Table

from rocketstore_spark.report.documents import document_text
from rocketstore_spark.report.text import cell

# piped or redirected output (job logs, files, grep) gets long lines rather than a terminal's 80 columns
console = Console(highlight=False, soft_wrap=False,
                  width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "240")))
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}           # what matters first


def emit_json(doc) -> None:
    """One JSON document on stdout (nothing else goes there with --json)."""
    click.echo(document_text(doc))


def table(title: str | None, headers: list[str], rows, numeric=frozenset(), styles: list | None = None) -> None:
    """A table of ``rows`` (cells formatted like the jobs' text tables) on stdout."""
    t = Table(title=title, title_justify="left", show_edge=False, pad_edge=False, box=None, header_style="bold")
    for h in headers:
        t.add_column(h, justify="right" if h in numeric else "left", overflow="fold")
    for k, row in enumerate(rows):
        t.add_row(*[cell(v) for v in row], style=styles[k] if styles else None)
    console.print(t)


def line(text: str = "", style: str | None = None) -> None:
    console.print(text, style=style, markup=False)


def findings_table(findings, limit: int, title: str | None = None) -> None:
    """The findings that matter first (errors, warnings, info), at most ``limit`` of them, each with its file,
    byte and physical offset; a line saying how many more there are."""
    shown = sorted(findings, key=lambda f: SEVERITY_ORDER[str(f.severity)])[:limit]
    table(title, ["severity", "check", "file", "byte", "physical offset", "queue", "message"],
          [(str(f.severity), f.check, f.file, f.file_position, f.physical_offset,
            f"{f.topic}/{f.queue_id}@{f.queue_offset}" if f.topic else None, f.message) for f in shown],
          numeric={"byte", "physical offset"}, styles=[SEVERITY_STYLE[str(f.severity)] for f in shown])
    if len(findings) > limit:
        line(f"  ... {len(findings) - limit} more (--limit, or --json)")


@contextlib.contextmanager
def progress_display(enabled: bool):
    """While a command runs, on stderr: the CommitLog segment each reading thread is on with a bar of its bytes,
    and the bytes read so far with their rate — from the reader's own counters (``rocketstore_spark.progress``),
    never an estimate. Shown when ``enabled`` (stderr is a terminal, or ROCKETSTORE_PROGRESS=1); gone when
    done."""
    if not enabled:
        yield
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from rocketstore_spark import progress
    bars = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                    console=Console(stderr=True, force_terminal=True), transient=True)
    total = bars.add_task("CommitLog read", total=None)
    lock = threading.Lock()
    segments: dict[int, int] = {}               # reading thread -> its bar
    reached: dict[tuple[int, str], int] = {}    # (thread, file) -> the byte reached

    def sink(path: str, position: int, size: int) -> None:
        thread = threading.get_ident()
        with lock:
            last = reached.get((thread, path), 0)
            read = position - last if position >= last else position       # a new pass over the file
            reached[(thread, path)] = position
            bars.advance(total, max(0, read))
            if thread not in segments:
                segments[thread] = bars.add_task("segment", total=1)
            bars.update(segments[thread], description=f"commitlog/{os.path.basename(path)}", completed=position,
                        total=size)

    with bars, progress.reporting(sink):
        yield
