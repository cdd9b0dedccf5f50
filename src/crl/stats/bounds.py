"""Bound-violation counts with Monte-Carlo error: the bound claims (C1, C2, C7, C8, C9)."""

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as scipy_stats

from crl._validate import check_level
from crl.stats._validate import as_finite_1d

INFORMATIVE_SLACK = 0.1
"""Below this slack (max measured / bound) a bound check holds but is not informative."""


@dataclass(frozen=True)
class ViolationCount:
    """How many measured values exceed their bound, and how many do so beyond their Monte-Carlo error.

    Attributes:
        n: number of (value, bound) pairs checked.
        count: number with ``value - bound > atol`` (raw, ignoring Monte-Carlo error).
        count_beyond_mc_error: number with ``value - bound > k * se + atol``.
        k: the multiple of the standard error used.
        max_excess: largest ``value - bound`` (negative when every value is below its bound).
        max_z: largest ``(value - bound) / se`` over pairs with ``se > 0`` (``None`` when every se is 0).
        worst_index: index of the pair with the largest excess.
        rate_upper: one-sided Clopper-Pearson upper confidence bound (level ``ci_level``) on the probability
            that a value violates its bound beyond MC error.
        ci_level: level of ``rate_upper``.
        expected_false: ``n * (1 - Phi(k))``, the expected count beyond MC error if every value sat exactly on
            its bound with normal errors of the given se (what a tight, true bound produces by chance).
        slack: the bound's tightness, ``max value / bound`` over the pairs with a finite bound > 0 (``None``
            when there is none); near 1 the check is sharp, below :data:`INFORMATIVE_SLACK` it says little.
    """

    n: int
    count: int
    count_beyond_mc_error: int
    k: float
    max_excess: float
    max_z: float | None
    worst_index: int
    rate_upper: float
    ci_level: float
    expected_false: float
    slack: float | None

    @property
    def holds(self) -> bool:
        """True when no value exceeds its bound beyond Monte-Carlo error."""
        return self.count_beyond_mc_error == 0

    @property
    def informative(self) -> bool:
        """Whether the check can carry weight: its slack is at least :data:`INFORMATIVE_SLACK`.

        A bound that every value undershoots by a factor of ten or more would hold for many false variants
        of the claim too ("holds, not informative", docs/theory.md section 7).
        """
        return self.slack is not None and self.slack >= INFORMATIVE_SLACK


def bound_violations(
    values: ArrayLike,
    bounds: ArrayLike,
    se: ArrayLike | None = None,
    *,
    k: float | None = None,
    alpha: float = 0.05,
    atol: float = 0.0,
    ci: float = 0.95,
) -> ViolationCount:
    """Count the values that exceed their upper bound, raw and beyond Monte-Carlo error.

    A pair violates beyond MC error when ``value - bound > k * se + atol``. With ``k=None`` the multiple is
    the Bonferroni one, ``k = Phi^{-1}(1 - alpha / n)``: if every bound held with equality and each value were
    normal about it with standard error se, the probability of *any* violation beyond MC error would be at
    most alpha. So "zero violations beyond MC error" (C1's rule) has family-wise error <= alpha for a true,
    tight bound, however many points are checked. ``atol`` absorbs floating-point rounding of exactly computed
    quantities (se = 0).

    Args:
        values: measured values (e.g. C2's ``E* - E(s)``).
        bounds: their upper bounds (e.g. ``sqrt((2/tau)(L(s) - L*))``), same length; ``inf`` is allowed.
        se: standard errors of ``values - bounds`` (>= 0), or ``None`` for exactly computed values.
        k: multiple of se; ``None`` chooses the Bonferroni multiple for ``alpha``.
        alpha: family-wise error rate used when ``k`` is ``None``, in (0, 1).
        atol: absolute tolerance (>= 0) added to ``k * se``.
        ci: level of the Clopper-Pearson upper bound on the violation rate.

    Raises:
        ValueError: on empty or mismatched inputs, NaN, negative se, k < 0, atol < 0, or alpha or ci outside
            (0, 1).
    """
    v = as_finite_1d("values", values)
    b = np.asarray(bounds, dtype=np.float64).reshape(-1)
    if b.shape != v.shape:
        raise ValueError(f"bounds has {b.size} entries but values has {v.size}; pass one bound per value.")
    if v.size == 0:
        raise ValueError("values is empty; pass at least one (value, bound) pair.")
    if np.any(np.isnan(b)) or np.any(b == -np.inf):
        raise ValueError("bounds contains NaN or -inf; every bound must be a number or +inf.")
    s = np.zeros_like(v) if se is None else as_finite_1d("se", se)
    if s.shape != v.shape:
        raise ValueError(
            f"se has {s.size} entries but values has {v.size}; pass one standard error per value."
        )
    if np.any(s < 0.0):
        raise ValueError("se has negative entries; standard errors are >= 0.")
    check_level("alpha", alpha)
    check_level("ci", ci)
    if atol < 0.0:
        raise ValueError(f"atol={atol!r} must be >= 0.")
    if k is None:
        k = float(scipy_stats.norm.isf(alpha / v.size))
    elif not math.isfinite(k) or k < 0.0:
        raise ValueError(f"k={k!r} must be a finite number >= 0 (or None for the Bonferroni choice).")
    excess = v - b
    beyond = int(np.sum(excess > k * s + atol))
    positive_se = s > 0.0
    max_z = float(np.max(excess[positive_se] / s[positive_se])) if np.any(positive_se) else None
    worst = int(np.argmax(excess))
    return ViolationCount(
        n=int(v.size),
        count=int(np.sum(excess > atol)),
        count_beyond_mc_error=beyond,
        k=float(k),
        max_excess=float(excess[worst]),
        max_z=max_z,
        worst_index=worst,
        rate_upper=_clopper_pearson_upper(beyond, int(v.size), ci),
        ci_level=ci,
        expected_false=float(v.size * scipy_stats.norm.sf(k)),
        slack=_slack(v, b),
    )


def _slack(values: np.ndarray, bounds: np.ndarray) -> float | None:
    """``max values / bounds`` over the pairs whose bound is finite and > 0 (``None`` when there is none)."""
    usable = np.isfinite(bounds) & (bounds > 0.0)
    return float(np.max(values[usable] / bounds[usable])) if np.any(usable) else None


def _clopper_pearson_upper(count: int, n: int, level: float) -> float:
    """One-sided exact binomial upper bound on a rate from ``count`` successes in ``n`` trials."""
    if count >= n:
        return 1.0
    return float(scipy_stats.beta.ppf(level, count + 1, n - count))
