"""The held-out error surface err(n, m) of the advisor, fitted with scipy, with intervals over seed replicates.

The form (docs/advisor.md explains the choice from [A]'s bounds)::

    err(n, m) = F(n) * (1 + b (n/n0)^delta m^(-alpha)),   F(n) = a + c (n/n0)^(-beta)

F(n) is the plateau at n (m -> infinity): a floor a plus a data term decaying in n at rate beta. The gain from
negatives is *relative to the plateau at each n*: ``err/F - 1 = b (n/n0)^delta m^(-alpha)`` decays in m at rate
alpha, with a scale that moves with n at rate delta (the n-m interaction). With the tolerance relative to the
plateau, the saturation point is ``m*(n) = (b (n/n0)^delta / tol)^(1/alpha)``, so m* grows like n^(delta/alpha):
[A]'s gap bounds (SCRL ``tau e^{8B/tau}/m + 1/sqrt n``: alpha = 1, delta = 1/2, m* ~ sqrt n; SSCRL ``1/sqrt m +
1/sqrt n``: alpha = delta = 1/2, m* ~ n) are both of this form when the data term dominates the plateau. The fit
keeps ``-1 <= delta/alpha <= 1``: at m = n (every pair a negative, the top of [A]'s grid) the relative excess
``b n0^-delta n^(delta - alpha)`` must not grow with n. n0 is the geometric mean of the pilot's n (it only
conditions the fit).

Fit: robust (soft-L1) least squares on log err (the noise of an error rate is closer to relative than absolute;
a diverged run is down-weighted), multi-start, bounded, analytic Jacobian. Intervals over the S seed replicates
(every cell of a replicate shares its seed), Student-t with S - 1 degrees of freedom (THEORY's rule for few
seeds; a percentile bootstrap over S < 30 seeds undercovers), by one of two methods:

- ``jackknife`` (default): the estimate is the fit to all cells; the variance is the delete-one-seed jackknife's,
  ``(S-1)/S sum_i (theta_(i) - mean)^2``. Fitting six parameters to one seed's cells is unstable when the gain
  from m is small against the seed noise; each jackknife fit sees S - 1 seeds.
- ``per_seed``: one fit per seed, the estimate their mean, the variance ``sd^2 / S``.

Positive scale quantities (c, b, m*, predicted errors) get their interval on the log scale.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from crl.advise.intervals import Interval, Intervals, replicate_interval, t_interval

__all__ = [
    "PARAMETERS",
    "Interval",
    "Intervals",
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
_LOWER = np.array([0.0, -30.0, 0.01, -30.0, -1.0, 0.05])
_UPPER = np.array([10.0, 30.0, 4.0, 30.0, 1.0, 4.0])
"""Bounds of the optimiser's vector (a / scale, log(c / scale), beta, log b, eta = delta / alpha, alpha)."""
_MIN_CELLS = len(PARAMETERS) + 2


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
    a, log_c, beta, log_b, eta, alpha = vector.tolist()
    return SurfaceParams(a * scale, scale * math.exp(log_c), beta, math.exp(log_b), eta * alpha, alpha, n0)


def _log_residuals(
    vector: NDArray[np.float64], n: NDArray[np.float64], m: NDArray[np.float64], log_y: NDArray[np.float64]
) -> NDArray[np.float64]:
    a, log_c, beta, log_b, eta, alpha = vector
    plateau = a + np.exp(log_c) * n ** (-beta)
    gain = np.exp(log_b + alpha * (eta * np.log(n) - np.log(m)))
    return np.log(plateau) + np.log1p(gain) - log_y


def _log_jacobian(
    vector: NDArray[np.float64], n: NDArray[np.float64], m: NDArray[np.float64], log_y: NDArray[np.float64]
) -> NDArray[np.float64]:
    """d residual / d (a, log c, beta, log b, eta, alpha), in closed form."""
    a, log_c, beta, log_b, eta, alpha = vector
    data_term = np.exp(log_c) * n ** (-beta)
    plateau = a + data_term
    gain = np.exp(log_b + alpha * (eta * np.log(n) - np.log(m)))
    share = gain / (1.0 + gain)
    columns = [
        1.0 / plateau,
        data_term / plateau,
        -data_term * np.log(n) / plateau,
        share,
        share * alpha * np.log(n),
        share * (eta * np.log(n) - np.log(m)),
    ]
    return np.stack(columns, axis=1)


def _starts(log_y: NDArray[np.float64]) -> list[NDArray[np.float64]]:
    floor = float(np.exp(log_y.min()))
    starts = []
    for a in (0.0, 0.5 * floor):
        for beta in (0.3, 1.0):
            for alpha in (0.5, 1.0):
                starts.append(np.array([a, math.log(max(floor - a, 1e-3 * floor)), beta, 0.0, 0.5, alpha]))
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


def _parameter(name: str) -> Callable[[SurfaceParams], float]:
    """The function reading one named parameter."""

    def read(params: SurfaceParams) -> float:
        return float(getattr(params, name))

    return read


@dataclass(frozen=True)
class SurfaceFit:
    """The fitted surface, its seed replicates, and what the pilot says about the noise of one run.

    Attributes:
        full: the fit to every seed's cells (the estimate; ``None`` for per-seed intervals).
        replicates: per seed, the fit without that seed (jackknife) or to that seed alone (per seed).
        method: "jackknife" or "per_seed".
        seeds: the replicate seeds.
        level: the level of every interval (e.g. 0.9).
        converged: whether each fit's optimiser reported success (the full fit first, when there is one).
        at_bound: per fit, the parameters that ended on a bound (weakly identified).
        cell_noise: one run's sd of log err (relative seed noise), robustly pooled over the cells.
        cells: the pilot's (n, m, geometric mean error over seeds) rows.
    """

    full: SurfaceParams | None
    replicates: tuple[SurfaceParams, ...]
    method: Intervals
    seeds: tuple[int, ...]
    level: float
    converged: tuple[bool, ...]
    at_bound: tuple[tuple[str, ...], ...]
    cell_noise: float
    cells: tuple[tuple[float, float, float], ...] = field(default=())

    def quantity(
        self,
        fn: Callable[[SurfaceParams], float | NDArray[np.float64]],
        *,
        log: bool = True,
        extra_var: float = 0.0,
    ) -> Interval:
        """The interval over seeds of ``fn(params)`` (log scale when ``log``), by the fit's method."""
        centre = float(fn(self.full)) if self.full is not None else None
        values = [float(fn(p)) for p in self.replicates]
        return replicate_interval(
            centre, values, self.level, method=self.method, log=log, extra_var=extra_var
        )

    def parameter_intervals(self) -> dict[str, Interval]:
        """Every parameter's interval (c and b on the log scale, the others on the linear one)."""
        return {name: self.quantity(_parameter(name), log=name in _LOG_SCALE) for name in PARAMETERS}

    def predict(self, n: float, m: float) -> Interval:
        """The expected error at (n, m), its interval on the log scale."""
        return self.quantity(lambda p: p.error(n, m))

    def predict_measured(self, n: float, m: float, runs: int) -> Interval:
        """The interval for the mean of ``runs`` new seed runs at (n, m): the prediction's uncertainty plus the
        pilot's per-run noise ``cell_noise^2 / runs`` (log scale)."""
        return self.quantity(lambda p: p.error(n, m), extra_var=self.cell_noise**2 / runs)

    def predicted_surface(self, n: ArrayLike, m: ArrayLike) -> NDArray[np.float64]:
        """The point prediction on broadcast arrays of n and m, vectorised (the full fit, or the geometric mean of
        the per-seed fits)."""
        if self.full is not None:
            return self.full.error(n, m)
        logs = np.stack([np.log(p.error(n, m)) for p in self.replicates])
        return np.exp(logs.mean(axis=0))

    def residuals(self) -> NDArray[np.float64]:
        """log(cell mean) - log(predicted) for each pilot cell (relative residuals of the fitted mean)."""
        return np.array(
            [math.log(y) - math.log(float(self.predicted_surface(n, m))) for n, m, y in self.cells]
        )


def fit_seed_surface(
    n: ArrayLike,
    m: ArrayLike,
    seed: ArrayLike,
    error: ArrayLike,
    *,
    level: float = 0.9,
    method: Intervals = "jackknife",
) -> SurfaceFit:
    """Fit the surface with intervals over seed replicates (cells sharing a seed) and pool the per-run noise.

    ``method="jackknife"`` (default): the estimate is the fit to all cells; each replicate is the fit without one
    seed. ``"per_seed"``: one fit per seed, the estimate their mean.

    Raises:
        ValueError: with fewer than 2 seeds (3 for the jackknife), a level outside (0, 1), an unknown method, or
            cells that cannot be fitted (:func:`fit_surface`).
    """
    if not 0 < level < 1:
        raise ValueError(f"level = {level} must lie in (0, 1), e.g. 0.9")
    if method not in ("jackknife", "per_seed"):
        raise ValueError(f"method = {method!r} is not known; use 'jackknife' or 'per_seed'")
    n_arr, m_arr, s_arr, y = (np.asarray(v, dtype=float) for v in (n, m, seed, error))
    seeds = sorted({int(s) for s in s_arr.tolist()})
    needed = 3 if method == "jackknife" else 2
    if len(seeds) < needed:
        raise ValueError(
            f"the pilot has {len(seeds)} seed(s); {method} intervals need at least {needed} (--seeds {needed})"
        )
    n0 = float(np.exp(np.log(n_arr).mean()))
    full = fit_surface(n_arr, m_arr, y, n0=n0) if method == "jackknife" else None
    masks = [(s_arr != s) if method == "jackknife" else (s_arr == s) for s in seeds]
    fits = [fit_surface(n_arr[mask], m_arr[mask], y[mask], n0=n0) for mask in masks]
    every = ([full] if full is not None else []) + fits
    return SurfaceFit(
        full=full.params if full is not None else None,
        replicates=tuple(f.params for f in fits),
        method=method,
        seeds=tuple(seeds),
        level=level,
        converged=tuple(f.converged for f in every),
        at_bound=tuple(f.at_bound for f in every),
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
