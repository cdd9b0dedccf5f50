"""crl's losses beside the ones users would otherwise pick: time, ratio to the three GEMMs, peak memory, parity.

Peers (each where installed; ``make bench-peers`` installs them into the separate venv ``.venv-peers``):
  - open_clip's ``ClipLoss`` and ``SigLipLoss``: its ``open_clip/loss.py`` is loaded by file path, without the
    package's ``__init__`` (which imports torchvision, never installed beside crl);
  - sentence-transformers' ``MultipleNegativesRankingLoss`` (one-sided in-batch InfoNCE) and
    ``CachedMultipleNegativesRankingLoss`` (its GradCache variant; the loss stage, chunked, with its backward);
  - info-nce-pytorch's ``InfoNCE`` (one-sided in-batch InfoNCE).
Each is timed on unit-norm embeddings (forward + backward of the loss alone) beside the crl call that computes the
same number: ``contrastive_loss(symmetric=True)`` for ClipLoss, ``sigmoid_loss`` for SigLipLoss, one-sided
``contrastive_loss`` for the others. Parity: before timing, each pair's values are compared in float64 at n = 256.
Each case runs in a fresh subprocess (its peak RSS growth is its own); "x bound" divides the median time by the
three GEMMs' time measured in the same subprocess (benchmarks/objectives.py's bound). Nothing is asserted.

Run: ``make bench-peers`` or ``.venv-peers/bin/python benchmarks/peers.py [--n 8192] [--repeats 5] [--threads 1]``.
"""

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from crl.objectives import contrastive_loss, sigmoid_loss
from objectives import peak_growth_since, rss_bytes, three_gemms_seconds

TAU = 0.07
SIGLIP_TAU, SIGLIP_BIAS = 0.1, -10.0
MINI_BATCH = 1024
Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def open_clip_losses() -> ModuleType | None:
    """open_clip/loss.py of the installed open_clip_torch, loaded alone (None when it is not installed)."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or spec.submodule_search_locations is None:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "loss.py"
    module_spec = importlib.util.spec_from_file_location("open_clip_loss", path)
    if module_spec is None or module_spec.loader is None:
        return None
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module


def sentence_transformers_losses() -> ModuleType | None:
    """sentence-transformers' losses module (its 6.x path, else the older one), or None when not installed."""
    for name in ("sentence_transformers.sentence_transformer.losses", "sentence_transformers.losses"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a @ b.T


def peer_losses() -> dict[str, tuple[Loss, Loss]]:
    """name -> (peer loss, crl loss of the same value), for every peer that imports."""
    cases: dict[str, tuple[Loss, Loss]] = {}
    loss_py = open_clip_losses()
    if loss_py is not None:
        clip, siglip = loss_py.ClipLoss(), loss_py.SigLipLoss()
        cases["open_clip ClipLoss"] = (
            lambda a, p: clip(a, p, torch.tensor(1 / TAU, dtype=a.dtype)),
            lambda a, p: contrastive_loss(a, p, tau=TAU, symmetric=True),
        )
        cases["open_clip SigLipLoss"] = (
            lambda a, p: siglip(
                a, p, torch.tensor(1 / SIGLIP_TAU, dtype=a.dtype), torch.tensor(SIGLIP_BIAS, dtype=a.dtype)
            ),
            lambda a, p: sigmoid_loss(a, p, tau=SIGLIP_TAU, bias=torch.tensor(SIGLIP_BIAS, dtype=a.dtype)),
        )
    losses = sentence_transformers_losses()
    if losses is not None:
        mnrl = losses.MultipleNegativesRankingLoss(None, scale=1 / TAU, similarity_fct=_dot)
        cached = losses.CachedMultipleNegativesRankingLoss.__new__(losses.CachedMultipleNegativesRankingLoss)
        torch.nn.Module.__init__(cached)
        cached.loss = mnrl
        cached.mini_batch_size = MINI_BATCH
        cached.show_progress_bar = False
        one_sided: Loss = lambda a, p: contrastive_loss(a, p, tau=TAU)  # noqa: E731
        cases["s-t MultipleNegativesRankingLoss"] = (
            lambda a, p: mnrl.compute_loss_from_embeddings([a, p], None),
            one_sided,
        )
        cases["s-t CachedMNRL (loss stage)"] = (
            lambda a, p: cached.calculate_loss([[a], [p]], with_backward=a.requires_grad),
            one_sided,
        )
    try:
        # info-nce-pytorch is optional (make bench-peers installs it): its case is skipped without it.
        from info_nce import InfoNCE
    except ImportError:
        pass
    else:
        info = InfoNCE(temperature=TAU)
        cases["info-nce-pytorch InfoNCE"] = (
            lambda a, p: info(a, p),
            lambda a, p: contrastive_loss(a, p, tau=TAU),
        )
    return cases


def unit_pair(n: int, d: int, dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(n, d, generator=g, dtype=dtype), dim=1)
    p = F.normalize(a + 0.5 * torch.randn(n, d, generator=g, dtype=dtype), dim=1)
    return a.requires_grad_(True), p.requires_grad_(True)


def parity(peer: Loss, ours: Loss) -> float:
    """|peer - crl| of the loss value in float64 at n = 256."""
    a, p = unit_pair(256, 32, torch.float64)
    return float((peer(a, p) - ours(a, p)).detach().abs())


def run_case(name: str, which: str, n: int, d: int, repeats: int) -> dict[str, float]:
    """Median seconds, median x bound and peak RSS growth (MiB) of one loss, in this (fresh) process."""
    peer, ours = peer_losses()[name]
    fn = peer if which == "peer" else ours
    a, p = unit_pair(n, d)
    baseline = rss_bytes()
    seconds, over = [], []
    for _ in range(repeats):
        bound = three_gemms_seconds(n, d)
        start = time.perf_counter()
        value = fn(a, p)
        if value.requires_grad:  # CachedMNRL's loss stage runs its chunks' backward itself
            value.backward()
        elapsed = time.perf_counter() - start
        a.grad = p.grad = None
        seconds.append(elapsed)
        over.append(elapsed / bound)
    return {
        "seconds": statistics.median(seconds),
        "over": statistics.median(over),
        "spread": max(over) - min(over),
        "mib": peak_growth_since(baseline),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--d", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--case", nargs=2, metavar=("NAME", "WHICH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.case:
        print(json.dumps(run_case(args.case[0], args.case[1], args.n, args.d, args.repeats)))
        return
    cases = peer_losses()
    found = ", ".join(cases) or "none (run make bench-peers)"
    print(
        f"torch {torch.__version__}, {args.threads} thread(s), n = m = {args.n}, d = {args.d}; peers: {found}"
    )
    print(f"load before {os.getloadavg()}; x bound = median time / the three GEMMs' time (same subprocess)\n")
    header = (
        f"{'loss':<34} {'parity |diff|':>13} {'median s':>9} {'x bound':>8} {'spread':>7} {'peak MiB':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, (peer, ours) in cases.items():
        diff = parity(peer, ours)
        for which, label in (("peer", name), ("crl", "  crl, same value")):
            cmd = [
                sys.executable,
                __file__,
                "--n",
                str(args.n),
                "--d",
                str(args.d),
                "--repeats",
                str(args.repeats),
            ]
            cmd += ["--threads", str(args.threads), "--case", name, which]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                print(f"{label:<34} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(done.stdout)
            shown = f"{diff:>13.1e}" if which == "peer" else f"{'':>13}"
            print(
                f"{label:<34} {shown} {r['seconds']:>9.2f} {r['over']:>8.2f} {r['spread']:>7.2f} {r['mib']:>9.0f}",
                flush=True,
            )
    print(f"\nload after {os.getloadavg()}")


if __name__ == "__main__":
    main()
