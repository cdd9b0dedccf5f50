"""The saturation point m*(n) of a metric curve over a grid of m (docs/theory.md section 7, row C6).

Given the metric of S seeds at K grid values m_1 < ... < m_K (higher is better or lower is better: the rule
only uses distances):

- the plateau P is the mean of the means at the two largest grid m;
- tol = max(h, 0.01 |P|), h the Student-t half-width at ``level`` of the plateau's per-seed values (each seed's
  mean of the metric at the two largest m), over S - 1 degrees of freedom;
- m* is the smallest grid m at which the mean, and the mean at every larger grid m, lies within tol of P;
- censoring: when m* would be one of the two largest grid m (the points that define the plateau) or no grid m
  qualifies, the grid shows no saturation: m* is right-censored, recorded as m* > m_(K-2); when m* is the
  smallest grid m it is left-censored, m* <= m_1.

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
from scipy import stats

__all__ = ["Censoring", "Saturation", "SaturationInterval", "saturation_interval", "saturation_m"]

Censoring = Literal["none", "left", "right"]


@dataclass(frozen=True)
class Saturation:
    """m* of one curve.

    Attributes:
        m_star: the grid m found; for a right-censored curve the bound m_(K-2) (m* > it), for a left-censored one
            m_1 (m* <= it).
        censoring: "none", "left" (m* <= m_1) or "right" (m* > m_(K-2)).
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


def saturation_m(grid: ArrayLike, values: ArrayLike, *, level: float) -> Saturation:
    """m* of the curve ``values`` (seeds x grid) over ``grid`` by the rule of the module docstring.

    Raises:
        ValueError: on fewer than 3 grid points or 2 seeds, an unsorted grid, non-finite values, or a level
            outside (0, 1).
    """
    if not 0.0 < level < 1.0:
        raise ValueError(f"level = {level} must lie strictly between 0 and 1")
    m, v = _check(grid, values)
    means = v.mean(axis=0)
    per_seed_plateau = v[:, -2:].mean(axis=1)
    plateau = float(means[-2:].mean())
    seeds = v.shape[0]
    half = float(stats.t.ppf(0.5 + level / 2, seeds - 1) * per_seed_plateau.std(ddof=1) / math.sqrt(seeds))
    tol = max(half, 0.01 * abs(plateau))
    inside = np.abs(means - plateau) <= tol
    outside = np.flatnonzero(~inside)
    index = 0 if outside.size == 0 else int(outside[-1]) + 1
    if index >= m.size - 2:
        return Saturation(float(m[-3]), "right", plateau, tol, tuple(means.tolist()))
    censoring: Censoring = "left" if index == 0 else "none"
    return Saturation(float(m[index]), censoring, plateau, tol, tuple(means.tolist()))


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
    seeds (rows of ``values``, drawn with replacement; a resample whose seeds are all one seed has no spread, its
    tol is 1% of its plateau)."""
    m, v = _check(grid, values)
    found = saturation_m(m, v, level=level)
    draws = []
    for _ in range(n_resamples):
        rows = v[rng.integers(0, v.shape[0], v.shape[0])]
        one = saturation_m(m, rows, level=level)
        draws.append(math.inf if one.censoring == "right" else one.m_star)
    tail = (1.0 - interval_level) / 2
    low, high = np.quantile(np.asarray(draws), [tail, 1.0 - tail], method="inverted_cdf")
    return SaturationInterval(found, float(low), float(high), interval_level, n_resamples)
