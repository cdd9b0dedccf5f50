"""The summary of the m*(n) experiment: curves, m*(n) per (arm, regime, n), slopes of log m* on log n, the seed rule.

Everything is descriptive at ``LEVEL`` = 95% (docs/claims/C6_real.md), by the C6 rule of docs/theory.md section 7
(:mod:`crl.stats.saturation`):

- a curve (arm, regime, n, metric) uses the seeds finished at every grid m of it; per m the mean over seeds and
  its Student-t interval; m*(n) with censoring and its seed-resampling interval (:func:`saturation_interval`,
  tol = max(t half-width of the plateau at LEVEL, 1% of it));
- per (arm, regime, metric) the least-squares slope b of log m* on log n, b = sum_n w_n log m*(n) with
  w_n = (log n - mean) / sum (log n - mean)^2, censored points at their bounds and the slope's interval
  [b_min, b_max] on the data (:func:`crl.stats.saturation.slope_bounds`); its CI the [(1-LEVEL)/2, (1+LEVEL)/2]
  quantiles of b_min and b_max over resamples of the seed indices (one resample for every n, m and both regimes
  of the arm: the regimes share each seed's weights and data order), over the seeds finished at every cell of
  the arm;
- per arm the difference slope(SSCRL) - slope(SCRL) with its CI (:func:`crl.stats.saturation.slope_difference`);
- the seed rule: the fewest seeds S >= 2 with t_{(1+LEVEL)/2, S-1} sd / sqrt(S) <= rise / 4, sd the standard
  deviation over seeds of the per-seed plateau (mean at the two largest m), rise = |plateau - mean at the
  smallest m|: the seeds a curve needs for its tolerance to be below a quarter of its rise; none for a flat curve,
  rise / 4 <= 1% of the plateau (tol's floor); the run's answer is the largest over the in-sample curves of the
  primary metric;
- convergence: per (arm, n) the largest |last_epoch_change| / loss_drop over the cells (< 1% is converged);
- contrasts (:data:`CONTRASTS`): per (regime, n, m) that two arms share, arm a minus arm b paired by seed index
  (the arms share each seed's initial weights and data order at n), the mean difference and its Student-t
  interval over the seeds both finished: exact against capped loss (the ablation), disjoint against in-sample
  negatives;
- cost: per (arm, regime, n) the training time per step and the anchor pairs processed per second at the curve's
  smallest and largest m (medians over seeds), the median wall time of a cell, and the runs that computed them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from crl._vocab import Regime
from crl.experiments.mstar.design import DataName, Grid
from crl.stats.saturation import (
    RELATIVE_FLOOR,
    Difference,
    SaturationInterval,
    grid_values,
    lower_quantile,
    saturation_interval,
    saturations_by_n,
    seed_weights,
    slope_bounds,
    slope_difference,
    upper_quantile,
)
from crl.sweep import CellRecord, derive_seed

__all__ = [
    "CONTRASTS",
    "LEVEL",
    "METRICS",
    "Contrast",
    "Convergence",
    "Cost",
    "Curve",
    "SlopeFit",
    "Summary",
    "Table",
    "complete_seeds",
    "metric_table",
    "seed_matrix",
    "seeds_needed",
    "summarise",
]

LEVEL = 0.95
METRICS: dict[DataName, tuple[str, ...]] = {
    "wordnet": ("ndcg@10",),
    "fashion": ("recall@1", "class_accuracy@1"),
}
"""The metrics summarised per data set, the primary one first."""

_Key = tuple[str, Regime, int]
Table = dict[_Key, dict[int, dict[int, float]]]
"""(arm, regime, n) -> m -> seed index -> metric value."""


@dataclass(frozen=True)
class Curve:
    """One (arm, regime, n, metric) curve over its grid of m.

    Attributes:
        m: grid m with a value in every used seed; means, lows, highs: mean and its Student-t interval per m.
        seeds: seeds used (finished at every m); failed: cells recorded as diverged.
        saturation: m* with its seed-resampling interval (None with fewer than 3 m or 2 seeds).
        rise: |plateau - mean at the smallest m|; plateau_sd: sd over seeds of the per-seed plateau.
        seeds_needed: :func:`seeds_needed` of (plateau_sd, rise), None without a rise.
    """

    arm: str
    regime: Regime
    n: int
    metric: str
    m: tuple[int, ...]
    means: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    seeds: int
    failed: int
    saturation: SaturationInterval | None
    rise: float | None
    plateau_sd: float | None
    seeds_needed: int | None


@dataclass(frozen=True)
class SlopeFit:
    """The slope of log m* on log n of one (arm, regime, metric): point (censored points at their bounds),
    bounds on the data, and the bootstrap CI; m* and censoring per n of the seeds used."""

    arm: str
    regime: Regime
    metric: str
    ns: tuple[int, ...]
    m_star: tuple[float, ...]
    censoring: tuple[str, ...]
    point: float
    bound_low: float
    bound_high: float
    ci_low: float
    ci_high: float
    seeds: int


CONTRASTS: tuple[tuple[str, str], ...] = (("ablation_exact", "ablation_cap"), ("disjoint", "in_sample"))
"""The pairs of arms (a, b) whose paired difference a - b the summary states at every shared (regime, n, m)."""


@dataclass(frozen=True)
class Contrast:
    """Arm ``first`` minus arm ``second`` at one (regime, n, m) of ``metric``, paired by seed index: the mean
    difference over ``seeds`` seeds and its Student-t interval at LEVEL (NaN with one seed)."""

    first: str
    second: str
    regime: Regime
    n: int
    m: int
    metric: str
    mean: float
    low: float
    high: float
    seeds: int


@dataclass(frozen=True)
class Convergence:
    """The largest |last_epoch_change| / loss_drop over the finished cells of (arm, n)."""

    arm: str
    n: int
    worst: float
    cells: int


@dataclass(frozen=True)
class Cost:
    """What the finished cells of one (arm, regime, n) cost, each figure a median over seeds.

    Attributes:
        batch: b, anchors per step; steps: training steps of a cell; cells: finished cells (every m and seed).
        m_low, m_high: the smallest and largest m with a finished cell.
        ms_low, ms_high: training milliseconds per step, 1000 train_s / steps, at m_low and m_high.
        cell_s: wall seconds of a cell (loading, training, held-out scoring), over all its m and seeds.
    """

    arm: str
    regime: Regime
    n: int
    batch: int
    steps: int
    cells: int
    m_low: int
    m_high: int
    ms_low: float
    ms_high: float
    cell_s: float

    def pairs_per_s(self, ms_per_step: float) -> float:
        """Anchor pairs processed per second at ``ms_per_step``: 1000 b / ms."""
        return 1000.0 * self.batch / ms_per_step


@dataclass(frozen=True)
class Summary:
    """Everything the report shows: curves, slopes, their differences per (arm, metric), convergence, the
    backbone's scores, the seeds the seed rule asks for (None when every in-sample curve is flat), the cost per
    (arm, regime, n), the wall seconds of all stored cells and the cells each run computed."""

    curves: tuple[Curve, ...]
    slopes: tuple[SlopeFit, ...]
    differences: dict[tuple[str, str], Difference]
    convergence: tuple[Convergence, ...]
    baseline: dict[str, float]
    seeds_rule: int | None
    costs: tuple[Cost, ...]
    cell_seconds: float
    runs: dict[str, int]
    contrasts: tuple[Contrast, ...]


def seeds_needed(
    sd: float, rise: float, plateau: float, *, level: float = LEVEL, limit: int = 10_000
) -> int | None:
    """The fewest S >= 2 with t_{(1+level)/2, S-1} sd / sqrt(S) <= rise / 4; None for a flat curve, rise / 4 <=
    RELATIVE_FLOOR |plateau| (tol's floor decides it); ``limit`` when even that many are not enough."""
    if rise / 4 <= RELATIVE_FLOOR * abs(plateau):
        return None
    for count in range(2, limit):
        if stats.t.ppf(0.5 + level / 2, count - 1) * sd / math.sqrt(count) <= rise / 4:
            return count
    return limit


def _t_interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(values.mean())
    if values.size < 2:
        return mean, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + LEVEL / 2, values.size - 1) * values.std(ddof=1) / math.sqrt(values.size))
    return mean, mean - half, mean + half


def _seed_indices(data: DataName, grid: Grid, n: int) -> dict[int, int]:
    """Cell seed -> seed index at n (the inverse of :func:`crl.experiments.mstar.design.grid_cells`' seeds)."""
    return {derive_seed(index, "mstar", data, n): index for index in range(grid.seeds)}


def metric_table(
    records: Sequence[CellRecord], data: DataName, grid: Grid, metric: str
) -> tuple[Table, dict[_Key, int]]:
    """The finished values by (arm, regime, n), m and seed index, and the diverged cells by (arm, regime, n)."""
    table: Table = {}
    failed: dict[_Key, int] = {}
    for record in records:
        params = record.cell.params
        if params.get("arm") == "backbone":
            continue
        key = (str(params["arm"]), params["regime"], int(params["n"]))
        if record.result.get("status") != "ok":
            failed[key] = failed.get(key, 0) + 1
            continue
        index = _seed_indices(data, grid, key[2]).get(record.cell.seed)
        if index is not None:
            table.setdefault(key, {}).setdefault(int(params["m"]), {})[index] = float(record.result[metric])
    return table, failed


def complete_seeds(by_m: dict[int, dict[int, float]]) -> list[int]:
    """Seed indices with a value at every m."""
    return sorted(set.intersection(*(set(row) for row in by_m.values()))) if by_m else []


def seed_matrix(by_m: dict[int, dict[int, float]], seeds: Sequence[int]) -> tuple[list[int], np.ndarray]:
    ms = sorted(by_m)
    return ms, np.array([[by_m[m][s] for m in ms] for s in seeds], dtype=float).reshape(len(seeds), len(ms))


def _curve(
    key: _Key,
    metric: str,
    by_m: dict[int, dict[int, float]],
    failed: int,
    rng: np.random.Generator,
    resamples: int,
) -> Curve:
    ms, values = seed_matrix(by_m, complete_seeds(by_m))
    intervals = [_t_interval(values[:, j]) for j in range(len(ms))] if values.shape[0] else []
    saturation, rise, sd, needed = None, None, None, None
    if len(ms) >= 3 and values.shape[0] >= 2:
        saturation = saturation_interval(ms, values, level=LEVEL, n_resamples=resamples, rng=rng)
        plateau = values[:, -2:].mean(axis=1)
        rise = abs(float(plateau.mean()) - float(values[:, 0].mean()))
        sd = float(plateau.std(ddof=1))
        needed = seeds_needed(sd, rise, float(plateau.mean()))
    return Curve(
        *key,
        metric,
        tuple(ms),
        tuple(i[0] for i in intervals),
        tuple(i[1] for i in intervals),
        tuple(i[2] for i in intervals),
        int(values.shape[0]),
        failed,
        saturation,
        rise,
        sd,
        needed,
    )


_CENSORING = {0: "none", 1: "right", 2: "left"}


def _arm_slopes(
    arm: str, metric: str, table: Table, rng: np.random.Generator, resamples: int
) -> tuple[list[SlopeFit], Difference | None]:
    """Both regimes' slopes of one arm over its n, on the seeds finished at every cell of the arm."""
    regimes = sorted({key[1] for key in table if key[0] == arm}, reverse=True)
    ns = sorted({key[2] for key in table if key[0] == arm})
    keys = [(arm, regime, n) for regime in regimes for n in ns]
    if len(ns) < 2 or any(key not in table or len(table[key]) < 3 for key in keys):
        return [], None
    common = sorted(set.intersection(*(set(complete_seeds(table[key])) for key in keys)))
    if len(common) < 2:
        return [], None
    weights = seed_weights(len(common), rng, resamples)
    log_n = np.log(np.asarray(ns, dtype=np.float64))
    fits, bounds = [], {}
    for regime in regimes:
        matrices = [seed_matrix(table[(arm, regime, n)], common) for n in ns]
        found = saturations_by_n([ms for ms, _ in matrices], [v for _, v in matrices], weights, LEVEL)
        bounds[regime] = slope_bounds(log_n, found)
        fits.append(
            SlopeFit(
                arm,
                regime,
                metric,
                tuple(ns),
                tuple(
                    float(grid_values(np.asarray(ms, dtype=float), log_m))
                    for (ms, _), log_m in zip(matrices, found.log_m[0], strict=True)
                ),
                tuple(_CENSORING[int(code)] for code in found.censor[0]),
                float(bounds[regime].point[0]),
                float(bounds[regime].low[0]),
                float(bounds[regime].high[0]),
                lower_quantile(bounds[regime].low[1:], LEVEL),
                upper_quantile(bounds[regime].high[1:], LEVEL),
                len(common),
            )
        )
    both = "shared" in bounds and "independent" in bounds
    difference = slope_difference(bounds["shared"], bounds["independent"], LEVEL) if both else None
    return fits, difference


def _contrasts(table: Table, metric: str) -> list[Contrast]:
    """:class:`Contrast` of each pair of :data:`CONTRASTS` at every (regime, n, m) both arms hold."""
    found = []
    for first, second in CONTRASTS:
        for (arm, regime, n), mine in sorted(table.items()):
            if arm != first:
                continue
            other = table.get((second, regime, n), {})
            for m in sorted(set(mine) & set(other)):
                seeds = sorted(set(mine[m]) & set(other[m]))
                if seeds:
                    mean, low, high = _t_interval(
                        np.array([mine[m][s] - other[m][s] for s in seeds], dtype=float)
                    )
                    found.append(Contrast(first, second, regime, n, m, metric, mean, low, high, len(seeds)))
    return found


def _convergence(records: Sequence[CellRecord]) -> tuple[Convergence, ...]:
    worst: dict[tuple[str, int], list[float]] = {}
    for record in records:
        result, params = record.result, record.cell.params
        if params.get("arm") == "backbone" or result.get("status") != "ok" or result.get("loss_drop") is None:
            continue
        drop = abs(float(result["loss_drop"]))
        ratio = abs(float(result["last_epoch_change"])) / drop if drop > 0 else math.inf
        worst.setdefault((str(params["arm"]), int(params["n"])), []).append(ratio)
    return tuple(Convergence(arm, n, max(values), len(values)) for (arm, n), values in sorted(worst.items()))


_Timing = tuple[float, int, int, float]
"""A finished cell's (train_s, steps, batch, wall_s)."""


def _ms_per_step(cells: list[_Timing]) -> float:
    """The median over cells of 1000 train_s / steps."""
    return float(np.median([1000.0 * train_s / steps for train_s, steps, _, _ in cells]))


def _costs(records: Sequence[CellRecord]) -> tuple[Cost, ...]:
    """:class:`Cost` per (arm, regime, n) of the finished training cells (the backbone trains nothing)."""
    timed: dict[_Key, dict[int, list[_Timing]]] = {}
    for record in records:
        result, params = record.result, record.cell.params
        if params.get("arm") == "backbone" or result.get("status") != "ok" or not result.get("steps"):
            continue
        key = (str(params["arm"]), params["regime"], int(params["n"]))
        row = (float(result["train_s"]), int(result["steps"]), int(params["recipe"]["batch"]), record.wall_s)
        timed.setdefault(key, {}).setdefault(int(params["m"]), []).append(row)
    costs = []
    for key, by_m in sorted(timed.items()):
        low, high = min(by_m), max(by_m)
        rows = [row for cells in by_m.values() for row in cells]
        costs.append(
            Cost(
                *key,
                batch=rows[0][2],
                steps=rows[0][1],
                cells=len(rows),
                m_low=low,
                m_high=high,
                ms_low=_ms_per_step(by_m[low]),
                ms_high=_ms_per_step(by_m[high]),
                cell_s=float(np.median([row[3] for row in rows])),
            )
        )
    return tuple(costs)


def _runs(records: Sequence[CellRecord]) -> dict[str, int]:
    """The cells each run computed, by run id."""
    counts: dict[str, int] = {}
    for record in records:
        counts[record.run_id] = counts.get(record.run_id, 0) + 1
    return dict(sorted(counts.items()))


def summarise(
    records: Sequence[CellRecord], data: DataName, grid: Grid, *, seed: int = 0, resamples: int = 2000
) -> Summary:
    """Curves, slopes and their differences per metric of :data:`METRICS`, the convergence check and the
    backbone's scores, from the stored records; intervals from ``resamples`` seed resamples of numpy's generator
    of ``seed``."""
    rng = np.random.default_rng(seed)
    curves: list[Curve] = []
    slopes: list[SlopeFit] = []
    differences: dict[tuple[str, str], Difference] = {}
    contrasts: list[Contrast] = []
    for metric in METRICS[data]:
        table, failed = metric_table(records, data, grid, metric)
        contrasts += _contrasts(table, metric)
        keys = sorted(set(table) | set(failed))
        curves += [
            _curve(key, metric, table.get(key, {}), failed.get(key, 0), rng, resamples) for key in keys
        ]
        for arm in sorted({key[0] for key in table}):
            fits, difference = _arm_slopes(arm, metric, table, rng, resamples)
            slopes += fits
            if difference is not None:
                differences[(arm, metric)] = difference
    baseline = next((dict(r.result) for r in records if r.cell.params.get("arm") == "backbone"), {})
    needed = [c.seeds_needed for c in curves if (c.arm, c.metric) == ("in_sample", METRICS[data][0])]
    rule = max((count for count in needed if count is not None), default=None)
    return Summary(
        tuple(curves),
        tuple(slopes),
        differences,
        _convergence(records),
        baseline,
        rule,
        _costs(records),
        sum(record.wall_s for record in records),
        _runs(records),
        tuple(contrasts),
    )
