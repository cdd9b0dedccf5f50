"""The local doubling pilot: at the user's (N, M), which doubling, of m or of n, gained more one step back?

Cells (the user's own cell (N, M) is not run):

- (N, M/2) and (N/2, M): one doubling of n, and one of m, from the base (N/2, M/2);
- (N/2, M/2): the base itself, for the two gains (it cancels in D);
- (N/2, M/4) and (N/4, M/2): the same comparison one step further back, for the drift.

With err the held-out error (lower is better) and bars the mean over S seed runs of a cell:

- D_hat = mean err(N, M/2) - mean err(N/2, M) = gain_m - gain_n, the gain of doubling m minus that of doubling n
  at the base (N/2, M/2): D > 0 says doubling m gained more;
- D_back = mean err(N/2, M/4) - mean err(N/4, M/2), the same at the base (N/4, M/4);
- drift = |D_hat - D_back|, how fast the answer moves per doubling of (n, m);
- the interval D_hat +- q sqrt(se_a^2 + se_b^2 + drift^2), se_a and se_b the standard errors (s / sqrt(S)) of the
  two means of D_hat, q calibrated out of sample on committed grids (docs/advisor_calibration.md).

The answer's target is the next step, D = err(2N, M) - err(N, 2M) at (N, M), measured by its truth cells (2N, M) and
(N, 2M) (:func:`measured_difference`). Halving is integer division: N and M must be divisible by 4 for the cells
to be exact halvings, and M >= 4.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Cell",
    "CellMean",
    "LocalEstimate",
    "Measured",
    "MeasuredDifference",
    "calibrate_q",
    "cell_mean",
    "check_point",
    "local_estimate",
    "measured_difference",
    "pilot_points",
    "required_q",
    "truth_points",
]

Cell = tuple[int, int]
"""(n, m): n training pairs, m negatives."""

Measured = Mapping[Cell, Sequence[float]]
"""(n, m) -> the held-out error of each seed run."""

_SMALLEST_N = 64
"""The smallest pilot n (N/4): the recipe map's batch is then 8 (8 steps per epoch)."""


def check_point(n: int, m: int) -> None:
    """Raise a ValueError naming the bad value unless (N, M) allows the pilot: M >= 4 and M <= N (fixed in-sample
    negatives: at most the n items), N/4 >= 64, N and M divisible by 4."""
    if m < 4 or m % 4:
        raise ValueError(
            f"m = {m}: the pilot halves m twice (M/2, M/4), so m must be a multiple of 4 and >= 4; set "
            "[loss] n_negatives (e.g. --set loss.n_negatives=160)"
        )
    if n % 4 or n // 4 < _SMALLEST_N:
        raise ValueError(
            f"n = {n}: the pilot halves n twice (N/2, N/4), so n must be a multiple of 4 with N/4 >= {_SMALLEST_N}; "
            "set [data] n_train (e.g. --set data.n_train=16000)"
        )
    if m > n // 2:
        raise ValueError(
            f"m = {m} > n/2 = {n // 2}: the pilot's cell (N/2, M) needs M <= N/2 negatives among its N/2 pairs; "
            "lower [loss] n_negatives or raise [data] n_train"
        )


def pilot_points(n: int, m: int) -> tuple[Cell, ...]:
    """The five pilot cells at the user's (N, M): (N, M/2), (N/2, M), (N/2, M/2), (N/2, M/4), (N/4, M/2)."""
    check_point(n, m)
    return ((n, m // 2), (n // 2, m), (n // 2, m // 2), (n // 2, m // 4), (n // 4, m // 2))


def truth_points(n: int, m: int) -> tuple[Cell, Cell]:
    """The cells that measure the answer's target D = err(2N, M) - err(N, 2M): (2N, M) and (N, 2M)."""
    check_point(n, m)
    return ((2 * n, m), (n, 2 * m))


@dataclass(frozen=True)
class CellMean:
    """The mean error of one cell over its runs and its standard error s / sqrt(k) (k >= 2 runs)."""

    mean: float
    se: float
    runs: int


def cell_mean(values: Sequence[float]) -> CellMean:
    """Mean and standard error s / sqrt(k) of k >= 2 runs.

    Raises:
        ValueError: if fewer than 2 runs (no standard error).
    """
    if len(values) < 2:
        raise ValueError(
            f"a cell holds {len(values)} seed runs; the pilot needs at least 2 per cell (--seeds >= 2)"
        )
    array = np.asarray(values, dtype=float)
    return CellMean(float(array.mean()), float(array.std(ddof=1) / math.sqrt(array.size)), int(array.size))


@dataclass(frozen=True)
class LocalEstimate:
    """The pilot's estimate at (N, M) (module docstring).

    Attributes:
        n, m: the user's (N, M).
        d_hat: D_hat = mean err(N, M/2) - mean err(N/2, M).
        d_back: D_back = mean err(N/2, M/4) - mean err(N/4, M/2).
        se_a, se_b: the standard errors of mean err(N, M/2) and mean err(N/2, M).
        se_base: the standard error of mean err(N/2, M/2), the base of both gains.
        gain_m: mean err(N/2, M/2) - mean err(N/2, M), doubling m at the base.
        gain_n: mean err(N/2, M/2) - mean err(N, M/2), doubling n at the base.
    """

    n: int
    m: int
    d_hat: float
    d_back: float
    se_a: float
    se_b: float
    se_base: float
    gain_m: float
    gain_n: float

    @property
    def drift(self) -> float:
        """|D_hat - D_back|."""
        return abs(self.d_hat - self.d_back)

    @property
    def scale(self) -> float:
        """sqrt(se_a^2 + se_b^2 + drift^2), the interval's half-width per unit of q."""
        return math.sqrt(self.se_a**2 + self.se_b**2 + self.drift**2)

    @property
    def se_gain_m(self) -> float:
        """The standard error of gain_m: sqrt(se_base^2 + se_b^2)."""
        return math.sqrt(self.se_base**2 + self.se_b**2)

    @property
    def se_gain_n(self) -> float:
        """The standard error of gain_n: sqrt(se_base^2 + se_a^2)."""
        return math.sqrt(self.se_base**2 + self.se_a**2)

    def interval(self, q: float) -> tuple[float, float]:
        """(low, high) = D_hat -+ q scale."""
        half = q * self.scale
        return self.d_hat - half, self.d_hat + half

    def covers(self, q: float, value: float) -> bool:
        """Whether ``value`` lies in :meth:`interval` (q)."""
        low, high = self.interval(q)
        return low <= value <= high

    @property
    def direction(self) -> str:
        """``"m"`` when D_hat > 0 (doubling m gained more), ``"n"`` when D_hat < 0, ``"tie"`` at exactly 0."""
        return "m" if self.d_hat > 0 else "n" if self.d_hat < 0 else "tie"


def local_estimate(errors: Measured, n: int, m: int) -> LocalEstimate:
    """The estimate at (N, M) from the pilot cells' runs (:func:`pilot_points`).

    Raises:
        KeyError: naming a pilot cell without runs; ValueError: a cell with fewer than 2 runs.
    """
    a, b, base, back_a, back_b = (cell_mean(_runs(errors, cell)) for cell in pilot_points(n, m))
    return LocalEstimate(
        n=n,
        m=m,
        d_hat=a.mean - b.mean,
        d_back=back_a.mean - back_b.mean,
        se_a=a.se,
        se_b=b.se,
        se_base=base.se,
        gain_m=base.mean - b.mean,
        gain_n=base.mean - a.mean,
    )


def _runs(errors: Measured, cell: Cell) -> Sequence[float]:
    if cell not in errors:
        raise KeyError(f"no runs of the cell (n, m) = {cell}")
    return errors[cell]


@dataclass(frozen=True)
class MeasuredDifference:
    """The measured target D = mean err(2N, M) - mean err(N, 2M) with its Welch interval.

    ``decisive`` when the interval excludes 0.
    """

    value: float
    low: float
    high: float

    @property
    def decisive(self) -> bool:
        """The interval excludes 0."""
        return self.low > 0 or self.high < 0


def measured_difference(errors: Measured, n: int, m: int, level: float = 0.95) -> MeasuredDifference:
    """D = mean err(2N, M) - mean err(N, 2M) and its Welch-t interval at ``level``: se^2 = s_1^2/k_1 + s_2^2/k_2,
    Welch-Satterthwaite degrees of freedom (a zero se gives the point as its interval)."""
    more_data, more_negatives = (cell_mean(_runs(errors, cell)) for cell in truth_points(n, m))
    variance = more_data.se**2 + more_negatives.se**2
    value = more_data.mean - more_negatives.mean
    if variance == 0.0:
        return MeasuredDifference(value, value, value)
    df = variance**2 / (
        more_data.se**4 / (more_data.runs - 1) + more_negatives.se**4 / (more_negatives.runs - 1)
    )
    half = float(stats.t.ppf((1 + level) / 2, df)) * math.sqrt(variance)
    return MeasuredDifference(value, value - half, value + half)


def required_q(estimate: LocalEstimate, truth: float) -> float:
    """The smallest q whose interval holds ``truth``: |truth - D_hat| / scale (inf when the scale is 0 and the truth
    differs, 0 when both are)."""
    miss = abs(truth - estimate.d_hat)
    if estimate.scale == 0.0:
        return 0.0 if miss == 0.0 else math.inf
    return miss / estimate.scale


def calibrate_q(estimates: Sequence[LocalEstimate], truths: Sequence[float], coverage: float) -> float:
    """The smallest q whose intervals hold at least ``coverage`` of the truths: the ceil(coverage k)-th smallest
    :func:`required_q` over the k points.

    Raises:
        ValueError: with no points, mismatched lengths or a coverage outside (0, 1].
    """
    if not estimates or len(estimates) != len(truths):
        raise ValueError(
            f"{len(estimates)} estimates and {len(truths)} truths: pass one truth per estimate, >= 1"
        )
    if not 0 < coverage <= 1:
        raise ValueError(f"coverage = {coverage}; use a share in (0, 1], e.g. 0.9")
    needed = sorted(required_q(e, t) for e, t in zip(estimates, truths, strict=True))
    return needed[math.ceil(coverage * len(needed) - 1e-12) - 1]
