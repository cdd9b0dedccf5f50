"""One ``crl advise --mstar`` session: plan the m* pilot (:mod:`crl.advise.mstar`: N/16, N/8, N/4, or lower where
that costs more than 10% of the same grid at N), state its cost before it runs, run its cells through the sweep
store, predict m*(N), and write ``mstar.json``.

The cells are the doubling pilot's (:func:`crl.advise.pilot.pilot_cells`: the user's config at (n, m) by the recipe
map, S seed runs, the held-out error), so a cell shared with a doubling session in the same folder is run once.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from crl.advise.heldout import Baseline, Metric, check_metric, default_metric
from crl.advise.mstar import (
    MstarPrediction,
    Scale,
    SeedErrors,
    answer_lines,
    check_scale,
    choose_pilot,
    m_grid,
    pilot_points,
    predict_mstar,
)
from crl.advise.pilot import TimingProbe, cell_samples, full_n, pilot_cells, probe_timing, run_in_folder
from crl.advise.session import AdviseOptions, baseline_at, model_covered
from crl.sweep import CellRecord, Executor, ProgressHook
from crl.train.config import TrainConfig
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = ["MstarPlan", "MstarResult", "finite_json", "plan_mstar", "run_mstar", "seed_errors"]


@dataclass(frozen=True)
class MstarPlan:
    """The m* pilot: its cells, seeds, epochs and metric, its processed samples against the same grid at N alone,
    and the timing probe."""

    n_full: int
    ns: tuple[int, ...]
    points: tuple[tuple[int, int], ...]
    seeds: tuple[int, ...]
    epochs: int
    metric: Metric
    pilot_samples: int
    full_samples: int
    share: float
    probe: TimingProbe | None
    scale: Scale = "error"


@dataclass(frozen=True)
class MstarResult:
    """A finished m* session."""

    plan: MstarPlan
    errors: SeedErrors
    prediction: MstarPrediction
    lines: list[str]
    baseline: Baseline
    json_path: Path


def plan_mstar(config: TrainConfig, options: AdviseOptions, *, probe: bool = True) -> MstarPlan:
    """The m* pilot at the config's N, its cost share (refused above 10%) and a timing probe.

    Raises:
        ValueError: naming the option or config field to change: ``--seeds`` below 3, ``--epochs`` below 1, an N
            too small for N/16, a pilot dearer than 10% of the grid at N, a bad ``--mstar-scale``.
    """
    if options.seeds < 3:
        raise ValueError(
            f"--seeds {options.seeds} must be >= 3 for --mstar (delete-one-seed jackknife intervals)"
        )
    if options.epochs < 1:
        raise ValueError(f"--epochs {options.epochs} must be >= 1")
    metric = check_metric(config, options.metric) if options.metric else default_metric(config)
    scale = check_scale(options.mstar_scale, metric)
    n_full = full_n(config)
    seeds = tuple(range(options.first_seed, options.first_seed + options.seeds))

    def samples(points: tuple[tuple[int, int], ...]) -> int:
        return len(seeds) * sum(cell_samples(config, n, m, options.epochs) for n, m in points)

    full = samples(tuple((n_full, m) for m in m_grid(n_full)))
    ns, share = choose_pilot(n_full, lambda candidate: samples(pilot_points(candidate)) / full)
    points = pilot_points(ns)
    timing = probe_timing(config, points, metric, options.sizes, largest_n=max(ns)) if probe else None
    return MstarPlan(
        n_full, ns, points, seeds, options.epochs, metric, samples(points), full, share, timing, scale
    )


def seed_errors(records: list[CellRecord]) -> dict[tuple[int, int], dict[int, float]]:
    """(n, m) -> seed -> held-out error of the records."""
    found: dict[tuple[int, int], dict[int, float]] = {}
    for record in records:
        key = (int(record.cell.params["n"]), int(record.cell.params["m"]))
        found.setdefault(key, {})[record.cell.seed] = float(record.result["error"])
    return found


def run_mstar(
    config: TrainConfig,
    options: AdviseOptions,
    plan: MstarPlan,
    out_dir: str | Path,
    *,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
) -> MstarResult:
    """Run the pilot's cells (resumable; ``executor``'s processes or Ray tasks, else ``options.workers``
    processes), predict m*(N), and write ``mstar.json``."""
    out = Path(out_dir)
    cells = pilot_cells(config, plan.points, plan.seeds, plan.epochs, plan.metric, options.sizes)
    records = run_in_folder(out, cells, workers=options.workers, executor=executor, progress=progress)
    errors = seed_errors(records)
    prediction = predict_mstar(errors, plan.n_full, ns=plan.ns, scale=plan.scale)
    shared = not NEGATIVES_FACTS[config.loss.negatives].per_anchor
    lines = answer_lines(prediction, shared=shared, scope=model_covered(config).covers)
    baseline = baseline_at(config, plan.metric, options.sizes, plan.points[0], plan.epochs, plan.seeds[0])
    json_path = out / "mstar.json"
    json_path.write_text(
        json.dumps(_document(config, plan, prediction, lines, baseline), indent=1), encoding="utf-8"
    )
    return MstarResult(plan, errors, prediction, lines, baseline, json_path)


def _document(
    config: TrainConfig, plan: MstarPlan, prediction: MstarPrediction, lines: list[str], baseline: Baseline
) -> dict[str, Any]:
    return {
        "answer": lines,
        "metric": plan.metric,
        "scale": plan.scale,
        "regime": config.loss.regime,
        "negatives": config.loss.negatives,
        "n": plan.n_full,
        "seeds": list(plan.seeds),
        "epochs": plan.epochs,
        "cost": {
            "pilot_samples": plan.pilot_samples,
            "grid_at_n_samples": plan.full_samples,
            "share": plan.share,
        },
        "baseline": asdict(baseline),
        "prediction": finite_json(asdict(prediction)),
    }


def finite_json(value: Any) -> Any:
    """``value`` with every infinite float (an end that censoring leaves open) as None, so the file is JSON."""
    if isinstance(value, dict):
        return {str(key): finite_json(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value
