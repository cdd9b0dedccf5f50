"""C5's statistics: the offset power law G(m) = a + b m^r, log-log slopes in n, and ratios, each with a Student-t
interval over seeds by the delete-one-seed jackknife (docs/claims/C5.md).

Every statistic here is a smooth function of the seed means of a quantity at each grid point (k seeds per
point; seed i of every point forms "seed i"). Its interval: the estimate from all seeds, the jackknife standard
error ``se^2 = (k - 1)/k sum_i (theta_(i) - theta_(.))^2`` over the k delete-one estimates, and the Student-t
quantile with k - 1 degrees of freedom at the part's level (docs/theory.md section 7: Student-t over seeds, not a
percentile bootstrap, which undercovers at 8 seeds).

The offset power law is fitted by relative least squares, ``min sum_j ((y_j - a - b x_j^r)/y_j)^2``: for each r on
a grid, (a, b) by weighted linear least squares, then a parabola through the grid minimum refines r. Its misfit
is the largest relative residual ``max_j |y_j/yhat_j - 1|`` (an effect size; above 5% the verdict is INCONCLUSIVE).
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import stats as scipy_stats

from crl._vocab import check_level

FloatArray = NDArray[np.float64]

EXPONENT_GRID = np.arange(-3.0, 0.5 + 1e-9, 0.002)
"""Candidate exponents r of the offset power law."""


@dataclass(frozen=True)
class OffsetPowerLaw:
    """``y = a + b x^r`` fitted by relative least squares (module docstring)."""

    a: float
    b: float
    r: float
    max_relative_residual: float

    def predict(self, x: FloatArray) -> FloatArray:
        """``a + b x^r``."""
        return self.a + self.b * np.power(x, self.r)


@dataclass(frozen=True)
class JackknifeInterval:
    """A statistic with its jackknife Student-t interval over k seeds."""

    value: float
    se: float
    ci_low: float
    ci_high: float
    level: float
    seeds: int


def offset_power_fit(x: FloatArray, y: FloatArray) -> OffsetPowerLaw:
    """Fit ``y = a + b x^r`` (module docstring) to at least 4 points with y > 0.

    Raises:
        ValueError: on fewer than 4 points, mismatched lengths, x <= 0 or y <= 0.
    """
    gx, gy = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if gx.shape != gy.shape or gx.ndim != 1 or gx.size < 4:
        raise ValueError(
            f"x and y must be 1-D of equal length >= 4 (a, b, r and one more); got {gx.shape}, {gy.shape}."
        )
    if np.any(gx <= 0.0) or np.any(gy <= 0.0) or not np.all(np.isfinite(gy)):
        raise ValueError("x and y must be finite and > 0 (G is fitted on |G| means).")
    scale = math.exp(float(np.mean(np.log(gx))))
    u = gx / scale
    rss, _, _ = _profile(u, gy, EXPONENT_GRID)
    best = int(np.clip(np.argmin(rss), 1, EXPONENT_GRID.size - 2))
    left, mid, right = rss[best - 1], rss[best], rss[best + 1]
    curvature = left - 2.0 * mid + right
    shift = 0.5 * (left - right) / curvature if curvature > 0.0 else 0.0
    step = EXPONENT_GRID[1] - EXPONENT_GRID[0]
    r = float(EXPONENT_GRID[best] + np.clip(shift, -1.0, 1.0) * step)
    _, a_r, b_r = _profile(u, gy, np.array([r]))
    a, b = float(a_r[0]), float(b_r[0]) / scale**r
    fitted = a + b * gx**r
    residual = float(np.max(np.abs(gy / fitted - 1.0))) if np.all(fitted > 0.0) else math.inf
    return OffsetPowerLaw(a=a, b=b, r=r, max_relative_residual=residual)


def _profile(
    u: FloatArray, y: FloatArray, exponents: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """For every exponent r at once: the relative residual sum of squares of the best (a, b) and that (a, b).

    Minimises ``sum_j (1 - a/y_j - b u_j^r/y_j)^2`` by the 2 x 2 normal equations (columns c0 = 1/y, c1 = u^r/y).
    """
    c0 = 1.0 / y
    c1 = u[None, :] ** exponents[:, None] / y[None, :]
    s00, s01, s11 = float(c0 @ c0), c1 @ c0, np.sum(c1 * c1, axis=1)
    t0, t1 = float(c0.sum()), c1.sum(axis=1)
    det = s00 * s11 - s01 * s01
    safe = np.where(np.abs(det) > 1e-300, det, 1.0)
    a = (s11 * t0 - s01 * t1) / safe
    b = (s00 * t1 - s01 * t0) / safe
    resid = 1.0 - a[:, None] * c0[None, :] - b[:, None] * c1
    rss = np.where(np.abs(det) > 1e-300, np.sum(resid * resid, axis=1), np.inf)
    return rss, a, b


def loglog_slope(x: FloatArray, y: FloatArray) -> float:
    """OLS slope of log y on log x (y > 0)."""
    lx, ly = np.log(np.asarray(x, dtype=np.float64)), np.log(np.asarray(y, dtype=np.float64))
    cx = lx - lx.mean()
    return float(cx @ (ly - ly.mean()) / (cx @ cx))


def jackknife_t(
    statistic: Callable[[FloatArray], float], seeds: FloatArray, level: float
) -> JackknifeInterval:
    """The jackknife Student-t interval of ``statistic(mean over seeds)`` (module docstring).

    Args:
        statistic: maps the (points,) seed means (or several stacked series) to one number.
        seeds: (k, ...) per-seed values, k >= 3; axis 0 indexes seeds.
        level: the confidence level (the part's level).

    Raises:
        ValueError: on fewer than 3 seeds, non-finite values or a bad level.
    """
    check_level("level", level)
    values = np.asarray(seeds, dtype=np.float64)
    k = values.shape[0]
    if k < 3:
        raise ValueError(f"seeds has {k} rows; a jackknife Student-t interval needs at least 3 seeds.")
    if not np.all(np.isfinite(values)):
        raise ValueError(
            "seeds holds NaN or infinity; record failed cells and leave them out before fitting."
        )
    estimate = statistic(values.mean(axis=0))
    total = values.sum(axis=0)
    leave_one = np.array([statistic((total - values[i]) / (k - 1)) for i in range(k)])
    se = math.sqrt((k - 1) / k * float(np.sum((leave_one - leave_one.mean()) ** 2)))
    half = float(scipy_stats.t.ppf(0.5 + level / 2.0, k - 1)) * se
    return JackknifeInterval(estimate, se, estimate - half, estimate + half, level, k)
