"""Summaries of replicates: the mean with its standard error, and the delete-one-seed jackknife.

The jackknife over k seeds (docs/theory.md section 7: Student-t over seeds, not a percentile bootstrap, which
undercovers at 8 seeds): a statistic theta of the seed means is recomputed on the means without seed i, giving
theta_(i); its standard error is ``se^2 = (k - 1)/k sum_i (theta_(i) - theta_(.))^2`` and its interval
``theta -/+ t_{k-1, (1+level)/2} se``.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from crl._validate import check_level
from crl._vocab import Estimate
from crl.stats._validate import FloatArray, as_finite_1d


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


def jackknife_se(leave_one_out: FloatArray) -> float:
    """``sqrt((k - 1)/k sum_i (theta_(i) - theta_(.))^2)`` of the k delete-one estimates theta_(i)."""
    count = leave_one_out.size
    return math.sqrt((count - 1) / count * float(np.sum((leave_one_out - leave_one_out.mean()) ** 2)))


@dataclass(frozen=True)
class JackknifeInterval:
    """A statistic with its jackknife Student-t interval over k seeds."""

    value: float
    se: float
    ci_low: float
    ci_high: float
    level: float
    seeds: int


def jackknife_t(
    statistic: Callable[[FloatArray], float], seeds: ArrayLike, level: float
) -> JackknifeInterval:
    """The jackknife Student-t interval of ``statistic(mean over seeds)`` (module docstring).

    Args:
        statistic: maps the (points,) seed means (or several stacked series) to one number.
        seeds: (k, ...) per-seed values, k >= 3; axis 0 indexes seeds.
        level: the confidence level.

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
    se = jackknife_se(np.array([statistic((total - values[i]) / (k - 1)) for i in range(k)]))
    half = float(scipy_stats.t.ppf(0.5 + level / 2.0, k - 1)) * se
    return JackknifeInterval(estimate, se, estimate - half, estimate + half, level, k)


INFLUENCE_BOUND = 4.0
"""c of the stability test (docs/verdicts.md, contract v4): the largest delete-one move is at most c times the root
mean square move se / sqrt(S - 1)."""


def influence_ratio(estimate: float, leave_one_out: FloatArray) -> float:
    """The largest delete-one move of a statistic in units of its root mean square move:
    ``max_i |theta_(i) - theta| / (se / sqrt(k - 1))``, se the jackknife standard error of :func:`jackknife_se`
    (so ``se / sqrt(k - 1) = sqrt(sum_i (theta_(i) - theta_(.))^2 / k)``). A statistic without jumps keeps it near
    the maximum of k normal deviates (below :data:`INFLUENCE_BOUND` = 4 but for a 0.5% tail at k = 64); one seed
    that moves the statistic alone gives about sqrt(k). 0 when no seed moves it; infinite when every seed moves it
    alike away from the estimate.

    Raises:
        ValueError: on fewer than 3 delete-one values or a non-finite one.
    """
    rows = np.asarray(leave_one_out, dtype=np.float64)
    if rows.ndim != 1 or rows.size < 3 or not np.all(np.isfinite(rows)) or not math.isfinite(estimate):
        raise ValueError("influence_ratio needs a finite estimate and at least 3 finite delete-one values.")
    typical = jackknife_se(rows) / math.sqrt(rows.size - 1)
    largest = float(np.max(np.abs(rows - estimate)))
    if typical == 0.0:
        return 0.0 if largest == 0.0 else math.inf
    return largest / typical
