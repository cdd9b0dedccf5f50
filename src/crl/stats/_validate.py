"""Argument checks shared by crl.stats: finite 1-d float64 arrays, levels, bootstrap sizes, log points."""

import numpy as np
from numpy.typing import ArrayLike, NDArray

from crl._vocab import check_level

FloatArray = NDArray[np.float64]


MIN_POINTS = 3


def as_finite_1d(name: str, values: ArrayLike) -> FloatArray:
    """``values`` as a 1-D float64 array, raising ``ValueError`` if anything is NaN or infinite."""
    array = np.asarray(values, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(array)):
        raise ValueError(
            f"{name} contains {int(np.sum(~np.isfinite(array)))} NaN/inf entries; pass finite numbers."
        )
    return array


def check_boot(n_boot: int, ci: float) -> None:
    """Validate the bootstrap size and confidence level."""
    if n_boot < 100:
        raise ValueError(
            f"n_boot={n_boot!r} is too small for a percentile interval; use at least 100 (2000 typical)."
        )
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
