"""Peak memory growth of one forward + backward pass of the score losses beside the contrastive loss.

For n anchors, m shared negatives and d = 128 (float32), each case runs in a fresh subprocess that builds its
inputs, reads the peak resident set size ``VmHWM`` from /proc/self/status, runs one forward + backward pass of
the loss, reads ``VmHWM`` again and reports the difference in MiB (the loss's extra memory as the operating
system sees it, allocator caches included: tracemalloc and torch's own counters miss those). The n x m score
matrix itself would be 4 n m bytes (512 MiB at n = 4096, m = 32768). Nothing is asserted: this prints.

Run: ``.venv/bin/python benchmarks/memory.py [--n 4096] [--m 32768] [--d 128]``.
"""

import argparse
import json
import subprocess
import sys

from _rss import peak_rss_bytes

MIB = 1 << 20

CASES = ("contrastive", "sigmoid", "pairwise_logistic", "pairwise_hinge", "oce_entropic")


def run_case(case: str, n: int, m: int, d: int) -> dict[str, float]:
    """One forward + backward pass in this (fresh) process; returns the peak RSS growth in MiB."""
    # Loaded in the case's own fresh process, after its memory baseline, so that the case's peak counts them.
    import torch
    import torch.nn.functional as F

    from crl.objectives import contrastive_loss, oce_loss, pairwise_loss, sigmoid_loss

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True)
    p = F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True)
    neg = F.normalize(torch.randn(m, d, generator=g), dim=1).requires_grad_(True)
    losses = {
        "contrastive": lambda: contrastive_loss(a, p, neg, tau=0.1),
        "sigmoid": lambda: sigmoid_loss(a, p, neg, tau=0.1),
        "pairwise_logistic": lambda: pairwise_loss(a, p, neg, tau=0.1, psi="logistic"),
        "pairwise_hinge": lambda: pairwise_loss(a, p, neg, tau=0.1, psi="hinge"),
        "oce_entropic": lambda: oce_loss(a, p, neg, tau=0.1),
    }
    before = peak_rss_bytes()
    losses[case]().backward()
    return {"growth_mib": (peak_rss_bytes() - before) / MIB}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--m", type=int, default=32768)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--case", choices=CASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        print(json.dumps(run_case(args.case, args.n, args.m, args.d)))
        return
    print(
        f"n = {args.n}, m = {args.m}, d = {args.d}, float32; n x m scores = {4 * args.n * args.m / MIB:.0f} MiB"
    )
    print(f"{'loss':<20} {'peak RSS growth (MiB)':>22}")
    for case in CASES:
        command = [sys.executable, __file__, "--case", case, "--n", str(args.n), "--m", str(args.m)]
        completed = subprocess.run([*command, "--d", str(args.d)], capture_output=True, text=True, check=True)
        growth = json.loads(completed.stdout.strip().splitlines()[-1])["growth_mib"]
        print(f"{case:<20} {growth:>22.0f}")


if __name__ == "__main__":
    main()
