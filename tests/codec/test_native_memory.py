"""native.keep_freed_memory in a fresh process (its settings are process-wide): the heap batches live in is
advised for transparent huge pages where the kernel takes the advice, and nothing is advised where it
does not."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent("""
    import re
    from rocketstore_spark.codec import native
    assert native.keep_freed_memory()
    advised = 0                       # bytes of [heap] mappings marked for huge pages (VmFlags "hg")
    size = heap = 0
    with open("/proc/self/smaps") as f:
        for line in f:
            mapping = re.match(r"([0-9a-f]+)-([0-9a-f]+) ", line)
            if mapping:
                size = int(mapping[2], 16) - int(mapping[1], 16)
                heap = line.rstrip().endswith("[heap]")
            elif heap and line.startswith("VmFlags:") and " hg" in line:
                advised += size
    print(advised, native.HEAP_RESERVE)
""")


def _thp_mode() -> str:
    from rocketstore_spark.codec.native import THP_SETTING
    try:
        text = Path(THP_SETTING).read_text()
    except OSError:
        return "none"
    return text[text.index("[") + 1:text.index("]")]


@pytest.mark.parametrize("switch", [None, "0"])
def test_the_batch_heap_is_advised_for_huge_pages_where_the_kernel_takes_advice(switch):
    """ROCKETSTORE_HUGE_PAGES=0 turns the advice off."""
    env = {k: v for k, v in os.environ.items() if k != "ROCKETSTORE_HUGE_PAGES"}
    if switch is not None:
        env["ROCKETSTORE_HUGE_PAGES"] = switch
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=env)
    advised, reserve = map(int, out.stdout.split())
    if _thp_mode() == "madvise" and switch is None:
        # the reserve grown ahead, less at most one huge page cut at each end
        assert advised >= reserve - (4 << 20), out.stdout
    else:
        assert advised == 0, out.stdout
