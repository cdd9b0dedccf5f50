"""Resident memory of a benchmark's own process, shared by the benchmark scripts (run as ``python benchmarks/X.py``,
which puts this folder on ``sys.path``)."""

from __future__ import annotations


def _status_bytes(field: str) -> int:
    """A ``kB`` line of /proc/self/status (``VmHWM``, ``VmRSS``) in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} line in /proc/self/status")


def peak_rss_bytes() -> int:
    """VmHWM (peak resident set size) of this process, from /proc/self/status."""
    return _status_bytes("VmHWM")


def rss_bytes() -> int:
    """VmRSS (current resident set size) of this process, from /proc/self/status."""
    return _status_bytes("VmRSS")
