"""What the CLI prints: rich tables on a terminal (plain text when piped), JSON on stdout with ``--json``,
diagnostics on stderr."""
from __future__ import annotations

import json
import os
import sys

import click
from rich.console import Console
from rich.table import Table

from rocketstore_spark.report.text import cell

# piped or redirected output (job logs, files, grep) gets long lines rather than a terminal's 80 columns
console = Console(highlight=False, soft_wrap=False,
                  width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "240")))
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def emit_json(doc) -> None:
    """One JSON document on stdout (nothing else goes there with --json)."""
    click.echo(json.dumps(doc, indent=1, ensure_ascii=False, default=str))


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
