"""A process's own peak resident memory, for the memory tests' child processes.

``getrusage(RUSAGE_SELF).ru_maxrss`` is not the process's own peak on Linux: a child forked from a large
process (pytest after the campaign, 1.8 GiB) starts with the parent's resident size as its high-water mark,
carried over the exec, so a test could fail on the parent's memory, or pass without measuring anything.
``VmHWM`` in /proc/self/status belongs to the address space the exec made: it is the child's own.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_kib() -> int:
    """The calling process's peak resident set since its exec, in KiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")


# `rocketstore ARGV` in a process that reports its own peak on stderr: python -c CLI_WITH_PEAK ARGV... (cwd: the
# repository, for tests.peak_rss); ``reported_peak_mib`` reads it back
CLI_WITH_PEAK = """
import sys
from tests.peak_rss import peak_rss_kib
from rocketstore_spark.cli.main import cli
code = 0
try:
    cli.main(args=sys.argv[1:], prog_name="rocketstore")
except SystemExit as e:
    code = e.code
print(f"PEAK_KIB {peak_rss_kib()}", file=sys.stderr)
sys.exit(code)
"""


def reported_peak_mib(stderr: str) -> float:
    """The peak a CLI_WITH_PEAK process printed, in MiB."""
    return int(stderr.rsplit("PEAK_KIB ", 1)[1].split()[0]) / 1024


def cli_with_peak(argv: list[str], python_path: Path = ROOT, ok=(0, 3)) -> dict:
    """``rocketstore ARGV`` in a fresh process running the code in ``python_path`` (a checkout; the benches'
    A/B): wall seconds, its own peak RSS in MiB, its exit status (one of ``ok``, else RuntimeError)."""
    env = {**os.environ, "PYTHONPATH": f"{python_path}{os.pathsep}{ROOT}"}
    began = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CLI_WITH_PEAK, *map(str, argv)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, env=env,
                          cwd=python_path)        # python -c puts the cwd first on the path
    seconds = time.perf_counter() - began
    if proc.returncode not in ok or "PEAK_KIB" not in proc.stderr:
        raise RuntimeError(f"rocketstore {' '.join(map(str, argv))}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return {"seconds": round(seconds, 2), "peak_mib": round(reported_peak_mib(proc.stderr)), "exit": proc.returncode}
