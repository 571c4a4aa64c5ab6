"""Hot queue benchmark (issue #26, item 3): a store whose every message went to one queue, audited, rebuilt and
its recovery reported, each in a fresh process with its time and its own peak resident memory.

    .venv/bin/python bench/bench_hot_queue.py --out /work/bench-data          # 8 GiB: about 50 M messages
    .venv/bin/python bench/bench_hot_queue.py --gib 1 --out /tmp/hot            # a quick look
    .venv/bin/python bench/bench_hot_queue.py --before /path/to/old/checkout    # also audit with that code

The store (under ``--out``, never in the repository): our encoder's small messages (a 16-byte body, TAGS and a
UNIQ_KEY: about 160 bytes a record), all in topic ``hot_topic`` queue 0, tiled into 1 GiB segments
(``tests.builders.tiled_segment_chunks``) with PHYSICALOFFSET and QUEUEOFFSET carried on as a broker writes them;
its ConsumeQueues and IndexFiles written by ``rocketstore rebuild`` at RocketMQ's default geometry (300,000
entries a ConsumeQueue file, IndexFiles of 5,000,000 slots x 20,000,000 entries) and moved into it. Then:

    install rebuild     rocketstore rebuild STORE --output DIR (the store without queues yet)
    audit               rocketstore audit STORE --json --work-dir WORK
    rebuild             rocketstore rebuild STORE --output DIR --json (the store's own queues then compared)
    recover report      rocketstore recover report STORE --json

Each command runs as ``python -c`` calling the CLI's entry point and printing its own peak resident memory on
exit: ``VmHWM`` (``tests/peak_rss.py`` says why not ``ru_maxrss``). Target (#26): audit and rebuild within 2 GiB
peak whatever the queue's size. ``--before DIR`` also audits with the code in DIR (a checkout from before the
queue was checked in parts: expect about 90 bytes a message). Figures go to stdout and OUT/hot-queue-results.json.
"""
from __future__ import annotations

import json
import os
import platform
import random
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_read import store_arguments  # noqa: E402
from rocketstore_spark.codec.encode import Message, SegmentWriter  # noqa: E402
from tests.builders import tile_copies, tiled_segment_chunks  # noqa: E402
from tests.peak_rss import cli_with_peak  # noqa: E402

TOPIC = "hot_topic"
TEMPLATE_BYTES = 4 << 20
GEOMETRY = ("--rocketmq-version", "5.3.3")          # RocketMQ's default ConsumeQueue and IndexFile geometry


def hot_template(nbytes: int, seed: int = 11) -> tuple[np.ndarray, np.ndarray]:
    """A segment of ``nbytes`` of small messages all in one queue, QUEUEOFFSET 0, 1, ...: (bytes, positions)."""
    rnd = random.Random(seed)
    w = SegmentWriter(nbytes)
    positions = []
    while w.current == 0:
        m = Message(topic=TOPIC, body=rnd.getrandbits(128).to_bytes(16, "big"), queue_id=0,
                    properties={"TAGS": rnd.choice(["TagA", "TagB"]), "UNIQ_KEY": f"{rnd.getrandbits(128):032X}"})
        offset, _ = w.append(m)
        if offset < nbytes:
            positions.append(offset)
    return np.frombuffer(bytes(w.segments[0]), dtype=np.uint8).copy(), np.array(positions, dtype=np.int64)


def build_store(store: Path, gib: float, segment_mib: int) -> int:
    """The CommitLog of the hot queue (kept when one of that size is there): the messages it holds."""
    seg_size = segment_mib << 20
    segments = max(1, int(gib * 1024 / segment_mib))
    template, positions = hot_template(TEMPLATE_BYTES)
    per_segment = tile_copies(template, positions, seg_size) * len(positions)
    marker = store / f".built-hot-{segments}x{segment_mib}"
    cl = store / "commitlog"
    if marker.exists():
        return segments * per_segment
    shutil.rmtree(store, ignore_errors=True)
    cl.mkdir(parents=True)
    for k in range(segments):
        with open(cl / f"{k * seg_size:020d}", "wb") as f:
            for chunk in tiled_segment_chunks(template, positions, seg_size, base_offset=k * seg_size,
                                              queue_offset_base=k * per_segment):
                f.write(chunk.tobytes())
    marker.touch()
    return segments * per_segment


def main(argv=None):
    p = store_arguments(__doc__, segment_mib=1024)
    p.set_defaults(gib=8.0)
    p.add_argument("--before", type=Path, help="also audit with the code of this checkout")
    args = p.parse_args(argv)
    out = args.out / "hot-queue"
    store, work = out / "store", out / "work"
    messages = build_store(store, args.gib, args.segment_mib)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
               "store": {"messages": messages, "queues": 1, "segment_mib": args.segment_mib}, "runs": {}}
    runs = results["runs"]

    def run(name: str, argv: list[str], **kw) -> None:
        runs[name] = cli_with_peak(argv, **kw)
        print(name, runs[name], flush=True)

    if not (store / "consumequeue").is_dir():
        run("install rebuild", ["rebuild", str(store), "--output", str(work / "rebuilt"), *GEOMETRY])
        for sub in ("consumequeue", "index"):
            (work / "rebuilt" / sub).rename(store / sub)
        shutil.rmtree(work / "rebuilt")
    files = [p for p in store.rglob("*") if p.is_file() and not p.name.startswith(".")]
    results["store"].update(
        bytes=sum(p.stat().st_size for p in files),
        commitlog_files=len(list((store / "commitlog").iterdir())),
        consumequeue_files=len(list((store / "consumequeue").rglob("0*"))),
        index_files=[p.stat().st_size for p in sorted((store / "index").iterdir())])
    print("store", results["store"], flush=True)
    run("audit", ["audit", str(store), "--json", "--work-dir", str(work)])
    run("rebuild", ["rebuild", str(store), "--output", str(work / "rebuilt"), "--json", *GEOMETRY])
    shutil.rmtree(work / "rebuilt")
    run("recover report", ["recover", "report", str(store), "--json"])
    if args.before:
        run("audit before", ["audit", str(store), "--json", "--work-dir", str(work)], python_path=args.before)
    results["load_average"] = os.getloadavg()
    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results, indent=2))
    (args.out / "hot-queue-results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
