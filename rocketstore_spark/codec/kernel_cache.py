"""numba's on-disk cache of this package's compiled kernels, invalidated by any change to the codec.

numba keys a cached kernel by the content of the one source file that defines it. Our kernels inline helpers
from other files (``native.copy_at``, ``javahash.java_hash_span``, ``commitlog``'s record checks): after an
upgrade or a ``git pull`` that changes only a helper, numba would load a kernel compiled with the old helper —
stale code, possibly wrong answers. Every kernel of the package is therefore stamped with its own file's
content *and* every ``rocketstore_spark/codec`` source: a change to the codec recompiles all kernels once. The
stamp also names the mode (``checked``), and a bounds-checked build is cached under names of its own (its
disambiguator): neither mode is served the other's kernels, nor evicts them.

``install`` puts the stamped locators first in numba's list; it runs when ``rocketstore_spark.codec`` is
imported, before any kernel is defined (numba picks a kernel's locator when it is decorated). numba's own
locators serve everything else unchanged. Runs in every process that compiles or loads kernels.
"""
from __future__ import annotations

import functools
import hashlib
import os
import zipfile
from pathlib import Path

from numba.core import caching

from rocketstore_spark.codec.checked import CHECKED

CODEC_DIR = Path(__file__).resolve().parent
PACKAGE = __name__.split(".")[0] + "."


def _codec_sources() -> list[tuple[str, bytes]]:
    """(file name, content) of every codec source, in name order: from the package's directory, or from the zip
    the package was imported from (spark-submit's ``--py-files``, on the driver and on executors)."""
    if CODEC_DIR.is_dir():
        return [(path.name, path.read_bytes()) for path in sorted(CODEC_DIR.glob("*.py"))]
    zip_path, inside = caching.ZipCacheLocator._split_zip_path(str(CODEC_DIR))
    with zipfile.ZipFile(zip_path) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith(inside + "/") and n.endswith(".py")
                       and "/" not in n[len(inside) + 1:])
        return [(n.rsplit("/", 1)[1], zf.read(n)) for n in names]


@functools.lru_cache(maxsize=1)
def codec_stamp() -> str:
    """sha256 over every codec source (names and contents) and the mode, read once per process (the same for
    the same sources in a directory or in a zip)."""
    digest = hashlib.sha256(b"checked" if CHECKED else b"normal")
    for name, content in _codec_sources():
        digest.update(name.encode() + b"\0" + content + b"\0")
    return digest.hexdigest()


def _stamped(base: type) -> type:
    class Stamped(base):
        @classmethod
        def from_function(cls, py_func, py_file):
            if not getattr(py_func, "__module__", "").startswith(PACKAGE):
                return None                                 # not ours: numba's own locators
            return super().from_function(py_func, py_file)

        def get_source_stamp(self):
            return super().get_source_stamp(), codec_stamp()

        def get_disambiguator(self):
            return super().get_disambiguator() + ("-checked" if CHECKED else "")

    Stamped.__name__ = Stamped.__qualname__ = f"CodecStamped{base.__name__}"
    return Stamped


class _ZipLocator(caching.ZipCacheLocator):
    """numba's locator for sources in a zip keeps the cache under a path derived from the zip's own path, which a
    Spark executor gets anew for every application (its copy of the ``--py-files`` zip): every job would compile
    every kernel again. Ours keeps it at one place per package directory inside the zip — NUMBA_CACHE_DIR when
    set, else the user's cache directory — and the stamp (content of the source and of the whole codec) says
    whether a cached kernel serves."""

    def __init__(self, py_func, py_file):
        super().__init__(py_func, py_file)
        base = caching.config.CACHE_DIR or caching.AppDirs(appname="numba", appauthor=False).user_cache_dir
        inside = os.path.dirname(self._internal_path).replace("/", "_")
        self._cache_path = os.path.join(base, f"zip_{inside}")


# numba's order: NUMBA_CACHE_DIR if set, else __pycache__ beside the source, else the user's cache directory; a
# source in a zip (spark-submit's --py-files): NUMBA_CACHE_DIR or the user's cache directory (_ZipLocator)
STAMPED_LOCATORS = tuple(_stamped(base) for base in (caching.UserProvidedCacheLocator, caching.InTreeCacheLocator,
                                                      caching.UserWideCacheLocator, _ZipLocator))


def install() -> None:
    """Put the stamped locators first (idempotent)."""
    classes = caching.CacheImpl._locator_classes
    if not any(cls in classes for cls in STAMPED_LOCATORS):
        classes[:0] = STAMPED_LOCATORS
