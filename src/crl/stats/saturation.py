"""Saturation points of a metric curve over a grid of m, and slopes of their logarithm on log n
(docs/theory.md section 7, row C6).

**The first-passage point m_q** (:func:`first_passage`; the statistic of C6 and of the real-data m*(n)
tables): the smallest m at which the seed-mean curve comes within a fixed relative tolerance q of its plateau
(the mean at the two largest grid m), interpolated log-log between grid points, so that it moves continuously
with the data; censored at the grid's ends. Slopes of log m_q on log n (:func:`passage_slopes`) and their
combinations (:func:`combine_slopes`) carry censored points as half-lines; their intervals are delete-one-seed
jackknife Student-t intervals (:func:`jackknife_weights`, :func:`jackknife_bounds`).

**The tolerance-band m*** (:func:`saturations`): the smallest grid m from which every later mean stays within
a Student-t tolerance of the plateau, with a bootstrap over seeds. It can only be a grid point, so its slopes
take lattice values; the stored real-data reports read it, beside m_q.

The data are one array per arm, ``values[s, i, j]``: the metric of seed s at the i-th n and j-th grid m (higher
or lower is better: both rules use only distances). Seeds enter as weight rows ``w[r, s]``: a row's curve is
the weighted mean over seeds (row 0, weights 1/S, is the data; bootstrap or delete-one rows follow).

- Plateau P = mean of the means at the two largest grid m; per seed p_s = the seed's mean at those two m.
- tol = max(t_{S-1, (1+level)/2} sd(p) / sqrt(S), 0.01 |P|) (Student-t half-width at the per-part level).
- m* = the smallest grid m_j with |mean_l - P| <= tol for every l >= j. Right-censored when that j is one of
  the two plateau points or none qualifies: the bound recorded is m_(K-1), the second-largest grid m, meaning
  m* >= m_(K-1), i.e. m* > m_(K-2); left-censored (m* <= m_1) when j is the first grid point.
- The least-squares slope b = sum_i w_i log m*_i, w_i = (u_i - mean u)/sum (u - mean u)^2 with u = log n, is
  linear in the log m* values, so censored points give an interval [b_min, b_max]: a right-censored y >= c
  adds w c to b_min when w > 0 and -inf when w < 0 (symmetrically for b_max and for left censoring).
- Slopes of m* and their differences within :data:`ROUNDING` (1e-9) of 0 are 0: they take lattice values, and
  float rounding must not turn a CI end of 0 into a PASS (rule: PASS if the lower end is > 0).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats as scipy_stats

from crl.stats.summary import jackknife_se

FloatArray = NDArray[np.float64]
UNCENSORED, RIGHT, LEFT, BOTH = 0, 1, 2, 3
CENSOR_NAMES = {
    UNCENSORED: "",
    RIGHT: "right-censored",
    LEFT: "left-censored",
    BOTH: "censored on both sides",
}
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
    """The least-squares slope of log m* on log n with censored points at their bounds, and its interval, with
    lattice rounding snapped to 0 (:func:`snap_zero`)."""
    found = censored_slope(log_n, sat.log_m, sat.censor)
    return SlopeBounds(snap_zero(found.point), snap_zero(found.low), snap_zero(found.high))


def censored_slope(log_n: FloatArray, log_m: FloatArray, censor: NDArray[np.int64]) -> SlopeBounds:
    """The least-squares slope ``b = sum_i w_i log m_i`` per row, ``w_i = (u_i - mean u)/sum (u - mean u)^2``,
    u = log n, with censored points at their bounds (the point) and as half-lines (the interval):
    :func:`censored_linear` with those weights."""
    centred = log_n - log_n.mean()
    return censored_linear(centred / np.sum(centred**2), log_m, censor)


def censored_linear(coefficients: FloatArray, log_m: FloatArray, censor: NDArray[np.int64]) -> SlopeBounds:
    """``sum_i c_i log m_i`` per row with censored points at their bounds (the point) and as half-lines (the
    interval): a right-censored point (log m_i >= its bound) with c_i < 0, or a left-censored one with c_i > 0,
    leaves the lower end at -inf, and symmetrically for the upper end."""
    contribution = coefficients * log_m
    right, left = (censor == RIGHT) | (censor == BOTH), (censor == LEFT) | (censor == BOTH)
    unbounded_low = (right & (coefficients < 0)) | (left & (coefficients > 0))
    unbounded_high = (right & (coefficients > 0)) | (left & (coefficients < 0))
    return SlopeBounds(
        contribution.sum(axis=1),
        np.where(unbounded_low, -np.inf, contribution).sum(axis=1),
        np.where(unbounded_high, np.inf, contribution).sum(axis=1),
    )


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


@dataclass(frozen=True)
class Passages:
    """The first-passage point m_q per (row, n): ``log_m`` is log m_q (censored: log of its bound), ``censor``
    0/1/2 (none/right/left), ``plateau`` the plateau P of the row's seed-mean curve."""

    log_m: FloatArray
    censor: NDArray[np.int64]
    plateau: FloatArray


def _check_q(q: float, name: str) -> None:
    """Refuse a relative tolerance outside (0, 1)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"{name} = {q!r}; pass a relative tolerance strictly between 0 and 1 (0.05 is 5%).")


def _relative_gaps(grid_m: FloatArray, means: FloatArray) -> tuple[FloatArray, FloatArray]:
    """The plateau ``P = (mean_(K-1) + mean_K) / 2`` of each curve and its relative distances
    ``g_j = |mean_j - P| / |P|``.

    Raises:
        ValueError: on a grid that is not increasing or a plateau of 0.
    """
    if grid_m.ndim != 1 or grid_m.size < 3 or not np.all(np.diff(grid_m) > 0):
        raise ValueError("grid_m must be an increasing 1-D grid of at least 3 values of m.")
    plateau = means[:, -2:].mean(axis=1)
    if np.any(plateau == 0.0):
        raise ValueError("a curve's plateau is 0: a relative tolerance q |P| is undefined there.")
    return plateau, np.abs(means - plateau[:, None]) / np.abs(plateau)[:, None]


def first_passage(grid_m: FloatArray, means: FloatArray, q: float) -> Passages:
    """The first-passage point m_q of each curve ``means[r, :]`` over the grid ``grid_m`` (m_1 < ... < m_K).

    With the plateau ``P = (mean_(K-1) + mean_K) / 2`` (the two largest grid m) and the relative distance
    ``g_j = |mean_j - P| / |P|``, m_q is the smallest m at which g comes within q: the first grid index j with
    ``g_j <= q`` among m_1 .. m_(K-1), located between m_(j-1) and m_j by log-log interpolation,

        log m_q = log m_(j-1) + (log g_(j-1) - log q) / (log g_(j-1) - log g_j) (log m_j - log m_(j-1)),

    so that m_q moves continuously with the curve (never by a grid step). Censoring: left (m_q <= m_1, recorded
    as m_1) when ``g_1 <= q``; right (m_q >= m_(K-1), recorded as m_(K-1)) when no m up to m_(K-1) comes within
    q (the curve reaches its tolerance only inside the plateau's own points, or not at all).

    Args:
        grid_m: (K,) increasing grid of m, K >= 3.
        means: (R, K) seed-mean curves, one per row.
        q: the relative tolerance, 0 < q < 1.

    Raises:
        ValueError: on a bad q, a grid that is not increasing, or a plateau of 0 (a relative tolerance of 0 is
            undefined).
    """
    _check_q(q, "q")
    plateau, gap = _relative_gaps(grid_m, means)
    reach = gap[:, :-1] <= q
    k = grid_m.size
    first = np.where(reach.any(axis=1), np.argmax(reach, axis=1), k - 1)
    censor = np.where(first >= k - 1, RIGHT, np.where(first == 0, LEFT, UNCENSORED)).astype(np.int64)
    log_grid = np.log(grid_m)
    log_m = np.where(censor == RIGHT, log_grid[k - 2], log_grid[0])
    inside = np.flatnonzero(censor == UNCENSORED)
    j = first[inside]
    log_before = np.log(gap[inside, j - 1])
    log_after = np.log(np.maximum(gap[inside, j], np.finfo(np.float64).tiny))
    share = (log_before - math.log(q)) / (log_before - log_after)
    log_m[inside] = log_grid[j - 1] + share * (log_grid[j] - log_grid[j - 1])
    return Passages(log_m, censor, plateau)


@dataclass(frozen=True)
class QBand:
    """A band of relative tolerances ``low <= q <= high`` over which log m_q is averaged (:func:`band_passage`).

    Raises:
        ValueError: unless ``0 < low < high < 1``.
    """

    low: float
    high: float

    def __post_init__(self) -> None:
        _check_q(self.low, "band low")
        _check_q(self.high, "band high")
        if not self.low < self.high:
            raise ValueError(f"band = [{self.low}, {self.high}]; pass low < high (a single q is a float).")

    def __str__(self) -> str:
        return f"q in [{self.low:g}, {self.high:g}]"


Tolerance = float | QBand
"""A fixed q (:func:`first_passage`) or a band of q (:func:`band_passage`)."""


def band_passage(grid_m: FloatArray, means: FloatArray, band: QBand) -> Passages:
    """The band form of the first-passage point: log m_q averaged over log q uniform on the band,

        log m_band = (1 / log(q_hi / q_lo)) int_{log q_lo}^{log q_hi} log m_q d(log q),

    with m_q of :func:`first_passage` (the same plateau, distances g_j, interpolation and censored values), computed
    exactly. With the running minimum h_j = min_(i <= j) g_i, the first passage lies between m_(j-1) and m_j for
    every q in [h_j, h_(j-1)) (an empty range unless g_j sets a new minimum), where log m_q is linear in log q; it
    is log m_1 (left-censored) for q >= g_1 and log m_(K-1) (right-censored) for q < h_(K-1). The integral sums
    each range's length times its integrand at the range's midpoint.

    Why a band: a fixed-q m_q jumps by whole grid steps when a curve crosses q more than once (a dip that touches q
    early moves the first passage), so one seed can move it far. Averaged over a band, the q at which each jump
    happens moves continuously with the curve, so log m_band does too: a seed's influence is bounded by its
    influence on the curve.

    Censoring: right (a lower bound) when part of the band is right-censored, left (an upper bound) when part is
    left-censored, :data:`BOTH` when both are.

    Args:
        grid_m: (K,) increasing grid of m, K >= 3.
        means: (R, K) seed-mean curves, one per row.
        band: the tolerances.

    Raises:
        ValueError: on a grid that is not increasing or a plateau of 0.
    """
    plateau, gap = _relative_gaps(grid_m, means)
    log_grid = np.log(grid_m)
    k = grid_m.size
    log_gap = np.log(np.maximum(gap[:, : k - 1], np.finfo(np.float64).tiny))
    running = np.minimum.accumulate(log_gap, axis=1)
    u_low, u_high = math.log(band.low), math.log(band.high)
    left_length = np.clip(u_high - np.maximum(log_gap[:, 0], u_low), 0.0, None)
    right_length = np.clip(np.minimum(running[:, k - 2], u_high) - u_low, 0.0, None)
    total = left_length * log_grid[0] + right_length * log_grid[k - 2]
    for j in range(1, k - 1):
        low = np.maximum(running[:, j], u_low)
        high = np.minimum(running[:, j - 1], u_high)
        length = np.clip(high - low, 0.0, None)
        drop = log_gap[:, j - 1] - log_gap[:, j]
        share = (log_gap[:, j - 1] - (low + high) / 2.0) / np.where(length > 0.0, drop, 1.0)
        total += np.where(
            length > 0.0, length * (log_grid[j - 1] + share * (log_grid[j] - log_grid[j - 1])), 0.0
        )
    right, left = right_length > 0.0, left_length > 0.0
    censor = np.where(right & left, BOTH, np.where(right, RIGHT, np.where(left, LEFT, UNCENSORED)))
    return Passages(total / (u_high - u_low), censor.astype(np.int64), plateau)


def passages(grid_m: FloatArray, means: FloatArray, tolerance: Tolerance) -> Passages:
    """:func:`first_passage` for a fixed q, :func:`band_passage` for a :class:`QBand`."""
    if isinstance(tolerance, QBand):
        return band_passage(grid_m, means, tolerance)
    return first_passage(grid_m, means, tolerance)


def jackknife_weights(n_seeds: int) -> FloatArray:
    """(S + 1, S) seed weights: row 0 is the data (1/S each), row i + 1 leaves seed i out (1/(S - 1) each)."""
    if n_seeds < 3:
        raise ValueError(f"n_seeds = {n_seeds}; a delete-one-seed jackknife needs at least 3 seeds.")
    rows = np.full((n_seeds + 1, n_seeds), 1.0 / (n_seeds - 1))
    rows[0] = 1.0 / n_seeds
    rows[1:][np.eye(n_seeds, dtype=bool)] = 0.0
    return rows


def passages_by_n(
    grids: Sequence[Sequence[float]], values: Sequence[FloatArray], weights: FloatArray, q: Tolerance
) -> Passages:
    """m_q(n) of one arm for every weight row, at a fixed q or averaged over a band of q (:func:`passages`):
    the i-th n on its own grid ``grids[i]`` with per-seed values ``values[i]`` (S, M_i); the curve of row r is the
    weighted seed mean ``weights[r] @ values[i]``."""
    parts = [
        passages(np.asarray(grid, dtype=np.float64), weights @ np.asarray(block, dtype=np.float64), q)
        for grid, block in zip(grids, values, strict=True)
    ]
    return Passages(
        np.stack([p.log_m for p in parts], axis=1),
        np.stack([p.censor for p in parts], axis=1),
        np.stack([p.plateau for p in parts], axis=1),
    )


def passage_slopes(log_n: FloatArray, passages: Passages) -> SlopeBounds:
    """The least-squares slope of log m_q on log n per row, censored points entering through their bounds
    (:func:`censored_slope`; no rounding snap: m_q is continuous, so its slopes are not lattice values)."""
    return censored_slope(log_n, passages.log_m, passages.censor)


def line_prediction(log_n: FloatArray, passages: Passages, log_x: float, reach: float = 1.0) -> SlopeBounds:
    """The least-squares line of log m_q on log n, read at log x, per row, carried a share ``reach`` of the way from
    the measured point at the largest log n (u_max):

        l(x) = mean(log m_q) + b (log x - mean u) = sum_i (1/k + w_i (log x - mean u)) log m_q(n_i),
        log m_hat(x) = (1 - reach) log m_q(u_max) + reach l(x),

    with b and w_i of :func:`censored_slope` (k pilot n). reach = 1 is the line, 0 the no-growth answer (m_q at the
    largest n), 1/2 their geometric mean. Linear in the log m_q, so censored points enter as half-lines
    (:func:`censored_linear`), and a delete-one-seed jackknife of it is an interval (:func:`jackknife_bounds`)."""
    centred = log_n - log_n.mean()
    line = 1.0 / log_n.size + centred / np.sum(centred**2) * (log_x - log_n.mean())
    anchor = np.zeros_like(log_n)
    anchor[int(np.argmax(log_n))] = 1.0
    coefficients = reach * line + (1.0 - reach) * anchor
    return censored_linear(coefficients, passages.log_m, passages.censor)


def passage_interval(passages: Passages, column: int, level: float) -> "JackknifeBounds":
    """The jackknife Student-t interval of log m_q at the n of ``column`` (rows: the data, then one per deleted
    seed); a censored row leaves open the side its censoring allows (left: no lower end, right: no upper end)."""
    log_m = passages.log_m[:, column]
    censor = passages.censor[:, column]
    open_low, open_high = (censor == LEFT) | (censor == BOTH), (censor == RIGHT) | (censor == BOTH)
    rows = SlopeBounds(log_m, np.where(open_low, -np.inf, log_m), np.where(open_high, np.inf, log_m))
    return jackknife_bounds(rows, level)


def combine_slopes(terms: Sequence[tuple[float, SlopeBounds]]) -> SlopeBounds:
    """``sum_i c_i b_i`` of slopes with censoring intervals, by interval arithmetic: a term with c > 0 adds
    c [low, high], one with c < 0 adds c [high, low]."""
    point = sum(c * b.point for c, b in terms)
    low = sum(c * (b.low if c > 0 else b.high) for c, b in terms)
    high = sum(c * (b.high if c > 0 else b.low) for c, b in terms)
    return SlopeBounds(np.asarray(point), np.asarray(low), np.asarray(high))


@dataclass(frozen=True)
class JackknifeBounds:
    """A statistic over jackknife rows (row 0 the data, rows 1..S each leaving one seed out): its value with
    censored points at their bounds, the censoring bounds on the data, and the Student-t interval
    ``[low_0 - t se(low), high_0 + t se(high)]`` on S - 1 degrees of freedom; an end is infinite when the data
    or any delete-one row leaves that end unbounded."""

    point: float
    bound_low: float
    bound_high: float
    ci_low: float
    ci_high: float
    se: float
    level: float
    seeds: int


def jackknife_bounds(statistic: SlopeBounds, level: float) -> JackknifeBounds:
    """The delete-one-seed jackknife Student-t interval of a statistic given on jackknife rows (class doc).

    ``se`` is the jackknife standard error of the point values (``sqrt((S-1)/S sum_i (b_(i) - b_(.))^2)``); the
    interval's lower end uses the rows' lower bounds and its upper end their upper bounds, so a censored point
    widens the interval toward the side its censoring leaves open and is never dropped.
    """
    seeds = statistic.point.size - 1
    t = float(scipy_stats.t.ppf(0.5 + level / 2.0, seeds - 1))

    def end(rows: FloatArray, sign: float) -> float:
        if not np.all(np.isfinite(rows)):
            return sign * math.inf
        return float(rows[0] + sign * t * jackknife_se(rows[1:]))

    point = statistic.point
    return JackknifeBounds(
        point=float(point[0]),
        bound_low=float(statistic.low[0]),
        bound_high=float(statistic.high[0]),
        ci_low=end(statistic.low, -1.0),
        ci_high=end(statistic.high, 1.0),
        se=jackknife_se(point[1:]),
        level=level,
        seeds=seeds,
    )


# The tolerance-band m* of one curve (the stored real-data reports' m*): the curve enters as one n, the seeds as
# weight rows; :func:`saturation_interval` adds a percentile interval by resampling seeds, which describes the
# spread and undercovers with few seeds (docs/theory.md section 7, "Small samples"): it is not a verdict.

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
