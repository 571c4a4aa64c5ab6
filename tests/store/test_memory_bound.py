"""Memory per split is bounded whatever the segment size: a 1 GiB segment written by our encoder decodes,
every column, with about the same peak memory as a 128 MiB one. Generation and reading run in separate
fresh processes so each peak (VmHWM) is the reader's own."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]

WRITE = textwrap.dedent("""
    import sys
    from tests.builders import synthetic_segment, tiled_segment_chunks
    seg, pos = synthetic_segment(32 << 20)
    with open(sys.argv[2], "wb") as f:
        for chunk in tiled_segment_chunks(seg, pos, int(sys.argv[1])):
            f.write(chunk.tobytes())
""")
READ = textwrap.dedent("""
    import sys
    from tests.peak_rss import peak_rss_kib
    from rocketstore_spark.codec.decoder import RecordDecoder
    from rocketstore_spark.codec.record_schema import DECODED
    from rocketstore_spark.store.segment_reader import SegmentReader
    if sys.argv[2] == "keep":                  # as the Spark reader runs: freed batch memory kept for reuse
        from rocketstore_spark.codec.native import keep_freed_memory
        assert keep_freed_memory()
    rows = 0
    baseline = peak_rss_kib()
    reader = SegmentReader(sys.argv[1], 0, RecordDecoder(DECODED))
    for decoded in reader:
        rows += decoded.batch.num_rows
    # a lone segment closed by a BLANK: the segment it rolled over to is not there
    assert [f.check for f in reader.result.findings] == ["commitlog.missing_next_segment"], reader.result
    assert reader.result.stop.name == "BLANK", reader.result
    print(rows, baseline, peak_rss_kib())
""")


def decode_peak(tmp_path, size: int, allocator: str) -> tuple[int, int]:
    path = str(tmp_path / f"{0:020d}")
    subprocess.run([sys.executable, "-c", WRITE, str(size), path], check=True, cwd=ROOT)
    rows, baseline, peak = map(int, subprocess.run([sys.executable, "-c", READ, path, allocator], capture_output=True,
                                                   text=True, check=True, cwd=ROOT).stdout.split())
    return rows, peak - baseline


@pytest.mark.long
@pytest.mark.parametrize("allocator", ["default", "keep"])
def test_one_gib_segment_decodes_in_bounded_memory(tmp_path, allocator):
    rows_small, grew_small = decode_peak(tmp_path, 128 << 20, allocator)
    rows_big, grew_big = decode_peak(tmp_path, 1 << 30, allocator)
    assert rows_big > 7 * rows_small                           # the whole GiB was really decoded
    assert grew_big < grew_small + 48 * 1024, (grew_small, grew_big)   # KiB: not proportional to size
    assert grew_big < 400 * 1024
