"""The audit's memory follows its budget, not the store (issue #27): a store four times larger, with RocketMQ's
default ConsumeQueue and IndexFile geometry (a 420 MB IndexFile of 5 M slots x 20 M entries), is audited in
about the same peak memory. Queue groups and the IndexFile check's chunks are made small in the audited process
(``QUEUE_GROUP_BYTES``, ``CHUNK_ENTRIES``, ``READ_ROWS``) so both stores span several of each; each store is
written and audited in a fresh process, so each peak is the audit's own."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEGMENT = 64 << 20

WRITE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tests.builders import synthetic_segment, tiled_segment_chunks
    from rocketstore_spark.rebuild.output import rebuild_store
    store, segments = Path(sys.argv[1]), int(sys.argv[2])
    (store / "commitlog").mkdir(parents=True)
    seg, pos = synthetic_segment(32 << 20)
    for k in range(segments):
        with open(store / "commitlog" / f"{k * %d:020d}", "wb") as f:
            for chunk in tiled_segment_chunks(seg, pos, %d, base_offset=k * %d):
                f.write(chunk.tobytes())
    rebuilt = store.parent / (store.name + "-rebuilt")
    rebuild_store(str(store), rebuilt, options={"rocketmqVersion": "5.3.3"})
    for sub in ("consumequeue", "index"):
        (rebuilt / sub).rename(store / sub)
""" % (SEGMENT, SEGMENT, SEGMENT))

AUDIT = textwrap.dedent("""
    import sys
    from rocketstore_spark.cli.main import cli
    from rocketstore_spark.store import spill
    from rocketstore_spark.verify import index, store
    from tests.peak_rss import peak_rss_kib
    store.QUEUE_GROUP_BYTES = 16 << 20
    index.CHUNK_ENTRIES = spill.READ_ROWS = 1 << 15
    try:
        cli.main(args=["audit", sys.argv[1], "--json"], prog_name="rocketstore")
    except SystemExit as e:
        code = e.code
    print(f"PEAK_KIB {peak_rss_kib()}", file=sys.stderr)
    sys.exit(code)
""")


def audit_peak_mib(tmp_path: Path, segments: int) -> float:
    store = tmp_path / f"store-{segments}"
    subprocess.run([sys.executable, "-c", WRITE, str(store), str(segments)], check=True, cwd=ROOT)
    assert (store / "index").is_dir() and any((store / "index").iterdir())
    proc = subprocess.run([sys.executable, "-c", AUDIT, str(store)], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode in (0, 3), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    return int(proc.stderr.rsplit("PEAK_KIB ", 1)[1].split()[0]) / 1024


@pytest.mark.long
def test_a_store_four_times_larger_is_audited_in_the_same_memory(tmp_path):
    small = audit_peak_mib(tmp_path, 2)
    big = audit_peak_mib(tmp_path, 8)
    print(f"audit peak: {small:.0f} MiB for 2 segments, {big:.0f} MiB for 8")
    assert big < small + 64, (small, big)             # MiB: not proportional to the store
    assert big < 1024, big
