"""Test helpers over store directories on disk: a copy of a store to damage or repair, and a store's files as a
comparable dictionary (every test that checks "the store is unchanged" or "byte-identical" uses these)."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path


def copy_store(src: Path, dst: Path, without: tuple[str, ...] = ()) -> Path:
    """A copy of the store at ``src`` in ``dst`` (created), leaving out the entries named ``without``
    (e.g. ``("consumequeue", "index")``: a store whose derived files are gone)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*without) if without else None)
    return dst


def tree(root: Path) -> dict[str, str] | None:
    """Every file under ``root`` (relative name -> sha256 of its content); None when ``root`` does not exist."""
    root = Path(root)
    if not root.exists():
        return None
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its content (relative name -> bytes), for tests that show where two
    trees first differ."""
    root = Path(root)
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
