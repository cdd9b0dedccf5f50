"""One advisor session: plan the pilot, run it (and the check cells), fit, advise, and write JSON and figure.

Files in the output folder: ``advise.sqlite`` (the sweep store: a rerun resumes and recomputes nothing stored),
``advice.json`` and ``advice.png``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crl.advise.advice import Advice, advise
from crl.advise.check import CheckSummary, check_points, summarise_checks
from crl.advise.figure import draw_advice
from crl.advise.heldout import EvalSizes, Metric, check_metric, default_metric
from crl.advise.pilot import (
    FRACTIONS,
    PilotDesign,
    PilotPoint,
    TimingProbe,
    cell_samples,
    design_pilot,
    full_n,
    pilot_cells,
    probe_timing,
    run_pilot,
)
from crl.advise.surface import SurfaceFit, fit_seed_surface
from crl.sweep import CellRecord, ProgressHook, SweepStore
from crl.train.config import LockedData, TrainConfig
from crl.train.negative_kinds import NEGATIVES_FACTS

__all__ = [
    "AdviseOptions",
    "AdviseResult",
    "Plan",
    "current_m",
    "model_covered",
    "plan_session",
    "run_session",
]


@dataclass(frozen=True)
class AdviseOptions:
    """The knobs of ``crl advise`` (see its ``--help``)."""

    budget: int
    seeds: int = 3
    levels: int = 4
    steps: int | None = None
    epochs: int | None = None
    fractions: tuple[float, ...] = FRACTIONS
    max_m: int | None = None
    metric: str | None = None
    level: float = 0.9
    rel_tol: float = 0.01
    workers: int = 1
    check: bool = False
    sizes: EvalSizes = field(default_factory=EvalSizes)


@dataclass(frozen=True)
class Plan:
    """What will run: the pilot design, the check cells, the metric, the user's (n, m) and the timing probe."""

    design: PilotDesign
    checks: tuple[PilotPoint, ...]
    metric: Metric
    n_full: int
    m_now: int
    probe: TimingProbe | None

    def check_samples(self, config: TrainConfig) -> int:
        """Processed samples of the check cells (all seeds)."""
        shapes = [(p, self.design.shape_at(p.n, config.data.batch_size)) for p in self.checks]
        per_seed = sum(cell_samples(config, p.m, shape.steps, shape.batch, p.n) for p, shape in shapes)
        return per_seed * len(self.design.seeds)


@dataclass(frozen=True)
class AdviseResult:
    """A finished session."""

    plan: Plan
    fit: SurfaceFit
    advice: Advice
    check: CheckSummary | None
    json_path: Path
    figure_path: Path


def current_m(config: TrainConfig) -> int:
    """The config's m: ``n_negatives``, or ``batch_size - 1`` for in-batch negatives (one process)."""
    return (
        config.loss.n_negatives
        if NEGATIVES_FACTS[config.loss.negatives].sized
        else config.data.batch_size - 1
    )


def model_covered(config: TrainConfig) -> str:
    """The model the advice covers, in words: on locked features, the head (its backbone is not trained)."""
    model = config.model
    data = config.data
    if isinstance(data, LockedData):
        hidden = getattr(model, "hidden", [])
        kind = "a linear head" if not hidden else f"a head with hidden layer(s) {list(hidden)}"
        return (
            f"{kind} onto S^{model.embedding_dim - 1} on locked {data.backbone} features of {data.dataset} "
            "(the backbone is frozen: the advice covers this head, not the backbone's training)"
        )
    return f"the {model.encoder} encoder of the config, trained end to end on [data] source = {data.source!r}"


def plan_session(config: TrainConfig, options: AdviseOptions, *, probe: bool = True) -> Plan:
    """The pilot that fits the budget (:func:`~crl.advise.pilot.design_pilot`), the check cells when asked, and
    a timing probe of this machine.

    Raises:
        ValueError: for ``--eval-queries 0`` (the whole test split) on data that are not locked features, or
            ``--steps`` together with ``--epochs``.
    """
    metric = check_metric(config, options.metric) if options.metric else default_metric(config)
    if options.sizes.queries == 0 and not isinstance(config.data, LockedData):
        raise ValueError(
            "--eval-queries 0 (the whole test split) is for [data] source = 'locked'; pass a count >= 2"
        )
    if options.steps is not None and options.epochs is not None:
        raise ValueError("pass --steps (steps per cell) or --epochs (epochs of each cell's n), not both")
    n_full = full_n(config)
    design = design_pilot(
        config,
        options.budget,
        n_full=n_full,
        fractions=options.fractions,
        levels=options.levels,
        seeds=options.seeds,
        steps=options.steps,
        max_m=options.max_m,
        epochs=options.epochs,
    )
    checks = (
        check_points(design.n_values[-1], n_full, options.fractions, max_m=options.max_m)
        if options.check
        else ()
    )
    timing = probe_timing(config, design, metric, options.sizes) if probe else None
    return Plan(
        design, tuple(p for p in checks if p not in design.points), metric, n_full, current_m(config), timing
    )


def _observations(records: Sequence[CellRecord]) -> tuple[list[int], list[int], list[int], list[float]]:
    n = [int(r.cell.params["n"]) for r in records]
    m = [int(r.cell.params["m"]) for r in records]
    return n, m, [r.cell.seed for r in records], [float(r.result["error"]) for r in records]


def run_session(
    config: TrainConfig,
    options: AdviseOptions,
    plan: Plan,
    out_dir: str | Path,
    *,
    progress: ProgressHook | None = None,
) -> AdviseResult:
    """Run the pilot (and checks), fit the surface, advise, and write ``advice.json`` and ``advice.png``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    design = plan.design
    cells = pilot_cells(
        config, design.points, design.seeds, design.steps, plan.metric, options.sizes, design.epochs
    )
    checks = pilot_cells(
        config, plan.checks, design.seeds, design.steps, plan.metric, options.sizes, design.epochs
    )
    with SweepStore(out / "advise.sqlite") as store:
        records = run_pilot(store, cells + checks, workers=options.workers, progress=progress)
    pilot_records, check_records = records[: len(cells)], records[len(cells) :]
    fit = fit_seed_surface(*_observations(pilot_records), level=options.level)
    advice = advise(
        fit,
        n=plan.n_full,
        m=plan.m_now,
        regime=config.loss.regime,
        pilot_n_max=design.n_values[-1],
        pilot_m_max=max(p.m for p in design.points),
        pilot_m_over_n=(min(p.m / p.n for p in design.points), max(p.m / p.n for p in design.points)),
        rel_tol=options.rel_tol,
        model=model_covered(config),
    )
    summary = summarise_checks(fit, check_records) if check_records else None
    figure = draw_advice(
        fit,
        advice,
        out / "advice.png",
        pilot=[(p.n, p.m) for p in design.points],
        checks=[(p.n, p.m) for p in plan.checks],
        metric=plan.metric,
    )
    document = _document(config, plan, fit, advice, summary)
    json_path = out / "advice.json"
    json_path.write_text(json.dumps(document, indent=1), encoding="utf-8")
    return AdviseResult(plan, fit, advice, summary, json_path, figure)


def _document(
    config: TrainConfig, plan: Plan, fit: SurfaceFit, advice: Advice, summary: CheckSummary | None
) -> dict[str, Any]:
    return {
        "metric": plan.metric,
        "regime": config.loss.regime,
        "negatives": config.loss.negatives,
        "n_full": plan.n_full,
        "m_now": plan.m_now,
        "pilot": {
            "points": [[p.n, p.m] for p in plan.design.points],
            "seeds": list(plan.design.seeds),
            "steps": plan.design.steps if plan.design.epochs is None else None,
            "epochs": plan.design.epochs,
            "processed_samples": plan.design.total_samples,
        },
        "fit": {
            "level": fit.level,
            "method": fit.method,
            "full": fit.full.as_dict() if fit.full is not None else None,
            "replicates": [p.as_dict() for p in fit.replicates],
            "converged": list(fit.converged),
            "at_bound": [list(names) for names in fit.at_bound],
            "cell_noise": fit.cell_noise,
            "cells": [list(cell) for cell in fit.cells],
        },
        "advice": advice.as_dict(),
        "check": summary.as_dict() if summary is not None else None,
    }
