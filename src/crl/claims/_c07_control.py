"""C7's negative control, and the judging shared with C8's: heavy-tailed scores that leave the sphere.

The model is :mod:`crl.claims._kernel_heavy_tail` (c|y|^2 on Gaussian data, exp(s/tau) of tail index 1.2, exact
log N); the estimator is C7's, :func:`crl.metrics.risk.integrated_cross_entropy_gap`, through its plain per-draw
difference (its control variate Wbar/N - 1 has infinite variance for alpha < 2; both have the same mean); the
rule is C7's (rates of both forms in the band [-1.1, -0.9], Prop. 1's bounds) at the claim's per-part level.
The true gap decays like k^(1 - alpha) = k^-0.2, so the rule must FAIL (docs/claims/C7.md).
"""

from collections.abc import Callable, Mapping, Sequence

import torch

from crl._vocab import KernelForm
from crl.claims._kernel_heavy_tail import (
    ALPHA,
    C7_POSITIVES,
    RHO,
    TAU,
    cross_entropy_gap,
    draw_heavy_tail,
)
from crl.claims._kernel_series import (
    FORM_ORDER,
    ControlOutcome,
    fit_series,
    judge,
    rate_statistic,
    rate_verdict,
    series_points,
)
from crl.claims._sphere_kernel import DrawSummary, FormGap, GapCell
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.figure_spec import curve, loglog_figure
from crl.claims.verdict import Statistic, verdict_no_violations
from crl.metrics.risk import cross_entropy_gap_bounds, integrated_cross_entropy_gap
from crl.stats import bound_violations
from crl.sweep import Cell

CONTROL_KS = (16, 32, 64, 128)
"""The controls' k grid (C7 and C8)."""
CONTROL_DRAWS = {Fidelity.QUICK: 20000, Fidelity.STANDARD: 80000, Fidelity.FULL: 160000}
"""Draws per k of C7's control."""

_FORM_NAMES = {"dcl": "DCL", "infonce": "InfoNCE"}

Bounds = Callable[[int, KernelForm], tuple[float, float]]
"""``(k, form) -> (lower, upper)`` bounds on the signed gap (``-inf`` for no lower bound)."""


def measure_control_gap(cell: Cell) -> dict[str, float]:
    """One C7 control cell: both forms' gaps (plain and variance-reduced) on the heavy-tailed model."""
    p = cell.params
    draws = draw_heavy_tail(
        C7_POSITIVES,
        n_draws=int(p["n_draws"]),
        n_negatives=int(p["k"]),
        generator=torch.Generator().manual_seed(cell.seed),
        alpha=float(p["alpha"]),
        tau=float(p["tau"]),
    )
    gaps = {
        form: FormGap.of(
            integrated_cross_entropy_gap(
                draws.positive_scores,
                draws.negative_scores,
                draws.log_partition,
                tau=float(p["tau"]),
                form=form,
            )
        )
        for form in FORM_ORDER
    }
    return GapCell(dcl=gaps["dcl"], infonce=gaps["infonce"]).to_dict()


def control_cells(ctx: ClaimContext, n_draws: int, extra: Mapping[str, float]) -> list[Cell]:
    """The control's cells over :data:`CONTROL_KS` (params carry ``"arm": "control"``)."""
    return [
        Cell(params, ctx.seed_for(params))
        for k in CONTROL_KS
        for params in [{"arm": "control", "k": k, "n_draws": n_draws, "alpha": ALPHA, "tau": TAU, **extra}]
    ]


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
    fits = {
        form: fit_series(
            f"control, {_FORM_NAMES[form]}",
            CONTROL_KS,
            [s.mean for s in measured[form]],
            [s.se for s in measured[form]],
            ctx.rng("control-rate", form),
            level=ctx.level,
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
    violations = bound_violations(values, limits, ses, alpha=1.0 - ctx.level, ci=ctx.level)
    verdict, reasons = judge(
        [*(rate_verdict(f) for f in fits.values()), (verdict_no_violations(violations), "")]
    )
    statistics = (
        *(rate_statistic("control: rate of |gap| vs k", f) for f in fits.values()),
        Statistic.from_violations(f"control: {bound_name} bound violations beyond MC error", violations),
    )
    curves = [
        curve(
            f"exact expected gap, {_FORM_NAMES[form]}",
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


def run_control(ctx: ClaimContext) -> ControlOutcome:
    """C7's control: measure the cells, judge the plain gaps by C7's rule (module docstring)."""
    cells = control_cells(ctx, CONTROL_DRAWS[ctx.fidelity], {"rho": RHO})
    records = [GapCell.from_dict(r.result) for r in ctx.run_cells(cells, measure_control_gap)]
    measured = {form: [record.gap(form).naive for record in records] for form in FORM_ORDER}
    return judge_control(
        ctx,
        claim="C7",
        measured=measured,
        exact=lambda k, form: cross_entropy_gap(k, form),
        bounds=lambda k, form: cross_entropy_gap_bounds(k, TAU, form),
        bound_name="Prop. 1",
    )
