"""In-process decode of full-schema batches by two versions of the package, interleaved in one run.

    .venv/bin/python bench/bench_decode.py --before /tmp/base --after . --rounds 4

Each round runs one fresh process per version (each version first every other round) (PYTHONPATH = its root, numba's cache already warm: a process
that compiles is run and thrown away first) that measures, over a synthetic 256 MiB segment
(``tests/builders.synthetic_segment`` tiled by ``tiled_segment_chunks``, built once and kept in ``--segment``):

- ``batch_us``: µs per batch, 8 batches of 4 K rows decoded again and again with every column (hot caches),
  the minimum and the median of 25 passes;
- ``write_us``: µs per batch of the batch writer alone (``RecordDecoder.output`` of one 4 K-row batch already
  walked, bodies gathered and checked by the writer), the minimum and the median of 25 passes of 8;
- ``segment_ms``: CPU ms per segment, the whole segment decoded with every column from the first record to
  the BLANK, the fastest 3 of 8 (the segment in memory: page faults of the batches' arenas included).

Prints one JSON line per process and a summary per version (the fastest figures, their spread over the rounds
and its median): on a shared host compare the minima, which other users' load moves least.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SEGMENT_BYTES = 256 << 20

MEASURE = r"""
import json, sys, time
import numpy as np
from rocketstore_spark.codec.decoder import RecordDecoder
from rocketstore_spark.codec.record_schema import DECODED
from rocketstore_spark.codec import native
native.keep_freed_memory()
segment = np.load(sys.argv[1], mmap_mode="r")
segment = np.ascontiguousarray(segment)
size, base = len(segment), 0
decoder = RecordDecoder(DECODED)

def whole():
    pos, rows = 0, 0
    while True:
        d = decoder.decode(segment, 0, size, base, pos, size)
        rows += d.n
        if d.n == 0 or d.next_position <= pos:
            return rows
        pos = d.next_position

whole()                                         # compiled kernels loaded, arenas sized
starts, pos = [], 0
for _ in range(8):
    starts.append(pos)
    pos = decoder.decode(segment, 0, size, base, pos, size).next_position
passes = []
for _ in range(25):
    t = time.perf_counter()
    for s in starts:
        decoder.decode(segment, 0, size, base, s, size)
    passes.append((time.perf_counter() - t) / len(starts) * 1e6)
d = decoder.decode(segment, 0, size, base, starts[1], size)
writes = []
for _ in range(25):
    t = time.perf_counter()
    for _ in range(8):
        decoder.output(segment, 0, base, d.positions, d.header)
    writes.append((time.perf_counter() - t) / 8 * 1e6)
writes.sort()
segments = []
for _ in range(8):
    t = time.process_time()
    rows = whole()
    segments.append((time.process_time() - t) * 1e3)
passes.sort()
segments.sort()
print(json.dumps({"batch_us_min": round(passes[0], 1), "batch_us_median": round(passes[len(passes) // 2], 1),
                  "write_us_min": round(writes[0], 1), "write_us_median": round(writes[len(writes) // 2], 1),
                  "segment_ms_fastest3": [round(x, 1) for x in segments[:3]], "rows": rows}))
"""


def build_segment(path: Path) -> None:
    sys.path.insert(0, str(ROOT))
    import numpy as np
    from tests.builders import synthetic_segment, tiled_segment_chunks
    segment, positions = synthetic_segment(16 << 20)
    np.save(path, np.concatenate(list(tiled_segment_chunks(segment, positions, SEGMENT_BYTES))))


def run(root: Path, segment: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", MEASURE, str(segment)], cwd=root, env=env, capture_output=True,
                          text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="root of the version measured first")
    parser.add_argument("--after", type=Path, required=True, help="root of the version measured second")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--segment", type=Path, default=Path("/tmp/rocketstore-bench-segment.npy"))
    args = parser.parse_args()
    if not args.segment.exists():
        build_segment(args.segment)
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    for root in roots.values():
        run(root, args.segment)                 # compiles and caches the kernels
    results = {name: [] for name in roots}
    for round_ in range(args.rounds):
        for name, root in list(roots.items())[::1 if round_ % 2 == 0 else -1]:      # each first in turn
            result = run(root, args.segment)
            results[name].append(result)
            print(json.dumps({"version": name, **result}), flush=True)
    for name, rs in results.items():
        minima = sorted(r["batch_us_min"] for r in rs)
        medians = sorted(r["batch_us_median"] for r in rs)
        fastest = sorted(r["segment_ms_fastest3"][0] for r in rs)
        writes = sorted(r["write_us_min"] for r in rs)
        print(f"{name}: batch µs min {minima[0]} (rounds' minima {minima[0]}-{minima[-1]}, median "
              f"{minima[len(minima) // 2]}; rounds' medians {medians[0]}-{medians[-1]}); writer µs min {writes[0]} "
              f"(rounds' minima median {writes[len(writes) // 2]}); segment ms fastest {fastest[0]} (rounds' "
              f"fastest {fastest[0]}-{fastest[-1]}, median {fastest[len(fastest) // 2]})")


if __name__ == "__main__":
    main()
