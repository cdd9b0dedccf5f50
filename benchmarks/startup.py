"""Start-up of the ``crl`` command: wall and CPU seconds of a few commands, each a fresh process.

    python benchmarks/startup.py                    # 5 runs of each command, the median printed
    PYTHONPATH=OTHER/src python benchmarks/startup.py --runs 9   # another checkout's crl, for a before/after

The commands: ``crl --help``, ``crl version``, ``crl search --help``, ``crl config --defaults`` and ``crl search
IDX 17`` (by id, table and ``--json``) on a saved flat index of 1,000 random vectors (d = 64) built in a
temporary folder. Wall time depends on the machine's load; the CPU time (user + system of the child) much less,
so both are printed, with the load average at the start. Prints one Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from crl.search import Index


def timed(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``python -m crl ARGV``, its output discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "crl", *argv], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5, help="Runs of each command (median reported).")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        index_dir = Path(folder) / "idx"
        vectors = np.random.default_rng(0).normal(size=(1000, 64)).astype(np.float32)
        Index.build(vectors, None, "flat", "cosine").save(index_dir)
        commands = {
            "crl --help": ["--help"],
            "crl version": ["version"],
            "crl search --help": ["search", "--help"],
            "crl config --defaults": ["config", "--defaults"],
            "crl search IDX 17": ["search", str(index_dir), "17"],
            "crl search IDX 17 --json": ["search", str(index_dir), "17", "--json"],
        }
        timed(["--help"])  # warm the file cache
        print(f"load average at start: {os.getloadavg()[0]:.2f}; {args.runs} runs each, medians\n")
        print("| command | wall s | CPU s |")
        print("|---|---|---|")
        for name, argv in commands.items():
            runs = [timed(argv) for _ in range(args.runs)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            print(f"| `{name}` | {wall:.2f} | {cpu:.2f} |")


if __name__ == "__main__":
    main()
