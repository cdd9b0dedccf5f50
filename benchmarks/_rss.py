"""Peak memory of a benchmark's own process, shared by the benchmark scripts (run as ``python benchmarks/X.py``,
which puts this folder on ``sys.path``)."""

from __future__ import annotations


def peak_rss_bytes() -> int:
    """VmHWM (peak resident set size) of this process, from /proc/self/status."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM line in /proc/self/status")
