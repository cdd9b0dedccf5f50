"""C6 (synthetic): where more negatives stop helping, m*(n), grows faster with n in SSCRL than in SCRL ([A] Sec. 5).

Pre-registered in docs/claims/C6.md (docs/theory.md section 7, C6). The module is long because
it holds the whole experiment in one place: two exact fits (the ball and the null control's line), the cells, the
m* rule's application, the table, the figure and the notes. Its statistics live in :mod:`crl.stats.saturation`.

Experiment (:func:`fit_in_ball`). Truth ``AsymmetricSphere(2, kappa=4, anchor_kappa=2, p- = pi)``,
tau = 0.5; s_hat minimises [A]'s gcl empirical risk over the ball |theta| <= 6 of the scores
``s(x, y) = <A x + b, y>`` (it contains s*), on n pairs and a fixed negative set: SCRL (each anchor its own m)
or SSCRL (m shared). The metric is the exact excess risk L(s_hat) - L*. A cell is one (arm, n, seed): it draws
the pairs once (shared by SCRL and SSCRL of that seed and n) and fits every grid m with fresh negatives.

Rule (one part, :mod:`crl.stats.saturation`). Per arm and n, the first-passage point m_q(n): the smallest m
at which the seed-mean curve comes within a relative tolerance q of its plateau (the mean at the two largest m),
interpolated log-log between grid points, censored at the grid's ends; log m_q is averaged over q in the band
:data:`TOLERANCE` (revision 6: a fixed q jumps where a curve crosses it more than once). Per arm the least-squares
slope b of log m_q on log n (censored points as half-lines). The judged statistic is the difference of slope
differences ``DD = [b(SSCRL) - b(SCRL)] - [b(null-SSCRL) - b(null-SCRL)]`` with a delete-one-seed jackknife
Student-t interval; PASS when it lies above 0.

Null arms: a setting where [A]'s mechanism is absent. Uniform anchors (kappa0 = 0) and the one-parameter score
class s = c <x, y> (:func:`fit_on_line`): the shared negatives' fluctuation averages out over uniform anchors
(C4's control shows it), so both regimes' m_q grow alike up to what the statistic itself adds; DD subtracts that.
Control: the same DD with a second, independent replicate of the null arms (null2) in the claim's place; its
true value is 0 and the rule must not PASS.

Grids: every arm at n ends at the same m_max(n) = 16 n, doubling from m = 2, so the plateau (the mean at the
two largest m) lies beyond m* ~ n by construction.

The fit: [A]'s gcl empirical risk minimised over a norm ball of linear scores on the circle, and its exact
excess risk.

Truth: :class:`crl.synthetic.AsymmetricSphere` in d = 2 with one anchor component, pi = vMF(e, kappa0), positives
M(x, .) = vMF(x, kappa) and negatives p- = pi. Then ``log p+_x(y)/p-(y) = <kappa x - kappa0 e, y> + const``, so the
ideal score ``s* = tau <kappa x - kappa0 e, y>`` lies in the lifted family of :mod:`crl.erm.lifted`

    s_theta(x, y) = x^T W y + b^T y = <W^T x + b, y>,   theta = (vec W, b) in R^6,

restricted to the ball ``|theta| <= radius`` (bounded scores, as [A] assumes), with W* = tau kappa I and
b* = -tau kappa0 e. [A]'s empirical risk on a fixed sample (n pairs; SCRL: anchor i's own m negatives y'_ij;
SSCRL: one set y'_j shared by all anchors) is :class:`crl.erm.lifted.EmpiricalRisk`, convex in theta; the
minimiser over the ball is :func:`crl.erm.convex.fit_ball` (damped Newton, then a search for the multiplier
when the ball binds; the KKT residual is the gradient-mapping norm), warm started from the previous m's fit
along a cell's grid. The null class s = c <x, y> is the line theta = c LINE, fitted by 1-D Newton on the same
risk (:func:`fit_on_line`).

Exact excess risk ([A]; docs/theory.md section 2): ``L(s) - L* = tau E_x KL(p+_x || q_{s,x})`` with
``q_{s,x} ∝ pi(y) exp(s(x, y)/tau) = vMF(mu, |u|)``, ``u = kappa0 e + (A x + b)/tau``, so

    KL(x) = kappa A_2(kappa) - log C_2(kappa) - A_2(kappa) <u, x> + log C_2(|u|),

and E_x over pi is a periodic integral in the anchor's angle: the trapezoid rule (spectrally exact).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from crl._vocab import Regime
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    FigureSpec,
    Statistic,
    Verdict,
    loglog_figure,
    points,
    verdict_above,
)
from crl.erm.convex import fit_ball
from crl.erm.lifted import EmpiricalRisk, LiftedFamily
from crl.stats.saturation import (
    CENSOR_NAMES,
    LEFT,
    RIGHT,
    JackknifeBounds,
    Passages,
    QBand,
    SlopeBounds,
    Tolerance,
    combine_slopes,
    jackknife_bounds,
    jackknife_weights,
    passage_interval,
    passage_slopes,
    passages_by_n,
)
from crl.sweep import Cell, derive_seed
from crl.synthetic import AsymmetricSphere, VMFUniform, log_vmf_normaliser, vmf_mean_resultant_length

DIM = 2
GRAD_TOLERANCE = 1e-7
"""KKT tolerance on the gradient-mapping norm (ball) and on |dL/dc| (line)."""
_MAX_NEWTON = 100
_QUADRATURE_NODES = 512


FAMILY = LiftedFamily(DIM)
"""s_theta(x, y) = x^T W y + b^T y, theta = (vec W, b) (module docstring)."""


@dataclass(frozen=True)
class CircleTruth:
    """The C6 truth: pi = vMF(e_1, kappa0) on the circle, M(x, .) = vMF(x, kappa), p- = pi, temperature tau."""

    kappa: float
    kappa0: float
    tau: float

    def ideal_parameters(self) -> Tensor:
        """theta* of ``s* = tau <kappa x - kappa0 e, y>``: W = tau kappa I, b = -tau kappa0 e_1."""
        weight = self.tau * self.kappa * torch.eye(DIM, dtype=torch.float64)
        bias = torch.tensor([-self.tau * self.kappa0, 0.0], dtype=torch.float64)
        return FAMILY.parameters_of(weight, bias)

    def model(self) -> AsymmetricSphere | VMFUniform:
        """The same law as a :class:`crl.synthetic.AsymmetricSphere` (its samplers draw the training data), or,
        with uniform anchors (kappa0 = 0), as a :class:`crl.synthetic.VMFUniform`."""
        if self.kappa0 == 0.0:
            return VMFUniform(DIM, self.kappa)
        return AsymmetricSphere(DIM, self.kappa, self.kappa0, negative_law="anchor")

    def excess_risk(self, theta: Tensor) -> float:
        """``L(s_theta) - L* = tau E_{x ~ pi} KL(p+_x || q_{s,x})`` (module docstring), by the trapezoid rule."""
        full = FAMILY.matrix(theta.to(torch.float64))
        weight, bias = full[:DIM, :DIM], full[DIM, :DIM]
        angle = 2.0 * math.pi * torch.arange(_QUADRATURE_NODES, dtype=torch.float64) / _QUADRATURE_NODES
        x = torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)
        density = torch.exp(self.kappa0 * (torch.cos(angle) - 1.0))
        density = density / density.sum()
        u = (x @ weight + bias) / self.tau
        u[:, 0] += self.kappa0
        resultant = float(vmf_mean_resultant_length(DIM, self.kappa))
        log_c = torch.from_numpy(
            np.asarray(log_vmf_normaliser(DIM, u.norm(dim=-1).numpy()), dtype=np.float64)
        )
        kl = (
            self.kappa * resultant
            - float(log_vmf_normaliser(DIM, self.kappa))
            - resultant * (u * x).sum(dim=-1)
            + log_c
        )
        return float(self.tau * (density * kl).sum())


@dataclass(frozen=True)
class Sample:
    """A fixed training sample: anchors (n, 2), positives (n, 2), negatives (n, m, 2) SCRL or (m, 2) SSCRL."""

    anchors: Tensor
    positives: Tensor
    negatives: Tensor

    @property
    def shared(self) -> bool:
        """True for SSCRL (one negative set of shape (m, 2))."""
        return self.negatives.ndim == 2

    def risk(self, tau: float) -> EmpiricalRisk:
        """[A]'s gcl ``L_hat`` of :data:`FAMILY` on this sample."""
        regime: Regime = "shared" if self.shared else "independent"
        return EmpiricalRisk(FAMILY, self.anchors, self.positives, self.negatives, tau, regime)


@dataclass(frozen=True)
class Fit:
    """A fit: its parameters, L_hat, the multiplier (0 when the constraint is inactive), the KKT residual,
    whether the constraint binds, and whether the residual reached :data:`GRAD_TOLERANCE`."""

    theta: Tensor
    empirical_risk: float
    multiplier: float
    kkt_residual: float
    constrained: bool
    converged: bool


def draw_sample(
    truth: CircleTruth,
    n: int,
    m: int,
    regime: Regime,
    generator: torch.Generator,
    pairs: tuple[Tensor, Tensor] | None = None,
) -> Sample:
    """n pairs (x ~ pi, y ~ vMF(x, kappa)), or the given ``pairs``, and the regime's fixed negatives from p-."""
    model = truth.model()
    anchors, positives = model.sample(n, generator) if pairs is None else pairs
    negatives = model.sample_negatives((m,) if regime == "shared" else (n, m), generator)
    return Sample(anchors, positives, negatives)


def fit_in_ball(sample: Sample, tau: float, radius: float, start: Tensor | None = None) -> Fit:
    """The minimiser of L_hat over ``|theta| <= radius`` to the KKT tolerance (:func:`crl.erm.convex.fit_ball`,
    warm started at ``start``). A fit whose residual stays above the tolerance is returned with
    ``converged=False`` (the claim counts and reports it; it is never refitted until it passes)."""
    found = fit_ball(sample.risk(tau), radius, tolerance=GRAD_TOLERANCE, start=start)
    return Fit(found.theta, found.risk, found.multiplier, found.kkt_residual, found.active, found.converged)


def fit_on_line(sample: Sample, tau: float, direction: Tensor, radius: float, start: float = 0.0) -> Fit:
    """The minimiser of L_hat over theta = c d, |c| <= radius (the null control's class s = c <x, y> with
    d = :data:`LINE`), by 1-D Newton on the convex L_hat(c d) with dL/dc = <grad, d> and d^2L/dc^2 = d^T Hess d,
    clipped to the interval. The KKT residual is |dL/dc| at an interior c, and max(0, -sign(c) dL/dc) on the
    boundary."""
    risk = sample.risk(tau)
    c = max(-radius, min(radius, start))
    found = risk.derivatives(c * direction)
    for _ in range(_MAX_NEWTON):
        slope, curvature = float(found.gradient @ direction), float(direction @ found.hessian @ direction)
        if _line_residual(c, slope, radius) <= GRAD_TOLERANCE:
            break
        step = -slope / max(curvature, 1e-300)
        t = 1.0
        while t > 1e-12:
            candidate = max(-radius, min(radius, c + t * step))
            trial = risk.derivatives(candidate * direction)
            if trial.value <= found.value + 1e-4 * slope * (candidate - c):
                break
            t *= 0.5
        if t <= 1e-12 or candidate == c:
            break
        c, found = candidate, trial
    slope = float(found.gradient @ direction)
    residual = _line_residual(c, slope, radius)
    bound = abs(c) >= radius
    return Fit(
        c * direction, found.value, abs(slope) if bound else 0.0, residual, bound, residual <= GRAD_TOLERANCE
    )


def _line_residual(c: float, slope: float, radius: float) -> float:
    """KKT residual of min L(c) on [-radius, radius]: |L'| inside; on an end, the part of L' pointing out."""
    if c >= radius:
        return max(0.0, slope)
    if c <= -radius:
        return max(0.0, -slope)
    return abs(slope)


TRUTH = CircleTruth(kappa=4.0, kappa0=2.0, tau=0.5)
NULL_TRUTH = CircleTruth(kappa=4.0, kappa0=0.0, tau=0.5)
"""The null control's truth: uniform anchors (kappa0 = 0), s* = tau kappa <x, y>."""
RADIUS = 6.0
"""Ball radius: 2 |theta*| (|theta*| = tau sqrt(2 kappa^2 + kappa0^2) = 3); the null class's |c| <= 6 / sqrt(2)
(s* has c = tau kappa = 2)."""
LINE = FAMILY.parameters_of(torch.eye(DIM, dtype=torch.float64), torch.zeros(DIM, dtype=torch.float64))
"""theta of s = <x, y> (W = I, b = 0): the null class is s = c <x, y>, theta = c LINE."""
ARMS = ("scrl", "sscrl", "null-scrl", "null-sscrl", "null2-scrl", "null2-sscrl")
REGIME = {arm: arm.split("-")[-1] for arm in ARMS}
"""Arm -> its regime's label in the cell parameters. Arm and label are in every cell's parameters, from which its
seed derives (``ctx.seed_for(params)``): random-stream names; :func:`saturation_cell` reads the ``Regime``."""
PLANS: dict[Fidelity, dict[str, Any]] = {
    Fidelity.QUICK: {"n": (4, 8, 16, 32, 64), "seeds": 30, "m_over_n": 16},
    Fidelity.STANDARD: {"n": (16, 32, 64, 128, 256), "seeds": 32, "m_over_n": 16},
    Fidelity.FULL: {"n": tuple(2**i for i in range(4, 10)), "seeds": 64, "m_over_n": 16},
}
"""Per fidelity: the n grid, the seeds, and m_max(n) = m_over_n n (docs/claims/C6.md, revision 5)."""
Q = 0.2
"""Revision 5's fixed tolerance (its pilot's choice), reported beside the band's m_q."""
TOLERANCE_CANDIDATES: tuple[Tolerance, ...] = (
    QBand(0.05, 0.20),
    QBand(0.10, 0.20),
    QBand(0.10, 0.30),
    QBand(0.05, 0.30),
)
"""The bands of q the pilot at 6121 chooses :data:`TOLERANCE` from (docs/claims/C6.md, revision 6)."""
TOLERANCE: Tolerance = QBand(0.10, 0.30)
"""The band of q over which log m_q is averaged (:func:`crl.stats.saturation.band_passage`), fixed by the pilot
at seed offset 6121 (docs/claims/C6.md, revision 6): of the candidates, the one with no censored m_band and the
smallest jackknife standard error of DD."""
CLAIM_TERMS = (("sscrl", 1.0), ("scrl", -1.0), ("null-sscrl", -1.0), ("null-scrl", 1.0))
"""DD = [b(SSCRL) - b(SCRL)] - [b(null-SSCRL) - b(null-SCRL)]."""
CONTROL_TERMS = (("null2-sscrl", 1.0), ("null2-scrl", -1.0), ("null-sscrl", -1.0), ("null-scrl", 1.0))
"""The control's DD: a second null replicate in the claim's place (true value 0)."""


def m_grid(n: int, m_over_n: int) -> tuple[int, ...]:
    """The doubling grid 2, 4, ..., m_max(n) = ``m_over_n`` n of every arm at n."""
    return tuple(2**i for i in range(1, int(math.log2(m_over_n * n)) + 1))


def m_grids(fidelity: Fidelity) -> list[tuple[int, ...]]:
    """Every n's m grid at ``fidelity``, in the order of its n grid."""
    plan = PLANS[fidelity]
    return [m_grid(n, plan["m_over_n"]) for n in plan["n"]]


def saturation_cell(cell: Cell) -> dict[str, Any]:
    """One (arm, n, seed): the pairs once, then every grid m (fresh negatives, warm start from the previous m)."""
    params = cell.params
    n = int(params["n"])
    regime: Regime = "shared" if params["regime"] == "sscrl" else "independent"
    null = str(params["arm"]).startswith("null")
    truth = NULL_TRUTH if null else TRUTH
    pairs_generator = torch.Generator().manual_seed(int(params["pair_seed"]))
    anchors, positives = truth.model().sample(n, pairs_generator)
    rows: dict[str, list[Any]] = {
        "excess": [],
        "empirical": [],
        "kkt": [],
        "constrained": [],
        "converged": [],
    }
    start = None
    for m in params["m_grid"]:
        generator = torch.Generator().manual_seed(derive_seed(cell.seed, int(m)))
        sample = draw_sample(truth, n, int(m), regime, generator, pairs=(anchors, positives))
        fit: Fit = (
            fit_on_line(
                sample, truth.tau, LINE, RADIUS / math.sqrt(DIM), 0.0 if start is None else _along(start)
            )
            if null
            else fit_in_ball(sample, truth.tau, RADIUS, start)
        )
        start = fit.theta
        rows["excess"].append(truth.excess_risk(fit.theta))
        rows["empirical"].append(fit.empirical_risk)
        rows["kkt"].append(fit.kkt_residual)
        rows["constrained"].append(fit.constrained)
        rows["converged"].append(fit.converged)
    return rows


def _along(theta: Tensor) -> float:
    """c of theta = c LINE."""
    return float(theta @ LINE / (LINE @ LINE))


@dataclass(frozen=True)
class Judgement:
    """C6 judged on per-seed curves: per arm m_q(n) on every jackknife row and the slope of log m_q on log n;
    the claim's and the control's DD with their jackknife intervals and verdicts."""

    passages: dict[str, Passages]
    slopes: dict[str, SlopeBounds]
    claim: JackknifeBounds
    control: JackknifeBounds
    verdict: Verdict
    reasons: list[str]
    control_verdict: Verdict
    control_reasons: list[str]


def difference_of_differences(
    slopes: dict[str, SlopeBounds], terms: Sequence[tuple[str, float]]
) -> SlopeBounds:
    """``sum_arm c_arm b(arm)`` over ``terms`` (:data:`CLAIM_TERMS` or :data:`CONTROL_TERMS`), censoring bounds
    by interval arithmetic."""
    return combine_slopes([(c, slopes[arm]) for arm, c in terms])


def judge(
    by_arm: dict[str, list[np.ndarray]],
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    level: float,
    *,
    q: Tolerance = TOLERANCE,
    unconverged: int = 0,
) -> Judgement:
    """C6's rule on per-seed curves ``by_arm[arm][i]`` (S, M_i) at the i-th n (module docstring): m_q per arm on
    the jackknife rows, the slopes of log m_q on log n, DD of the claim and of the control with their
    jackknife Student-t intervals, and the verdicts."""
    n_seeds = next(iter(by_arm.values()))[0].shape[0]
    rows = jackknife_weights(n_seeds)
    log_n = np.log(np.asarray(grid_n, dtype=np.float64))
    passages = {arm: passages_by_n(grids, values, rows, q) for arm, values in by_arm.items()}
    slopes = {arm: passage_slopes(log_n, found) for arm, found in passages.items()}
    claim = jackknife_bounds(difference_of_differences(slopes, CLAIM_TERMS), level)
    control = jackknife_bounds(difference_of_differences(slopes, CONTROL_TERMS), level)
    verdict, reasons = _judge(claim, unconverged)
    control_verdict, control_reasons = _judge(control, unconverged)
    return Judgement(passages, slopes, claim, control, verdict, reasons, control_verdict, control_reasons)


def stack_arms(records: list[Any], fidelity: Fidelity) -> dict[str, list[np.ndarray]]:
    """Per arm, per n of ``fidelity``'s plan, the (S, M_n) array of the stored cells' excess risks."""
    grid_n = PLANS[fidelity]["n"]
    n_seeds = 1 + max(int(r.cell.params["replicate"]) for r in records)
    return {arm: _stack(records, arm, grid_n, n_seeds, "excess") for arm in ARMS}


class Saturation(Claim):
    """C6 on the synthetic truth (module docstring)."""

    id: ClassVar[str] = "C6"
    title: ClassVar[str] = "Saturation m*(n), synthetic"
    source: ClassVar[str] = "[A] Sec. 5; balancing Thm 4.5/4.6"
    evidence: ClassVar[str] = (
        "[A]'s balance of its bounds read as a prediction: SSCRL's m* grows faster with n than SCRL's, beyond "
        "what a null setting shows (exact excess risk of ball-constrained ERM on a synthetic truth)"
    )
    parts: ClassVar[int] = 1
    statement: ClassVar[str] = (
        "The number of negatives m*(n) beyond which the excess risk of the ERM stops improving grows faster "
        "with n when the negatives are shared (SSCRL, m* ~ n by balancing the bounds) than when each anchor "
        "has its own (SCRL, m* ~ n^(1/2)), by more than in a setting where [A]'s mechanism is absent."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C6 (revision 6): DD = [slope(SSCRL) - slope(SCRL)] - [slope(null-SSCRL) - "
        "slope(null-SCRL)] of log m_q(n) on log n is > 0. Fixed by crl: AsymmetricSphere(2, kappa=4, "
        "anchor_kappa=2, p- = pi), tau = 0.5, s(x,y) = <Ax + b, y> in the ball |theta| <= 6 (contains s*), "
        "s_hat = argmin of the gcl L_hat over the ball (crl.erm.convex.fit_ball, warm started along m; KKT "
        "residual, the gradient-mapping norm, <= 1e-7), metric "
        "L(s_hat) - L* (exact); null arms: uniform anchors (VMFUniform(2, kappa=4)) and the class s = c <x, y>, "
        "|c| <= 6/sqrt(2). Every arm at n runs on m = 2, 4, ..., 16 n. m_q(n) = the smallest m at which the "
        "seed-mean curve comes within q of its plateau (mean at the two largest m) relative to it, interpolated "
        "log-log between grid points; left-censored at m_1, right-censored at m_(K-1) when no m up to it comes "
        "within q. The statistic per arm and n is log m_q averaged over log q uniform on [0.1, 0.3] (exactly), "
        "censored on a side when part of the band is. Censored points enter the least-squares slopes as "
        "half-lines (interval arithmetic, never dropped). CI: delete-one-seed jackknife Student-t on S - 1 "
        "degrees of freedom, lower end from the lower bounds, upper end from the upper bounds, an end infinite "
        "when the data or any delete-one row "
        "leaves it unbounded. PASS if the CI's lower end is > 0, FAIL if its upper end is < 0, INCONCLUSIVE "
        "otherwise or when a fit did not converge. Each arm's slope is reported against 1/2 and 1. Control: "
        "the same DD with a second, independent replicate of the null arms in the claim's place (true value "
        "0), same grids, rule and level; it must not PASS."
    )
    control_description: ClassVar[str] = (
        "A second null replicate: uniform anchors (VMFUniform(2, kappa=4), s* = tau kappa <x, y>) and the "
        "one-parameter class s = c <x, y>, on pairs and negatives independent of the first null arms, in the "
        "claim's place: DD = [slope(null2-SSCRL) - slope(null2-SCRL)] - [slope(null-SSCRL) - slope(null-SCRL)], "
        "whose true value is 0. Same grids, fits, metric, statistic, jackknife and level; it must not PASS."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Fit every (arm, n, seed, m), find m_q(n) per arm, and judge the difference of slope differences."""
        plan = PLANS[ctx.fidelity]
        grid_n, n_seeds, grids = plan["n"], ctx.seeds_or(plan["seeds"]), m_grids(ctx.fidelity)
        cells = [
            Cell(params, ctx.seed_for(params))
            for arm in ARMS
            for n, grid in zip(grid_n, grids, strict=True)
            for r in range(n_seeds)
            for params in [_cell_params(ctx, arm, n, r, grid)]
        ]
        records = ctx.run_cells(cells, saturation_cell)
        by_arm = {arm: _stack(records, arm, grid_n, n_seeds, "excess") for arm in ARMS}
        unconverged = sum(not ok for record in records for ok in record.result["converged"])
        found = judge(by_arm, grid_n, grids, ctx.level, unconverged=unconverged)
        return self.result(
            ctx,
            verdict=found.verdict,
            statistics=[
                _difference_statistic(
                    "DD = [slope(SSCRL) - slope(SCRL)] - [slope(null-SSCRL) - slope(null-SCRL)] of log m_q on "
                    "log n",
                    found.claim,
                ),
                *(_slope_statistic(arm, found.slopes[arm], ctx.level) for arm in ("sscrl", "scrl")),
                *(_slope_statistic(arm, found.slopes[arm], ctx.level) for arm in ("null-sscrl", "null-scrl")),
            ],
            control_verdict=found.control_verdict,
            control_statistics=[
                _difference_statistic(
                    "control: DD with a second null replicate in the claim's place (true value 0)",
                    found.control,
                ),
                *(
                    _slope_statistic(arm, found.slopes[arm], ctx.level)
                    for arm in ("null2-sscrl", "null2-scrl")
                ),
            ],
            figures=[_figure(grid_n, found.passages)],
            table=_table(grid_n, grids, by_arm, found.passages, records),
            notes=_notes(grid_n, grids, n_seeds, found, records, unconverged, ctx.level),
            reasons=found.reasons,
            control_reasons=found.control_reasons,
        )


def _cell_params(
    ctx: ClaimContext, arm: str, n: int, replicate: int, grid_m: Sequence[int]
) -> dict[str, Any]:
    """A cell's parameters; the two regimes of the claim share the pairs of (n, replicate), and so do the two
    regimes of each null replicate (null, null2: drawn from the null truth, each from its own pair seeds)."""
    pair_key = arm.split("-")[0] if arm.startswith("null") else "claim"
    return {
        "arm": arm,
        "regime": REGIME[arm],
        "n": n,
        "replicate": replicate,
        "m_grid": list(grid_m),
        "pair_seed": ctx.seed_for("pairs", pair_key, n, replicate),
    }


def _stack(records: list[Any], arm: str, grid_n: Sequence[int], n_seeds: int, key: str) -> list[np.ndarray]:
    """Per n, the (S, M_n) array of one arm's per-m values ``key`` on that n's grid."""
    rows: dict[tuple[int, int], list[float]] = {}
    for record in records:
        params = record.cell.params
        if params["arm"] == arm:
            rows[(int(params["replicate"]), int(params["n"]))] = record.result[key]
    return [np.asarray([rows[(r, n)] for r in range(n_seeds)], dtype=np.float64) for n in grid_n]


def _judge(statistic: JackknifeBounds, unconverged: int) -> tuple[Verdict, list[str]]:
    """PASS if the CI is above 0, FAIL if below, else INCONCLUSIVE; INCONCLUSIVE whenever a fit did not converge."""
    if unconverged:
        return Verdict.INCONCLUSIVE, [f"{unconverged} fits did not reach the KKT tolerance"]
    verdict = verdict_above(Statistic("DD", statistic.point, statistic.ci_low, statistic.ci_high), 0.0)
    if verdict is Verdict.INCONCLUSIVE:
        return verdict, [f"CI [{statistic.ci_low:.3g}, {statistic.ci_high:.3g}] of DD contains 0"]
    return verdict, []


def _difference_statistic(name: str, statistic: JackknifeBounds) -> Statistic:
    """DD with its jackknife CI; the detail gives its censoring bounds on the data."""
    detail = (
        f"m_q averaged over {TOLERANCE}; censored points as half-lines, bounds on the data [{statistic.bound_low:.3g}, "
        f"{statistic.bound_high:.3g}]; delete-one-seed jackknife Student-t over {statistic.seeds} seeds "
        f"(se {statistic.se:.3g}); an infinite end is one that censoring leaves unbounded"
    )
    return Statistic(name, statistic.point, statistic.ci_low, statistic.ci_high, statistic.level, detail)


ARM_LABELS = {
    "scrl": "SCRL",
    "sscrl": "SSCRL",
    "null-scrl": "null SCRL (uniform anchors, s = c<x, y>)",
    "null-sscrl": "null SSCRL (uniform anchors, s = c<x, y>)",
    "null2-scrl": "control: second null SCRL",
    "null2-sscrl": "control: second null SSCRL",
}


def _slope_statistic(arm: str, slope: SlopeBounds, level: float) -> Statistic:
    """One arm's slope of log m_q on log n with its jackknife interval (reported against 1/2 and 1, not judged)."""
    found = jackknife_bounds(slope, level)
    detail = (
        f"bounds on the data [{found.bound_low:.3g}, {found.bound_high:.3g}]; jackknife Student-t; reported "
        "against 1/2 and 1, not judged"
    )
    return Statistic(
        f"slope of log m_q on log n, {ARM_LABELS[arm]}",
        found.point,
        found.ci_low,
        found.ci_high,
        level,
        detail,
    )


def _table(
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    by_arm: dict[str, list[np.ndarray]],
    passages: dict[str, Passages],
    records: list[Any],
) -> list[dict[str, Any]]:
    """One row per (arm, n, m): mean metric with its se, the plateau, m_q(n) and its censoring, and the fraction
    of seeds whose ball constraint binds."""
    constrained = {arm: _stack(records, arm, grid_n, by_arm[arm][0].shape[0], "constrained") for arm in ARMS}
    rows = []
    for arm in ARMS:
        values, found = by_arm[arm], passages[arm]
        for i, n in enumerate(grid_n):
            for j, m in enumerate(grids[i]):
                column = values[i][:, j]
                rows.append(
                    {
                        "arm": arm,
                        "n": n,
                        "m": m,
                        "excess_risk": float(column.mean()),
                        "excess_risk_se": float(column.std(ddof=1) / math.sqrt(column.size)),
                        "ball_active_fraction": float(constrained[arm][i][:, j].mean()),
                        "plateau": float(found.plateau[0, i]),
                        "m_q": float(math.exp(found.log_m[0, i])),
                        "m_q_censoring": CENSOR_NAMES[int(found.censor[0, i])],
                    }
                )
    return rows


def _notes(
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    n_seeds: int,
    found: Judgement,
    records: list[Any],
    unconverged: int,
    level: float,
) -> str:
    """m_q(n) per arm with its jackknife interval, the slopes beside 1/2 and 1, and the fits' KKT residuals."""
    parts = []
    for arm in ARMS:
        passages = found.passages[arm]
        stars = []
        for i, n in enumerate(grid_n):
            interval = passage_interval(passages, i, level)
            mark = {RIGHT: ">=", LEFT: "<="}.get(int(passages.censor[0, i]), "")
            stars.append(
                f"n={n}: m_q {mark}{math.exp(interval.point):.1f} "
                f"[{math.exp(interval.ci_low):.1f}, {math.exp(interval.ci_high):.1f}]"
            )
        parts.append(
            f"{arm}: " + "; ".join(stars) + f"; slope {found.slopes[arm].point[0]:.3g} (vs 1/2 and 1)"
        )
    worst = max(max(record.result["kkt"]) for record in records)
    null_difference = found.slopes["null-sscrl"].point[0] - found.slopes["null-scrl"].point[0]
    return (
        f"{n_seeds} seeds, n in {list(grid_n)}, m = 2, 4, ..., m_max(n) = "
        + ", ".join(f"{grid[-1]}" for grid in grids)
        + f" (every arm); {TOLERANCE}. The null arms' own slope difference: {null_difference:.3g}. "
        + " | ".join(parts)
        + f". Largest KKT residual {worst:.2g}; fits not converged: {unconverged}."
    )


def _figure(grid_n: Sequence[int], passages: dict[str, Passages]) -> FigureSpec:
    """m_q(n) per arm on log-log axes (censored points at their bounds), with slopes 1/2 and 1 for reference."""
    series = [
        points(
            ARM_LABELS[arm],
            list(grid_n),
            np.exp(passages[arm].log_m[0]).tolist(),
            control=arm.startswith("null2"),
        )
        for arm in ARMS
    ]
    return loglog_figure(
        "m_star", "C6: m_q(n) per arm", "n (pairs)", f"m_q ({TOLERANCE})", *series, theory_slope=1.0
    )


CLAIM = Saturation()
