"""One advisor session: plan the local pilot at the user's (N, M), run it (and the check cells), answer, and write
``advice.json`` and ``advice.png``.

Files in the output folder: ``advise.sqlite`` (the sweep store: a rerun resumes and recomputes nothing stored),
``advice.json`` (the answer's sentence first, then the decision, the direction's chance, the estimate, the costs,
the cells) and
``advice.png`` (:mod:`crl.advise.figure`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crl.advise.answer import Answer, OptionCost, Q, Scope, answer_of
from crl.advise.figure import draw_answer
from crl.advise.heldout import (
    Baseline,
    EvalSizes,
    Metric,
    check_metric,
    default_metric,
    heldout_error,
    identity_baseline,
)
from crl.advise.local import (
    Cell,
    CellMean,
    cell_mean,
    local_estimate,
    measured_difference,
    pilot_points,
    truth_points,
)
from crl.advise.pilot import (
    TimingProbe,
    cell_samples,
    full_n,
    pilot_cells,
    pilot_config,
    probe_timing,
    run_in_folder,
    shape_of,
    start_model,
)
from crl.sweep import CellRecord, ProgressHook
from crl.train.config import LockedData, TrainConfig
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = [
    "AdviseOptions",
    "AdviseResult",
    "Plan",
    "baseline_at",
    "baseline_of",
    "current_m",
    "errors_of",
    "model_covered",
    "option_costs",
    "plan_session",
    "run_session",
]


@dataclass(frozen=True)
class AdviseOptions:
    """The knobs of ``crl advise`` (see its ``--help``)."""

    seeds: int = 4
    epochs: int = 10
    first_seed: int = 0
    metric: str | None = None
    workers: int = 1
    check: bool = False
    sizes: EvalSizes = field(default_factory=EvalSizes)
    executor: str = "process"
    address: str | None = None
    mstar_scale: str = "error"


@dataclass(frozen=True)
class Plan:
    """What will run: the pilot and check cells at the user's (N, M), seeds, epochs, metric and the timing probe."""

    n_full: int
    m_now: int
    points: tuple[Cell, ...]
    checks: tuple[Cell, ...]
    seeds: tuple[int, ...]
    epochs: int
    metric: Metric
    probe: TimingProbe | None

    def samples(self, config: TrainConfig, points: Sequence[Cell]) -> int:
        """Processed samples of ``points`` over all seeds."""
        return len(self.seeds) * sum(cell_samples(config, n, m, self.epochs) for n, m in points)


@dataclass(frozen=True)
class AdviseResult:
    """A finished session."""

    plan: Plan
    answer: Answer
    means: dict[Cell, CellMean]
    json_path: Path
    figure_path: Path


def current_m(config: TrainConfig) -> int:
    """The config's m: ``n_negatives``, or ``batch_size - 1`` for in-batch negatives (one process)."""
    return (
        config.loss.n_negatives
        if NEGATIVES_FACTS[config.loss.negatives].sized
        else config.data.batch_size - 1
    )


def model_covered(config: TrainConfig) -> Scope:
    """What the answer covers, in words: on locked features the head (its backbone is frozen; the advisor's scope),
    else the whole model (outside it)."""
    data = config.data
    if isinstance(data, LockedData):
        hidden = getattr(config.model, "hidden", [])
        kind = "a linear head" if not hidden else f"a head with hidden layer(s) {list(hidden)}"
        return Scope(f"{kind} on frozen {data.backbone} features of {data.dataset}, not the backbone", True)
    return Scope(f"the whole {config.model.encoder} model trained end to end on {data.source} pairs", False)


def baseline_of(config: TrainConfig, plan: Plan, sizes: EvalSizes) -> Baseline:
    """The doubling pilot's baseline: :func:`baseline_at` its base cell (N/2, M/2) at the first seed."""
    return baseline_at(
        config, plan.metric, sizes, (plan.n_full // 2, plan.m_now // 2), plan.epochs, plan.seeds[0]
    )


def baseline_at(
    config: TrainConfig, metric: Metric, sizes: EvalSizes, cell: Cell, epochs: int, seed: int
) -> Baseline:
    """A pilot's baseline: on locked features the zero-shot identity map
    (:func:`crl.advise.heldout.identity_baseline`), else the untrained model the pilot's runs start from (the
    ``cell`` (n, m) at ``seed``, before its first step), scored by ``metric``."""
    identity = identity_baseline(config, metric, sizes)
    if identity is not None:
        return identity
    n, m = cell
    start = start_model(config, n, m, epochs, seed)
    error = heldout_error(start, pilot_config(config, n, m, epochs, seed), metric, sizes)
    return Baseline("the untrained model the pilot's runs start from", error)


def plan_session(config: TrainConfig, options: AdviseOptions, *, probe: bool = True) -> Plan:
    """The pilot at the user's (N, M) (the config's n and m), the check cells when asked, a timing probe.

    Raises:
        ValueError: naming the option or config field to change: ``--seeds`` below 2, ``--epochs`` below 1,
            ``--eval-queries 0`` on data that are not locked features, an (N, M) the pilot cannot halve twice.
    """
    if options.seeds < 2:
        raise ValueError(
            f"--seeds {options.seeds} must be >= 2 (a standard error per cell); q is calibrated at 4"
        )
    if options.epochs < 1:
        raise ValueError(f"--epochs {options.epochs} must be >= 1")
    metric = check_metric(config, options.metric) if options.metric else default_metric(config)
    if options.sizes.queries == 0 and not isinstance(config.data, LockedData):
        raise ValueError(
            "--eval-queries 0 (the whole test split) is for [data] source = 'locked'; pass a count >= 2"
        )
    n_full, m_now = full_n(config), current_m(config)
    points = pilot_points(n_full, m_now)
    checks = truth_points(n_full, m_now) if options.check else ()
    seeds = tuple(range(options.first_seed, options.first_seed + options.seeds))
    largest_n = max(n for n, _ in (*points, *checks))
    timing = probe_timing(config, points, metric, options.sizes, largest_n=largest_n) if probe else None
    return Plan(n_full, m_now, points, checks, seeds, options.epochs, metric, timing)


def errors_of(records: Sequence[CellRecord]) -> dict[Cell, list[float]]:
    """(n, m) -> the error of each run of the records."""
    errors: dict[Cell, list[float]] = {}
    for record in records:
        key = (int(record.cell.params["n"]), int(record.cell.params["m"]))
        errors.setdefault(key, []).append(float(record.result["error"]))
    return errors


def option_costs(
    config: TrainConfig, n: int, m: int, epochs: int, gain_m: float, gain_n: float
) -> tuple[OptionCost, OptionCost]:
    """The two doublings at the base (N/2, M/2): (N/2, M) and (N, M/2), in processed samples (module docstring
    of :mod:`crl.advise.answer`)."""
    base = cell_samples(config, n // 2, m // 2, epochs)
    return (
        OptionCost("m", base, cell_samples(config, n // 2, m, epochs), gain_m),
        OptionCost("n", base, cell_samples(config, n, m // 2, epochs), gain_n),
    )


def run_session(
    config: TrainConfig,
    options: AdviseOptions,
    plan: Plan,
    out_dir: str | Path,
    *,
    progress: ProgressHook | None = None,
) -> AdviseResult:
    """Run the pilot (and check) cells, answer, and write ``advice.json`` and ``advice.png``."""
    out = Path(out_dir)
    cells = pilot_cells(
        config, (*plan.points, *plan.checks), plan.seeds, plan.epochs, plan.metric, options.sizes
    )
    errors = errors_of(run_in_folder(out, cells, workers=options.workers, progress=progress))
    estimate = local_estimate(errors, plan.n_full, plan.m_now)
    means = {cell: cell_mean(values) for cell, values in errors.items()}
    pilot_errors = [means[cell].mean for cell in plan.points]
    answer = answer_of(
        estimate,
        seeds=len(plan.seeds),
        scope=model_covered(config),
        costs=option_costs(config, plan.n_full, plan.m_now, plan.epochs, estimate.gain_m, estimate.gain_n),
        baseline=baseline_of(config, plan, options.sizes),
        cell_errors=(min(pilot_errors), max(pilot_errors)),
        q=Q,
        check=measured_difference(errors, plan.n_full, plan.m_now) if plan.checks else None,
    )
    figure = draw_answer(answer, means, out / "advice.png", metric=plan.metric)
    json_path = out / "advice.json"
    json_path.write_text(json.dumps(_document(config, plan, answer, means), indent=1), encoding="utf-8")
    return AdviseResult(plan, answer, means, json_path, figure)


def _document(config: TrainConfig, plan: Plan, answer: Answer, means: dict[Cell, CellMean]) -> dict[str, Any]:
    return {
        "answer": answer.as_dict(),
        "metric": plan.metric,
        "regime": config.loss.regime,
        "negatives": config.loss.negatives,
        "n": plan.n_full,
        "m": plan.m_now,
        "seeds": list(plan.seeds),
        "epochs": plan.epochs,
        "recipe": {f"{n}": asdict(shape_of(config, n, plan.epochs)) for n in sorted({n for n, _ in means})},
        "pilot": [list(point) for point in plan.points],
        "checks": [list(point) for point in plan.checks],
        "cells": [{"n": n, "m": m, **asdict(mean)} for (n, m), mean in sorted(means.items())],
    }
