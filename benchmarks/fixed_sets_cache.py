"""SCRL's sets S_i kept across epochs against computed at every visit: the time of a grid cell's draws.

    .venv/bin/python benchmarks/fixed_sets_cache.py                  # n = 16,000: about 2 minutes on 2 cores
    .venv/bin/python benchmarks/fixed_sets_cache.py --n 4000 --epochs 2

:class:`crl.negatives.fixed.FixedSets` gives anchor i the m candidates of smallest keyed hash h(seed, i, j) among
the C = n training items, which costs b x C hashes and a top-m per batch. A row's mask depends on the row alone,
so it is kept after its first visit (within ``cache_bytes``). This script draws the sets of E epochs of batches of
b = 256 anchors, as an m*(n) grid cell at n = 16,000 does, once with ``cache_bytes = 0`` (every visit computes
them, the baseline) and once with the default bound; each variant runs in its own process, so its peak resident
memory (VmHWM) is its own, and the masks of both are compared (they must be equal). Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import time

import torch

from _rss import peak_rss_bytes
from crl.negatives import EmbeddedBatch
from crl.negatives.fixed import SET_CACHE_BYTES, FixedSets

BATCH = 256


def _measure(n: int, m: int, epochs: int, cache_bytes: int) -> dict[str, float | int | str]:
    """Seconds of every epoch's draws, the peak RSS and a digest of all masks drawn."""
    torch.set_num_threads(1)
    items = torch.arange(n)
    sampler = FixedSets(m, items, items, seed=1, cache_bytes=cache_bytes)
    digest = hashlib.sha256()
    seconds = []
    for epoch in range(epochs):
        order = torch.randperm(n, generator=torch.Generator().manual_seed(epoch))
        start = time.perf_counter()
        for begin in range(0, n - BATCH + 1, BATCH):
            rows = order[begin : begin + BATCH]
            batch = EmbeddedBatch(torch.zeros(BATCH, 1), torch.zeros(BATCH, 1), indices=rows)
            draw = sampler.draw(batch, torch.Generator())
            assert draw.mask is not None
            digest.update(draw.mask.numpy().tobytes())
        seconds.append(time.perf_counter() - start)
    return {
        "first_epoch_s": seconds[0],
        "later_epoch_s": sum(seconds[1:]) / max(1, len(seconds) - 1),
        "total_s": sum(seconds),
        "peak_rss_mib": peak_rss_bytes() / 2**20,
        "kept_rows": sampler.kept_rows,
        "digest": digest.hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=16_000, help="training items = candidates C")
    parser.add_argument("--m", type=str, default="800,8000", help="comma-separated set sizes")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--child", type=str, default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        m, cache_bytes = (int(value) for value in args.child.split(","))
        print(json.dumps(_measure(args.n, m, args.epochs, cache_bytes)))
        return
    print(f"n = C = {args.n}, b = {BATCH}, {args.epochs} epochs of draws; one process per row\n")
    print("| m | sets | first epoch (s) | later epoch (s) | all epochs (s) | peak RSS (MiB) | rows kept |")
    print("|---|---|---|---|---|---|---|")
    for m in (int(value) for value in args.m.split(",")):
        digests = set()
        for name, cache_bytes in (("computed every visit", 0), ("kept", SET_CACHE_BYTES)):
            child = [sys.executable, __file__, "--n", str(args.n), "--epochs", str(args.epochs)]
            output = subprocess.run(
                [*child, "--child", f"{m},{cache_bytes}"], check=True, capture_output=True, text=True
            )
            row = json.loads(output.stdout)
            digests.add(row["digest"])
            print(
                f"| {m} | {name} | {row['first_epoch_s']:.2f} | {row['later_epoch_s']:.2f} | {row['total_s']:.2f} "
                f"| {row['peak_rss_mib']:.0f} | {row['kept_rows']} |"
            )
        if len(digests) != 1:
            raise SystemExit(f"m = {m}: the kept sets differ from the computed ones")
    print("\nthe masks drawn are equal with and without the cache at every m")


if __name__ == "__main__":
    main()
