"""Time of crl's losses over the time of their three GEMMs, measured in the same run; peak memory; bf16 error.

For d = 128 and n = m (default 16384) it times one forward + backward pass of each case and divides by the
"bound": three GEMMs of 2 n m d FLOPs (the forward scores and the two gradients of a dense implementation), run
right before each repeat as back-to-back float32 (4096 x d) @ (d x 4096) products (per FLOP at least as fast here
as the kernel's 1024 x 1024 blocks: 3.10 against 2.95-3.13 ms per 2^20 scores at d = 128, one thread).
Ratios to a bound timed in the same minute are robust to the load of a shared machine; the printout gives the
median, the spread (min..max) over the repeats and the load average (os.getloadavg) before and after.

Cases (``--cases``):
  - ``symmetric-infonce``, ``symmetric-dcl``, ``symmetric-gcl``: CLIP's in-batch symmetric loss (tiled kernel);
  - ``one-sided``: InfoNCE of n anchors against m shared negatives, reduced by a mean (tiled kernel);
  - ``sigmoid``: SigLIP's loss over all n^2 pairs (``sigmoid_loss``);
  - ``clip-formula``: open_clip's ClipLoss formula in plain torch (cross_entropy of both directions of a @ p.T);
  - ``bf16-symmetric``: ``symmetric-infonce`` under ``torch.autocast("cpu", torch.bfloat16)``.
``--passes`` prints the milliseconds per 1024 x 1024 block of the passes after each GEMM, by torch's operators and
by the fused C passes (:mod:`crl.objectives._native`), timed inside a loop of GEMMs as the kernel runs them.
``--crossover`` prints dense against tiled milliseconds for n = m = 64..2048 (where ``tiling="auto"`` switches).
Each line gives the median time, the median and range of the per-repeat ratios, and min/min: the fastest repeat of
the loss over the fastest repeat of the bound. Load from other tenants only ever adds time, so on a noisy machine the
two minima estimate the uncontended costs, where a per-repeat ratio whose bound happened to be slowed reads low.
``--memory`` runs each case once in a fresh subprocess and prints its peak RSS growth (VmHWM minus the RSS once the
inputs exist; it includes the inputs' gradients). ``--error`` prints the bf16 error against float64.
Nothing is asserted: this prints. Peers (open_clip, sentence-transformers, info-nce-pytorch): benchmarks/peers.py.

Run: ``make bench`` or ``.venv/bin/python benchmarks/objectives.py [--sizes 16384] [--repeats 5] [--threads 1]``;
the bf16 error alone: ``--error --cases`` (no case).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from crl.objectives import contrastive_loss, sigmoid_loss
from crl.objectives._native import fused_passes

TAU = 0.07
MIB = 1 << 20
CASES = (
    "symmetric-infonce",
    "symmetric-dcl",
    "symmetric-gcl",
    "one-sided",
    "sigmoid",
    "clip-formula",
    "bf16-symmetric",
)
DEFAULT_CASES = CASES[:5]
"""``make bench``: the crl cases in float32 (clip-formula and bf16-symmetric, slow here, on request)."""


def three_gemms_seconds(n: int, d: int) -> float:
    """Seconds of the three GEMMs' FLOPs (3 x 2 n n d) run as float32 (4096 x d) @ (d x 4096) products back to
    back: the bound, timed over about as long as the loss so that both see the same load."""
    a, b = torch.randn(4096, d), torch.randn(d, 4096)
    out = torch.empty(4096, 4096)
    torch.mm(a, b, out=out)
    count = max(1, round(3 * n * n / (4096 * 4096)))
    start = time.perf_counter()
    for _ in range(count):
        torch.mm(a, b, out=out)
    return (time.perf_counter() - start) * 3 * n * n / (count * 4096 * 4096)


def inputs(n: int, d: int, case: str) -> tuple[torch.Tensor, ...]:
    """Unit-norm anchors, positives and (one-sided) shared negatives, with gradients."""
    g = torch.Generator().manual_seed(0)
    count = 3 if case == "one-sided" else 2
    return tuple(
        F.normalize(torch.randn(n, d, generator=g), dim=1).requires_grad_(True) for _ in range(count)
    )


def loss_fn(case: str, tensors: tuple[torch.Tensor, ...]) -> Callable[[], torch.Tensor]:
    """A closure computing the case's scalar loss from ``tensors``."""
    a, p = tensors[0], tensors[1]
    if case.startswith("symmetric-"):
        form = case.split("-")[1]
        return lambda: contrastive_loss(a, p, tau=TAU, form=form, symmetric=True, tiling="tiled")  # type: ignore[arg-type]
    if case == "bf16-symmetric":

        def bf16() -> torch.Tensor:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return contrastive_loss(a, p, tau=TAU, symmetric=True, tiling="tiled")

        return bf16
    if case == "one-sided":
        return lambda: contrastive_loss(a, p, tensors[2], tau=TAU, tiling="tiled")
    if case == "sigmoid":
        bias = torch.tensor(-10.0)
        return lambda: sigmoid_loss(a, p, tau=0.1, bias=bias)
    labels = torch.arange(a.shape[0])

    def clip_formula() -> torch.Tensor:
        logits = a @ p.T / TAU
        return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))

    return clip_formula


def time_once(fn: Callable[[], torch.Tensor], tensors: tuple[torch.Tensor, ...]) -> float:
    """Seconds of one forward + backward pass."""
    start = time.perf_counter()
    fn().backward()
    elapsed = time.perf_counter() - start
    for t in tensors:
        t.grad = None
    return elapsed


def timings(case: str, n: int, d: int, repeats: int) -> tuple[list[float], list[float]]:
    """(seconds of the loss, seconds of its three-GEMM bound) per repeat, the bound re-measured before each."""
    tensors = inputs(n, d, case)
    fn = loss_fn(case, tensors)
    time_once(fn, tensors)
    seconds, bounds = [], []
    for _ in range(repeats):
        bounds.append(three_gemms_seconds(n, d))
        seconds.append(time_once(fn, tensors))
    return seconds, bounds


def rss_bytes() -> int:
    """This process's resident set size now."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_growth_since(baseline: int) -> float:
    """MiB by which this process's peak RSS (VmHWM) exceeds ``baseline`` bytes."""
    with open("/proc/self/status") as f:
        hwm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM"))
    return (hwm - baseline) / MIB


def peak_growth(case: str, n: int, d: int) -> float:
    """MiB of peak RSS growth of one forward + backward pass, in this (fresh) process."""
    tensors = inputs(n, d, case)
    fn = loss_fn(case, tensors)
    baseline = rss_bytes()
    fn().backward()
    return peak_growth_since(baseline)


def bf16_error(n: int, d: int) -> dict[str, float]:
    """Relative error of the bf16-autocast symmetric loss and its gradients against float64 (tiled both)."""
    a, p = inputs(n, d, "symmetric-infonce")
    results = {}
    for name, dtype in (("float64", torch.float64), ("bf16", torch.float32)):
        x = a.detach().to(dtype).requires_grad_(True)
        y = p.detach().to(dtype).requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=name == "bf16"):
            loss = contrastive_loss(x, y, tau=TAU, symmetric=True, tiling="tiled")
        loss.backward()
        assert x.grad is not None
        results[name] = (loss.detach().double(), x.grad.double())
    (ref, ref_grad), (low, low_grad) = results["float64"], results["bf16"]
    return {
        "loss": float((low - ref).abs() / ref.abs()),
        "grad": float((low_grad - ref_grad).norm() / ref_grad.norm()),
    }


PASS_KINDS = ("gemm", "torch backward", "fused backward", "torch forward", "fused forward")


def block_pass(kind: str, out: torch.Tensor, spare: torch.Tensor, u: torch.Tensor, v: torch.Tensor) -> None:
    """The elementwise work after one block's GEMM: the symmetric backward's weights 2^x (1 + u_i v_j), or the
    forward's row sums and v-weighted column sums of 2^x, by torch's operators or by the fused pass."""
    fused = fused_passes()
    if kind == "torch backward":
        out.exp2_().addcmul_(out, torch.mm(u[:, None], v[None, :], out=spare))
    elif kind == "fused backward" and fused is not None:
        fused.exp2_rank_one(out, u, v)
    elif kind == "torch forward":
        out.exp2_().sum(dim=1)
        torch.mv(out.T, v)
    elif kind == "fused forward" and fused is not None:
        fused.exp2_sums(out, v)


def print_passes(d: int, repeats: int) -> None:
    """Milliseconds per 1024 x 1024 block of each pass group, timed inside a loop of 16 block GEMMs (1024 x (d + 1)
    products of disjoint row and column blocks, as the kernel runs them): the GEMM alone, then the GEMM followed by
    each pass group; a pass costs the difference of medians over ``repeats`` interleaved rounds."""
    block, count = 1024, 16
    g = torch.Generator().manual_seed(0)
    q = torch.randn(count * block, d + 1, generator=g) * 0.05
    c = torch.randn(count * block, d + 1, generator=g) * 0.05
    out, spare = torch.empty(block, block), torch.empty(block, block)
    u, v = torch.rand(block, generator=g), torch.rand(block, generator=g)
    per_kind: dict[str, list[float]] = {kind: [] for kind in PASS_KINDS}
    for _ in range(repeats):
        for kind in PASS_KINDS:
            start = time.perf_counter()
            for i in range(count):
                rows, cols = (
                    slice(i * block, (i + 1) * block),
                    slice((count - 1 - i) * block, (count - i) * block),
                )
                torch.mm(q[rows], c[cols].T, out=out)
                block_pass(kind, out, spare, u, v)
            per_kind[kind].append((time.perf_counter() - start) / count * 1e3)
    gemm = statistics.median(per_kind["gemm"])
    built = "built" if fused_passes() is not None else "NOT built (rows show the GEMM alone)"
    print(f"ms per {block} x {block} block, d + 1 = {d + 1}, median of {repeats}; fused passes {built}")
    for kind in PASS_KINDS:
        total = statistics.median(per_kind[kind])
        print(f"{kind:<16} {total:>7.3f}  pass {total - gemm:>6.3f}")


CROSSOVER_SIZES = (64, 128, 256, 512, 1024, 2048)


def crossover_ms(n: int, d: int, symmetric: bool, tiling: str) -> float:
    """Median milliseconds of one forward + backward pass of the symmetric in-batch (or one-sided, m = n shared
    negatives) InfoNCE with ``tiling`` forced, over enough repeats to last about a second."""
    case = "symmetric-infonce" if symmetric else "one-sided"
    tensors = inputs(n, d, case)
    a, p = tensors[0], tensors[1]
    negatives = None if symmetric else tensors[2]

    def fn() -> torch.Tensor:
        return contrastive_loss(a, p, negatives, tau=TAU, symmetric=symmetric, tiling=tiling)  # type: ignore[arg-type]

    time_once(fn, tensors)
    repeats = max(5, 20000 // n)
    return 1e3 * statistics.median(time_once(fn, tensors) for _ in range(repeats))


def print_crossover(d: int) -> None:
    """Dense against tiled milliseconds by n = m: where ``tiling="auto"`` should switch on this machine."""
    print(f"{'n = m':>6} {'symmetric dense':>16} {'tiled':>8} {'one-sided dense':>16} {'tiled':>8}   (ms)")
    for n in CROSSOVER_SIZES:
        times = [
            crossover_ms(n, d, symmetric, tiling)
            for symmetric in (True, False)
            for tiling in ("dense", "tiled")
        ]
        print(f"{n:>6} {times[0]:>16.2f} {times[1]:>8.2f} {times[2]:>16.2f} {times[3]:>8.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16384])
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--cases",
        nargs="*",
        default=list(DEFAULT_CASES),
        choices=CASES,
        help="none: only the --error figures",
    )
    parser.add_argument("--memory", action="store_true", help="peak RSS growth per case (subprocesses)")
    parser.add_argument("--error", action="store_true", help="bf16 error against float64 at each size")
    parser.add_argument("--crossover", action="store_true", help="dense vs tiled time for n = m = 64..2048")
    parser.add_argument(
        "--passes", action="store_true", help="ms per block of each pass group, torch vs fused"
    )
    parser.add_argument("--peak", nargs=3, metavar=("CASE", "N", "D"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.peak:
        print(json.dumps(peak_growth(args.peak[0], int(args.peak[1]), int(args.peak[2]))))
        return
    if args.passes:
        print(f"torch {torch.__version__}, {args.threads} thread(s), load {os.getloadavg()}")
        print_passes(args.d, max(args.repeats, 9))
        return
    if args.crossover:
        print(f"torch {torch.__version__}, {args.threads} thread(s), d = {args.d}, load {os.getloadavg()}")
        print_crossover(args.d)
        return
    print(f"torch {torch.__version__}, {args.threads} thread(s), d = {args.d}, load before {os.getloadavg()}")
    print(
        "x bound = time / time of 3 GEMMs of 2 n m d FLOPs (as 4096 x d x 4096 blocks) run before each repeat;\n"
        "min/min = the fastest repeat of the loss over the fastest of its bounds\n"
    )
    header = (
        f"{'case':<18} {'n = m':>6} {'median s':>9} {'x bound':>8} {'min..max x bound':>17} {'min/min':>9}"
    )
    print(header + (f" {'peak MiB':>9}" if args.memory else ""))
    print("-" * (len(header) + (10 if args.memory else 0)))
    for n in args.sizes:
        for case in args.cases:
            seconds, bounds = timings(case, n, args.d, args.repeats)
            over = [s / b for s, b in zip(seconds, bounds, strict=True)]
            line = (
                f"{case:<18} {n:>6} {statistics.median(seconds):>9.2f} {statistics.median(over):>8.2f} "
                f"{min(over):>8.2f}..{max(over):<7.2f} {min(seconds) / min(bounds):>9.2f}"
            )
            if args.memory:
                cmd = [
                    sys.executable,
                    __file__,
                    "--threads",
                    str(args.threads),
                    "--peak",
                    case,
                    str(n),
                    str(args.d),
                ]
                done = subprocess.run(cmd, capture_output=True, text=True, check=False)
                line += f" {float(done.stdout):>9.0f}" if done.returncode == 0 else " failed"
            print(line, flush=True)
        if args.error:
            err = bf16_error(n, args.d)
            print(
                f"bf16 autocast vs float64 at n = {n}: loss rel. error {err['loss']:.2e}, "
                f"grad rel. error {err['grad']:.2e}"
            )
    print(f"\nload after {os.getloadavg()}")


if __name__ == "__main__":
    main()
