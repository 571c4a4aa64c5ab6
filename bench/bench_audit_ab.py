"""Two checkouts' `rocketstore audit --json` on one store, alternating in the same window (issue #27): each run a
fresh process started outside any checkout (``cd /tmp``, ``PYTHONPATH=CHECKOUT``), ``cat`` of the same files in
each round; ``cold``: every store file's pages dropped first (``posix_fadvise(DONTNEED)``), ``warm``: after a
``cat``. Prints per run: seconds, CPU-seconds (user + system, and apart), peak RSS, the bytes the process read from
the disk (getrusage's block inputs: the task's ``read_bytes``, threads included), its major page faults (a mapped
page the pass had to wait for the disk for: what the read-ahead did not bring in first) and the load average
before it.

    .venv/bin/python bench/bench_audit_ab.py STORE before=/tmp/old-checkout after=. --rounds 3 --phases cold,warm

A store larger than the page cache shows what the order of the passes costs in bytes read: a log read twice
reads more than ``cat`` does.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_commands import store_files  # noqa: E402
from bench_read import drop_cache  # noqa: E402


def timed(argv: list[str], env: dict | None = None) -> dict:
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        proc = subprocess.run(["/usr/bin/time", "-o", t.name, "-f", "%e %M %U %S %I %F", *argv],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                              cwd=tempfile.gettempdir())
        if proc.returncode not in (0, 3):
            raise RuntimeError(f"{' '.join(argv)}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
        seconds, kib, user, system, inblock, major = t.read().split()[-6:]
    return {"seconds": float(seconds), "cpu_seconds": round(float(user) + float(system), 1),
            "user": float(user), "system": float(system), "peak_mib": int(kib) // 1024,
            "read_gb": round(int(inblock) * 512 / 1e9, 2), "major_faults": int(major)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("store", type=Path)
    p.add_argument("sides", nargs="+", help="NAME=CHECKOUT, run in this order each round")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--phases", default="cold,warm")
    args = p.parse_args(argv)
    files = store_files(args.store)
    sides = dict(s.split("=", 1) for s in args.sides)
    for r in range(args.rounds):
        for phase in args.phases.split(","):
            for name, tree in {"cat": None, **sides}.items():
                if phase == "cold":
                    drop_cache(files)
                else:
                    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
                load = [round(x, 2) for x in os.getloadavg()]
                if tree is None:
                    res = timed(["cat", *map(str, files)])
                else:
                    env = {**os.environ, "PYTHONPATH": str(Path(tree).resolve())}
                    audit = [sys.executable, "-m", "rocketstore_spark.cli.main", "audit", str(args.store), "--json"]
                    res = timed(audit, env)
                print(json.dumps({"round": r, "phase": phase, "side": name, **res, "load_before": load}), flush=True)


if __name__ == "__main__":
    main()
