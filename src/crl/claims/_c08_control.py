"""C8's negative control: heavy-tailed scores that leave the sphere, with positives that make E_M exp(s/tau) infinite.

The model is :mod:`crl.claims._kernel_heavy_tail` with C8's positives, M = N(0, alpha/(alpha - gamma) I), so that
``dM/dpi = exp(gamma s/tau) / E_pi exp(gamma s/tau)`` (exact), ``E|dM/dpi|^2`` is finite but ``E_M exp(s/tau)``
is not, and crl's DCL gap ``Cov(wbar, log Wbar)`` decays like k^-(alpha - gamma) = k^-0.75. The estimator is
C8's, :func:`crl.metrics.risk.ideal_search_gap` (variance-reduced; finite variance since 2 gamma < alpha), the
rule C8's (rates of both forms in [-1.1, -0.9], Prop. 2's bound with this model's ``E|dM/dpi|^2``) at the
claim's per-part level: it must FAIL (docs/claims/C8.md). Heavy-tailed negatives alone would not do: with
positives of finite ``E_M exp(s/tau)`` crl's gap stays O(1/k).
"""

import torch

from crl._vocab import KernelForm
from crl.claims._c07_control import control_cells, judge_control
from crl.claims._kernel_heavy_tail import (
    C8_POSITIVES,
    GAMMA,
    TAU,
    draw_heavy_tail,
    ideal_search_gap,
    kernel_ratio_second_moment,
)
from crl.claims._kernel_series import FORM_ORDER, ControlOutcome
from crl.claims._sphere_kernel import FormGap, GapCell
from crl.claims.context import ClaimContext, Fidelity
from crl.metrics.risk import ideal_search_bound
from crl.metrics.risk import ideal_search_gap as ideal_search_gap_draws
from crl.sweep import Cell

CONTROL_DRAWS = {Fidelity.QUICK: 80000, Fidelity.STANDARD: 320000, Fidelity.FULL: 640000}
"""Draws per k of C8's control (its per-draw relative spread is 4-6, C7's 1.6-2)."""


def measure_control_gap(cell: Cell) -> dict[str, float]:
    """One C8 control cell: both forms' ideal-search gaps on the heavy-tailed model with C8's positives."""
    p = cell.params
    tau = float(p["tau"])
    draws = draw_heavy_tail(
        C8_POSITIVES,
        n_draws=int(p["n_draws"]),
        n_negatives=int(p["k"]),
        generator=torch.Generator().manual_seed(cell.seed),
        alpha=float(p["alpha"]),
        gamma=float(p["gamma"]),
        tau=tau,
    )
    gaps = {
        form: FormGap.of(
            ideal_search_gap_draws(
                draws.positive_scores,
                draws.negative_scores,
                draws.log_kernel_ratio,
                draws.log_partition,
                tau=tau,
                form=form,
            )
        )
        for form in FORM_ORDER
    }
    return GapCell(dcl=gaps["dcl"], infonce=gaps["infonce"]).to_dict()


def run_control(ctx: ClaimContext) -> ControlOutcome:
    """C8's control: measure the cells and judge the variance-reduced gaps by C8's rule (module docstring)."""
    cells = control_cells(ctx, CONTROL_DRAWS[ctx.fidelity], {"gamma": GAMMA})
    records = [GapCell.from_dict(r.result) for r in ctx.run_cells(cells, measure_control_gap)]
    second_moment = kernel_ratio_second_moment()

    def bounds(k: int, form: KernelForm) -> tuple[float, float]:
        bound = ideal_search_bound(k, TAU, second_moment, form)
        return -bound, bound

    return judge_control(
        ctx,
        claim="C8",
        measured={form: [record.gap(form).estimate for record in records] for form in FORM_ORDER},
        exact=lambda k, form: ideal_search_gap(k, form),
        bounds=bounds,
        bound_name="Prop. 2",
    )
