"""Means with standard errors, and the saturation point of a metric (C6's m*(n))."""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from crl._vocab import Estimate
from crl.stats._validate import as_finite_1d


def mean_se(values: ArrayLike) -> Estimate:
    """Mean and standard error of replicates: ``mean = sum v / n``, ``se = sd(v, ddof=1) / sqrt(n)``.

    Args:
        values: at least two finite numbers.

    Raises:
        ValueError: if fewer than two values are given or any is not finite.
    """
    v = as_finite_1d("values", values)
    if v.size < 2:
        raise ValueError(f"values has {v.size} entries; pass at least 2 replicates to estimate an error.")
    return Estimate(float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)), int(v.size))


@dataclass(frozen=True)
class Saturation:
    """Where a metric reaches its plateau (C6's m*).

    Attributes:
        x_star: smallest x from which on the metric stays within eps of the plateau (log-linearly interpolated
            between grid points when requested).
        plateau: the plateau value used.
        index: index of the first grid point from which on every point is within eps.
        censored: True when already the first grid point is within eps, so the true saturation point is
            ``<= x_star`` (x_star is then ``x[0]``).
    """

    x_star: float
    plateau: float
    index: int
    censored: bool


def saturation_point(
    x: ArrayLike,
    y: ArrayLike,
    eps: float,
    *,
    plateau: float | None = None,
    interpolate: bool = True,
) -> Saturation:
    """The smallest x from which on ``|y - plateau| <= eps`` (C6's m*, "within eps of the plateau").

    The plateau defaults to the value at the largest x. The grid point found is the first one from which on
    *every* later point is within eps (a single early point that dips into the band does not count). With
    ``interpolate``, ``x_star`` is where ``|y - plateau|`` crosses eps on the straight line in ``log x``
    between that point and the one before it, so that m* varies continuously rather than in grid steps.

    Args:
        x: strictly increasing grid, all > 0, at least 2 points.
        y: the metric at each x (finite).
        eps: half-width of the band around the plateau (> 0).
        plateau: the plateau value; ``None`` uses ``y[-1]``.
        interpolate: interpolate between grid points in log x.

    Raises:
        ValueError: on a non-increasing or non-positive grid, mismatched lengths, eps <= 0, a non-finite
            plateau, or when the last point is not within eps of the given plateau (nothing saturates).
    """
    gx = as_finite_1d("x", x)
    gy = as_finite_1d("y", y)
    if gx.shape != gy.shape or gx.size < 2:
        raise ValueError(f"x and y have {gx.size} and {gy.size} entries; pass equally many, at least 2.")
    if np.any(gx <= 0.0) or np.any(np.diff(gx) <= 0.0):
        raise ValueError("x must be > 0 and strictly increasing; sort the grid and drop duplicates.")
    if not (math.isfinite(eps) and eps > 0.0):
        raise ValueError(f"eps={eps!r} must be a finite number > 0.")
    level = float(gy[-1]) if plateau is None else float(plateau)
    if not math.isfinite(level):
        raise ValueError(f"plateau={plateau!r} must be finite.")
    distance = np.abs(gy - level)
    outside = np.flatnonzero(distance > eps)
    if outside.size and outside[-1] == gx.size - 1:
        raise ValueError(
            f"the last point y={gy[-1]!r} is not within eps={eps!r} of plateau={level!r}; extend the grid or "
            "check the plateau."
        )
    index = int(outside[-1]) + 1 if outside.size else 0
    if index == 0:
        return Saturation(x_star=float(gx[0]), plateau=level, index=0, censored=True)
    x_star = float(gx[index])
    if interpolate:
        d0, d1 = distance[index - 1], distance[index]
        t = (d0 - eps) / (d0 - d1)
        x_star = float(np.exp(np.log(gx[index - 1]) + t * (np.log(gx[index]) - np.log(gx[index - 1]))))
    return Saturation(x_star=x_star, plateau=level, index=index, censored=False)
