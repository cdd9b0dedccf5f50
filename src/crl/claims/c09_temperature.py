"""C9: the temperature regularises the learned kernel ([B] eq. 8): |log dQ/dpi| <= 2/tau, and a cost of small 1/tau.

Model: VMFUniform(d = 3, kappa = 4). Two measurements:

- **Bounds** (eq. 8): for embeddings phi onto the unit sphere (a random linear map, a random MLP, and an MLP
  trained for a few hundred Adam steps with InfoNCE at that tau), ``sup_{z,z'} |log dQ(z,.)/dpi (z')|`` and
  ``sup_z KL(Q(z,.)||pi)`` on product Gauss rules of S^2 (anchors 12 x 24, support 48 x 96), against 2/tau.
- **Best KL**: in the family ``phi_c(z) = (sqrt(c) z, sqrt(1-c))`` on S^3 (``<phi_c z, phi_c z'> = c<z,z'> + 1-c``,
  so Q = vMF(z, c/tau)), ``min_c E KL(M||Q_c)``, measured by Monte Carlo (y ~ M(z,.) from the model, log N by
  quadrature) with c chosen on one half of the draws and the KL evaluated on the other (cross-fitting), against
  the closed form: 0 when ``kappa tau <= 1``, ``KL(vMF(kappa)||vMF(1/tau))`` otherwise. (This is the best KL
  within the isometric-lift family, crl's choice; other phi may do better, but no phi reaches 0 once
  ``sup |log dM/dpi| > 2/tau``.)
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy import optimize
from torch import Tensor

from crl.claims._sphere_kernel import DIM, Embedding, sphere_embedding
from crl.claims._temperature_parts import (
    BestKL,
    KernelExtremes,
    closed_form_best_kl,
    kernel_extremes,
    kl_sampler,
    random_mlp_embedding,
    trained_mlp_embedding,
)
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    Verdict,
    combine_verdicts,
    curve,
    loglog_figure,
    points,
    verdict_no_violations,
)
from crl.metrics.risk import temperature_bound
from crl.stats import ViolationCount, bound_violations
from crl.sweep import Cell, CellRecord
from crl.synthetic.vmf import VMFUniform

KAPPA = 4.0
"""Concentration of M(z, .) = vMF(z, kappa): the lift family reaches M exactly iff tau <= 1/kappa = 0.25."""
BOUND_TAUS = (0.1, 0.25, 0.5, 1.0, 2.0)
"""Temperatures of the eq. 8 bound checks."""
BEST_KL_TAUS = (0.1, 0.15, 0.2, 0.25, 0.35, 0.5, 0.7, 1.0, 1.5)
"""Temperatures of the best-KL curve (1/kappa = 0.25 on the grid)."""
EMBEDDINGS = ("linear", "mlp", "trained")
"""phi of the bound checks: random linear map, random MLP (3 -> 32 -> 8, ReLU), trained MLP (same shape)."""
CONTROL_NORM = 1.5
"""Norm of the control embedding 1.5 * id (off the unit sphere: eq. 8's premise broken)."""
AGREEMENT_ATOL = 1e-3
"""Absolute tolerance of best KL vs the closed form (for the O(1/n) optimisation bias of the cross-fit)."""
_BEST_KL_DRAWS = {Fidelity.QUICK: (128, 64), Fidelity.STANDARD: (512, 64), Fidelity.FULL: (2048, 128)}
"""(anchors, positives per anchor) of the best-KL Monte Carlo."""


def _scaled_identity(z: Tensor) -> Tensor:
    """The control phi = 1.5 z (norm 1.5)."""
    return CONTROL_NORM * z


def measure_bounds(cell: Cell) -> dict[str, float]:
    """One eq. 8 cell: the extremes of the learned kernel for one (phi, tau)."""
    p = cell.params
    model = VMFUniform(DIM, float(p["kappa"]))
    tau = float(p["tau"])
    kind = str(p["phi"])
    embed: Embedding
    if kind == "linear":
        embed = sphere_embedding("linear", cell.seed)
    elif kind == "mlp":
        embed = random_mlp_embedding(cell.seed)
    elif kind == "trained":
        embed = trained_mlp_embedding(model, tau, cell.seed)
    elif kind == "scaled_identity":
        embed = _scaled_identity
    else:
        raise ValueError(f"phi={kind!r} is not one of C9's embeddings.")
    return kernel_extremes(model, embed, tau).to_dict()


def measure_best_kl(cell: Cell) -> dict[str, float]:
    """One best-KL cell: cross-fitted ``min_c E KL(M||Q_c)`` over the lift family at one tau.

    Half A of the anchors chooses c by minimising the Monte-Carlo KL (bounded scalar search on [0, 1]); half B
    evaluates ``E KL(M||Q_c)`` at that c, with its standard error over B's anchors.
    """
    p = cell.params
    model = VMFUniform(DIM, float(p["kappa"]))
    tau = float(p["tau"])
    generator = torch.Generator().manual_seed(cell.seed)
    halves = [
        kl_sampler(model, tau, int(p["n_anchors"]) // 2, int(p["n_positives"]), generator) for _ in range(2)
    ]
    search = optimize.minimize_scalar(
        lambda c: float(halves[0](c).mean()), bounds=(0.0, 1.0), method="bounded", options={"xatol": 1e-7}
    )
    c_hat = float(search.x)
    per_anchor = halves[1](c_hat)
    return BestKL(
        best_kl=float(per_anchor.mean()),
        best_kl_se=float(per_anchor.std(ddof=1) / np.sqrt(per_anchor.size)),
        c_hat=c_hat,
    ).to_dict()


@dataclass(frozen=True)
class BoundRow:
    """A bound-check (or control) cell: its (phi, tau) and the learned kernel's extremes there."""

    arm: str
    kappa: float
    phi: str
    tau: float
    extremes: KernelExtremes

    @classmethod
    def of(cls, record: CellRecord) -> "BoundRow":
        """The row of a stored bound cell."""
        p = record.cell.params
        extremes = KernelExtremes.from_dict(record.result)
        return cls(str(p["arm"]), float(p["kappa"]), str(p["phi"]), float(p["tau"]), extremes)

    def table_row(self) -> dict[str, Any]:
        """The row of the claim's table: the extremes, then the cell's params."""
        return self.extremes.to_dict() | {
            "arm": self.arm,
            "kappa": self.kappa,
            "phi": self.phi,
            "tau": self.tau,
        }


@dataclass(frozen=True)
class BestKLRow:
    """A best-KL cell: its tau and Monte-Carlo sizes, the measured best KL and the closed form."""

    arm: str
    kappa: float
    n_anchors: int
    n_positives: int
    tau: float
    measured: BestKL

    @classmethod
    def of(cls, record: CellRecord) -> "BestKLRow":
        """The row of a stored best-KL cell."""
        p = record.cell.params
        measured = BestKL.from_dict(record.result)
        return cls(
            str(p["arm"]),
            float(p["kappa"]),
            int(p["n_anchors"]),
            int(p["n_positives"]),
            float(p["tau"]),
            measured,
        )

    @property
    def closed_form(self) -> float:
        """``min_c KL(vMF(kappa)||vMF(c/tau))`` at this tau."""
        return closed_form_best_kl(self.kappa, self.tau)

    def table_row(self) -> dict[str, Any]:
        """The row of the claim's table: the measurement, the cell's params, the closed form."""
        params = {
            "arm": self.arm,
            "kappa": self.kappa,
            "n_anchors": self.n_anchors,
            "n_positives": self.n_positives,
        }
        return self.measured.to_dict() | params | {"tau": self.tau, "closed_form": self.closed_form}


@dataclass(frozen=True)
class BestKLChecks:
    """Part (ii) of the rule on the best-KL rows.

    Attributes:
        agreement: disagreements with the closed form beyond the Bonferroni multiple of the se + atol.
        positive: every tau > 1/kappa has best KL > 3 se.
        increasing: the best KL increases strictly in tau over tau > 1/kappa (at least two points).
    """

    agreement: ViolationCount
    positive: bool
    increasing: bool


class TemperatureClaim(Claim):
    """C9 ([B] eq. 8): ``e^{-2/tau} pi <= Q(z,.) <= e^{2/tau} pi``; the best KL(M||Q) rises once 1/tau < kappa."""

    id = "C9"
    title = "Temperature regularises"
    source = "[B] eq. 8"
    statement = (
        "For every phi onto the unit sphere, z and A: e^{-2/tau} pi(A) <= Q(z,A) <= e^{2/tau} pi(A), i.e. "
        "sup |log dQ/dpi| <= 2/tau, hence KL(Q(z,.)||pi) <= 2/tau: a small 1/tau restricts how far the learned "
        "kernel can move from pi. On vMF(kappa), the best KL(M||Q) (family phi_c, Q = vMF(c/tau)) is 0 while "
        "kappa tau <= 1 and rises as 1/tau falls below kappa."
    )
    rule = (
        "docs/theory.md section 7, C9: bounds 2/tau hold for random and trained phi; best KL rises once 1/tau < kappa. "
        "crl's fixed criterion (vMF, d = 3, kappa = 4): (i) for phi in {random linear map, random MLP, MLP "
        "trained 300 Adam steps with InfoNCE at tau} and tau in {0.1, 0.25, 0.5, 1, 2}, sup_{z,z'} |log dQ/dpi| "
        "<= 2/tau and sup_z KL(Q(z,.)||pi) <= 2/tau on Gauss rules of S^2 (anchors 12 x 24, support 48 x 96; "
        "no MC error: zero violations beyond atol 1e-9); (ii) for tau in {0.1, 0.15, 0.2, 0.25, 0.35, 0.5, 0.7, 1, "
        "1.5}, the cross-fitted Monte-Carlo min_c E KL(M||Q_c) over phi_c(z) = (sqrt(c) z, sqrt(1-c)) agrees with "
        "the closed form (0 for kappa tau <= 1, KL(vMF(kappa)||vMF(1/tau)) otherwise) within the Bonferroni "
        "multiple (the claim's family-wise level) of its standard error + 1e-3, exceeds 3 se for every "
        "tau > 1/kappa, and increases strictly in tau over tau > 1/kappa."
    )
    control_description = (
        "An embedding that breaks eq. 8's premise: phi = 1.5 * identity (norm 1.5, not on the unit sphere), "
        "for which sup |log dQ/dpi| = 2.25/tau + log C_3(2.25/tau) > 2/tau; rule (i) on it must FAIL."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Bound cells for every (phi, tau), best-KL cells for every tau, the control; judge all three."""
        n_anchors, n_positives = _BEST_KL_DRAWS[ctx.fidelity]
        bound_cells = [
            Cell(params, ctx.seed_for(params))
            for kind in EMBEDDINGS
            for tau in BOUND_TAUS
            for params in [{"arm": "bounds", "phi": kind, "tau": tau, "kappa": KAPPA}]
        ]
        control_cells = [
            Cell(params, ctx.seed_for(params))
            for tau in BOUND_TAUS
            for params in [{"arm": "control", "phi": "scaled_identity", "tau": tau, "kappa": KAPPA}]
        ]
        best_cells = [
            Cell(params, ctx.seed_for(params))
            for tau in BEST_KL_TAUS
            for params in [
                {
                    "arm": "best_kl",
                    "tau": tau,
                    "kappa": KAPPA,
                    "n_anchors": n_anchors,
                    "n_positives": n_positives,
                }
            ]
        ]
        bounds = [BoundRow.of(r) for r in ctx.run_cells(bound_cells, measure_bounds)]
        control = [BoundRow.of(r) for r in ctx.run_cells(control_cells, measure_bounds)]
        best = [BestKLRow.of(r) for r in ctx.run_cells(best_cells, measure_best_kl)]
        bound_count = _eq8_violations(bounds)
        checks = _best_kl_checks(best, alpha=1 - ctx.level)
        verdict = combine_verdicts(
            verdict_no_violations(bound_count),
            verdict_no_violations(checks.agreement),
            Verdict.PASS if checks.positive and checks.increasing else Verdict.FAIL,
        )
        control_count = _eq8_violations(control)
        rising = [row for row in best if KAPPA * row.tau > 1.0]
        statistics = [
            Statistic.from_violations(
                "eq. 8 violations (sup |log dQ/dpi|, sup KL(Q||pi) vs 2/tau)", bound_count
            ),
            Statistic.from_violations(
                "best KL vs closed form: disagreements beyond MC error", checks.agreement
            ),
            *(
                Statistic(
                    f"best KL(M||Q), tau = {row.tau:g}",
                    row.measured.best_kl,
                    row.measured.best_kl - 1.96 * row.measured.best_kl_se,
                    row.measured.best_kl + 1.96 * row.measured.best_kl_se,
                    detail=f"closed form {row.closed_form:.4g}; c_hat = {row.measured.c_hat:.4f}",
                )
                for row in rising
            ),
        ]
        return self.result(
            ctx,
            verdict=verdict,
            statistics=statistics,
            control_verdict=verdict_no_violations(control_count),
            control_statistics=[Statistic.from_violations("eq. 8 violations by phi = 1.5 id", control_count)],
            figures=[_bounds_figure(bounds, control), _best_kl_figure(best, bounds)],
            table=[*(row.table_row() for row in (*bounds, *control)), *(row.table_row() for row in best)],
            notes=(
                f"best KL strictly positive beyond 3 se for tau > 1/kappa: {checks.positive}; increasing in tau "
                f"there: {checks.increasing}. mean_kl_kernel_to_learned in the table is E_z KL(M||Q) of each "
                "bound-check phi (descriptive; the trained MLP's value is an upper estimate of what training "
                "reaches at that tau)."
            ),
        )


def _eq8_violations(rows: Sequence[BoundRow]) -> ViolationCount:
    """Both eq. 8 quantities of every row against 2/tau (no MC error; atol 1e-9 for rounding)."""
    values = [
        value
        for row in rows
        for value in (row.extremes.sup_abs_log_ratio, row.extremes.sup_kl_learned_to_anchor)
    ]
    limits = [row.extremes.bound for row in rows for _ in range(2)]
    return bound_violations(values, limits, atol=1e-9)


def _best_kl_checks(rows: Sequence[BestKLRow], *, alpha: float) -> BestKLChecks:
    """Agreement with the closed form (two-sided, Bonferroni), positivity beyond 3 se, increase over tau > 1/kappa."""
    diffs, ses = [], []
    for row in rows:
        diff = row.measured.best_kl - row.closed_form
        diffs += [diff, -diff]
        ses += [row.measured.best_kl_se, row.measured.best_kl_se]
    agreement = bound_violations(diffs, [0.0] * len(diffs), ses, atol=AGREEMENT_ATOL, alpha=alpha)
    rising = [row.measured for row in sorted(rows, key=lambda row: row.tau) if KAPPA * row.tau > 1.0]
    positive = all(m.best_kl > 3.0 * m.best_kl_se for m in rising)
    increasing = len(rising) >= 2 and all(a.best_kl < b.best_kl for a, b in itertools.pairwise(rising))
    return BestKLChecks(agreement, positive, increasing)


def _bounds_figure(bounds: Sequence[BoundRow], control: Sequence[BoundRow]) -> FigureSpec:
    """sup |log dQ/dpi| and sup KL(Q||pi) vs tau for every phi and the control, under the bound 2/tau."""
    series = []
    for kind in (*EMBEDDINGS, "scaled_identity"):
        rows = sorted((r for r in (*bounds, *control) if r.phi == kind), key=lambda r: r.tau)
        taus = [r.tau for r in rows]
        series.append(
            points(f"sup |log dQ/dpi|, phi = {kind}", taus, [r.extremes.sup_abs_log_ratio for r in rows])
        )
        series.append(
            points(f"sup KL(Q||pi), phi = {kind}", taus, [r.extremes.sup_kl_learned_to_anchor for r in rows])
        )
    return loglog_figure(
        "bounds",
        "C9: eq. 8, sup |log dQ/dpi| and sup_z KL(Q||pi) <= 2/tau",
        "tau",
        "value",
        *series,
        bounds=[curve("2/tau", BOUND_TAUS, [temperature_bound(t) for t in BOUND_TAUS])],
    )


def _best_kl_figure(rows: Sequence[BestKLRow], bounds: Sequence[BoundRow]) -> FigureSpec:
    """Measured best KL vs tau (+-1.96 se) with the closed form and the trained MLP's E KL(M||Q)."""
    ordered = sorted(rows, key=lambda r: r.tau)
    taus = [r.tau for r in ordered]
    trained = sorted((r for r in bounds if r.phi == "trained"), key=lambda r: r.tau)
    fine = np.geomspace(min(taus), max(taus), 60)
    return FigureSpec(
        "best_kl",
        f"C9: best E KL(M||Q) in the lift family, kappa = {KAPPA:g} (threshold tau = 1/kappa)",
        "tau",
        "min_c E KL(M||Q_c)",
        (
            points(
                "measured (cross-fitted MC)",
                taus,
                [r.measured.best_kl for r in ordered],
                y_err=[1.96 * r.measured.best_kl_se for r in ordered],
            ),
            points(
                "trained MLP (8-d), E KL(M||Q) by quadrature",
                [r.tau for r in trained],
                [r.extremes.mean_kl_kernel_to_learned for r in trained],
            ),
        ),
        (curve("closed form", fine, [closed_form_best_kl(KAPPA, float(t)) for t in fine], kind="theory"),),
        log_x=True,
        log_y=False,
    )


CLAIM = TemperatureClaim()
