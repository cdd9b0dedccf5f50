"""The series design shared by C7 and C8: (phi, tau) series over a doubling k grid, their cells and slope fits.

Each series is one (phi, tau) of :data:`SERIES` on ``VMFUniform(3, KAPPA)``, measured at every k of the
fidelity's :class:`Plan`; each (series, form) is reduced to a log-log slope of |gap| against k with a bootstrap
interval at the claim's level shared by all (series, form) pairs (Bonferroni).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

from crl._vocab import KernelForm
from crl.claims._sphere_kernel import DIM, GapCell
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec, Points, points
from crl.claims.verdict import Statistic, Verdict, bonferroni_level, verdict_contains
from crl.stats import SlopeFit, loglog_slope
from crl.sweep import Cell

KAPPA = 2.0
"""Concentration of the positive kernel M(z, .) = vMF(z, kappa) of C7 and C8."""
SERIES: tuple[tuple[str, float], ...] = (("identity", 1.0), ("linear", 0.5))
"""The (phi, tau) series of C7 and C8."""
FORM_ORDER: tuple[KernelForm, ...] = ("dcl", "infonce")
"""The forms measured in every cell, in the order of the fits and tables."""

CellT = TypeVar("CellT", bound=GapCell)


@dataclass(frozen=True)
class Plan:
    """Sizes of one fidelity: draws per cell and the k grid."""

    n_draws: int
    ks: tuple[int, ...]


def doubling(low: int, high: int) -> tuple[int, ...]:
    """``(low, 2 low, 4 low, ..., high)`` for powers-of-two multiples."""
    values = [low]
    while values[-1] < high:
        values.append(2 * values[-1])
    return tuple(values)


PLANS = {
    Fidelity.QUICK: Plan(2000, doubling(128, 2048)),
    Fidelity.STANDARD: Plan(6000, doubling(128, 8192)),
    Fidelity.FULL: Plan(24000, doubling(128, 16384)),
}
"""Draws per cell and k grids. The grids start at k = 128, where crl's next-order term (about 0.6/k of the
leading a/k here) no longer biases the fitted slope beyond the standard-fidelity CI width (docs/decisions.md)."""


@dataclass(frozen=True)
class CellKey:
    """Where a cell sits in the design: its phi, tau and k."""

    phi: str
    tau: float
    k: int


@dataclass(frozen=True)
class SeriesFit:
    """A measured series (one phi, tau, form) reduced to the rule's parts."""

    label: str
    ks: tuple[int, ...]
    values: tuple[float, ...]
    ses: tuple[float, ...]
    fit: SlopeFit
    one_sign: bool


@dataclass(frozen=True)
class SeriesRun(Generic[CellT]):
    """Every cell of the design and every (series, form)'s slope fit.

    Attributes:
        cells: the typed result of each (phi, tau, k) cell.
        fits: one fit per (series, form), in the order SERIES x FORM_ORDER.
    """

    cells: Mapping[CellKey, CellT]
    fits: tuple[SeriesFit, ...]

    def cell(self, kind: str, tau: float, k: int) -> CellT:
        """The result of the (phi = ``kind``, ``tau``, ``k``) cell."""
        return self.cells[CellKey(kind, tau, k)]

    def series(self, kind: str, tau: float, ks: Sequence[int]) -> list[CellT]:
        """The cells of one series, in the order of ``ks``."""
        return [self.cell(kind, tau, k) for k in ks]


@dataclass(frozen=True)
class ControlOutcome:
    """The negative control of C7 or C8: the rule's verdict on the alternative, its statistics and figure."""

    verdict: Verdict
    statistics: tuple[Statistic, ...]
    figure: FigureSpec


def fit_series(
    label: str,
    ks: Sequence[int],
    values: Sequence[float],
    ses: Sequence[float],
    rng: np.random.Generator,
    *,
    ci: float = 0.95,
) -> SeriesFit:
    """Fit the log-log slope of |value| vs k (parametric bootstrap with the MC standard errors, CI level ``ci``).

    ``one_sign`` says whether every value has the same sign and ``|value| > 2 se`` (else |value| is not
    resolved and the rule is INCONCLUSIVE).
    """
    v, s = np.asarray(values, dtype=np.float64), np.asarray(ses, dtype=np.float64)
    one_sign = bool((np.all(v > 0) or np.all(v < 0)) and np.all(np.abs(v) > 2.0 * s))
    magnitude = np.maximum(np.abs(v), 1e-300)
    fit = loglog_slope(np.asarray(ks, dtype=np.float64), magnitude, np.maximum(s, 1e-300), rng=rng, ci=ci)
    return SeriesFit(label, tuple(ks), tuple(map(float, v)), tuple(map(float, s)), fit, one_sign)


def slope_verdict(series: SeriesFit, target: float) -> Verdict:
    """The slope part of the rule: CI contains ``target``, and the sign is resolved (else INCONCLUSIVE)."""
    verdict = verdict_contains(Statistic.from_slope(series.label, series.fit), target)
    return verdict if series.one_sign or verdict == Verdict.FAIL else Verdict.INCONCLUSIVE


def series_points(series: SeriesFit, *, with_fit: bool = True) -> Points:
    """|value| with +-1.96 se bars (clipped above 0) as a figure series."""
    v = np.abs(np.asarray(series.values))
    err = 1.96 * np.asarray(series.ses)
    low = np.maximum(v - err, v * 1e-3)
    return points(series.label, series.ks, v, y_low=low, y_high=v + err, fit=series.fit if with_fit else None)


def cell_params(kind: str, tau: float, k: int, n_draws: int, phi_seed: int) -> dict[str, Any]:
    """Everything a C7 or C8 cell's result depends on."""
    return {
        "phi": kind,
        "tau": tau,
        "k": k,
        "n_draws": n_draws,
        "kappa": KAPPA,
        "dim": DIM,
        "phi_seed": phi_seed,
    }


def series_label(form: KernelForm, kind: str, tau: float) -> str:
    """Series label, e.g. ``"DCL, phi = identity, tau = 1"``."""
    name = {"dcl": "DCL", "infonce": "InfoNCE"}[form]
    return f"{name}, phi = {kind}, tau = {tau:g}"


def run_series(
    ctx: ClaimContext,
    plan: Plan,
    phi_seed: int,
    measure: Callable[[Cell], dict[str, float]],
    record: type[CellT],
) -> SeriesRun[CellT]:
    """Measure every (phi, tau, k) cell of SERIES x plan.ks and fit each (series, form)'s slope.

    ``measure`` returns a cell's stored dict; ``record.from_dict`` reads it back as a typed record. Each slope
    CI is at the claim's error rate shared by its len(SERIES) * len(FORM_ORDER) series (Bonferroni).
    """
    cells = [
        Cell(params, ctx.seed_for(params))
        for kind, tau in SERIES
        for k in plan.ks
        for params in [cell_params(kind, tau, k, plan.n_draws, phi_seed)]
    ]
    results = {
        CellKey(
            str(r.cell.params["phi"]), float(r.cell.params["tau"]), int(r.cell.params["k"])
        ): record.from_dict(r.result)
        for r in ctx.run_cells(cells, measure)
    }
    fits = tuple(
        fit_series(
            series_label(form, kind, tau),
            plan.ks,
            [cell.gap(form).estimate.mean for cell in series],
            [cell.gap(form).estimate.se for cell in series],
            ctx.rng("slope", kind, tau, form),
            ci=bonferroni_level(len(SERIES) * len(FORM_ORDER), ctx.level),
        )
        for kind, tau in SERIES
        for series in [[results[CellKey(kind, tau, k)] for k in plan.ks]]
        for form in FORM_ORDER
    )
    return SeriesRun(results, fits)
