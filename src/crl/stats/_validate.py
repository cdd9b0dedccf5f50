"""The arguments of crl.stats, checked with :mod:`crl._validate`'s constraints: finite 1-d float64 arrays,
bootstrap sizes and levels, the points of a log-log fit."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crl._validate import FiniteArray, Integer, check, check_level

FloatArray = NDArray[np.float64]


MIN_POINTS = 3

BOOTSTRAP_SIZE = Integer(100, example=" for a percentile interval (2000 typical)")
"""The number of bootstrap resamples of a percentile interval."""


def as_finite_1d(name: str, values: ArrayLike) -> FloatArray:
    """``values`` as a 1-D float64 array, raising ``ValueError`` if anything is NaN or infinite."""
    return check(name, values, FiniteArray())


def check_boot(n_boot: int, ci: float) -> None:
    """Validate the bootstrap size and confidence level."""
    check("n_boot", n_boot, BOOTSTRAP_SIZE)
    check_level("ci", ci)


def log_points(x: ArrayLike, y: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Validate a log-log data set and return ``(log x, log y)``."""
    gx = as_finite_1d("x", x)
    gy = as_finite_1d("y", y)
    if gx.shape != gy.shape:
        raise ValueError(f"x has {gx.size} entries but y has {gy.size}; pass one y per x.")
    if gx.size < MIN_POINTS:
        raise ValueError(f"x has {gx.size} points; a slope with a CI needs at least {MIN_POINTS}.")
    if np.any(gx <= 0.0):
        raise ValueError(f"x has entries <= 0 ({gx[gx <= 0.0][:3]}); a log-log fit needs x > 0.")
    if np.any(gy <= 0.0):
        raise ValueError(
            f"y has entries <= 0 ({gy[gy <= 0.0][:3]}); a log-log fit needs y > 0: drop points whose value "
            "is within its error of 0, or measure them more precisely."
        )
    if np.ptp(gx) == 0.0:
        raise ValueError("x has a single distinct value; a slope needs at least 2 distinct x values.")
    return np.log(gx), np.log(gy)
