"""Writing a job's JSON document (driver): to a file, or to stdout with the text report moved to stderr so
the two never mix."""
from __future__ import annotations

import json
import sys


def text_stream(json_target: str | None):
    """Where the text report goes: stderr when the JSON document takes stdout (``-``)."""
    return sys.stderr if json_target == "-" else sys.stdout


def write_document(doc: dict, target: str) -> None:
    """``doc`` as indented JSON to ``target`` (a path, or ``-`` for stdout); says where on the text stream."""
    body = json.dumps(doc, indent=1, ensure_ascii=False, default=str)
    if target == "-":
        print(body)
        return
    with open(target, "w", encoding="utf-8") as f:
        f.write(body + "\n")
    print(f"JSON written to {target}", file=text_stream(target))
