"""The series design shared by C7 and C8: (phi, tau) series over a doubling k grid, their cells and rate fits.

Each series is one (phi, tau) of :data:`SERIES` on ``VMFUniform(3, KAPPA)``, measured at every k of the
fidelity's :class:`Plan`; each (series, form) is reduced to the rate r of |gap| ~ k^r by the misfit protocol
(:func:`crl.stats.rate_fit`) at the claim's per-part level ``ctx.level``, and judged by
``verdict_rate(fit, -1.0, 0.1)`` (docs/claims/C7.md, C8.md). The budget splits the level over the parts, so
there is no Bonferroni over the series here.

The negative controls of both claims share their k grid, cells and judging (:func:`judge_control`): the
claim's rule on heavy-tailed scores off the sphere (:mod:`crl.claims._kernel_heavy_tail`).
"""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from scipy import stats as scipy_stats

from crl._vocab import KernelForm
from crl.claims._kernel_heavy_tail import ALPHA, TAU
from crl.claims._sphere_kernel import DIM, DrawSummary, GapCell
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import FigureSpec, Points, curve, loglog_figure, points
from crl.claims.verdict import Statistic, Verdict, combine_verdicts, verdict_no_violations, verdict_rate
from crl.stats import RateFit, ViolationCount, bound_violations, rate_fit
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
    Fidelity.QUICK: Plan(8000, doubling(128, 1024)),
    Fidelity.STANDARD: Plan(8000, doubling(128, 8192)),
    Fidelity.FULL: Plan(24000, doubling(128, 16384)),
}
"""Draws per cell and k grids (docs/claims/C7.md). The grids start at k = 128, where crl's next-order term (about
0.6/k of the leading a/k here) does not bias the rate (docs/decisions.md); 8000 draws keep the relative
standard error of the DCL gap near 1.6%, well below the misfit protocol's 5% residual."""
TARGET_RATE = -1.0
"""The claimed rate r of C7 and C8 (gap ~ k^-1)."""
MARGIN = 0.1
"""delta of the equivalence band [r - delta, r + delta] (docs/theory.md section 7)."""


@dataclass(frozen=True)
class CellKey:
    """Where a cell sits in the design: its phi, tau and k."""

    phi: str
    tau: float
    k: int


@dataclass(frozen=True)
class SeriesFit:
    """A measured series (one phi, tau, form) reduced to its rate by the misfit protocol."""

    label: str
    ks: tuple[int, ...]
    values: tuple[float, ...]
    ses: tuple[float, ...]
    fit: RateFit


@dataclass(frozen=True)
class SeriesRun(Generic[CellT]):
    """Every cell of the design and every (series, form)'s rate fit.

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
    """The negative control of C7 or C8: the rule's verdict on the alternative, its statistics, figure, reasons.

    Attributes:
        reasons: why the verdict is INCONCLUSIVE (empty otherwise).
        table: one row per (form, k) of the control's measurements.
    """

    verdict: Verdict
    statistics: tuple[Statistic, ...]
    figure: FigureSpec
    reasons: tuple[str, ...] = ()
    table: tuple[dict[str, Any], ...] = ()


def fit_series(
    label: str,
    ks: Sequence[int],
    values: Sequence[float],
    ses: Sequence[float],
    rng: np.random.Generator,
    *,
    level: float,
) -> SeriesFit:
    """The rate r of |value| ~ k^r by :func:`crl.stats.rate_fit` (parametric bootstrap with the Monte-Carlo
    standard errors, interval at ``level``). A value of the wrong sign or near 0 shows up as misfit."""
    v, s = np.asarray(values, dtype=np.float64), np.asarray(ses, dtype=np.float64)
    magnitude = np.maximum(np.abs(v), 1e-300)
    fit = rate_fit(np.asarray(ks, dtype=np.float64), magnitude, np.maximum(s, 1e-300), rng=rng, ci=level)
    return SeriesFit(label, tuple(ks), tuple(map(float, v)), tuple(map(float, s)), fit)


def rate_verdict(series: SeriesFit) -> tuple[Verdict, str]:
    """``verdict_rate(fit, -1.0, 0.1)`` of one series, its reason prefixed with the series' label."""
    verdict, reason = verdict_rate(series.fit, TARGET_RATE, MARGIN)
    return verdict, f"{series.label}: {reason}" if reason else ""


def judge(parts: Sequence[tuple[Verdict, str]]) -> tuple[Verdict, tuple[str, ...]]:
    """All parts of a rule together: :func:`combine_verdicts` and the reasons of the INCONCLUSIVE parts."""
    verdict = combine_verdicts(*(part for part, _ in parts))
    return verdict, tuple(reason for part, reason in parts if reason and part is Verdict.INCONCLUSIVE)


def rate_statistic(name: str, series: SeriesFit) -> Statistic:
    """The series' rate with its interval, named ``"<name>, <label>"``."""
    return Statistic.from_rate(f"{name}, {series.label}", series.fit)


def series_points(series: SeriesFit, *, control: bool = False) -> Points:
    """|value| with +-z se bars at the rate fit's level (the claim's per-part level; clipped above 0) as a figure
    series; the power-law fit when it is the model."""
    v = np.abs(np.asarray(series.values))
    err = float(scipy_stats.norm.ppf(0.5 + series.fit.ci_level / 2.0)) * np.asarray(series.ses)
    low = np.maximum(v - err, v * 1e-3)
    fit = series.fit.power if series.fit.model == "power" else None
    return points(series.label, series.ks, v, y_low=low, y_high=v + err, fit=fit, control=control)


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
    """Measure every (phi, tau, k) cell of SERIES x plan.ks and fit each (series, form)'s rate.

    ``measure`` returns a cell's stored dict; ``record.from_dict`` reads it back as a typed record. Each rate's
    interval is at the claim's per-part level ``ctx.level``.
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
            ctx.rng("rate", kind, tau, form),
            level=ctx.level,
        )
        for kind, tau in SERIES
        for series in [[results[CellKey(kind, tau, k)] for k in plan.ks]]
        for form in FORM_ORDER
    )
    return SeriesRun(results, fits)


CONTROL_KS = (16, 32, 64, 128)
"""The controls' k grid (C7 and C8)."""
FORM_NAMES = {"dcl": "DCL", "infonce": "InfoNCE"}

Bounds = Callable[[int, KernelForm], tuple[float, float]]
"""``(k, form) -> (lower, upper)`` bounds on the signed gap (``-inf`` for no lower bound)."""


def control_cells(ctx: ClaimContext, n_draws: int, extra: Mapping[str, float]) -> list[Cell]:
    """The control's cells over :data:`CONTROL_KS` (params carry ``"arm": "control"``)."""
    return [
        Cell(params, ctx.seed_for(params))
        for k in CONTROL_KS
        for params in [{"arm": "control", "k": k, "n_draws": n_draws, "alpha": ALPHA, "tau": TAU, **extra}]
    ]


def control_rule(
    measured: Mapping[KernelForm, Sequence[DrawSummary]],
    bounds: Bounds,
    *,
    level: float,
    rng: Callable[[KernelForm], np.random.Generator],
) -> tuple[dict[KernelForm, SeriesFit], ViolationCount, Verdict, tuple[str, ...]]:
    """The claim's rule on the control's measured summaries: each form's rate fit (its bootstrap drawn from
    ``rng(form)``) and the bound count at ``level``; the fits, the count, the combined verdict and its reasons."""
    fits = {
        form: fit_series(
            f"control, {FORM_NAMES[form]}",
            CONTROL_KS,
            [s.mean for s in measured[form]],
            [s.se for s in measured[form]],
            rng(form),
            level=level,
        )
        for form in FORM_ORDER
    }
    values, limits, ses = [], [], []
    for form in FORM_ORDER:
        for k, summary in zip(CONTROL_KS, measured[form], strict=True):
            lower, upper = bounds(k, form)
            values += [summary.mean, -summary.mean]
            limits += [upper, -lower]
            ses += [summary.se, summary.se]
    violations = bound_violations(values, limits, ses, alpha=1.0 - level, ci=level)
    verdict, reasons = judge(
        [*(rate_verdict(f) for f in fits.values()), (verdict_no_violations(violations), "")]
    )
    return fits, violations, verdict, reasons


def judge_control(
    ctx: ClaimContext,
    *,
    claim: str,
    measured: Mapping[KernelForm, Sequence[DrawSummary]],
    exact: Callable[[int, KernelForm], float],
    bounds: Bounds,
    bound_name: str,
) -> ControlOutcome:
    """The claim's rule on the control: each form's rate (``ctx.level``) and the bound count, and its figure.

    Args:
        claim: "C7" or "C8" (titles).
        measured: per form, the judged per-draw summary at each k of :data:`CONTROL_KS`.
        exact: the exact expected gap at (k, form), drawn as the theory curve and tabled.
        bounds: the claim's bounds at the control's tau.
        bound_name: e.g. ``"Prop. 1"``.
    """
    fits, violations, verdict, reasons = control_rule(
        measured, bounds, level=ctx.level, rng=lambda form: ctx.rng("control-rate", form)
    )
    statistics = (
        *(rate_statistic("control: rate of |gap| vs k", f) for f in fits.values()),
        Statistic.from_violations(f"control: {bound_name} bound violations beyond MC error", violations),
    )
    curves = [
        curve(
            f"exact expected gap, {FORM_NAMES[form]}",
            CONTROL_KS,
            [abs(exact(k, form)) for k in CONTROL_KS],
            kind="theory",
        )
        for form in FORM_ORDER
    ]
    curves.append(
        curve(f"{bound_name} bound, tau = {TAU:g}", CONTROL_KS, [bounds(k, "dcl")[1] for k in CONTROL_KS])
    )
    figure = loglog_figure(
        "control",
        f"{claim} control: heavy-tailed scores off the sphere (tail index {ALPHA:g})",
        "k (negatives)",
        "|gap|",
        *(series_points(f, control=True) for f in fits.values()),
        theory_slope=-1.0,
        bounds=curves,
    )
    table = tuple(
        {"arm": "control", "form": form, "k": k, "gap": s.mean, "se": s.se, "exact_gap": exact(k, form)}
        for form in FORM_ORDER
        for k, s in zip(CONTROL_KS, measured[form], strict=True)
    )
    return ControlOutcome(verdict, statistics, figure, reasons, table)
