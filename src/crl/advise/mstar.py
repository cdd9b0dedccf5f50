"""m*(N) from a small pilot: how many negatives at the user's n, and how that moves with more data
(docs/advisor_mstar.md; [A]'s m*(n)).

The pilot: three consecutive doublings of n, {N/16, N/8, N/4}, or one or more doublings lower where that costs
more than :data:`COST_SHARE_LIMIT` of the grid at N (:func:`mstar_ns`, :func:`choose_pilot`), at each n the m grid
of the powers of two below n and n itself (:func:`m_grid`), S seed runs per cell. With err(n, m) the seed-mean
held-out error:

- m_q(n): the first m at which err(n, .) comes within q |P| of its plateau P (the mean at the two largest m),
  log-log interpolated (:func:`crl.stats.saturation.first_passage`); on the score's scale (:data:`SCALES`) the
  curve is the score s = 1 - err and the tolerance q P_s, P_s = 1 - P;
- m_band(n): log m_q averaged over log q uniform on :data:`BAND` (:func:`crl.stats.saturation.band_passage`), the
  judged form; the fixed :data:`FIXED_QS` beside it;
- the slope b of log m_band on log n, and the least-squares line read at N, 2N and 4N
  (:func:`crl.stats.saturation.line_prediction`), each with its delete-one-seed jackknife Student-t interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from crl.stats.saturation import (
    BOTH,
    CENSOR_NAMES,
    LEFT,
    RIGHT,
    UNCENSORED,
    JackknifeBounds,
    QBand,
    Tolerance,
    jackknife_bounds,
    jackknife_weights,
    line_prediction,
    passage_interval,
    passage_slopes,
    passages_by_n,
)

__all__ = [
    "BAND",
    "COST_SHARE_LIMIT",
    "FIXED_QS",
    "LEVEL",
    "SCALES",
    "Interval",
    "MstarPrediction",
    "PilotPassage",
    "Scale",
    "SeedErrors",
    "band_at",
    "check_scale",
    "choose_pilot",
    "determined",
    "m_grid",
    "mstar_ns",
    "on_scale",
    "passage_at",
    "pilot_points",
    "plateau_error",
    "predict_mstar",
    "span",
]

BAND = QBand(0.025, 0.10)
"""The judged tolerance band (geometric centre 5% of the plateau), registered in docs/advisor_mstar.md."""
FIXED_QS = (0.01, 0.02, 0.05)
"""Fixed tolerances printed beside the band (descriptive)."""
LEVEL = 0.95
PILOT_DIVISORS = (16, 8, 4)
"""The pilot's n: N/16, N/8, N/4."""
SMALLEST_PILOT_N = 32
"""N/16 must hold at least this many pairs (a curve of at least 6 grid m)."""
COST_SHARE_LIMIT = 0.10
"""The pilot may cost at most this share of the same grid at N alone (processed samples)."""
GROWTHS = (1, 2, 4)
"""The predictions are at N, 2N and 4N."""
WIDEST_ANSWER = 100.0
"""A prediction whose 95% interval spans more than this factor (:func:`span`) is not stated as a number: the answer
says the pilot did not pin m* down, with the interval."""

SeedErrors = Mapping[tuple[int, int], Mapping[int, float]]
"""(n, m) -> seed -> held-out error of that seed's run."""

Scale = Literal["error", "score"]
SCALES: tuple[Scale, ...] = ("error", "score")
"""The scale m_q's tolerance is read on: ``error``, q |P| of the error's plateau (check 2 of
docs/advisor_mstar.md, the default); ``score``, q P_s of the score's plateau, s = 1 - err, for rate metrics
(check 3)."""


def check_scale(scale: str, metric: str) -> Scale:
    """``scale`` as a :data:`Scale`, the score's only for a rate metric (its score 1 - err is a rate too).

    Raises:
        ValueError: naming ``--mstar-scale`` for a scale not in :data:`SCALES`, or ``score`` with ``excess_risk``.
    """
    if scale == "error":
        return "error"
    if scale != "score":
        raise ValueError(f"--mstar-scale {scale!r}: give one of {', '.join(SCALES)}")
    if metric == "excess_risk":
        raise ValueError(
            "--mstar-scale score needs a rate metric (1 - excess_risk is no score): use --mstar-scale error or "
            "--metric with a rate (recall_error, ndcg_error, knn_error)"
        )
    return "score"


def on_scale(errors: SeedErrors, scale: Scale) -> SeedErrors:
    """The curves m_q is read from: the errors themselves, or the scores 1 - err."""
    if scale == "error":
        return errors
    return {cell: {seed: 1.0 - value for seed, value in seeds.items()} for cell, seeds in errors.items()}


def mstar_ns(n_full: int, lower: int = 0) -> tuple[int, ...]:
    """The pilot's n: N/16, N/8, N/4 (integer division), each divided by 2^lower.

    Raises:
        ValueError: naming ``[data] n_train`` when the smallest pilot n < :data:`SMALLEST_PILOT_N`.
    """
    divisors = tuple(divisor * 2**lower for divisor in PILOT_DIVISORS)
    if n_full // divisors[0] < SMALLEST_PILOT_N:
        raise ValueError(
            f"n = {n_full}: the m* pilot trains at N/{divisors[0]}, which needs N >= {divisors[0] * SMALLEST_PILOT_N}; "
            "set [data] n_train higher (e.g. --set data.n_train=16000) or use the doubling pilot (without --mstar)"
        )
    return tuple(n_full // divisor for divisor in divisors)


def choose_pilot(n_full: int, share_of: Callable[[tuple[int, ...]], float]) -> tuple[tuple[int, ...], float]:
    """The first pilot n (:func:`mstar_ns` at lower = 0, 1, ...) whose cost share ``share_of(ns)`` is at most
    :data:`COST_SHARE_LIMIT`, with that share.

    Raises:
        ValueError: when no pilot with its smallest n >= :data:`SMALLEST_PILOT_N` is cheap enough, naming the fix.
    """
    mstar_ns(n_full)
    lower, shares = 0, []
    while n_full // (PILOT_DIVISORS[0] * 2**lower) >= SMALLEST_PILOT_N:
        ns = mstar_ns(n_full, lower)
        share = share_of(ns)
        if share <= COST_SHARE_LIMIT:
            return ns, share
        shares.append(f"{share:.1%} at n = {', '.join(map(str, ns))}")
        lower += 1
    raise ValueError(
        f"every m* pilot would cost more than {COST_SHARE_LIMIT:.0%} of the same grid at N ({'; '.join(shares)}): "
        "lower [data] batch_size or use the doubling pilot (without --mstar)"
    )


def pilot_points(ns: Sequence[int]) -> tuple[tuple[int, int], ...]:
    """Every pilot cell (n, m) of the pilot n ``ns``."""
    return tuple((n, m) for n in ns for m in m_grid(n))


def m_grid(n: int) -> tuple[int, ...]:
    """The m of one pilot n: every power of two below n, then n itself."""
    if n < 2:
        raise ValueError(f"n = {n}; an m grid needs n >= 2.")
    powers = [2**k for k in range(int(math.log2(n)) + 1) if 2**k < n]
    return (*powers, n)


@dataclass(frozen=True)
class Interval:
    """A value with its 95% interval (an end that censoring leaves open is infinite) and its censoring in words."""

    value: float
    low: float
    high: float
    censoring: str = ""

    @classmethod
    def of_log(cls, bounds: JackknifeBounds, censoring: str | None = None) -> Interval:
        """The exponentials of a jackknife interval on the log scale; its censoring read off its bounds on the data
        unless given (an open upper bound: the value is a lower bound, right-censored)."""
        if censoring is None:
            open_low, open_high = math.isinf(bounds.bound_low), math.isinf(bounds.bound_high)
            censoring = CENSOR_NAMES[
                BOTH if open_low and open_high else RIGHT if open_high else LEFT if open_low else UNCENSORED
            ]
        return cls(math.exp(bounds.point), math.exp(bounds.ci_low), math.exp(bounds.ci_high), censoring)

    def text(self, digits: int = 3) -> str:
        """``value [low, high]`` with censoring named."""
        mark = {"right-censored": ">=", "left-censored": "<="}.get(self.censoring, "")
        return f"{mark}{self.value:.{digits}g} [{self.low:.{digits}g}, {self.high:.{digits}g}]"


@dataclass(frozen=True)
class PilotPassage:
    """One pilot n: m_band with its interval, and the fixed-q m_q beside it."""

    n: int
    m_band: Interval
    fixed: dict[float, Interval]


@dataclass(frozen=True)
class MstarPrediction:
    """The pilot's m_band(n), the slope of log m_band on log n (per doubling of n, m* is multiplied by 2^slope), and
    m_band predicted at each of ``at``'s n."""

    n_full: int
    seeds: int
    pilots: tuple[PilotPassage, ...]
    slope: Interval
    at: dict[int, Interval]
    scale: Scale = "error"

    def growth_per_doubling(self) -> Interval:
        """2^slope: the factor one doubling of the data multiplies m* by."""
        return Interval(2.0**self.slope.value, 2.0**self.slope.low, 2.0**self.slope.high)


def _matrices(errors: SeedErrors, ns: Sequence[int]) -> tuple[list[list[int]], list[np.ndarray], int]:
    """Per pilot n its m grid and the (S, M) matrix of the seeds that finished every cell of every n.

    Raises:
        ValueError: when a pilot n has fewer than 3 m, or fewer than 3 seeds finished every cell.
    """
    grids = [sorted(m for (n_cell, m) in errors if n_cell == n) for n in ns]
    for n, grid in zip(ns, grids, strict=True):
        if len(grid) < 3:
            raise ValueError(f"pilot n = {n} has {len(grid)} m measured; m_q needs at least 3.")
    seed_sets = [set(errors[(n, m)]) for n, grid in zip(ns, grids, strict=True) for m in grid]
    seeds = sorted(set.intersection(*seed_sets))
    if len(seeds) < 3:
        raise ValueError(
            f"{len(seeds)} seed(s) finished every pilot cell; the jackknife intervals need at least 3 (--seeds)."
        )
    matrices = [
        np.array([[errors[(n, m)][s] for m in grid] for s in seeds], dtype=np.float64)
        for n, grid in zip(ns, grids, strict=True)
    ]
    return grids, matrices, len(seeds)


def _pilot_passages(
    ns: Sequence[int], grids: list[list[int]], matrices: list[np.ndarray], rows: np.ndarray
) -> tuple[PilotPassage, ...]:
    """m_band and the fixed-q m_q with their intervals at every pilot n."""
    found = {tolerance: passages_by_n(grids, matrices, rows, tolerance) for tolerance in (BAND, *FIXED_QS)}

    def interval(tolerance: Tolerance, column: int) -> Interval:
        passages = found[tolerance]
        return Interval.of_log(
            passage_interval(passages, column, LEVEL), CENSOR_NAMES[int(passages.censor[0, column])]
        )

    return tuple(
        PilotPassage(n, interval(BAND, i), {q: interval(q, i) for q in FIXED_QS}) for i, n in enumerate(ns)
    )


def passage_at(errors: SeedErrors, n: int, scale: Scale = "error") -> PilotPassage:
    """m_band and the fixed-q m_q measured at one n (a truth point of the checks) on ``scale``, with their jackknife
    intervals over the seeds that finished every m there."""
    grids, matrices, seeds = _matrices(on_scale(errors, scale), (n,))
    return _pilot_passages((n,), grids, matrices, jackknife_weights(seeds))[0]


def plateau_error(errors: SeedErrors, n: int) -> float:
    """P(n): the mean error over seeds at the two largest measured m of n, the plateau m_q is measured against."""
    top = sorted(m for n_cell, m in errors if n_cell == n)[-2:]
    values = [value for m in top for value in errors[(n, m)].values()]
    return sum(values) / len(values)


def band_at(errors: SeedErrors, n: int, scale: Scale = "error") -> Interval:
    """m_band measured at one n on ``scale`` (:func:`passage_at`)."""
    return passage_at(errors, n, scale).m_band


def predict_mstar(
    errors: SeedErrors,
    n_full: int,
    *,
    ns: Sequence[int] | None = None,
    reverse_growth: bool = False,
    scale: Scale = "error",
    reach: float = 1.0,
) -> MstarPrediction:
    """m_band at each pilot n, its slope on log n, and m_band predicted at N, 2N and 4N (module docstring).

    Args:
        errors: (n, m) -> seed -> error, for every pilot cell (seeds aligned across cells).
        n_full: the user's N.
        ns: the pilot n (default :func:`mstar_ns` of N, the pilot at no cost cap).
        reverse_growth: the registered negative control: each pilot n's curve is paired with the pilot n in
            reverse order, so the fitted slope is -b.
        scale: the scale of the tolerance (:data:`SCALES`).
        reach: the share of the line's growth past the largest pilot n that the prediction carries
            (:func:`crl.stats.saturation.line_prediction`): 1 is check 2's line (the advisor's answer), 1/2 check 5's
            half-slope predictor (docs/advisor_mstar.md), 0 the no-growth answer.

    Raises:
        ValueError: on fewer than 2 pilot n, a pilot n with fewer than 3 m, or fewer than 3 complete seeds.
    """
    pilot_ns = tuple(ns) if ns is not None else mstar_ns(n_full)
    if len(pilot_ns) < 2:
        raise ValueError(f"{len(pilot_ns)} pilot n; a growth in n needs at least 2.")
    grids, matrices, seeds = _matrices(on_scale(errors, scale), pilot_ns)
    rows = jackknife_weights(seeds)
    band = passages_by_n(grids, matrices, rows, BAND)
    paired = pilot_ns[::-1] if reverse_growth else pilot_ns
    log_n = np.log(np.asarray(paired, dtype=np.float64))
    slope = jackknife_bounds(passage_slopes(log_n, band), LEVEL)
    at = {
        growth * n_full: Interval.of_log(
            jackknife_bounds(line_prediction(log_n, band, math.log(growth * n_full), reach), LEVEL)
        )
        for growth in GROWTHS
    }
    return MstarPrediction(
        n_full,
        seeds,
        _pilot_passages(pilot_ns, grids, matrices, rows),
        Interval(slope.point, slope.ci_low, slope.ci_high),
        at,
        scale,
    )


def _count(value: float) -> str:
    """A count of negatives in words: rounded to 3 significant figures, thousands separated."""
    if not math.isfinite(value):
        return "unbounded"
    return f"{float(f'{value:.3g}'):,.0f}" if value >= 10 else f"{value:.2g}"


def _range(interval: Interval) -> str:
    return f"[{_count(interval.low)}, {_count(interval.high)}]"


def span(interval: Interval) -> float:
    """The factor an interval spans: high / low with both ends finite and positive; with one end open, the square of
    the factor from the value to the closed end (the span it would have if symmetric on the log scale); infinite
    with both ends open."""
    low_open, high_open = interval.low <= 0, math.isinf(interval.high)
    if low_open and high_open:
        return math.inf
    if low_open:
        return (interval.high / interval.value) ** 2
    if high_open:
        return (interval.value / interval.low) ** 2
    return interval.high / interval.low


def determined(interval: Interval) -> bool:
    """Whether a prediction is stated as a number: its :func:`span` is at most :data:`WIDEST_ANSWER`."""
    return interval.censoring != CENSOR_NAMES[BOTH] and span(interval) <= WIDEST_ANSWER


def answer_lines(prediction: MstarPrediction, *, shared: bool, scope: str) -> list[str]:
    """The prediction in the user's words, the recommendation first: the batch or pool size for shared
    negatives, the count per anchor for per-anchor ones, what doubling the data does to it, and the pilot."""
    unit = (
        "a batch (or shared pool) of about {m} negatives for in-batch / shared negatives"
        if shared
        else "about {m} negatives per anchor (independent or hard negatives)"
    )
    lines = []
    for n, interval in prediction.at.items():
        where = (
            "at your n" if n == prediction.n_full else f"at {n // prediction.n_full}x your data (n = {n:,})"
        )
        if not determined(interval):
            lines.append(
                f"m* {where}{' = ' + format(n, ',') if n == prediction.n_full else ''}: not determined by this "
                f"pilot (95% interval {_range(interval)}, spanning more than {WIDEST_ANSWER:.0f}x); "
                "its curves are flat within the band from the smallest m, or cross it erratically: more seeds "
                "(--seeds) or a larger n (--set data.n_train=...) move the pilot to where m* is measurable"
            )
            continue
        bound = {"right-censored": "at least ", "left-censored": "at most "}.get(interval.censoring, "")
        beyond = " (more than n: negatives help up to every item)" if interval.value > n else ""
        lines.append(
            f"m* {where}{' = ' + format(n, ',') if n == prediction.n_full else ''}: "
            f"{bound}{unit.format(m=_count(interval.value))} {_range(interval)}{beyond}"
        )
    growth = prediction.growth_per_doubling()
    lines.append(
        f"Each doubling of the data multiplies m* by {growth.value:.2f} [{growth.low:.2f}, {growth.high:.2f}] "
        f"(slope of log m* on log n {prediction.slope.text()}); past m* only more data lowers the error."
    )
    lines.append(
        "How far to trust it: the intervals hold the pilot's seed noise, not the error of carrying its line past the "
        "pilot's n. In its registered checks it failed: the line missed the measured m* by more than 2x at a third "
        "or more of the points of every check, overshooting where m* grows more slowly past the pilot and "
        "undershooting where it grows faster (docs/advisor_mstar.md, checks 2-5). Measure m* at your n before "
        f"relying on it: crl advise CONFIG --mstar-truth {prediction.n_full}."
    )
    pilots = ", ".join(f"n = {p.n:,}: {p.m_band.text()}" for p in prediction.pilots)
    lines.append(
        f"Measured m* at the pilot's n ({prediction.seeds} seeds; 95% delete-one-seed jackknife intervals): {pilots}."
    )
    for q in FIXED_QS:
        fixed = ", ".join(f"{p.fixed[q].text()}" for p in prediction.pilots)
        lines.append(f"  fixed q = {q:.0%} (descriptive): {fixed}")
    curve = "error" if prediction.scale == "error" else "score (1 - error)"
    lines.append(
        f"m* is the first m whose {curve} comes within q of its plateau, log-averaged over q in [{BAND.low:.1%}, "
        f"{BAND.high:.0%}]. Scope: {scope}."
    )
    return lines
