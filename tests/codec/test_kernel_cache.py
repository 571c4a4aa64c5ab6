"""numba's cache of our kernels follows the whole codec: a kernel that inlines a helper from another file is
recompiled when only that helper's file changes (numba alone would load the stale kernel)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numba
import pytest

from rocketstore_spark.codec import checked, kernel_cache, properties

ROOT = Path(__file__).resolve().parents[2]

# decodes one property string through property_columns (which inlines javahash.java_hash_span for tagsCode)
RUN = """
import numpy as np
from rocketstore_spark.codec import properties
props = np.frombuffer(b"TAGS\\x01TagA\\x02", dtype=np.uint8)
one = np.zeros(1, dtype=np.int64)
out = properties.property_columns(props, one, np.array([len(props)]), one, one, one,
                                  properties.parse_delay_levels(), 1, np.ones(6, dtype=np.bool_))
print("tags_code", out[14][0])
"""


def _run(package_root: Path, cache_dir: Path, checked_mode: bool = False) -> tuple[str, str]:
    env = {**os.environ, "PYTHONPATH": str(package_root), "NUMBA_DEBUG_CACHE": "1", "NUMBA_CACHE_DIR": str(cache_dir),
           checked.ENV: "1" if checked_mode else "0"}
    done = subprocess.run([sys.executable, "-c", RUN], cwd=package_root, env=env, capture_output=True, text=True,
                          check=True)
    events = [line for line in done.stdout.splitlines() if "property_columns" in line and "[cache]" in line]
    value = [line for line in done.stdout.splitlines() if line.startswith("tags_code")]
    return " ".join(events), value[0]


@pytest.mark.long                       # compiles the kernels in fresh processes: 20-50 s on 2 cores
def test_a_changed_helper_file_recompiles_the_kernels_that_inline_it(tmp_path):
    root = tmp_path / "src"
    shutil.copytree(ROOT / "rocketstore_spark", root / "rocketstore_spark",
                    ignore=shutil.ignore_patterns("__pycache__"))
    cache = tmp_path / "cache"
    first, value = _run(root, cache)
    assert "data saved" in first, first
    java_hash = 0
    for unit in "TagA":                                         # Java's String.hashCode, by its definition
        java_hash = (31 * java_hash + ord(unit)) & 0xFFFFFFFF
    assert value == f"tags_code {java_hash}"
    again, _ = _run(root, cache)
    assert "data loaded" in again and "data saved" not in again, again
    # only the helper's file changes (properties.py, which defines the kernel, does not): the helper now hashes
    # every string to 7
    javahash = root / "rocketstore_spark" / "codec" / "javahash.py"
    source = javahash.read_text()
    changed = source.replace("    return np.int32(h)\n", "    return np.int32(7)\n", 1)
    assert changed != source
    javahash.write_text(changed)
    after, value = _run(root, cache)
    assert "data saved" in after, after
    assert value == "tags_code 7"


def test_the_bounds_checked_mode_has_kernels_of_its_own(tmp_path):
    # the same sources, the other mode: compiled anew (not served the other mode's build), and the first mode's
    # build still there afterwards
    cache = tmp_path / "cache"
    assert "data saved" in _run(ROOT, cache)[0]
    in_checked_mode, value = _run(ROOT, cache, checked_mode=True)
    assert "data saved" in in_checked_mode and "data loaded" not in in_checked_mode, in_checked_mode
    again, same = _run(ROOT, cache)
    assert "data loaded" in again and "data saved" not in again and same == value, again


def test_our_kernels_are_stamped_and_others_are_not():
    locator = properties.property_columns._cache._impl._locator
    assert isinstance(locator, kernel_cache.STAMPED_LOCATORS)
    assert locator.get_source_stamp()[1] == kernel_cache.codec_stamp()

    def theirs(x):
        return x + 1
    theirs.__module__ = "somebody_else"
    foreign = numba.njit(cache=True)(theirs)           # its locator is chosen here: nothing is compiled or saved
    assert not isinstance(foreign._cache._impl._locator, kernel_cache.STAMPED_LOCATORS)


ZIP_RUN = """
import json
from rocketstore_spark.codec import kernel_cache, properties
locator = properties.property_columns._cache._impl._locator
print(json.dumps([properties.__file__, isinstance(locator, kernel_cache.STAMPED_LOCATORS), locator.get_cache_path(),
                  list(locator.get_source_stamp())[1], kernel_cache.codec_stamp()]))
"""


def test_kernels_imported_from_a_zip_are_stamped_and_cached_in_one_place_whatever_the_zip_path(tmp_path):
    """spark-submit's --py-files: each executor imports the package from its own copy of the zip. The kernels
    are stamped with the whole codec as read from the zip (the same stamp as from the checkout) and cached under
    one directory, not one per copy (nothing is compiled here)."""
    import zipfile
    seen = []
    for copy in ("a", "b"):
        archive = tmp_path / copy / "rocketstore_spark.zip"
        archive.parent.mkdir()
        with zipfile.ZipFile(archive, "w") as zf:
            for path in sorted((ROOT / "rocketstore_spark").rglob("*.py")):
                zf.write(path, path.relative_to(ROOT).as_posix())
        env = {**os.environ, "PYTHONPATH": str(archive), "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
        done = subprocess.run([sys.executable, "-c", ZIP_RUN], cwd=tmp_path, env=env, capture_output=True,
                              text=True, check=True)
        seen.append(__import__("json").loads(done.stdout.strip().splitlines()[-1]))
    for source, stamped, cache, stamp, codec in seen:
        assert ".zip" in source and stamped
        assert stamp == codec == kernel_cache.codec_stamp()
        assert cache == str(tmp_path / "cache" / "zip_rocketstore_spark_codec")
