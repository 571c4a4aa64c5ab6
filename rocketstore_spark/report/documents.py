"""JSON documents (driver): the one way they are serialized (indented, UTF-8 as is), written to a file or to
stdout with the text report moved to stderr so the two never mix (the jobs, the CLI); and the documents of
the verify and the rebuild, JSON-ready, as ``rocketstore verify --json`` and ``rebuild --json`` print them."""
from __future__ import annotations

import json
import sys


def text_stream(json_target: str | None):
    """Where the text report goes: stderr when the JSON document takes stdout (``-``)."""
    return sys.stderr if json_target == "-" else sys.stdout


def document_text(doc) -> str:
    """``doc`` as indented JSON (non-ASCII kept, anything else JSON lacks as its ``str``)."""
    return json.dumps(doc, indent=1, ensure_ascii=False, default=str)


def save_document(doc, path: str) -> None:
    """``doc`` as indented JSON into the file ``path``, ending in a newline."""
    with open(path, "w", encoding="utf-8") as f:
        f.write(document_text(doc) + "\n")


def write_document(doc: dict, target: str) -> None:
    """``doc`` as indented JSON to ``target`` (a path, or ``-`` for stdout); says where on the text stream."""
    if target == "-":
        print(document_text(doc))
        return
    save_document(doc, target)
    print(f"JSON written to {target}", file=text_stream(target))


def verify_document(verdicts) -> dict:
    """The stores' findings (``verify.store.StoreVerdict`` each): store, release and every finding's row."""
    return {"stores": [{"store": v.store, "rocketmq_version": str(v.settings.release),
                        "findings": [f.as_row() for f in v.findings]} for v in verdicts]}


def rebuild_document(r) -> dict:
    """A rebuild (``rebuild.output.RebuildResult``): its settings and where they came from, the queues and
    IndexFiles written, the findings and the comparison with the store's own files."""
    return {"store": r.store, "output": str(r.output), "rocketmq_version": str(r.settings.release),
            "settings_sources": r.settings.sources, "records": r.records,
            "queues": [{"topic": q.topic, "queue_id": q.queue_id, "files": q.files, "max_offset": q.state.max_offset}
                       for q in r.queues],
            "index_files": r.index_files, "findings": [f.as_row() for f in r.findings],
            "differences": [d.as_row() for d in r.differences]}
