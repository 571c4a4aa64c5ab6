"""A process's own peak resident memory, for the memory tests' child processes.

``getrusage(RUSAGE_SELF).ru_maxrss`` is not the process's own peak on Linux: a child forked from a large
process (pytest after the campaign, 1.8 GiB) starts with the parent's resident size as its high-water mark,
carried over the exec, so a test could fail on the parent's memory, or pass without measuring anything.
``VmHWM`` in /proc/self/status belongs to the address space the exec made: it is the child's own.
"""
from __future__ import annotations


def peak_rss_kib() -> int:
    """The calling process's peak resident set since its exec, in KiB (Linux)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise RuntimeError("no VmHWM in /proc/self/status")
