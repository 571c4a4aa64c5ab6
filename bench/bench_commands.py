"""Operator commands benchmark (issue #27): what an operator runs after an incident, at a real broker's
geometry, against ``cat`` of the same files and against RocketMQ's own restart of the same store, same run.

    .venv/bin/python bench/bench_commands.py                           # 8 GiB of 1 GiB segments
    .venv/bin/python bench/bench_commands.py --gib 2 --no-rocketmq --no-spark
    .venv/bin/python bench/bench_commands.py --cold                    # also every command from the disk
    .venv/bin/python bench/bench_commands.py --gib 28 --only audit --cold --repeat 1   # larger than RAM

The store: our encoder's (bench_read.build_store, 20 topics, queue offsets carried on across segments), with RocketMQ's default geometry — 1 GiB segments,
ConsumeQueues of 300,000 entries, IndexFiles of 5,000,000 slots x 20,000,000 entries — written by
``rocketstore rebuild`` (whose output is RocketMQ's byte for byte: tests/rebuild). Each command runs as an
operator runs it, a fresh process, timed from outside with its peak resident memory and CPU share
(``/usr/bin/time``), ``--repeat`` times; the best run counts, every run is kept:

    cat                 cat of every file the audit reads (CommitLog, ConsumeQueues, IndexFiles)
    audit               rocketstore audit STORE --json
    recover report      rocketstore recover report STORE --json
    rebuild             rocketstore rebuild STORE --output DIR
    export topic        rocketstore export STORE --topic bench_topic_3 (one topic of twenty)
    export all          rocketstore export STORE (the full-schema read of every record)
    store_summary       ./spark-submit.sh jobs/store_summary.py --store STORE     (unless --no-spark)
    header read         ./spark-submit.sh bench/spark_header_read.py STORE: Spark start-up and a read of
                        every record's header columns, the floor store_summary is held to
    rocketmq restart    RocketMQ's own abnormal recovery of a copy of the store (the golden generator's
                        ``recover --abort``: the copy made first, then ``DefaultMessageStore.load()`` timed
                        inside the JVM: the restart after a crash that would cut what the audit finds)
                        (unless --no-rocketmq)

With ``--cold`` every command (and cat) runs a second time with the store's pages dropped from the page cache
first (``posix_fadvise(DONTNEED)`` on our own generated files): the disk-bound figure; with ``--gib`` above the
machine's RAM, the store cannot stay in the page cache at all. Targets (#27): audit >= 1 GB/s warm and >= 0.8x cat cold, peak
<= 1 GiB; export of one topic <= 1/5 of export all; store_summary <= 2x the header read. Figures, the load
average and the machine go to stdout and OUT/commands-results.json.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests" / "golden"))

from bench_read import build_store, drop_cache, store_arguments  # noqa: E402

CLI = str(Path(sys.executable).parent / "rocketstore")      # the venv running this bench
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout
TOPIC = "bench_topic_3"
# RocketMQ's defaults, which the generator (made for small golden stores) must be told
DEFAULT_GEOMETRY = ("--mappedFileSizeConsumeQueue", "6000000", "--maxHashSlotNum", "5000000",
                    "--maxIndexNum", "20000000")
GB = 1e9


def with_queues(store: Path, version: str) -> None:
    """Give a generated store its ConsumeQueues and IndexFiles (our rebuild, RocketMQ's default geometry)."""
    if (store / "consumequeue").is_dir() and (store / "index").is_dir():
        return
    out = store.parent / "rebuilt"
    shutil.rmtree(out, ignore_errors=True)
    subprocess.run([CLI, "rebuild", str(store), "--output", str(out), "--rocketmq-version", version, "--json"],
                   stdout=subprocess.DEVNULL, check=False)
    for sub in ("consumequeue", "index"):
        (out / sub).rename(store / sub)
    shutil.rmtree(out)


def store_files(store: Path) -> list[Path]:
    return sorted(p for sub in ("commitlog", "consumequeue", "index") for p in (store / sub).rglob("*") if p.is_file())


def timed(argv: list[str], ok=(0, 3), env: dict | None = None) -> dict:
    """One run of ``argv`` in a fresh process: seconds, peak RSS (MiB) and CPU share, from /usr/bin/time."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        proc = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %M %P", *argv], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        if proc.returncode not in ok:
            raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        seconds, kib, cpu = t.read().split()[-3:]
    return {"seconds": float(seconds), "peak_mib": round(int(kib) / 1024), "cpu_percent": int(cpu.rstrip("%"))}


def rocketmq_restart(store: Path, version: str, work: Path, segment_bytes: int) -> dict:
    from serve_check import generator                      # tests/golden/serve_check.py
    out = work / "restart.json"
    generator(version, "recover", "--store", str(store), "--work", str(work / "restart"), "--out", str(out),
              "--abort", "--mappedFileSizeCommitLog", str(segment_bytes), *DEFAULT_GEOMETRY, timeout=3600)
    report = json.loads(out.read_text())
    if not report.get("loaded"):
        raise RuntimeError(f"RocketMQ {version} did not load the copy: {report.get('load_error')}")
    return {"seconds": report["load_seconds"], "dispatch_seconds": report.get("dispatch_seconds")}


def main(argv=None):
    p = store_arguments(__doc__, segment_mib=1024)
    p.set_defaults(gib=8.0)
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--rocketmq-version", default="5.3.3", help="the release the store's queues follow and whose "
                   "restart is timed")
    p.add_argument("--no-rocketmq", action="store_true", help="skip RocketMQ's restart (no JDK or Maven)")
    p.add_argument("--no-spark", action="store_true", help="skip store_summary and the header read")
    p.add_argument("--cold", action="store_true", help="also run every command with the page cache dropped")
    p.add_argument("--only", help="comma-separated commands to run (e.g. 'audit': cat always runs), for a store "
                                  "larger than RAM where each costs minutes")
    args = p.parse_args(argv)

    out = args.out / "commands"
    build_store(out, args.gib, args.segment_mib, queue_offsets=True)        # queue offsets as a broker numbers them
    store = out / "store"
    with_queues(store, args.rocketmq_version)
    files = store_files(store)
    log_bytes = sum(p.stat().st_size for p in (store / "commitlog").iterdir())
    all_bytes = sum(p.stat().st_size for p in files)
    work = out / "work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    s = str(store)
    commands = {
        "audit": [CLI, "audit", s, "--json"],
        "recover report": [CLI, "recover", "report", s, "--json"],
        "rebuild": [CLI, "rebuild", s, "--output", str(work / "rebuilt"), "--json"],
        "export topic": [CLI, "export", s, "--topic", TOPIC, "--output", str(work / "topic.parquet")],
        "export all": [CLI, "export", s, "--output", str(work / "all.parquet")],
    }
    if not args.no_spark:
        commands["store_summary"] = [str(ROOT / "spark-submit.sh"), "jobs/store_summary.py", "--store", s]
        commands["header read"] = [str(ROOT / "spark-submit.sh"), "bench/spark_header_read.py", s]

    if args.only:
        keep = set(args.only.split(","))
        unknown = keep - set(commands)
        if unknown:
            p.error(f"--only: no such command {', '.join(sorted(unknown))} (of {', '.join(commands)})")
        commands = {name: argv for name, argv in commands.items() if name in keep}
        args.no_rocketmq = args.no_rocketmq or "rocketmq restart" not in keep

    def cat() -> dict:
        return timed(["cat", *map(str, files)])

    def run(name: str) -> dict:
        if name == "rebuild":
            shutil.rmtree(work / "rebuilt", ignore_errors=True)
        for output in ("topic.parquet", "all.parquet"):      # export writes a new file, never over one
            (work / output).unlink(missing_ok=True)
        return timed(commands[name])

    results = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)},
               "store": {"gib": args.gib, "segment_mib": args.segment_mib, "commitlog_bytes": log_bytes,
                         "bytes_read_by_audit": all_bytes, "files": len(files)},
               "warm": {}, "cold": {}}
    cat()                                                   # the page cache warmed
    for phase in ("warm", "cold") if args.cold else ("warm",):
        runs = results[phase]
        for _ in range(args.repeat):
            for name in ("cat", *commands):
                if phase == "cold":
                    drop_cache(files)
                load = [round(x, 2) for x in os.getloadavg()]         # other work on the machine, run by run
                runs.setdefault(name, []).append({**(cat() if name == "cat" else run(name)), "load_before": load})
                print(phase, name, runs[name][-1], flush=True)
        cat()
    if not args.no_rocketmq:
        restarts = [rocketmq_restart(store, args.rocketmq_version, work, args.segment_mib << 20)
                    for _ in range(args.repeat)]
        results["warm"]["rocketmq restart"] = restarts
        print("rocketmq restart", restarts, flush=True)
    shutil.rmtree(work, ignore_errors=True)

    def best(phase, name):
        return min(results[phase][name], key=lambda r: r["seconds"])

    summary = {}
    for phase in ("warm", "cold") if args.cold else ("warm",):
        b = {name: best(phase, name) for name in results[phase]}
        summary[phase] = {name: {**r, "gb_per_s": round(log_bytes / GB / r["seconds"], 2)} for name, r in b.items()}
        cat_run = b["cat"]["seconds"]
        summary[phase]["ratios"] = {
            **({"audit_vs_cat": round(cat_run / b["audit"]["seconds"], 2)} if "audit" in b else {}),
            **({"export_topic_vs_export_all": round(b["export topic"]["seconds"] / b["export all"]["seconds"], 3)}
               if "export topic" in b and "export all" in b else {}),
            **({"store_summary_vs_header_read": round(b["store_summary"]["seconds"] / b["header read"]["seconds"], 2)}
               if "store_summary" in b else {}),
            **({"audit_vs_rocketmq_restart": round(b["rocketmq restart"]["seconds"] / b["audit"]["seconds"], 2)}
               if "rocketmq restart" in b and "audit" in b else {}),
        }
    results["summary"] = summary
    results["load_average"] = os.getloadavg()
    print(json.dumps(summary, indent=2))
    (args.out / "commands-results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
