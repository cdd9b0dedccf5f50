"""The cost of the m*(n) experiment's grids, extrapolated from ms/step measured at small sizes on this machine.

Measured (one thread, a few steps after one warm-up step, through crl.train.loop.TrainingLoop on each recipe's
config from crl.experiments.mstar.design.train_config): the locked heads on random unit features of the
recipe's width, SSCRL at m = 400 and 4000 of C = 4000 candidates and SCRL at m = C / 10 for C = 2000 and 8000;
the ablation's MLP on fresh Fashion-MNIST views at n = 2000, SSCRL at m = 64 and 2000. Fitted: SSCRL
t = a + b m (a step embeds the m pool items), SCRL t = a + b C (the union of b sets of m covers about all C
candidates, and the keyed hashes are b C), the ablation t = a + b R (R images embedded per step: m, or the
union of the sets, crl.train.exact_cost). Each cell then costs steps x t + one held-out score (measured on the
whole test split of each data set).
Prints the measured points, the fits, and per (data set, fidelity) the cells, CPU hours and the wall time on
two workers. Extrapolated: the largest grids are 4-8x the measured sizes.

Run: ``.venv/bin/python benchmarks/mstar_cost.py [--steps 4]`` (about a minute of CPU; needs Fashion-MNIST and
WordNet, and computes the WordNet test split's MiniLM features into the feature cache when they are not there).
"""

import argparse
import time
from collections import defaultdict
from dataclasses import asdict

import numpy as np
import torch
import torch.nn.functional as F

from crl.data import LockedFeaturePairs
from crl.experiments.mstar.design import (
    ABLATION,
    FIDELITIES,
    RECIPES,
    Recipe,
    grid_cells,
    train_config,
)
from crl.train.build import Streams
from crl.train.data import build_source
from crl.train.exact_cost import exact_step_cost
from crl.train.locked_heldout import load_heldout, score
from crl.train.loop import TrainingLoop

WIDTH = {"wordnet": 384, "fashion_mnist": 784}


def _params(recipe: Recipe, arm: str, regime: str, n: int, m: int, steps: int, pool: int = 0) -> dict:
    return {
        "arm": arm,
        "regime": regime,
        "n": n,
        "m": m,
        "steps": steps,
        "pool": pool,
        "recipe": asdict(recipe),
    }


def ms_per_step(params: dict, steps: int) -> float:
    """Mean ms of ``steps`` steps after one warm-up step, one thread."""
    config = train_config({**params, "steps": steps + 1}, seed=0)
    recipe = params["recipe"]
    if recipe["source"] == "locked":
        count = params["n"] + params["pool"]
        g = torch.Generator().manual_seed(0)
        x = F.normalize(torch.randn(count, WIDTH[recipe["dataset"]], generator=g), dim=1)
        source = LockedFeaturePairs(x, x.clone(), torch.arange(count), n_pairs=params["n"])
    else:
        source = build_source(config.data, seed=0)
    loop = TrainingLoop(config, source, Streams.derive(0, regime=config.loss.regime))
    loop.train_step()
    start = time.perf_counter()
    for _ in range(steps):
        float(loop.train_step())
    return 1000 * (time.perf_counter() - start) / steps


def eval_seconds(data: str) -> float:
    """Seconds of one held-out score on the whole test split through a random linear head of the recipe's width
    (the test features loaded first: from the feature cache, or computed there once, for WordNet in minutes)."""
    recipe = RECIPES[data]
    heldout = load_heldout(recipe.dataset, recipe.backbone, recipe.backbone_path, 0)
    head = torch.nn.Linear(heldout.x.shape[1], recipe.dim)

    def encode(features: torch.Tensor) -> torch.Tensor:
        return F.normalize(head(features), dim=1)

    start = time.perf_counter()
    with torch.no_grad():
        score(heldout, encode, encode)
    return time.perf_counter() - start


def _line(x: list[float], y: list[float]) -> tuple[float, float]:
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def fit(steps: int) -> dict[str, tuple[float, float]]:
    """(a, b) of t = a + b u in ms per model (module docstring), printing the measured points."""
    fits = {}
    for name, recipe in RECIPES.items():
        shared = [ms_per_step(_params(recipe, "in_sample", "shared", 4000, m, 1), steps) for m in (400, 4000)]
        scrl = [
            ms_per_step(_params(recipe, "in_sample", "independent", c, c // 10, 1), steps)
            for c in (2000, 8000)
        ]
        print(
            f"{name}: SSCRL C = 4000, m = 400 / 4000: {shared[0]:.1f} / {shared[1]:.1f} ms; "
            f"SCRL m = C/10, C = 2000 / 8000: {scrl[0]:.1f} / {scrl[1]:.1f} ms"
        )
        fits[f"{name}/shared"] = _line([400, 4000], shared)
        fits[f"{name}/independent"] = _line([2000, 8000], scrl)
    ablation = [
        ms_per_step(_params(ABLATION, "ablation_exact", "shared", 2000, m, 1), steps) for m in (64, 2000)
    ]
    print(f"ablation: SSCRL n = 2000, m = 64 / 2000: {ablation[0]:.1f} / {ablation[1]:.1f} ms")
    fits["ablation"] = _line([64, 2000], ablation)
    return fits


def step_ms(params: dict, fits: dict[str, tuple[float, float]]) -> float:
    """The fitted ms of one step of a cell."""
    arm, regime, n, m = params["arm"], params["regime"], params["n"], params["m"]
    if arm.startswith("ablation"):
        a, b = fits["ablation"]
        if arm == "ablation_cap":
            return a + b * min(m, 64)
        batch = params["recipe"]["batch"]
        rows = exact_step_cost(regime, batch=batch, m=m, candidates=n, d_x=784, d_y=784, d_out=64).negatives
        return a + b * rows
    a, b = fits[f"{params['data']}/{regime}"]
    candidates = params["pool"] or n
    return a + b * (m if regime == "shared" else candidates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    torch.set_num_threads(1)
    fits = fit(args.steps)
    for name, (a, b) in fits.items():
        print(f"fit {name}: {a:.2f} + {b:.4f} u ms")
    evals = {data: eval_seconds(data) for data in FIDELITIES}
    print("held-out score: " + ", ".join(f"{data} {seconds:.2f} s" for data, seconds in evals.items()))
    for data, grids in FIDELITIES.items():
        for fidelity, grid in grids.items():
            seconds: dict[str, float] = defaultdict(float)
            cells = grid_cells(data, grid)
            for cell in cells[1:]:
                params = cell.params
                seconds[params["arm"]] += params["steps"] * step_ms(params, fits) / 1000 + evals[data]
            total = sum(seconds.values())
            arms = ", ".join(f"{arm} {value / 3600:.2f} h" for arm, value in seconds.items())
            print(
                f"{data} {fidelity}: {len(cells)} cells, {total / 3600:.2f} CPU h ({arms}); "
                f"wall on 2 workers {total / 7200:.2f} h"
            )


if __name__ == "__main__":
    main()
