"""JSON documents (driver): the one way they are serialized (indented, UTF-8 as is), written to a file or to
stdout with the text report moved to stderr so the two never mix (the jobs, the CLI); and the documents of
the verify, JSON-ready, as ``rocketstore verify --json`` prints it (the rebuild's is ``RebuildResult.document``,
the audit's ``report.audit``)."""
from __future__ import annotations

import sys

from rocketstore_spark.documents import header, json_text


def text_stream(json_target: str | None):
    """Where the text report goes: stderr when the JSON document takes stdout (``-``)."""
    return sys.stderr if json_target == "-" else sys.stdout


def document_text(doc) -> str:
    """``doc`` as indented JSON (non-ASCII kept, anything else JSON lacks as its ``str``)."""
    return json_text(doc)


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


VERIFY_DOCUMENT = ("rocketstore-spark/verify", 1)


def verify_document(verdicts) -> dict:
    """The stores' findings (``verify.store.StoreVerdict`` each) under the document header: per store, the
    release and the settings the checks followed (``BrokerSettings.to_json``) and every finding's row."""
    return header(*VERIFY_DOCUMENT) | {
        "stores": [{"store": v.store, "rocketmq_version": str(v.settings.release), "settings": v.settings.to_json(),
                    "findings": [f.as_row() for f in v.findings]} for v in verdicts]}
