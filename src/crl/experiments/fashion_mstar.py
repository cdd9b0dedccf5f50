"""[A]'s m*(n) experiment at small scale on Fashion-MNIST: where do more negatives stop helping?

Grid (docs/claims/C6_real.md pre-registers it): regimes SSCRL and SCRL, n training images, m = round(f n)
negatives for the fractions f, seeds; each cell is :func:`crl.experiments.fashion_cell.run_cell`, stored in a
:class:`crl.sweep.SweepStore` the moment it finishes, so an interrupted run resumes without recomputing or
double counting (``crl experiment fashion-mstar`` again with the same database). One extra cell holds the
raw-pixel baseline. The seed of a cell depends on (seed index, n) only: both regimes and every m of one seed share
the initial weights and the data order (a paired design).

:func:`summarise` turns the stored cells into the curves (mean and 95% Student-t interval over seeds per m),
m*(n) per regime and metric by the C6 rule (:mod:`crl.experiments.mstar`, tol at the per-part level of C6's one
part, :func:`crl.claims.budget.part_level`), and the check of [A]'s shape: a gain from the smallest m to
f = 0.4 whose paired interval lies above 0 (steep), and every mean from f = 0.4 to 1 within tol of the plateau
(flat).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from scipy import stats

from crl._vocab import Regime
from crl.claims.budget import part_level
from crl.experiments.fashion_cell import pixel_baseline, run_cell
from crl.experiments.mstar import SaturationInterval, saturation_interval
from crl.sweep import Cell, CellRecord, SweepStore, derive_seed, run_cells

__all__ = [
    "CLAIM",
    "FIDELITIES",
    "METRICS",
    "Curve",
    "ExperimentGrid",
    "compute_cell",
    "grid_cells",
    "run_experiment",
    "summarise",
]

CLAIM = "fashion-mstar"
"""The name under which the cells are stored (not one of the verdict claims C1-C10)."""

METRICS = ("knn_accuracy", "recall_at_1")
Fidelity = Literal["tiny", "reduced", "full"]


@dataclass(frozen=True)
class ExperimentGrid:
    """The grid and the fixed training constants of one fidelity (docs/claims/C6_real.md)."""

    ns: tuple[int, ...]
    fractions: tuple[float, ...]
    seeds: int
    budget: int
    batch: int = 64
    neg_batch: int = 32
    tau: float = 0.2
    lr: float = 2e-3
    gamma_floor: float = 0.2
    hidden: int = 256
    dim: int = 64
    bank: int = 5000
    n_test: int = 5000

    def m_values(self, n: int) -> list[int]:
        """m = max(1, round(f n)) for each fraction f (distinct, increasing)."""
        values = sorted({max(1, round(f * n)) for f in self.fractions})
        return values


FIDELITIES: dict[str, ExperimentGrid] = {
    "tiny": ExperimentGrid(
        (40, 80), (0.05, 0.25, 0.5, 1.0), 2, 64, batch=16, neg_batch=8, bank=200, n_test=100
    ),
    "reduced": ExperimentGrid((200, 400, 800), (0.01, 0.1, 0.4, 0.7, 1.0), 2, 3200),
    "full": ExperimentGrid(
        (500, 1000, 2000),
        (0.01, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.85, 1.0),
        3,
        32000,
        neg_batch=64,
        bank=10000,
        n_test=10000,
    ),
}


def _constants(grid: ExperimentGrid) -> dict[str, Any]:
    keys = ("budget", "batch", "neg_batch", "tau", "lr", "gamma_floor", "hidden", "dim", "bank", "n_test")
    return {key: getattr(grid, key) for key in keys}


def grid_cells(grid: ExperimentGrid) -> list[Cell]:
    """The pixel-baseline cell, then every (regime, n, m, seed) cell of the grid."""
    cells = [Cell({"kind": "pixels", "bank": grid.bank, "n_test": grid.n_test}, 0)]
    for n in grid.ns:
        for m in grid.m_values(n):
            for regime in ("shared", "independent"):
                for index in range(grid.seeds):
                    params = {"kind": "train", "regime": regime, "n": n, "m": m, **_constants(grid)}
                    cells.append(Cell(params, derive_seed(index, "fashion-mstar", n)))
    return cells


def compute_cell(cell: Cell) -> dict[str, Any]:
    """One cell: the pixel baseline or a training run (module-level, so process-pool workers can run it)."""
    params = dict(cell.params)
    if params.pop("kind") == "pixels":
        return pixel_baseline(params["bank"], params["n_test"])
    return run_cell(params, cell.seed)


def run_experiment(
    database: Path,
    grid: ExperimentGrid,
    *,
    run_id: str,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    compute: Callable[[Cell], dict[str, Any]] = compute_cell,
) -> list[CellRecord]:
    """Compute the cells the database lacks (each stored as it finishes) and return every record of the grid."""
    with SweepStore(database) as store:
        return run_cells(
            store, CLAIM, grid_cells(grid), compute, run_id=run_id, workers=workers, progress=progress
        )


@dataclass(frozen=True)
class Curve:
    """One (regime, n, metric) curve over the grid of m and what the C6 rule finds on it.

    Attributes:
        m: the grid m with at least one finished cell in every seed.
        means, lows, highs: mean over seeds and its 95% Student-t interval, per m.
        saturation: m* with its seed-resampling interval (None with fewer than 3 m or 2 seeds).
        gain: mean at f = 0.4 minus mean at the smallest m, with its paired 95% interval (low, high).
        steep: gain's interval above 0; flat: every m >= 0.4 n within tol of the plateau.
        failed: cells of this curve recorded as diverged (never dropped silently).
    """

    regime: Regime
    n: int
    metric: str
    m: tuple[int, ...]
    means: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    saturation: SaturationInterval | None
    gain: tuple[float, float, float] | None
    steep: bool | None
    flat: bool | None
    failed: int


def _t_interval(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float]:
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def _matrix(
    records: Sequence[CellRecord], regime: Regime, n: int, metric: str
) -> tuple[list[int], np.ndarray, int]:
    """(grid m, seeds x m values, failed count) of the finished cells, keeping only seeds finished at every m."""
    table: dict[int, dict[int, float]] = {}
    failed = 0
    for record in records:
        params = record.cell.params
        if params.get("regime") != regime or params.get("n") != n:
            continue
        if record.result.get("status") != "ok":
            failed += 1
            continue
        table.setdefault(int(params["m"]), {})[record.cell.seed] = float(record.result[metric])
    ms = sorted(table)
    seeds = sorted(set.intersection(*(set(row) for row in table.values()))) if ms else []
    return ms, np.array([[table[m][seed] for m in ms] for seed in seeds], dtype=float), failed


def _curve(
    records: Sequence[CellRecord],
    regime: Regime,
    n: int,
    metric: str,
    rng: np.random.Generator,
    resamples: int,
) -> Curve:
    ms, values, failed = _matrix(records, regime, n, metric)
    empty = values.size == 0
    intervals = [_t_interval(values[:, j]) for j in range(len(ms))] if not empty else []
    saturation = None
    if len(ms) >= 3 and values.shape[0] >= 2:
        saturation = saturation_interval(ms, values, level=part_level(1), n_resamples=resamples, rng=rng)
    gain, steep, flat = None, None, None
    at_04 = [j for j, m in enumerate(ms) if m >= 0.4 * n]
    if saturation is not None and at_04:
        gain = _t_interval(values[:, at_04[0]] - values[:, 0])
        steep = gain[1] > 0
        found = saturation.saturation
        flat = found.censoring != "right" and found.m_star <= ms[at_04[0]]
    return Curve(
        regime,
        n,
        metric,
        tuple(ms),
        tuple(i[0] for i in intervals),
        tuple(i[1] for i in intervals),
        tuple(i[2] for i in intervals),
        saturation,
        gain,
        steep,
        flat,
        failed,
    )


def summarise(
    records: Sequence[CellRecord], grid: ExperimentGrid, *, seed: int = 0, resamples: int = 2000
) -> tuple[list[Curve], dict[str, float]]:
    """The curves of every (regime, n, metric) and the pixel baseline's scores (empty until it is computed);
    m* intervals from ``resamples`` seed resamples drawn with numpy's generator of ``seed``."""
    rng = np.random.default_rng(seed)
    curves = [
        _curve(records, regime, n, metric, rng, resamples)
        for metric in METRICS
        for regime in ("shared", "independent")
        for n in grid.ns
    ]
    baseline = next((dict(r.result) for r in records if r.cell.params.get("kind") == "pixels"), {})
    return curves, baseline
