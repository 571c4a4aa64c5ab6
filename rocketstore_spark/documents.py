"""Typed, versioned JSON documents: what every document we write carries and how one is read back (wherever a
document is written or loaded: driver, CLI).

Every document's top level starts with

    document_type       what it is ("rocketstore-spark/repair-plan", ".../rebuild", ".../audit", ...)
    document_version    its format's version: raised whenever a field changes meaning or goes
    made_by             "rocketstore-spark X.Y.Z", the release of this package that wrote it

followed by the document's own fields. ``Document`` is the base of the typed ones (dataclasses): ``to_json``
gives that dict, ``from_json`` checks the type and version before it builds one, and ``load`` reads a file.
A document of another type or version is never guessed at: ``DocumentError`` names the file, what it holds and
what was expected.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import ClassVar

import rocketstore_spark

MADE_BY = f"rocketstore-spark {rocketstore_spark.__version__}"


class DocumentError(ValueError):
    """A JSON document that is not the one expected: unreadable, of another type, or of another version."""


def json_text(obj, indent: int | None = 1) -> str:
    """``obj`` as JSON text (non-ASCII kept as it is, anything else JSON lacks as its ``str``). A name read
    from the file system that is not UTF-8 (a surrogate escape) cannot be written as UTF-8: then every
    non-ASCII character is a ``\\u`` escape, which carries it exactly."""
    text = json.dumps(obj, indent=indent, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(obj, indent=indent, ensure_ascii=True, default=str)
    return text


def header(document_type: str, document_version: int) -> dict:
    """The fields every document starts with (module docstring)."""
    return {"document_type": document_type, "document_version": document_version, "made_by": MADE_BY}


def check(obj, document_type: str, document_version: int, source: str) -> dict:
    """``obj`` when it is a document of ``document_type`` at ``document_version``; DocumentError naming
    ``source`` (a file, or what the document is) and what was found otherwise."""
    if not isinstance(obj, dict):
        raise DocumentError(f"{source}: not a {document_type} document (a JSON {type(obj).__name__}, not an object)")
    found_type, found_version = obj.get("document_type"), obj.get("document_version")
    if found_type != document_type:
        raise DocumentError(f"{source}: a document of type {found_type!r}, expected {document_type!r}")
    if found_version != document_version:
        raise DocumentError(f"{source}: {document_type} version {found_version!r} (made by "
                            f"{obj.get('made_by', 'an unknown release')}), this release reads version "
                            f"{document_version} only")
    return obj


@dataclasses.dataclass
class Document:
    """Base of the typed documents: a dataclass whose fields are the document's own (JSON-ready values)."""
    DOCUMENT_TYPE: ClassVar[str]
    DOCUMENT_VERSION: ClassVar[int]

    def to_json(self) -> dict:
        return header(self.DOCUMENT_TYPE, self.DOCUMENT_VERSION) | {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, obj, source: str):
        """The document in ``obj`` (checked: ``check``); unknown fields are ignored, missing ones are an
        error."""
        obj = check(obj, cls.DOCUMENT_TYPE, cls.DOCUMENT_VERSION, source)
        names = {f.name for f in dataclasses.fields(cls)}
        try:
            return cls(**{k: v for k, v in obj.items() if k in names})
        except TypeError as e:
            raise DocumentError(f"{source}: an incomplete {cls.DOCUMENT_TYPE} document ({e})") from None

    @classmethod
    def load(cls, path: str | os.PathLike):
        """The document in the file ``path``; DocumentError when it is not JSON or not this document."""
        try:
            with open(path, encoding="utf-8") as f:
                obj = json.load(f)
        except ValueError as e:
            raise DocumentError(f"{path}: not a JSON document: {e}") from None
        return cls.from_json(obj, str(path))
