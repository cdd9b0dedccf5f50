"""Time and peak memory of crl eval's linear probe (:func:`crl.metrics.classification.linear_probe_predictions`) on a
synthetic problem shaped like a CNN backbone's features: n training items of d features (d = 3,136 is the
backbone h of Fashion-MNIST's CNN, 64 x 7 x 7), c classes, m test items.

Each run is a fresh subprocess (its peak resident set size ``VmHWM`` from /proc/self/status, read before and after
the probe: the growth is the probe's own memory, allocator caches included) with ``--threads`` torch threads. It
prints one JSON line per run: seconds, objective evaluations (forward + backward passes of L-BFGS), seconds per
evaluation, peak RSS growth in MiB, and the test accuracy (the same problem gives the same figure before and after
a change that keeps the probe's minimiser). Nothing is asserted: this prints.

Run: ``.venv/bin/python benchmarks/linear_probe.py [--n 11000] [--d 3136] [--classes 10] [--max-iter 200]
[--threads 2] [--repeats 1]``.
"""

import argparse
import json
import subprocess
import sys
import time

from _rss import peak_rss_bytes

MIB = 1 << 20


def run_case(n: int, d: int, classes: int, max_iter: int, threads: int, test: int) -> dict[str, float]:
    """One probe in this (fresh) process: its seconds, evaluations, peak RSS growth and accuracy."""
    # Loaded in the case's own fresh process, after its memory baseline, so that the case's peak counts them.
    import torch

    from crl.metrics import classification
    from crl.metrics.classification import linear_probe_predictions

    torch.set_num_threads(threads)
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(classes, d, generator=generator)
    labels = torch.randint(0, classes, (n + test,), generator=generator)
    features = (0.05 * centres[labels] + torch.randn(n + test, d, generator=generator)).relu()
    counted = {"evaluations": 0}

    class CountingLBFGS(torch.optim.LBFGS):
        """torch's L-BFGS, counting the objective's evaluations."""

        def step(self, closure):  # type: ignore[no-untyped-def, override]
            def counting():  # type: ignore[no-untyped-def]
                counted["evaluations"] += 1
                return closure()

            return super().step(counting)

    classification.torch.optim.LBFGS = CountingLBFGS  # type: ignore[misc]
    before = peak_rss_bytes()
    started = time.perf_counter()
    predicted = linear_probe_predictions(
        features[:n], labels[:n], features[n:], max_iter=max_iter, n_classes=classes
    )
    seconds = time.perf_counter() - started
    return {
        "n": n,
        "d": d,
        "classes": classes,
        "threads": threads,
        "seconds": round(seconds, 2),
        "evaluations": counted["evaluations"],
        "seconds_per_evaluation": round(seconds / max(1, counted["evaluations"]), 4),
        "peak_rss_growth_mib": round((peak_rss_bytes() - before) / MIB, 1),
        "test_accuracy": float((predicted == labels[n:]).double().mean()),
    }


def main() -> None:
    """Run the probe ``--repeats`` times, each in a fresh subprocess, and print one JSON line per run."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=11_000, help="training items (Fashion-MNIST's run: 55,000)")
    parser.add_argument("--d", type=int, default=3136, help="features per item")
    parser.add_argument("--classes", type=int, default=10)
    parser.add_argument("--test", type=int, default=2000, help="test items")
    parser.add_argument("--max-iter", type=int, default=200, help="L-BFGS iterations (crl eval's default)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--case", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    shape = (args.n, args.d, args.classes, args.max_iter, args.threads, args.test)
    if args.case:
        print(json.dumps(run_case(*shape)))
        return
    for _ in range(args.repeats):
        command = [sys.executable, __file__, "--case", *sys.argv[1:]]
        print(subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
