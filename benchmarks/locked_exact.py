"""Milliseconds per step and peak memory of the exact L_hat on locked features, at a few m, on random features.

Each case (regime, m) runs in a fresh subprocess: n random unit features (d_in = 384, MiniLM's width) for both
sides, heads 384 -> [hidden] -> 64 per tower, b anchors per step, ``[loss] negatives = "fixed_pool"`` (SSCRL) or
``"fixed_sets"`` (SCRL) with m negatives, gcl, through crl.train.loop.TrainingLoop (sets, heads, exact loss, AdamW):
two warm-up steps, then the mean wall time of the next ``--steps``, and the growth of the peak resident set size
(VmHWM from /proc/self/status) from just before the loop is built (the features already in memory) to the end:
the model, AdamW and every step's buffers, allocator caches included. Beside it, what
crl.train.exact_cost.exact_step_cost states for the case (negatives embedded per step, GFLOP) and pairs/s from the
measured time. Nothing is asserted: this prints.

Run: ``.venv/bin/python benchmarks/locked_exact.py [--n 20000] [--m 4096 16384] [--batch 64] [--hidden 0]``.
(At m = 64k the sets need n >= 64k items; that size is for a machine with time to spare, not for a check.)
"""

import argparse
import json
import subprocess
import sys
import time

from _rss import peak_rss_bytes

MIB = 1 << 20
D_IN, D_OUT = 384, 64


def run_case(regime: str, n: int, m: int, batch: int, hidden: int, steps: int) -> dict[str, float]:
    """Time ``steps`` steps after two warm-up steps, in this (fresh) process."""
    # Loaded in the case's own fresh process, after its memory baseline, so that the case's peak counts them.
    import torch
    import torch.nn.functional as F

    from crl.data import LockedFeaturePairs
    from crl.train.build import Streams
    from crl.train.config import parse_config
    from crl.train.loop import TrainingLoop

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(0)
    x = F.normalize(torch.randn(n, D_IN, generator=g), dim=1)
    y = F.normalize(x + 0.5 * torch.randn(n, D_IN, generator=g), dim=1)
    source = LockedFeaturePairs(x, y, torch.arange(n), n_pairs=n)
    negatives = "fixed_pool" if regime == "shared" else "fixed_sets"
    before = peak_rss_bytes()
    config = parse_config(
        {
            "data": {"source": "locked", "n_train": n, "batch_size": batch},
            "model": {
                "encoder": "mlp",
                "hidden": [hidden] if hidden else [],
                "embedding_dim": D_OUT,
                "towers": "two",
            },
            "loss": {"negatives": negatives, "n_negatives": m, "form": "gcl", "tau": 0.1},
            "optim": {"total_steps": steps + 2, "warmup_steps": 0},
        }
    )
    loop = TrainingLoop(config, source, Streams.derive(0, regime=config.loss.regime))
    for _ in range(2):
        loop.train_step()
    started = time.perf_counter()
    for _ in range(steps):
        float(loop.train_step())
    seconds = (time.perf_counter() - started) / steps
    return {"ms_per_step": 1000 * seconds, "peak_growth_mib": (peak_rss_bytes() - before) / MIB}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20000, help="training items (the candidates)")
    parser.add_argument("--m", type=int, nargs="+", default=[4096, 16384])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=0, help="the heads' hidden width (0: linear)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--case", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.case is not None:
        regime, m = args.case[0], int(args.case[1])
        print(json.dumps(run_case(regime, args.n, m, args.batch, args.hidden, args.steps)))
        return
    # Only the parent reads the cost table; the cases' fresh processes do not load it.
    from crl.train.exact_cost import exact_step_cost

    print(
        f"n = {args.n} random features of {D_IN} per side, heads {D_IN} -> "
        f"{[args.hidden] if args.hidden else []} -> {D_OUT}, b = {args.batch}, gcl, one thread"
    )
    print(
        f"{'regime':<7} {'m':>6} {'negatives/step':>15} {'GFLOP':>7} {'ms/step':>9} {'pairs/s':>9} {'peak MiB':>9}"
    )
    for m in args.m:
        for regime in ("shared", "independent"):
            cost = exact_step_cost(
                regime,
                batch=args.batch,
                m=m,
                candidates=args.n,
                d_x=D_IN,
                d_y=D_IN,
                d_out=D_OUT,
                hidden=args.hidden,
            )
            command = [sys.executable, __file__, "--case", regime, str(m), "--n", str(args.n)]
            command += ["--batch", str(args.batch), "--hidden", str(args.hidden), "--steps", str(args.steps)]
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            measured = json.loads(done.stdout.strip().splitlines()[-1])
            seconds = measured["ms_per_step"] / 1000
            name = "SSCRL" if regime == "shared" else "SCRL"
            print(
                f"{name:<7} {m:>6} {cost.negatives:>15.0f} {cost.flops / 1e9:>7.2f} {measured['ms_per_step']:>9.1f} "
                f"{cost.pairs_per_second(seconds):>9.0f} {measured['peak_growth_mib']:>9.0f}"
            )


if __name__ == "__main__":
    main()
