"""Where our tools may write: never under a store. Every path a command or job writes to (a rebuild's output
directory, a JSON document, a reset plan, a Delta table, an export) is resolved (symlinks followed) and
refused when it is a store root or lies inside one (driver or CLI; before anything is written)."""
from __future__ import annotations

import os
from pathlib import Path


class OutputError(ValueError):
    """An output path that cannot be used (inside a store, or already holding what would be written)."""


def outside_stores(path: str | os.PathLike, store_roots, what: str = "output") -> Path:
    """``path`` resolved; OutputError when it is one of ``store_roots`` or inside one (symlinks followed)."""
    out = Path(os.path.realpath(path))
    for store in store_roots:
        root = Path(os.path.realpath(store))
        if out == root or root in out.parents:
            raise OutputError(f"{path}: the {what} is inside the store {store} (resolved: {out}); nothing is ever "
                              "written under a store: give a path elsewhere")
    return out


def store_roots(layouts) -> list[str]:
    """The directories of ``layouts`` that nothing may be written under: each store's root, or for a bare
    CommitLog directory the directory itself, and every directory of a multi-path CommitLog."""
    return [str(p) for layout in layouts
            for p in (layout.files.root or layout.files.commitlog_dir, *layout.files.commitlog_dirs)]
