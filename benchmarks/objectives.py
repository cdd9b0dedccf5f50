"""Time and peak memory of the contrastive loss (tiled, dense, naive cross-entropy) beside the machine GEMM rate.

For d = 128 and n = m in {4096, 16384, 65536} it times one forward + backward pass of
  - ``naive``: CLIP's ``cross_entropy(a @ p.T / tau, arange(n))`` (both directions for the symmetric case),
  - ``dense``: crl's ``contrastive_loss(..., tiling="dense")`` (the n x m matrix in memory),
  - ``tiled``: crl's ``contrastive_loss(..., tiling="tiled")`` (one block at a time),
each case in a fresh subprocess, and prints time / (3 GEMMs of 2 n m d FLOPs at the measured GEMM rate) and the peak
extra memory (peak RSS minus the RSS once the inputs exist) / (4 n m bytes, one float32 n x m matrix).
Cases whose n x m matrices would not fit in memory are skipped and marked so. Nothing is asserted: this prints.

Run: ``make bench`` or ``.venv/bin/python benchmarks/objectives.py [--sizes 4096 16384] [--d 128]``.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss

TAU = 0.07
MIB = 1 << 20


def current_rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def gemm_rate(rows: int, inner: int, cols: int, repeats: int = 5) -> float:
    """Best float32 GFLOP/s of an (rows x inner) @ (inner x cols) product over a few repeats."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)
    out = torch.empty(rows, cols)
    torch.mm(a, b, out=out)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b, out=out)
        best = min(best, time.perf_counter() - start)
    return 2 * rows * inner * cols / best / 1e9


def run_case(method: str, case: str, n: int, d: int) -> dict[str, float]:
    """One forward + backward pass in this (fresh) process; returns seconds and peak extra bytes."""
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True)
    p = F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True)
    neg = (
        F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True)
        if case == "negatives"
        else None
    )
    labels = torch.arange(n)
    baseline = current_rss_bytes()

    def loss() -> torch.Tensor:
        if method == "naive":
            if case == "symmetric":
                logits = a @ p.T / TAU
                return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))
            assert neg is not None
            logits = torch.cat([(a * p).sum(1, keepdim=True), a @ neg.T], dim=1) / TAU
            return F.cross_entropy(logits, torch.zeros(n, dtype=torch.long))
        return contrastive_loss(a, p, neg, tau=TAU, symmetric=case == "symmetric", tiling=method)  # type: ignore[arg-type]

    repeats = 3 if n <= 4096 else 1
    if repeats > 1:
        loss().backward()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        loss().backward()
        best = min(best, time.perf_counter() - start)
        a.grad = p.grad = None
        if neg is not None:
            neg.grad = None
    return {"seconds": best, "extra_bytes": peak_rss_bytes() - baseline}


def fits(method: str, n: int) -> bool:
    """Dense and naive hold a few n x m float32 matrices; skip them when three would not fit in memory."""
    if method == "tiled":
        return True
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return 3 * 4 * n * n < 0.8 * total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--methods", nargs="+", default=["naive", "dense", "tiled"])
    parser.add_argument("--cases", nargs="+", default=["symmetric", "negatives"])
    parser.add_argument("--case", nargs=4, metavar=("METHOD", "CASE", "N", "D"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case:
        method, case, n, d = args.case
        print(json.dumps(run_case(method, case, int(n), int(d))))
        return
    d = args.d
    square = gemm_rate(2048, 2048, 2048)
    shaped = gemm_rate(4096, d, 4096)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    print(
        f"float32 GEMM: {square:.1f} GFLOP/s (2048^3), {shaped:.1f} GFLOP/s (4096 x {d} x 4096: the loss's shape)"
    )
    print(
        "bound = 3 GEMMs of 2 n m d FLOPs at the loss-shaped rate; mem ratio = peak extra / (4 n m bytes)\n"
    )
    header = (
        f"{'case':<10} {'n = m':>7} {'method':<6} {'time s':>8} {'x bound':>8} {'peak MiB':>9} {'x 4nm':>7}"
    )
    print(header)
    print("-" * len(header))
    for case in args.cases:
        for n in args.sizes:
            bound = 3 * 2 * n * n * d / (shaped * 1e9)
            for method in args.methods:
                if not fits(method, n):
                    print(f"{case:<10} {n:>7} {method:<6} {'skipped: n x m matrices exceed memory':>44}")
                    continue
                cmd = [sys.executable, __file__, "--case", method, case, str(n), str(d)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if done.returncode != 0:
                    print(f"{case:<10} {n:>7} {method:<6} failed: {done.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(done.stdout)
                mib = r["extra_bytes"] / MIB
                print(
                    f"{case:<10} {n:>7} {method:<6} {r['seconds']:>8.2f} {r['seconds'] / bound:>8.2f} "
                    f"{mib:>9.0f} {r['extra_bytes'] / (4 * n * n):>7.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
