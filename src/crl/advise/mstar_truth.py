"""The truth an m* prediction is judged against: m_band measured at given n on the full m grid
(docs/advisor_mstar.md, check 2), by the same cells as ``crl advise --mstar``'s pilot.

At each truth n the cells are (n, m) for every power of two m below n and m = n (:func:`crl.advise.mstar.m_grid`),
trained by the advisor's recipe map and scored by the held-out error, S seed runs each
(:func:`crl.advise.pilot.pilot_cells`); a cell's record does not depend on the config's own N, so a truth cell and a
pilot cell at the same (n, m, seed) are one cell. m_band(n) is :func:`crl.advise.mstar.passage_at`: the band-averaged
first passage within q |P| of the plateau P (of the error or of the score 1 - err, by ``--mstar-scale``), with its
delete-one-seed jackknife interval, and the fixed q = 1%, 2%, 5% beside it. Over three or more n the same grid is the
m*(n) experiment on the user's data: the slope of log m_q on log n is printed per q (descriptive; the least-squares
line through the measured points).

Files in the output folder: ``advise.sqlite`` (the sweep store; a rerun resumes) and ``truth.json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from crl.advise.heldout import Metric, check_metric, default_metric
from crl.advise.mstar import (
    FIXED_QS,
    Interval,
    PilotPassage,
    Scale,
    check_scale,
    passage_at,
    pilot_points,
    plateau_error,
)
from crl.advise.mstar_session import finite_json, seed_errors
from crl.advise.pilot import TimingProbe, cell_samples, pilot_cells, probe_timing, run_in_folder
from crl.advise.session import AdviseOptions
from crl.sweep import Executor, ProgressHook
from crl.train.config import TrainConfig

__all__ = ["TruthPlan", "TruthResult", "parse_truth_ns", "plan_truth", "run_truth"]

SMALLEST_TRUTH_N = 32


@dataclass(frozen=True)
class TruthPlan:
    """The truth grid: its n, cells, seeds, epochs, metric, processed samples and the timing probe."""

    ns: tuple[int, ...]
    points: tuple[tuple[int, int], ...]
    seeds: tuple[int, ...]
    epochs: int
    metric: Metric
    samples: int
    probe: TimingProbe | None
    scale: Scale = "error"


@dataclass(frozen=True)
class TruthResult:
    """m_band and the fixed-q m_q measured at every truth n, the plateau error there (the mean at its two largest m)."""

    plan: TruthPlan
    passages: dict[int, PilotPassage]
    plateau: dict[int, float]
    json_path: Path

    @property
    def m_band(self) -> dict[int, Interval]:
        """m_band per truth n."""
        return {n: passage.m_band for n, passage in self.passages.items()}

    def slopes(self) -> dict[str, float]:
        """The least-squares slope of log m_q on log n over the uncensored truth n, per tolerance ("band", "1%", ...);
        NaN with fewer than 2 such n."""
        found = {"band": [(n, p.m_band) for n, p in self.passages.items()]}
        for q in FIXED_QS:
            found[f"{q:.0%}"] = [(n, p.fixed[q]) for n, p in self.passages.items()]
        return {name: _slope(points) for name, points in found.items()}


def parse_truth_ns(text: str) -> tuple[int, ...]:
    """``--mstar-truth``'s comma-separated n, sorted.

    Raises:
        ValueError: naming ``--mstar-truth`` on a value that is not an integer >= 32, or a repeated one.
    """
    try:
        ns = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ValueError(
            f"--mstar-truth {text!r}: give comma-separated integers, e.g. --mstar-truth 8000,16000"
        ) from None
    if not ns or min(ns) < SMALLEST_TRUTH_N or len(set(ns)) != len(ns):
        raise ValueError(
            f"--mstar-truth {text!r}: give distinct n >= {SMALLEST_TRUTH_N}, e.g. --mstar-truth 8000,16000"
        )
    return tuple(sorted(ns))


def plan_truth(
    config: TrainConfig, options: AdviseOptions, ns: Sequence[int], *, probe: bool = True
) -> TruthPlan:
    """The truth grid at ``ns`` with its processed samples and a timing probe.

    Raises:
        ValueError: ``--seeds`` below 3 (the jackknife interval), ``--epochs`` below 1, a bad ``--mstar-scale``.
    """
    if options.seeds < 3:
        raise ValueError(f"--seeds {options.seeds} must be >= 3 for --mstar-truth (jackknife intervals)")
    if options.epochs < 1:
        raise ValueError(f"--epochs {options.epochs} must be >= 1")
    metric = check_metric(config, options.metric) if options.metric else default_metric(config)
    scale = check_scale(options.mstar_scale, metric)
    seeds = tuple(range(options.first_seed, options.first_seed + options.seeds))
    points = pilot_points(ns)
    samples = len(seeds) * sum(cell_samples(config, n, m, options.epochs) for n, m in points)
    timing = probe_timing(config, points, metric, options.sizes, largest_n=max(ns)) if probe else None
    return TruthPlan(tuple(ns), points, seeds, options.epochs, metric, samples, timing, scale)


def run_truth(
    config: TrainConfig,
    options: AdviseOptions,
    plan: TruthPlan,
    out_dir: str | Path,
    *,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
) -> TruthResult:
    """Run the truth cells (resumable), measure m_band at each n, and write ``truth.json``."""
    out = Path(out_dir)
    cells = pilot_cells(config, plan.points, plan.seeds, plan.epochs, plan.metric, options.sizes)
    records = run_in_folder(out, cells, workers=options.workers, executor=executor, progress=progress)
    errors = seed_errors(records)
    passages = {n: passage_at(errors, n, plan.scale) for n in plan.ns}
    plateau = {n: plateau_error(errors, n) for n in plan.ns}
    json_path = out / "truth.json"
    result = TruthResult(plan, passages, plateau, json_path)
    json_path.write_text(json.dumps(_document(config, result), indent=1), encoding="utf-8")
    return result


def _slope(points: list[tuple[int, Interval]]) -> float:
    """Least-squares slope of log value on log n over the points whose value is uncensored and positive."""
    kept = [
        (math.log(n), math.log(i.value)) for n, i in points if i.censoring == "" and 0 < i.value < math.inf
    ]
    if len(kept) < 2:
        return math.nan
    x, y = zip(*kept, strict=True)
    return float(np.polyfit(x, y, 1)[0])


def _document(config: TrainConfig, result: TruthResult) -> dict[str, Any]:
    plan = result.plan
    return {
        "metric": plan.metric,
        "scale": plan.scale,
        "regime": config.loss.regime,
        "negatives": config.loss.negatives,
        "seeds": list(plan.seeds),
        "epochs": plan.epochs,
        "samples": plan.samples,
        "truth": {
            str(n): {
                "m_band": finite_json(asdict(passage.m_band)),
                "fixed": {f"{q:g}": finite_json(asdict(passage.fixed[q])) for q in FIXED_QS},
                "plateau_error": result.plateau[n],
            }
            for n, passage in result.passages.items()
        },
        "slopes": finite_json(result.slopes()),
    }
