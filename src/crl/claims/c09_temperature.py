"""C9: the temperature regularises the learned kernel ([B] eq. 8 and section 3), judged on trained embeddings.

Model: VMFUniform(d = 3, kappa = 4), ``M(z, .) = vMF(z, kappa)``. [B] eq. 8,
``e^{-2/tau} pi <= Q(z, .) <= e^{2/tau} pi`` for unit-norm phi, is an identity on the normalising support (a unit
test, tests/claims/test_c09_temperature.py). What can fail is its consequence for learning: the best
``E_z KL(M(z,.)||Q(z,.))`` over phi is 0 while ``1/tau >= kappa`` (phi of output dimension d + 1 holds
``(sqrt(tau kappa) z, sqrt(1 - tau kappa))``, for which Q = M) and rises once 1/tau falls below kappa (then
``|log dQ/dpi| <= 2/tau`` cannot span M's range 2 kappa). C9 trains affine phi (``_temperature_parts``) at each
1/tau over seeds and judges the Student-t interval of the KL they reach against the pre-registered eps_flat
(docs/claims/C9.md): flat for 1/tau in :data:`FLAT_INV_TAUS`, rising for 1/tau in :data:`RISING_INV_TAUS`.
Control: output dimension d, which cannot hold M for 1/tau > kappa, judged by the flat rule.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from crl._vocab import Estimate
from crl.claims._sphere_kernel import DIM
from crl.claims._temperature_parts import (
    KernelFit,
    closed_form_lift_kl,
    kernel_fit,
    train_affine_embedding,
)
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Points,
    Statistic,
    Verdict,
    combine_verdicts,
    curve,
    points,
)
from crl.claims.verdict import verdict_above, verdict_at_most
from crl.stats import mean_se
from crl.sweep import Cell, CellRecord
from crl.synthetic.vmf import VMFUniform

KAPPA = 4.0
"""Concentration of M(z, .) = vMF(z, kappa): Q = M is reachable (D = d + 1) iff 1/tau >= kappa."""
FLAT_INV_TAUS = (4.0, 6.0, 8.0, 12.0)
"""1/tau of the flat parts (1/tau >= kappa)."""
RISING_INV_TAUS = (1.0, 1.5)
"""1/tau of the rising parts (1/tau < kappa/2)."""
BETWEEN_INV_TAUS = (3.0,)
"""1/tau between kappa/2 and kappa: drawn, not judged (standard and full only)."""
EPS_FLAT = 1e-4
"""eps_flat: 10 x the largest KL of the tolerance pilot (9.2e-6 at 1/tau = kappa), rounded up (docs/claims/C9.md)."""
CLAIM_DIM, CONTROL_DIM = DIM + 1, DIM
"""Output dimension D of the claim's phi (d + 1: holds M) and of the control's (d: cannot, for 1/tau > kappa)."""
REPLICATES = {Fidelity.QUICK: 5, Fidelity.STANDARD: 12, Fidelity.FULL: 30}
"""Seeds per (arm, 1/tau)."""


def measure(cell: Cell) -> dict[str, float]:
    """One cell: train phi of output dimension D at tau = 1/``inv_tau`` from ``cell.seed``; its :class:`KernelFit`."""
    p = cell.params
    model = VMFUniform(DIM, float(p["kappa"]))
    tau = 1.0 / float(p["inv_tau"])
    embed = train_affine_embedding(model, tau, int(p["out_dim"]), cell.seed)
    return kernel_fit(model, embed, tau).to_dict()


@dataclass(frozen=True)
class FitRow:
    """One trained phi: its arm, output dimension D, 1/tau and replicate, and what it reached."""

    arm: str
    out_dim: int
    inv_tau: float
    replicate: int
    fit: KernelFit

    @classmethod
    def of(cls, record: CellRecord) -> "FitRow":
        """The row of a stored cell."""
        p = record.cell.params
        fit = KernelFit.from_dict(record.result)
        return cls(str(p["arm"]), int(p["out_dim"]), float(p["inv_tau"]), int(p["replicate"]), fit)

    def table_row(self) -> dict[str, Any]:
        """The row of the claim's table."""
        params = {
            "arm": self.arm,
            "out_dim": self.out_dim,
            "inv_tau": self.inv_tau,
            "replicate": self.replicate,
        }
        return params | self.fit.to_dict()


@dataclass(frozen=True)
class Part:
    """One judged interval: its statistic, its verdict, and why it is INCONCLUSIVE (empty otherwise)."""

    statistic: Statistic
    verdict: Verdict
    reason: str


def kl_estimate(rows: Sequence[FitRow], inv_tau: float) -> Estimate:
    """Mean and se over seeds of E_z KL(M||Q) at one 1/tau."""
    return mean_se([row.fit.mean_kl for row in rows if row.inv_tau == inv_tau])


def judge(rows: Sequence[FitRow], inv_tau: float, *, flat: bool, level: float, label: str) -> Part:
    """The flat part (CI upper <= eps_flat: ``verdict_at_most``) or the rising part (CI lower > eps_flat:
    ``verdict_above``) at one 1/tau, with the Student-t interval at ``level``."""
    kind = "flat" if flat else "rising"
    name = f"{label} E_z KL(M||Q), 1/tau = {inv_tau:g} ({kind})"
    statistic = Statistic.from_mean(name, kl_estimate(rows, inv_tau), level, nonnegative=True)
    verdict = verdict_at_most(statistic, EPS_FLAT) if flat else verdict_above(statistic, EPS_FLAT)
    reason = ""
    if verdict is Verdict.INCONCLUSIVE:
        reason = (
            f"{kind} part at 1/tau = {inv_tau:g}: CI [{statistic.ci_low:.3g}, {statistic.ci_high:.3g}] "
            f"contains eps_flat = {EPS_FLAT:g} (CI too wide)"
        )
    return Part(statistic, verdict, reason)


def _cells(ctx: ClaimContext, arm: str, out_dim: int, inv_taus: Sequence[float]) -> list[Cell]:
    """One cell per (1/tau, replicate) of an arm, each seeded from its params."""
    return [
        Cell(params, ctx.seed_for(params))
        for inv_tau in inv_taus
        for replicate in range(REPLICATES[ctx.fidelity])
        for params in [
            {"arm": arm, "out_dim": out_dim, "inv_tau": inv_tau, "kappa": KAPPA, "replicate": replicate}
        ]
    ]


class TemperatureClaim(Claim):
    """C9 ([B] eq. 8): the best KL(M||Q) over trained phi is flat for 1/tau >= kappa, rising for 1/tau < kappa/2."""

    id = "C9"
    title = "What a temperature lets Q represent (approximation)"
    source = "[B] eq. 8 and section 3"
    evidence: ClassVar[str] = (
        "Approximation: which kernels Q a temperature lets a unit-norm phi represent (the best KL(M||Q) over "
        "trained phi); that tau regularises a trained embedding is C10's tau part (eq. 8's |log dQ/dpi| <= 2/tau "
        "is an identity for unit-norm phi, a unit test, not this verdict)"
    )
    parts: ClassVar[int] = len(FLAT_INV_TAUS) + len(RISING_INV_TAUS)
    statement = (
        "For every phi onto the unit sphere, e^{-2/tau} pi(A) <= Q(z,A) <= e^{2/tau} pi(A) (eq. 8): a small 1/tau "
        "restricts how far the learned kernel can move from pi. On vMF(kappa), the best E_z KL(M||Q) over phi "
        "(output dimension d + 1) is 0 while 1/tau >= kappa and positive once 1/tau < kappa. This is "
        "approximation (what Q can represent), not generalisation: the regulariser of a trained phi is C10's."
    )
    rule = (
        "docs/theory.md section 7, C9: the best E_z KL(M||Q) over trained phi is flat for 1/tau >= kappa and rising "
        "for 1/tau < kappa/2. crl's fixed criterion (VMFUniform, d = 3, kappa = 4): phi(z) = (Az + b)/|Az + b| of "
        "output dimension d + 1 = 4 (which holds (sqrt(tau kappa) z, sqrt(1 - tau kappa)), Q = M when tau kappa "
        "<= 1), trained from A, b ~ N(0, 1/3) by 200 full-batch Adam steps (lr 0.05) on E_z KL(M||Q) by Gauss "
        "rules of S^2 (anchors 4 x 8, support 16 x 32) and evaluated on finer rules (12 x 24, 48 x 96); per "
        "1/tau, the Student-t interval over seeds (quick 5, standard 12, full 30). eps_flat = 1e-4 (10 x the "
        "optimiser's largest KL in a pilot where Q = M is reachable, rounded up to a power of ten). Flat: for "
        "1/tau in {4, 6, 8, 12}, PASS if the upper end <= eps_flat, FAIL if the lower end > eps_flat. Rising: for "
        "1/tau in {1, 1.5}, PASS if the lower end > eps_flat, FAIL if the upper end < eps_flat. Otherwise "
        "INCONCLUSIVE; any FAIL fails the claim. Control: output dimension d = 3, judged by the flat rule, must "
        "FAIL. sup |log dQ/dpi| <= 2/tau ([B] eq. 8) is an identity for unit-norm phi: a unit test, not a part."
    )
    control_description = (
        "Output dimension d = 3 (same affine family, optimiser and number of seeds): Q = M needs the Gram matrix "
        "tau kappa <z,z'> + 1 - tau kappa, of rank d + 1 unless tau kappa = 1, so for 1/tau > kappa the KL stays "
        "away from 0. Judged by the flat rule at 1/tau in {4, 6, 8, 12}, at the claim's per-part level: must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Train phi of output dimension d + 1 on the grid and d on the flat grid; judge the parts and the control."""
        between = BETWEEN_INV_TAUS if ctx.fidelity is not Fidelity.QUICK else ()
        claim_taus: tuple[float, ...] = (*RISING_INV_TAUS, *between, *FLAT_INV_TAUS)
        claim_rows = [
            FitRow.of(r) for r in ctx.run_cells(_cells(ctx, "claim", CLAIM_DIM, claim_taus), measure)
        ]
        control_cells = _cells(ctx, "control", CONTROL_DIM, FLAT_INV_TAUS)
        control_rows = [FitRow.of(r) for r in ctx.run_cells(control_cells, measure)]
        claim_label, control_label = f"D = {CLAIM_DIM}:", f"control (D = {CONTROL_DIM}):"
        parts = [
            *(judge(claim_rows, t, flat=True, level=ctx.level, label=claim_label) for t in FLAT_INV_TAUS),
            *(judge(claim_rows, t, flat=False, level=ctx.level, label=claim_label) for t in RISING_INV_TAUS),
        ]
        control = [
            judge(control_rows, t, flat=True, level=ctx.level, label=control_label) for t in FLAT_INV_TAUS
        ]
        return self.result(
            ctx,
            verdict=combine_verdicts(*(part.verdict for part in parts)),
            statistics=[part.statistic for part in parts],
            control_verdict=combine_verdicts(*(part.verdict for part in control)),
            control_statistics=[part.statistic for part in control],
            reasons=[part.reason for part in parts if part.reason],
            control_reasons=[part.reason for part in control if part.reason],
            figures=[_best_kl_figure(claim_rows, control_rows, ctx.level)],
            table=[row.table_row() for row in (*claim_rows, *control_rows)],
            notes=(
                f"eps_flat = {EPS_FLAT:g}, fixed from the optimiser's tolerance before any run (docs/claims/C9.md). "
                "Each interval is over seeds of the optimiser's start; the KL of a trained phi is computed by "
                "Gauss rules, without Monte-Carlo error. 1/tau = 3 (between kappa/2 and kappa) is drawn, not "
                "judged. sup |log dQ/dpi| and sup KL(Q||pi) of every trained phi are in the table (<= 2/tau, an "
                "identity)."
            ),
        )


def _curve_points(rows: Sequence[FitRow], label: str, level: float, *, control: bool) -> Points:
    """Means over seeds of E_z KL(M||Q) against 1/tau with their Student-t intervals at ``level``, the lower end
    drawn at 0 where it is below (KL >= 0; the verdict uses the interval as computed)."""
    inv_taus = sorted({row.inv_tau for row in rows})
    estimates = [kl_estimate(rows, t) for t in inv_taus]
    intervals = [estimate.t_ci(level) for estimate in estimates]
    return points(
        label,
        inv_taus,
        [estimate.mean for estimate in estimates],
        y_low=[max(low, 0.0) for low, _ in intervals],
        y_high=[high for _, high in intervals],
        control=control,
    )


def _best_kl_figure(claim_rows: Sequence[FitRow], control_rows: Sequence[FitRow], level: float) -> FigureSpec:
    """E_z KL(M||Q) of trained phi against 1/tau (claim: D = d + 1; control: D = d) with Student-t intervals at
    ``level``, under eps_flat and beside the lift family's closed form (0 for 1/tau >= kappa)."""
    grid = np.geomspace(min(RISING_INV_TAUS), max(FLAT_INV_TAUS), 60)
    return FigureSpec(
        "best_kl",
        f"C9: E_z KL(M||Q) of trained phi, kappa = {KAPPA:g}; t-intervals at {level:.5g}, cut at 0",
        "1/tau",
        "E_z KL(M||Q)",
        (
            _curve_points(
                claim_rows, f"trained phi, output dimension d + 1 = {CLAIM_DIM}", level, control=False
            ),
            _curve_points(control_rows, f"control: output dimension d = {CONTROL_DIM}", level, control=True),
        ),
        (
            curve("eps_flat", grid, [EPS_FLAT] * grid.size, kind="bound"),
            curve(
                "closed form, (sqrt(tau kappa) z, sqrt(1 - tau kappa)) family",
                grid,
                [closed_form_lift_kl(KAPPA, 1.0 / float(t)) for t in grid],
                kind="theory",
            ),
        ),
        log_x=True,
        y_scale="symlog",
    )


CLAIM = TemperatureClaim()
