#!/usr/bin/env python3
"""What reading through DLedger entries costs against a classic CommitLog of the same messages (issue #29).

    .venv/bin/python bench/bench_dledger.py                      # 3 x 128 MiB segments per store, best of 5
    .venv/bin/python bench/bench_dledger.py --gib 1 --segment-mib 256 --repeat 7
    .venv/bin/python bench/bench_dledger.py --classic-only --code /other/checkout   # its classic path, same store

Builds two stores from one synthetic segment of our encoder (tests/builders.py): a classic ``commitlog/`` of
rebased copies, and a ``dledger-n0/data/`` whose files frame the same records in 48-byte entries (a few percent
fewer records fit a file: the rates are per message). With the page cache warm, each round times, in turn, on
each store and in this process (the readers Spark's workers run, without Spark's share):

    header-only   RecordDecoder of physical_offset, total_size, queue_id, queue_offset, store_timestamp
                  (fixed-width: the interleaved lanes)
    full          RecordDecoder of every column of codec.record_schema
    audit         store.scan.scan_segment with BODYCRC (the rocketmq_segments source, audit, scrub)

and prints CPU ns per message (this process's CPU time: on a shared host, other load moves it far less than
wall time), the best of ``--repeat`` rounds, and DLedger's cost over classic. Writes bench/out/dledger.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
if "--code" in sys.argv:            # another checkout's rocketstore_spark (its numba cache: set NUMBA_CACHE_DIR)
    sys.path.insert(0, sys.argv[sys.argv.index("--code") + 1])

from rocketstore_spark.codec.decoder import RecordDecoder  # noqa: E402
from rocketstore_spark.codec.record_schema import DECODED  # noqa: E402
from rocketstore_spark.store.discovery import discover  # noqa: E402
from rocketstore_spark.store.scan import scan_segment  # noqa: E402
from rocketstore_spark.store.segment_reader import SegmentReader  # noqa: E402

HEADER_ONLY = ("total_size", "queue_id", "queue_offset", "store_timestamp")


def build(out: Path, segments: int, segment_mib: int) -> dict[str, Path]:
    """The two stores under ``out`` (kept between runs of the same geometry)."""
    size = segment_mib << 20
    marker = out / f".built-{segments}x{segment_mib}"
    stores = {"classic": out / "classic", "dledger": out / "dledger"}
    if marker.exists():
        return stores
    # here, not at the top: with --code, tests/ is another checkout's too (run once without it to build)
    from tests.builders import dledger_segment, rebase_segment, synthetic_segment
    template, positions = synthetic_segment(size)
    classic = stores["classic"] / "commitlog"
    data = stores["dledger"] / "dledger-n0" / "data"
    for d in (classic, data):
        d.mkdir(parents=True, exist_ok=True)
        for f in d.iterdir():
            f.unlink()
    index = 0
    for k in range(segments):
        (classic / f"{k * size:020d}").write_bytes(rebase_segment(template, positions, k * size).tobytes())
        framed, _, n = dledger_segment(template, positions, size, k * size, index)
        (data / f"{k * size:020d}").write_bytes(framed.tobytes())
        index += n
    marker.touch()
    return stores


def read_all(store: Path, columns) -> int:
    layout = discover(str(store))[0]
    decoder = RecordDecoder(columns)
    n = 0
    for k, seg in enumerate(layout.segments):
        for decoded in SegmentReader(seg.path, seg.base_offset, decoder, followed=layout.followed(k)):
            n += decoded.n
    return n


def audit_all(store: Path) -> int:
    layout = discover(str(store))[0]
    return sum(scan_segment(seg.path, seg.base_offset, check_crc=True, followed=layout.followed(k)).records
               for k, seg in enumerate(layout.segments))


READERS = {
    "header-only": lambda store: read_all(store, HEADER_ONLY),
    "full": lambda store: read_all(store, tuple(DECODED)),
    "audit": audit_all,
}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--gib", type=float, default=0.375, help="bytes per store (default: 3 x 128 MiB)")
    p.add_argument("--segment-mib", type=int, default=128)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path, default=Path("/tmp/rocketstore-bench-dledger"))
    p.add_argument("--classic-only", action="store_true", help="time the classic store only (another checkout)")
    p.add_argument("--code", type=Path, default=ROOT, help="the checkout whose rocketstore_spark runs (default: this)")
    args = p.parse_args(argv)
    segments = max(1, int(args.gib * 1024 / args.segment_mib))
    stores = build(args.out, segments, args.segment_mib)
    kinds = ("classic",) if args.classic_only else ("classic", "dledger")
    messages = {kind: read_all(stores[kind], ("queue_id",)) for kind in kinds}      # warms the cache (and numba)
    for kind in kinds:
        for reader in READERS.values():
            reader(stores[kind])
    best: dict[str, dict[str, float]] = {kind: {} for kind in kinds}
    for _ in range(args.repeat):
        for name, reader in READERS.items():
            for kind in kinds:
                t = time.process_time()
                n = reader(stores[kind])
                ns = (time.process_time() - t) * 1e9 / n
                assert n == messages[kind], (kind, name, n, messages[kind])
                best[kind][name] = min(best[kind].get(name, float("inf")), ns)
    result = {"segments": segments, "segment_mib": args.segment_mib, "messages": messages,
              "ns_per_message": best, "code": str(args.code)}
    for name in READERS:
        line = f"{name:12s} classic {best['classic'][name]:7.1f} ns/msg"
        if "dledger" in best:
            ratio = best["dledger"][name] / best["classic"][name]
            result.setdefault("dledger_over_classic", {})[name] = ratio
            line += f"   dledger {best['dledger'][name]:7.1f} ns/msg   {100 * (ratio - 1):+5.1f} %"
        print(line)
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / ("dledger-classic-only.json" if args.classic_only else "dledger.json")).write_text(
        json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
