"""The held-out error surface err(n, m) of the advisor, fitted per seed with scipy, with Student-t intervals.

The form (docs/advisor.md explains the choice from [A]'s bounds)::

    err(n, m) = F(n) * (1 + b (n/n0)^delta m^(-alpha)),   F(n) = a + c (n/n0)^(-beta)

F(n) is the plateau at n (m -> infinity): a floor a plus a data term decaying in n at rate beta. The gain from
negatives is *relative to the plateau at each n*: ``err/F - 1 = b (n/n0)^delta m^(-alpha)`` decays in m at rate
alpha, with a scale that moves with n at rate delta (the n-m interaction). With the tolerance relative to the
plateau, the saturation point is ``m*(n) = (b (n/n0)^delta / tol)^(1/alpha)``, so m* grows like n^(delta/alpha):
[A]'s gap bounds (SCRL ``tau e^{8B/tau}/m + 1/sqrt n``: alpha = 1, delta = 1/2, m* ~ sqrt n; SSCRL ``1/sqrt m +
1/sqrt n``: alpha = delta = 1/2, m* ~ n) are both of this form when the data term dominates the plateau. n0 is
the geometric mean of the pilot's n (it only conditions the fit).

Fit: robust (soft-L1) least squares on log err (the noise of an error rate is closer to relative than
absolute; a diverged run is down-weighted), multi-start, bounded, one fit per seed replicate (every cell of a
replicate shares its seed). Intervals: Student-t over the S
per-seed estimates (THEORY's rule for few seeds: a percentile bootstrap over S < 30 seeds undercovers);
positive scale quantities (c, b, m*, predicted errors) get their t-interval on the log scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

__all__ = [
    "PARAMETERS",
    "Interval",
    "SurfaceFit",
    "SurfaceParams",
    "fit_seed_surface",
    "fit_surface",
    "t_interval",
]

PARAMETERS: tuple[str, ...] = ("a", "c", "beta", "b", "delta", "alpha")
"""The surface's parameters, in the order of :class:`SurfaceParams`."""

ROBUST_SCALE = 0.1
"""Residual scale of the robust (soft-L1) loss on log err: residuals beyond ~10% count linearly, not squared, so
one diverged or unlucky run does not bend a replicate's surface."""

_LOG_SCALE = frozenset({"c", "b"})
_LOWER = np.array([0.0, -30.0, 0.01, -30.0, -2.0, 0.05])
_UPPER = np.array([10.0, 30.0, 4.0, 30.0, 4.0, 4.0])
_MIN_CELLS = len(PARAMETERS) + 2


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval at ``level`` (e.g. 0.9 for a 90% interval)."""

    estimate: float
    low: float
    high: float
    level: float

    def contains(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return self.low <= value <= self.high

    def as_dict(self) -> dict[str, float]:
        """``{"estimate", "low", "high", "level"}``."""
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "level": self.level}


def t_interval(values: ArrayLike, level: float, *, log: bool = False, extra_var: float = 0.0) -> Interval:
    """Student-t interval of the mean of S replicates: ``mean +- t_{S-1,(1+level)/2} sqrt(sd^2/S + extra_var)``.

    With ``log``, the interval is computed on log(values) and mapped back (a geometric mean with a multiplicative
    interval). ``extra_var`` adds a variance on the same scale (e.g. the noise of a measured mean).

    Raises:
        ValueError: for fewer than two values, non-finite values, or non-positive values with ``log``.
    """
    v = np.asarray(values, dtype=float)
    if v.size < 2 or not np.isfinite(v).all():
        raise ValueError(f"values must be at least two finite replicates, got {v.tolist()}")
    if log:
        if (v <= 0).any():
            raise ValueError(f"values must be > 0 for a log-scale interval, got {v.tolist()}")
        v = np.log(v)
    half = stats.t.ppf((1 + level) / 2, v.size - 1) * math.sqrt(v.var(ddof=1) / v.size + extra_var)
    centre = float(v.mean())
    ends = [centre, centre - float(half), centre + float(half)]
    if log:
        ends = [math.exp(e) for e in ends]
    return Interval(ends[0], ends[1], ends[2], level)


@dataclass(frozen=True)
class SurfaceParams:
    """One fitted surface (module docstring); ``n0`` is the reference n of the fit."""

    a: float
    c: float
    beta: float
    b: float
    delta: float
    alpha: float
    n0: float

    def plateau(self, n: ArrayLike) -> NDArray[np.float64]:
        """``F(n) = a + c (n/n0)^(-beta)``, the error at m -> infinity."""
        return self.a + self.c * (np.asarray(n, dtype=float) / self.n0) ** (-self.beta)

    def relative_gain(self, n: ArrayLike, m: ArrayLike) -> NDArray[np.float64]:
        """``err/F - 1 = b (n/n0)^delta m^(-alpha)``: how far above its plateau the error lies at m."""
        ratio = np.asarray(n, dtype=float) / self.n0
        return self.b * ratio**self.delta * np.asarray(m, dtype=float) ** (-self.alpha)

    def error(self, n: ArrayLike, m: ArrayLike) -> NDArray[np.float64]:
        """``err(n, m) = F(n) (1 + b (n/n0)^delta m^(-alpha))``."""
        return self.plateau(n) * (1.0 + self.relative_gain(n, m))

    def saturation(self, n: float, tol: float) -> float:
        """C6's m*: the smallest m with ``err(n, m) - F(n) <= tol``, i.e. ``(F(n) b (n/n0)^delta / tol)^(1/alpha)``
        (at least 1)."""
        excess_at_one = float(self.plateau(n) * self.relative_gain(n, 1.0))
        return max(1.0, (excess_at_one / tol) ** (1.0 / self.alpha)) if excess_at_one > 0 else 1.0

    def as_dict(self) -> dict[str, float]:
        """The parameters by name (and n0)."""
        return {name: float(getattr(self, name)) for name in (*PARAMETERS, "n0")}


def _params_of(vector: NDArray[np.float64], scale: float, n0: float) -> SurfaceParams:
    a, log_c, beta, log_b, delta, alpha = vector.tolist()
    return SurfaceParams(a * scale, scale * math.exp(log_c), beta, math.exp(log_b), delta, alpha, n0)


def _log_residuals(
    vector: NDArray[np.float64], n: NDArray[np.float64], m: NDArray[np.float64], log_y: NDArray[np.float64]
) -> NDArray[np.float64]:
    a, log_c, beta, log_b, delta, alpha = vector
    plateau = a + np.exp(log_c) * n ** (-beta)
    gain = np.exp(log_b + delta * np.log(n) - alpha * np.log(m))
    return np.log(plateau) + np.log1p(gain) - log_y


def _log_jacobian(
    vector: NDArray[np.float64], n: NDArray[np.float64], m: NDArray[np.float64], log_y: NDArray[np.float64]
) -> NDArray[np.float64]:
    """d residual / d (a, log c, beta, log b, delta, alpha), in closed form."""
    a, log_c, beta, log_b, delta, alpha = vector
    data_term = np.exp(log_c) * n ** (-beta)
    plateau = a + data_term
    gain = np.exp(log_b + delta * np.log(n) - alpha * np.log(m))
    share = gain / (1.0 + gain)
    columns = [
        1.0 / plateau,
        data_term / plateau,
        -data_term * np.log(n) / plateau,
        share,
        share * np.log(n),
        -share * np.log(m),
    ]
    return np.stack(columns, axis=1)


def _starts(log_y: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    floor = float(np.exp(log_y.min()))
    starts = []
    for a in (0.0, 0.5 * floor):
        for beta in (0.3, 1.0):
            for alpha in (0.5, 1.0):
                starts.append(np.array([a, math.log(max(floor - a, 1e-3 * floor)), beta, 0.0, 0.25, alpha]))
    return starts


@dataclass(frozen=True)
class _OneFit:
    params: SurfaceParams
    converged: bool
    at_bound: tuple[str, ...]


def fit_surface(n: ArrayLike, m: ArrayLike, error: ArrayLike, *, n0: float) -> _OneFit:
    """Least-squares fit of log err(n, m) to log ``error`` (one replicate), best of a grid of starts.

    Raises:
        ValueError: if fewer than 8 cells, fewer than 3 distinct n or m, or an error is not finite and > 0.
    """
    n_arr, m_arr, y = (np.asarray(v, dtype=float) for v in (n, m, error))
    _check_cells(n_arr, m_arr, y)
    scale = float(np.exp(np.log(y).mean()))
    log_y = np.log(y / scale)
    ratio = n_arr / n0
    best: optimize.OptimizeResult | None = None
    for start in _starts(log_y):
        result = optimize.least_squares(
            _log_residuals,
            np.clip(start, _LOWER, _UPPER),
            jac=_log_jacobian,
            args=(ratio, m_arr, log_y),
            bounds=(_LOWER, _UPPER),
            loss="soft_l1",
            f_scale=ROBUST_SCALE,
        )
        if best is None or result.cost < best.cost:
            best = result
    assert best is not None
    width = _UPPER - _LOWER
    near = (best.x - _LOWER < 1e-4 * width) | (_UPPER - best.x < 1e-4 * width)
    near[0] = False
    at_bound = tuple(name for name, flag in zip(PARAMETERS, near, strict=True) if flag)
    return _OneFit(_params_of(best.x, scale, n0), bool(best.success), at_bound)


def _check_cells(n: NDArray[np.float64], m: NDArray[np.float64], y: NDArray[np.float64]) -> None:
    if not (n.shape == m.shape == y.shape) or n.ndim != 1:
        raise ValueError(f"n, m and error must be 1-d of one length, got {n.shape}, {m.shape}, {y.shape}")
    if n.size < _MIN_CELLS or np.unique(n).size < 3 or np.unique(m).size < 3:
        raise ValueError(
            f"a surface fit needs at least {_MIN_CELLS} cells with 3 distinct n and 3 distinct m, got {n.size} "
            f"cells, n in {sorted(set(n.tolist()))}, m in {sorted(set(m.tolist()))}; add pilot cells"
        )
    if not (np.isfinite(y).all() and (y > 0).all()):
        raise ValueError(f"every held-out error must be finite and > 0, got {y.tolist()}")
    if (n < 1).any() or (m < 1).any():
        raise ValueError("every n and m must be >= 1")


@dataclass(frozen=True)
class SurfaceFit:
    """Per-seed fits of the surface and what the pilot says about their noise.

    Attributes:
        per_seed: one :class:`SurfaceParams` per seed replicate.
        seeds: the replicate seeds.
        level: the level of every interval (e.g. 0.9).
        converged: whether each seed's optimiser reported success.
        at_bound: per seed, the parameters that ended on a bound (weakly identified).
        cell_noise: one run's sd of log err (relative seed noise), robustly pooled over the cells.
        cells: the pilot's (n, m, mean error over seeds) rows.
    """

    per_seed: tuple[SurfaceParams, ...]
    seeds: tuple[int, ...]
    level: float
    converged: tuple[bool, ...]
    at_bound: tuple[tuple[str, ...], ...]
    cell_noise: float
    cells: tuple[tuple[float, float, float], ...] = field(default=())

    def values(self, fn: str) -> NDArray[np.float64]:
        """A parameter's per-seed values."""
        return np.array([getattr(p, fn) for p in self.per_seed])

    def parameter_intervals(self) -> dict[str, Interval]:
        """Every parameter's Student-t interval over seeds (c and b on the log scale; a on the linear one)."""
        out = {}
        for name in PARAMETERS:
            values = self.values(name)
            log = name in _LOG_SCALE and bool((values > 0).all())
            out[name] = t_interval(values, self.level, log=log)
        return out

    def predict(self, n: float, m: float) -> Interval:
        """The expected error at (n, m): geometric mean of the per-seed predictions, t-interval on the log scale."""
        return t_interval([float(p.error(n, m)) for p in self.per_seed], self.level, log=True)

    def predict_measured(self, n: float, m: float, runs: int) -> Interval:
        """The interval for the mean of ``runs`` new seed runs at (n, m): the prediction's seed spread plus the
        pilot's per-run noise ``cell_noise^2 / runs`` (log scale)."""
        predictions = [float(p.error(n, m)) for p in self.per_seed]
        return t_interval(predictions, self.level, log=True, extra_var=self.cell_noise**2 / runs)

    def predicted_surface(self, n: ArrayLike, m: ArrayLike) -> NDArray[np.float64]:
        """The point prediction (geometric mean over seeds) on broadcast arrays of n and m, vectorised."""
        logs = np.stack([np.log(p.error(n, m)) for p in self.per_seed])
        return np.exp(logs.mean(axis=0))

    def quantity(self, fn: object, *, log: bool = True) -> Interval:
        """The t-interval over seeds of ``fn(params)`` for a callable ``fn`` of one :class:`SurfaceParams`."""
        assert callable(fn)
        return t_interval([float(fn(p)) for p in self.per_seed], self.level, log=log)

    def residuals(self) -> NDArray[np.float64]:
        """log(cell mean) - log(predicted) for each pilot cell (relative residuals of the fitted mean)."""
        return np.array([math.log(y) - math.log(self.predict(n, m).estimate) for n, m, y in self.cells])


def fit_seed_surface(
    n: ArrayLike, m: ArrayLike, seed: ArrayLike, error: ArrayLike, *, level: float = 0.9
) -> SurfaceFit:
    """Fit the surface once per seed replicate (cells sharing a seed) and pool the pilot's seed noise.

    Raises:
        ValueError: with fewer than 2 seeds, a level outside (0, 1), or a replicate that cannot be fitted
            (:func:`fit_surface`).
    """
    if not 0 < level < 1:
        raise ValueError(f"level = {level} must lie in (0, 1), e.g. 0.9")
    n_arr, m_arr, s_arr, y = (np.asarray(v, dtype=float) for v in (n, m, seed, error))
    seeds = sorted({int(s) for s in s_arr.tolist()})
    if len(seeds) < 2:
        raise ValueError(
            f"the pilot has {len(seeds)} seed(s); fit a surface with at least 2 (intervals over seeds)"
        )
    n0 = float(np.exp(np.log(n_arr).mean()))
    fits = []
    for s in seeds:
        mask = s_arr == s
        fits.append(fit_surface(n_arr[mask], m_arr[mask], y[mask], n0=n0))
    return SurfaceFit(
        per_seed=tuple(f.params for f in fits),
        seeds=tuple(seeds),
        level=level,
        converged=tuple(f.converged for f in fits),
        at_bound=tuple(f.at_bound for f in fits),
        cell_noise=_cell_noise(n_arr, m_arr, y),
        cells=_cell_means(n_arr, m_arr, y),
    )


def _cell_groups(n: NDArray[np.float64], m: NDArray[np.float64]) -> list[tuple[float, float]]:
    return sorted({(float(a), float(b)) for a, b in zip(n.tolist(), m.tolist(), strict=True)})


def _cell_noise(n: NDArray[np.float64], m: NDArray[np.float64], y: NDArray[np.float64]) -> float:
    """One run's sd of log err, robustly: the median over cells of ``s_c^2 / q_c``, s_c^2 the within-cell sample
    variance over k_c seeds and ``q_c = median(chi^2_{k_c - 1}) / (k_c - 1)`` (its median relative to sigma^2 under
    normal noise), square-rooted; a single wild run moves one cell's s_c^2, not the median."""
    ratios = []
    for cell_n, cell_m in _cell_groups(n, m):
        logs = np.log(y[(n == cell_n) & (m == cell_m)])
        if logs.size >= 2:
            dof = logs.size - 1
            ratios.append(float(logs.var(ddof=1)) / (stats.chi2.median(dof) / dof))
    return math.sqrt(float(np.median(ratios))) if ratios else 0.0


def _cell_means(
    n: NDArray[np.float64], m: NDArray[np.float64], y: NDArray[np.float64]
) -> tuple[tuple[float, float, float], ...]:
    """(n, m, geometric mean of the error over seeds) per cell."""
    return tuple(
        (cell_n, cell_m, float(np.exp(np.log(y[(n == cell_n) & (m == cell_m)]).mean())))
        for cell_n, cell_m in _cell_groups(n, m)
    )
