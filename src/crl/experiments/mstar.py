"""The saturation point m*(n) of a metric curve over a grid of m (docs/theory.md section 7, row C6).

Given the metric of S seeds at K grid values m_1 < ... < m_K (higher is better or lower is better: the rule
only uses distances):

- the plateau P is the mean of the means at the two largest grid m;
- tol = max(h, 0.01 |P|), h the Student-t half-width at ``level`` of the plateau's per-seed values (each seed's
  mean of the metric at the two largest m), over S - 1 degrees of freedom;
- m* is the smallest grid m at which the mean, and the mean at every larger grid m, lies within tol of P;
- censoring: when m* would be one of the two largest grid m (the points that define the plateau) or no grid m
  qualifies, the grid shows no saturation: m* is right-censored, recorded as the bound m_(K-1) (the
  second-largest grid m), meaning m* >= m_(K-1), i.e. m* > m_(K-2); when m* is the smallest grid m it is
  left-censored, m* <= m_1.

This module is the one-curve view of :mod:`crl.stats.saturation` (the implementation the synthetic C6 uses):
the curve enters as one n, and the seeds as weight rows.

:func:`saturation_interval` adds a percentile interval by resampling seeds (the rule recomputed on every
resample; right-censored resamples count as +inf). With few seeds such an interval undercovers (docs/theory.md
section 7, "Small samples"): it describes the spread, it is not a verdict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crl.stats.saturation import LEFT, RIGHT, saturations, seed_weights

__all__ = [
    "Censoring",
    "Saturation",
    "SaturationInterval",
    "grid_values",
    "saturation_interval",
    "saturation_m",
]

Censoring = Literal["none", "left", "right"]


@dataclass(frozen=True)
class Saturation:
    """m* of one curve.

    Attributes:
        m_star: the grid m found; for a right-censored curve the bound m_(K-1), the second-largest grid m
            (m* >= it, i.e. m* > m_(K-2)), for a left-censored one m_1 (m* <= it).
        censoring: "none", "left" (m* <= m_1) or "right" (m* >= m_(K-1)).
        plateau: P, the mean of the means at the two largest grid m.
        tol: the tolerance max(h, 0.01 |P|).
        means: the per-m means over seeds.
    """

    m_star: float
    censoring: Censoring
    plateau: float
    tol: float
    means: tuple[float, ...]


@dataclass(frozen=True)
class SaturationInterval:
    """m* with a seed-resampling percentile interval [low, high] (high = inf when resamples are right-censored)."""

    saturation: Saturation
    low: float
    high: float
    level: float
    n_resamples: int


def _check(grid: ArrayLike, values: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    m = np.asarray(grid, dtype=float)
    v = np.asarray(values, dtype=float)
    if m.ndim != 1 or m.size < 3 or not np.all(np.diff(m) > 0):
        raise ValueError(f"grid = {m.tolist()} must list at least 3 strictly increasing values of m")
    if v.ndim != 2 or v.shape[1] != m.size or v.shape[0] < 2:
        raise ValueError(
            f"values has shape {v.shape}; pass (seeds, {m.size}) with at least 2 seeds, one column per grid m"
        )
    if not np.all(np.isfinite(v)):
        raise ValueError("values holds NaN or infinity; record failed cells apart, never as a metric value")
    return m, v


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level} must lie strictly between 0 and 1")


def _censoring(code: int) -> Censoring:
    return "right" if code == RIGHT else "left" if code == LEFT else "none"


def grid_values(m: NDArray[np.float64], log_m: NDArray[np.float64]) -> NDArray[np.float64]:
    """The grid m whose logs are ``log_m`` (exactly, not exp(log m))."""
    return m[np.searchsorted(np.log(m), log_m)]


def saturation_m(grid: ArrayLike, values: ArrayLike, *, level: float) -> Saturation:
    """m* of the curve ``values`` (seeds x grid) over ``grid`` by the rule of the module docstring: row 0 (every
    seed weighted 1/S) of :func:`crl.stats.saturation.saturations` on ``values`` as S x 1 x K.

    Raises:
        ValueError: on fewer than 3 grid points or 2 seeds, an unsorted grid, non-finite values, or a level
            outside (0, 1).
    """
    _check_level(level)
    m, v = _check(grid, values)
    weights = seed_weights(v.shape[0], None, 0)
    found = saturations(m, v[:, None, :], weights, level)
    means = weights[0] @ v
    return Saturation(
        m_star=float(grid_values(m, found.log_m[0, 0])),
        censoring=_censoring(int(found.censor[0, 0])),
        plateau=float(found.plateau[0, 0]),
        tol=float(found.tol[0, 0]),
        means=tuple(means.tolist()),
    )


def saturation_interval(
    grid: ArrayLike,
    values: ArrayLike,
    *,
    level: float,
    interval_level: float = 0.95,
    n_resamples: int = 2000,
    rng: np.random.Generator,
) -> SaturationInterval:
    """:func:`saturation_m` with a percentile interval at ``interval_level`` over ``n_resamples`` resamples of the
    seeds (rows 1..B of :func:`crl.stats.saturation.seed_weights`: seeds drawn with replacement; a resample whose
    seeds are all one seed has no spread, its tol is 1% of its plateau)."""
    m, v = _check(grid, values)
    found = saturation_m(m, v, level=level)
    resampled = saturations(m, v[:, None, :], seed_weights(v.shape[0], rng, n_resamples)[1:], level)
    draws = np.where(resampled.censor[:, 0] == RIGHT, math.inf, grid_values(m, resampled.log_m[:, 0]))
    tail = (1.0 - interval_level) / 2
    low, high = np.quantile(draws, [tail, 1.0 - tail], method="inverted_cdf")
    return SaturationInterval(found, float(low), float(high), interval_level, n_resamples)
