"""The saturation point m*(n) with censoring (docs/theory.md section 7, row C6), slope intervals of log m* on
log n, and the bootstrap over seeds: the one implementation of the rule, used by the synthetic claim C6
(:mod:`crl.claims.c06_saturation`) and by the real-data experiment (:mod:`crl.experiments.mstar`).

The data are one array per arm, ``values[s, i, j]``: the metric of seed s at the i-th n and j-th grid m (higher
or lower is better: the rule uses only distances). Everything below is vectorised over bootstrap resamples,
which enter as seed weights ``w[b, s]`` (resample counts / S): the plain analysis is the resample of weight 1/S
for every seed.

- Plateau P = mean of the means at the two largest grid m; per seed p_s = the seed's mean at those two m.
- tol = max(t_{S-1, (1+level)/2} sd(p) / sqrt(S), 0.01 |P|) (Student-t half-width at the per-part level).
- m* = the smallest grid m_j with |mean_l - P| <= tol for every l >= j. Right-censored when that j is one of
  the two plateau points or none qualifies: the bound recorded is m_(K-1), the second-largest grid m, meaning
  m* >= m_(K-1), i.e. m* > m_(K-2); left-censored (m* <= m_1) when j is the first grid point.
- The least-squares slope b = sum_i w_i log m*_i, w_i = (u_i - mean u)/sum (u - mean u)^2 with u = log n, is
  linear in the log m* values, so censored points give an interval [b_min, b_max]: a right-censored y >= c
  adds w c to b_min when w > 0 and -inf when w < 0 (symmetrically for b_max and for left censoring).
- Slopes and their differences within :data:`ROUNDING` (1e-9) of 0 are 0: they take lattice values, and float
  rounding must not turn a CI end of 0 into a PASS (rule: PASS if the lower end is > 0).
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats

FloatArray = NDArray[np.float64]
UNCENSORED, RIGHT, LEFT = 0, 1, 2
CENSOR_NAMES = {UNCENSORED: "", RIGHT: "right-censored", LEFT: "left-censored"}
RELATIVE_FLOOR = 0.01
"""tol is at least 1% of the plateau."""
ROUNDING = 1e-9
"""Slopes of log m* on log n within this of a value are that value: m* and n lie on grids, so a slope and a
difference of slopes take lattice values (on doubling grids of both, multiples of 1 / sum (u - mean u)^2 in log
2 units: 1/17.5 for six n), and the float sums that form them leave rounding of about 1e-16 that must not decide
the sign of a CI end (a lower end of 2.2e-16 is 0, not > 0)."""


@dataclass(frozen=True)
class Saturations:
    """m* per (resample, n): ``log_m`` is log m* (censored: its bound), ``censor`` 0/1/2 (none/right/left);
    ``plateau`` and ``tol`` per (resample, n)."""

    log_m: FloatArray
    censor: NDArray[np.int64]
    plateau: FloatArray
    tol: FloatArray


@dataclass(frozen=True)
class SlopeBounds:
    """Per resample: the slope with censored points at their bounds, and its interval [low, high]."""

    point: FloatArray
    low: FloatArray
    high: FloatArray


def seed_weights(n_seeds: int, rng: np.random.Generator | None, n_boot: int) -> FloatArray:
    """(B, S) weights: row 0 is the data (1/S each); with ``rng``, rows 1..n_boot are resamples of the seeds."""
    rows = [np.full((1, n_seeds), 1.0 / n_seeds)]
    if rng is not None:
        picks = rng.integers(0, n_seeds, size=(n_boot, n_seeds))
        counts = np.zeros((n_boot, n_seeds))
        np.add.at(counts, (np.arange(n_boot)[:, None], picks), 1.0)
        rows.append(counts / n_seeds)
    return np.vstack(rows)


def saturations(grid_m: FloatArray, values: FloatArray, weights: FloatArray, level: float) -> Saturations:
    """m*(n) of one arm for every weight row (module docstring). ``values`` is (S, N, M), ``weights`` (B, S)."""
    n_seeds = values.shape[0]
    means = np.einsum("bs,snm->bnm", weights, values)
    per_seed_plateau = values[:, :, -2:].mean(axis=2)
    plateau = weights @ per_seed_plateau
    second = weights @ per_seed_plateau**2
    variance = np.clip(second - plateau**2, 0.0, None) * n_seeds / (n_seeds - 1)
    t = float(scipy_stats.t.ppf(0.5 + level / 2.0, n_seeds - 1))
    tol = np.maximum(t * np.sqrt(variance / n_seeds), RELATIVE_FLOOR * np.abs(plateau))
    within = np.abs(means - plateau[:, :, None]) <= tol[:, :, None]
    suffix = np.flip(np.logical_and.accumulate(np.flip(within, axis=2), axis=2), axis=2)
    k = grid_m.size
    first = np.where(suffix.any(axis=2), np.argmax(suffix, axis=2), k)
    censor = np.where(first >= k - 2, RIGHT, np.where(first == 0, LEFT, UNCENSORED))
    index = np.where(censor == RIGHT, k - 2, first)
    return Saturations(np.log(grid_m)[index], censor.astype(np.int64), plateau, tol)


def saturations_by_n(
    grids: Sequence[Sequence[int]], values: Sequence[FloatArray], weights: FloatArray, level: float
) -> Saturations:
    """m*(n) of one arm for every weight row, the i-th n on its own m grid ``grids[i]`` (``values[i]`` is
    (S, M_i)), joined over n."""
    parts = [
        saturations(np.asarray(grid, dtype=np.float64), block[:, None, :], weights, level)
        for grid, block in zip(grids, values, strict=True)
    ]
    return Saturations(
        np.concatenate([p.log_m for p in parts], axis=1),
        np.concatenate([p.censor for p in parts], axis=1),
        np.concatenate([p.plateau for p in parts], axis=1),
        np.concatenate([p.tol for p in parts], axis=1),
    )


def slope_bounds(log_n: FloatArray, sat: Saturations) -> SlopeBounds:
    """The least-squares slope of log m* on log n with censored points at their bounds, and its interval."""
    centred = log_n - log_n.mean()
    w = centred / np.sum(centred**2)
    contribution = w * sat.log_m
    right, left = sat.censor == RIGHT, sat.censor == LEFT
    unbounded_low = (right & (w < 0)) | (left & (w > 0))
    unbounded_high = (right & (w > 0)) | (left & (w < 0))
    low = np.where(unbounded_low, -np.inf, contribution).sum(axis=1)
    high = np.where(unbounded_high, np.inf, contribution).sum(axis=1)
    return SlopeBounds(snap_zero(contribution.sum(axis=1)), snap_zero(low), snap_zero(high))


def snap_zero(values: FloatArray) -> FloatArray:
    """``values`` with every entry of magnitude <= :data:`ROUNDING` set to exactly 0 (infinite entries kept)."""
    return np.where(np.abs(values) <= ROUNDING, 0.0, values)


def lower_quantile(values: FloatArray, level: float) -> float:
    """The (1 - level)/2 quantile (no interpolation, so infinite values are kept)."""
    return float(np.quantile(values, (1.0 - level) / 2.0, method="lower"))


def upper_quantile(values: FloatArray, level: float) -> float:
    """The (1 + level)/2 quantile (no interpolation)."""
    return float(np.quantile(values, (1.0 + level) / 2.0, method="higher"))


@dataclass(frozen=True)
class Difference:
    """slope(a) - slope(b): point estimate, its censoring bounds on the data, and the bootstrap CI."""

    point: float
    bound_low: float
    bound_high: float
    ci_low: float
    ci_high: float


def slope_difference(first: SlopeBounds, second: SlopeBounds, level: float) -> Difference:
    """``slope(first) - slope(second)``: the CI is [q_low(first.low - second.high), q_high(first.high -
    second.low)] over the resamples (rows 1..B); row 0 (the data) gives the point and its bounds."""
    low = snap_zero(first.low - second.high)
    high = snap_zero(first.high - second.low)
    return Difference(
        point=float(snap_zero(first.point[:1] - second.point[:1])[0]),
        bound_low=float(low[0]),
        bound_high=float(high[0]),
        ci_low=lower_quantile(low[1:], level),
        ci_high=upper_quantile(high[1:], level),
    )
