"""C6 (synthetic): where more negatives stop helping, m*(n), grows faster with n in SSCRL than in SCRL ([A] Sec. 5).

Pre-registered in docs/claims/C6.md (docs/theory.md section 7, C6). The module is long (about 680 lines) because
it holds the whole experiment in one place: two exact fits (the ball and the null control's line), the cells, the
m* rule's application, the table, the figure and the notes. Its statistics live in :mod:`crl.stats.saturation`.

Experiment (:func:`fit_in_ball`). Truth ``AsymmetricSphere(2, kappa=4, anchor_kappa=2, p- = pi)``,
tau = 0.5; s_hat minimises [A]'s gcl empirical risk over the ball |theta| <= 6 of the scores
``s(x, y) = <A x + b, y>`` (it contains s*), on n pairs and a fixed negative set: SCRL (each anchor its own m)
or SSCRL (m shared). The metric is the exact excess risk L(s_hat) - L*. A cell is one (arm, n, seed): it draws
the pairs once (shared by SCRL and SSCRL of that seed and n) and fits every grid m with fresh negatives.

Rule (one part, :mod:`crl.stats.saturation`). m*(n) per regime from the seed means (plateau = mean at the two
largest m, tol = max(Student-t half-width of the plateau at the per-part level, 1% of it)), censored at the
grid's ends; the least-squares slope of log m* on log n as an interval over the censored values; the CI of
slope(SSCRL) - slope(SCRL) by a bootstrap over >= 30 seeds; PASS when it lies above 0.

Null control (contract v2): a setting where [A]'s mechanism is absent. Uniform anchors (kappa0 = 0) and the
one-parameter score class s = c <x, y> (:func:`fit_on_line`): the shared negatives' fluctuation averages out
over uniform anchors (C4's control shows it), so both regimes' m* grow alike; the true difference
slope(SSCRL) - slope(SCRL) is about 0 and the rule must not PASS. Its arms run on the same grids.

Grids: every arm at n ends at the same m_max(n) = 16 n (full: max(32 n, 4096)), doubling from m = 2, so the
plateau (the mean at the two largest m) lies beyond m* ~ n by construction and SSCRL is not right-censored by
the grid's end.

The fit: [A]'s gcl empirical risk minimised over a norm ball of linear scores on the circle, and its exact
excess risk.

Truth: :class:`crl.synthetic.AsymmetricSphere` in d = 2 with one anchor component, pi = vMF(e, kappa0), positives
M(x, .) = vMF(x, kappa) and negatives p- = pi. Then ``log p+_x(y)/p-(y) = <kappa x - kappa0 e, y> + const``, so the
ideal score ``s* = tau <kappa x - kappa0 e, y>`` lies in the family

    s_theta(x, y) = <A x + b, y>,   theta = (vec A, b) in R^6  (a 2 x 2 matrix A and b in R^2),

restricted to the ball ``|theta| <= radius`` (bounded scores, as [A] assumes). With features
``phi(x, y) = (y (x) (x, 1))`` the score is ``<phi, theta>``, and [A]'s empirical risk on a fixed sample (n pairs;
SCRL: anchor i's own m negatives y'_ij; SSCRL: one set y'_j shared by all anchors)

    L_hat(theta) = (1/n) sum_i tau log((1/m) sum_j exp((s_ij - s_i+)/tau))

is a log-sum-exp of affine functions: convex. With ``p_ij = softmax_j(s_ij / tau)``:
``grad = (1/n) sum_i (sum_j p_ij phi_ij - phi_i+)`` and
``Hess = (1/(n tau)) sum_i [(sum_j p_ij y'_ij y'_ij^T - ybar_i ybar_i^T) (x) xt_i xt_i^T]``, xt_i = (x_i, 1).

The minimiser over the ball satisfies the KKT conditions ``grad + lam theta = 0``, ``lam >= 0``,
``lam (|theta| - radius) = 0``: damped Newton at lam = 0 (interior), and if that leaves the ball, Newton on
``L_hat + lam |theta|^2 / 2`` with lam bisected (in log lam) until ``|theta| = radius``.

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
from crl.stats.saturation import (
    CENSOR_NAMES,
    Difference,
    Saturations,
    SlopeBounds,
    lower_quantile,
    saturations_by_n,
    seed_weights,
    slope_bounds,
    slope_difference,
    upper_quantile,
)
from crl.sweep import Cell, derive_seed
from crl.synthetic import AsymmetricSphere, VMFUniform, log_vmf_normaliser, vmf_mean_resultant_length

DIM = 2
N_PARAMS = 6
GRAD_TOLERANCE = 1e-7
"""KKT tolerance: the fit stops when |grad L_hat + lam theta| + lam | |theta| - radius | <= this."""
_MAX_NEWTON = 100
_BISECTIONS = 60
_QUADRATURE_NODES = 512


@dataclass(frozen=True)
class CircleTruth:
    """The C6 truth: pi = vMF(e_1, kappa0) on the circle, M(x, .) = vMF(x, kappa), p- = pi, temperature tau."""

    kappa: float
    kappa0: float
    tau: float

    def ideal_parameters(self) -> Tensor:
        """theta* of ``s* = tau <kappa x - kappa0 e, y>``: A = tau kappa I, b = -tau kappa0 e_1."""
        matrix = self.tau * self.kappa * torch.eye(DIM, dtype=torch.float64)
        bias = torch.tensor([-self.tau * self.kappa0, 0.0], dtype=torch.float64)
        return pack(matrix, bias)

    def model(self) -> AsymmetricSphere | VMFUniform:
        """The same law as a :class:`crl.synthetic.AsymmetricSphere` (its samplers draw the training data), or,
        with uniform anchors (kappa0 = 0), as a :class:`crl.synthetic.VMFUniform`."""
        if self.kappa0 == 0.0:
            return VMFUniform(DIM, self.kappa)
        return AsymmetricSphere(DIM, self.kappa, self.kappa0, negative_law="anchor")

    def excess_risk(self, theta: Tensor) -> float:
        """``L(s_theta) - L* = tau E_{x ~ pi} KL(p+_x || q_{s,x})`` (module docstring), by the trapezoid rule."""
        matrix, bias = unpack(theta.to(torch.float64))
        angle = 2.0 * math.pi * torch.arange(_QUADRATURE_NODES, dtype=torch.float64) / _QUADRATURE_NODES
        x = torch.stack([torch.cos(angle), torch.sin(angle)], dim=-1)
        weight = torch.exp(self.kappa0 * (torch.cos(angle) - 1.0))
        weight = weight / weight.sum()
        u = (x @ matrix.T + bias) / self.tau
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
        return float(self.tau * (weight * kl).sum())


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


@dataclass(frozen=True)
class Fit:
    """The ball-constrained ERM: its parameters, L_hat, the multiplier, the KKT residual, whether the ball
    binds (multiplier > 0), and whether the residual reached :data:`GRAD_TOLERANCE`."""

    theta: Tensor
    empirical_risk: float
    multiplier: float
    kkt_residual: float
    constrained: bool
    converged: bool


def pack(matrix: Tensor, bias: Tensor) -> Tensor:
    """theta = (vec A row-major, b), matching the features y (x) (x, 1)."""
    return torch.cat([torch.cat([matrix, bias[:, None]], dim=1).reshape(-1)])


def unpack(theta: Tensor) -> tuple[Tensor, Tensor]:
    """(A, b) from theta."""
    block = theta.reshape(DIM, DIM + 1)
    return block[:, :DIM], block[:, DIM]


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


def _lifted(x: Tensor) -> Tensor:
    """xt = (x, 1), shape (n, 3)."""
    return torch.cat([x, torch.ones(x.shape[0], 1, dtype=x.dtype)], dim=1)


def _negative_scores(v: Tensor, negatives: Tensor) -> Tensor:
    """s_ij = <v_i, y'_ij> (SCRL, negatives (n, m, 2)) or <v_i, y'_j> (SSCRL, negatives (m, 2)): shape (n, m)."""
    if negatives.ndim == 2:
        return v @ negatives.T
    return torch.einsum("id,ijd->ij", v, negatives)


def _tilted_moments(p: Tensor, negatives: Tensor) -> tuple[Tensor, Tensor]:
    """Per anchor, ``ybar_i = sum_j p_ij y'_ij`` (n, 2) and ``sum_j p_ij y'_ij y'_ij^T`` (n, 2, 2)."""
    if negatives.ndim == 2:
        first = p @ negatives
        products = negatives[:, :, None] * negatives[:, None, :]
        return first, (p @ products.reshape(-1, DIM * DIM)).reshape(-1, DIM, DIM)
    y0, y1 = negatives[..., 0], negatives[..., 1]
    p0, p1 = p * y0, p * y1
    first = torch.stack([p0.sum(dim=1), p1.sum(dim=1)], dim=-1)
    s00, s01, s11 = (p0 * y0).sum(dim=1), (p0 * y1).sum(dim=1), (p1 * y1).sum(dim=1)
    second = torch.stack([s00, s01, s01, s11], dim=-1).reshape(-1, DIM, DIM)
    return first, second


def risk_derivatives(theta: Tensor, sample: Sample, tau: float) -> tuple[float, Tensor, Tensor]:
    """``(L_hat, grad, Hess)`` of [A]'s gcl empirical risk at theta (formulas in the module docstring)."""
    matrix, bias = unpack(theta)
    v = sample.anchors @ matrix.T + bias
    positive = (v * sample.positives).sum(dim=-1)
    logits = _negative_scores(v, sample.negatives) / tau
    m = logits.shape[1]
    lse = torch.logsumexp(logits, dim=1)
    value = float(tau * (lse - positive / tau - math.log(m)).mean())
    p = torch.exp(logits - lse[:, None])
    ybar, second = _tilted_moments(p, sample.negatives)
    xt = _lifted(sample.anchors)
    n = xt.shape[0]
    grad = torch.einsum("id,ik->dk", ybar - sample.positives, xt).reshape(-1) / n
    cov = second - ybar[:, :, None] * ybar[:, None, :]
    hess = torch.einsum("ide,ik,il->dkel", cov, xt, xt).reshape(N_PARAMS, N_PARAMS) / (n * tau)
    return value, grad, hess


def _ball_step(theta: Tensor, grad: Tensor, hess: Tensor, radius: float) -> tuple[Tensor, float]:
    """The minimiser z of the quadratic model ``<g, z - theta> + (z - theta)^T H (z - theta) / 2`` over
    ``|z| <= radius``, and its multiplier lam: ``z(lam) = (H + lam I)^{-1} (H theta - g)`` with lam = 0 if that
    lies in the ball, else ``|z(lam)| = radius`` (bisection in log lam; |z(lam)| decreases in lam)."""
    values, vectors = torch.linalg.eigh(hess)
    c = vectors.T @ (hess @ theta - grad)
    floor = max(float(values.max()) * 1e-12, 1e-300)
    eig = values.clamp_min(floor)

    def norm_at(lam: float) -> float:
        return float((c / (eig + lam)).norm())

    if norm_at(0.0) <= radius:
        return vectors @ (c / eig), 0.0
    low, high = 0.0, max(1.0, float(c.norm()) / radius)
    while norm_at(high) > radius:
        low, high = high, 4.0 * high
    for _ in range(_BISECTIONS):
        lam = 0.5 * (low + high)
        if norm_at(lam) > radius:
            low = lam
        else:
            high = lam
    return vectors @ (c / (eig + high)), high


def _project(theta: Tensor, radius: float) -> Tensor:
    """theta scaled into the ball |theta| <= radius."""
    norm = float(theta.norm())
    return theta if norm <= radius else theta * (radius / norm)


def fit_in_ball(sample: Sample, tau: float, radius: float, start: Tensor | None = None) -> Fit:
    """The minimiser of L_hat over ``|theta| <= radius`` to the KKT tolerance, by projected Newton: each step
    minimises the local quadratic model over the ball (:func:`_ball_step`), then a backtracking line search on
    L_hat along the (feasible) segment. The KKT residual is ``|grad + lam theta|`` with lam from the last step.

    A fit whose residual stays above the tolerance is returned with ``converged=False`` (the claim counts and
    reports it; it is never refitted until it passes). ``start`` is a warm start (projected onto the ball).
    """
    theta = torch.zeros(N_PARAMS, dtype=torch.float64) if start is None else _project(start, radius)
    value, grad, hess = risk_derivatives(theta, sample, tau)
    lam = 0.0
    for _ in range(_MAX_NEWTON):
        target, lam = _ball_step(theta, grad, hess, radius)
        residual = _kkt_residual(theta, grad, lam, radius)
        if residual <= GRAD_TOLERANCE:
            break
        direction = target - theta
        slope = float(grad @ direction)
        t = 1.0
        while t > 1e-12:
            candidate = theta + t * direction
            c_value, c_grad, c_hess = risk_derivatives(candidate, sample, tau)
            if c_value <= value + 1e-4 * t * slope:
                break
            t *= 0.5
        if t <= 1e-12:
            break
        theta, value, grad, hess = candidate, c_value, c_grad, c_hess
    target, lam = _ball_step(theta, grad, hess, radius)
    residual = _kkt_residual(theta, grad, lam, radius)
    return Fit(theta, value, lam, residual, lam > 0.0, residual <= GRAD_TOLERANCE)


def fit_on_line(sample: Sample, tau: float, direction: Tensor, radius: float, start: float = 0.0) -> Fit:
    """The minimiser of L_hat over theta = c d, |c| <= radius (the null control's class s = c <x, y> with
    d = theta of A = I, b = 0), by 1-D Newton on the convex L_hat(c d) with dL/dc = <grad, d> and
    d^2L/dc^2 = d^T Hess d, clipped to the interval. The KKT residual is |dL/dc| at an interior c, and
    max(0, -sign(c) dL/dc) on the boundary."""
    c = max(-radius, min(radius, start))
    value, grad, hess = risk_derivatives(c * direction, sample, tau)
    for _ in range(_MAX_NEWTON):
        slope, curvature = float(grad @ direction), float(direction @ hess @ direction)
        if _line_residual(c, slope, radius) <= GRAD_TOLERANCE:
            break
        step = -slope / max(curvature, 1e-300)
        t = 1.0
        while t > 1e-12:
            candidate = max(-radius, min(radius, c + t * step))
            c_value, c_grad, c_hess = risk_derivatives(candidate * direction, sample, tau)
            if c_value <= value + 1e-4 * slope * (candidate - c):
                break
            t *= 0.5
        if t <= 1e-12 or candidate == c:
            break
        c, value, grad, hess = candidate, c_value, c_grad, c_hess
    slope = float(grad @ direction)
    residual = _line_residual(c, slope, radius)
    bound = abs(c) >= radius
    return Fit(
        c * direction, value, abs(slope) if bound else 0.0, residual, bound, residual <= GRAD_TOLERANCE
    )


def _line_residual(c: float, slope: float, radius: float) -> float:
    """KKT residual of min L(c) on [-radius, radius]: |L'| inside; on an end, the part of L' pointing out."""
    if c >= radius:
        return max(0.0, slope)
    if c <= -radius:
        return max(0.0, -slope)
    return abs(slope)


def _kkt_residual(theta: Tensor, grad: Tensor, lam: float, radius: float) -> float:
    """``|grad + lam theta| + lam |radius - |theta||``: stationarity plus complementary slackness."""
    return float((grad + lam * theta).norm()) + lam * abs(radius - float(theta.norm()))


TRUTH = CircleTruth(kappa=4.0, kappa0=2.0, tau=0.5)
NULL_TRUTH = CircleTruth(kappa=4.0, kappa0=0.0, tau=0.5)
"""The null control's truth: uniform anchors (kappa0 = 0), s* = tau kappa <x, y>."""
RADIUS = 6.0
"""Ball radius: 2 |theta*| (|theta*| = tau sqrt(2 kappa^2 + kappa0^2) = 3); the null class's |c| <= 6 / sqrt(2)
(s* has c = tau kappa = 2)."""
LINE = pack(torch.eye(DIM, dtype=torch.float64), torch.zeros(DIM, dtype=torch.float64))
"""theta of s = <x, y> (A = I, b = 0): the null class is s = c <x, y>, theta = c LINE."""
ARMS = ("scrl", "sscrl", "null-scrl", "null-sscrl")
REGIME = {"scrl": "scrl", "sscrl": "sscrl", "null-scrl": "scrl", "null-sscrl": "sscrl"}
"""Arm -> its regime's label in the cell parameters. Arm and label are in every cell's parameters, from which its
seed derives (``ctx.seed_for(params)``): random-stream names; :func:`saturation_cell` reads the ``Regime``."""
PLANS: dict[Fidelity, dict[str, Any]] = {
    Fidelity.QUICK: {"n": (4, 8, 16, 32, 64), "seeds": 30, "m_over_n": 16, "m_max_floor": 0},
    Fidelity.STANDARD: {"n": (16, 32, 64, 128, 256), "seeds": 32, "m_over_n": 16, "m_max_floor": 0},
    Fidelity.FULL: {"n": tuple(2**i for i in range(4, 10)), "seeds": 64, "m_over_n": 32, "m_max_floor": 4096},
}
"""Per fidelity: the n grid, the seeds, and m_max(n) = max(m_over_n n, m_max_floor). Quick and standard: 16 n,
four doublings beyond m* ~ n. Full: 32 n and at least 4096, so that no bootstrap replicate right-censors SSCRL's
m* by the grid's end, at small n too (docs/claims/C6.md, full-fidelity revisions 2 to 4)."""


def m_grid(n: int, m_over_n: int, m_max_floor: int = 0) -> tuple[int, ...]:
    """The doubling grid 2, 4, ..., m_max(n) = max(``m_over_n`` n, ``m_max_floor``) of every arm at n."""
    top = max(m_over_n * n, m_max_floor)
    return tuple(2**i for i in range(1, int(math.log2(top)) + 1))


def m_grids(fidelity: Fidelity) -> list[tuple[int, ...]]:
    """Every n's m grid at ``fidelity``, in the order of its n grid."""
    plan = PLANS[fidelity]
    return [m_grid(n, plan["m_over_n"], plan["m_max_floor"]) for n in plan["n"]]


N_BOOT = 2000


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


class Saturation(Claim):
    """C6 on the synthetic truth (module docstring)."""

    id: ClassVar[str] = "C6"
    title: ClassVar[str] = "Saturation m*(n), synthetic"
    source: ClassVar[str] = "[A] Sec. 5; balancing Thm 4.5/4.6"
    evidence: ClassVar[str] = (
        "[A]'s balance of its bounds read as a prediction: SSCRL's m* grows faster with n than SCRL's "
        "(exact excess risk of ball-constrained ERM on a synthetic truth)"
    )
    parts: ClassVar[int] = 1
    statement: ClassVar[str] = (
        "The number of negatives m*(n) beyond which the excess risk of the ERM stops improving grows faster "
        "with n when the negatives are shared (SSCRL, m* ~ n by balancing the bounds) than when each anchor "
        "has its own (SCRL, m* ~ n^(1/2))."
    )
    rule: ClassVar[str] = (
        "docs/theory.md section 7, C6 (contract v2): slope(SSCRL) - slope(SCRL) of log m*(n) on log n is > 0. "
        "Fixed by crl: AsymmetricSphere(2, kappa=4, anchor_kappa=2, p- = pi), tau = 0.5, s(x,y) = <Ax + b, y> "
        "in the ball |theta| <= 6 (contains s*), s_hat = argmin of the gcl L_hat over the ball (projected "
        "Newton, KKT residual <= 1e-7), metric L(s_hat) - L* (exact). Every arm at n runs on m = 2, 4, ..., "
        "m_max(n) = 16 n (full: max(32 n, 4096); the same m_max(n) for both regimes). m*(n) = smallest grid "
        "m from which the mean metric stays "
        "within tol = max(per-part-level Student-t half-width of the plateau, 1% of it) of the plateau (mean "
        "at the two largest m); right-censored when that is one of the two largest m or none, left-censored at "
        "the smallest m. Censored points enter the least-squares slope through their bounds (slope intervals, "
        "never dropped). CI of the difference: bootstrap over >= 30 seeds (2000 resamples), lower end from the "
        "lower bounds, upper end from the upper bounds. PASS if the CI's lower end is > 0, FAIL if its upper "
        "end is < 0, INCONCLUSIVE otherwise. Both slopes are reported against 1/2 and 1. Null control: uniform "
        "anchors (VMFUniform(2, kappa=4)) and the class s = c <x, y>, |c| <= 6/sqrt(2), same grids, rule and "
        "level: the shared negatives' fluctuation averages out, both regimes' m* grow alike, and the rule must "
        "not PASS."
    )
    control_description: ClassVar[str] = (
        "Null control: a setting where [A]'s mechanism is absent. Uniform anchors (VMFUniform(2, kappa=4), "
        "s* = tau kappa <x, y>) and the one-parameter class s = c <x, y>: the fluctuation of shared negatives "
        "averages out over uniform anchors (C4's control), so SSCRL's and SCRL's m* grow alike and the true "
        "slope difference is about 0. Same grids, fits, metric, m* rule, censoring, bootstrap and level; it "
        "must not PASS."
    )

    def run(self, ctx: ClaimContext) -> ClaimResult:
        """Fit every (arm, n, seed, m), find m*(n) per arm, and judge the slope differences."""
        plan = PLANS[ctx.fidelity]
        grid_n, n_seeds, grids = plan["n"], plan["seeds"], m_grids(ctx.fidelity)
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
        weights = seed_weights(n_seeds, ctx.rng("bootstrap"), N_BOOT)
        sats, slopes = arm_slopes(by_arm, grid_n, grids, weights, ctx.level)
        claim, control = claim_and_control(slopes, ctx.level)
        verdict, reasons = _judge(claim, unconverged)
        control_verdict, control_reasons = _judge(control, unconverged)
        table = _table(grid_n, grids, by_arm, sats, records)
        return self.result(
            ctx,
            verdict=verdict,
            statistics=[
                _difference_statistic("slope(SSCRL) - slope(SCRL) of log m* on log n", claim, ctx.level),
                *(_slope_statistic(arm, slopes[arm], ctx.level) for arm in ("sscrl", "scrl")),
            ],
            control_verdict=control_verdict,
            control_statistics=[
                _difference_statistic(
                    "null control: slope(SSCRL) - slope(SCRL), uniform anchors, s = c <x, y>",
                    control,
                    ctx.level,
                ),
                *(_slope_statistic(arm, slopes[arm], ctx.level) for arm in ("null-sscrl", "null-scrl")),
            ],
            figures=[_figure(grid_n, sats)],
            table=table,
            notes=_notes(grid_n, grids, n_seeds, sats, slopes, records, unconverged),
            reasons=reasons,
            control_reasons=control_reasons,
        )


def arm_slopes(
    by_arm: dict[str, list[np.ndarray]],
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    weights: np.ndarray,
    level: float,
) -> tuple[dict[str, Saturations], dict[str, SlopeBounds]]:
    """Per arm, m*(n) for every weight row (``by_arm[arm][i]`` is the (S, M_i) metric at the i-th n on its grid)
    and the slope of log m* on log n with its censoring interval."""
    log_n = np.log(np.asarray(grid_n, dtype=np.float64))
    sats = {arm: saturations_by_n(grids, values, weights, level) for arm, values in by_arm.items()}
    return sats, {arm: slope_bounds(log_n, sat) for arm, sat in sats.items()}


def claim_and_control(slopes: dict[str, SlopeBounds], level: float) -> tuple[Difference, Difference]:
    """The claim's slope(SSCRL) - slope(SCRL) and the null control's, the same difference on its arms."""
    claim = slope_difference(slopes["sscrl"], slopes["scrl"], level)
    control = slope_difference(slopes["null-sscrl"], slopes["null-scrl"], level)
    return claim, control


def _cell_params(
    ctx: ClaimContext, arm: str, n: int, replicate: int, grid_m: Sequence[int]
) -> dict[str, Any]:
    """A cell's parameters; the two regimes of the claim share the pairs of (n, replicate), and so do the two
    regimes of the null control (drawn from its own truth)."""
    pair_key = "null" if arm.startswith("null") else "claim"
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


def _judge(difference: Difference, unconverged: int) -> tuple[Verdict, list[str]]:
    """PASS if the CI is above 0, FAIL if below, else INCONCLUSIVE; INCONCLUSIVE whenever a fit did not converge."""
    if unconverged:
        return Verdict.INCONCLUSIVE, [f"{unconverged} fits did not reach the KKT tolerance"]
    statistic = Statistic("difference", difference.point, difference.ci_low, difference.ci_high)
    verdict = verdict_above(statistic, 0.0)
    if verdict is Verdict.INCONCLUSIVE:
        return verdict, [
            f"CI [{difference.ci_low:.3g}, {difference.ci_high:.3g}] of the slope difference contains 0"
        ]
    return verdict, []


def _difference_statistic(name: str, difference: Difference, level: float) -> Statistic:
    """The difference with its bootstrap CI; the detail gives its censoring bounds on the data."""
    detail = (
        f"censored points at their bounds; bounds on the data [{difference.bound_low:.3g}, "
        f"{difference.bound_high:.3g}]; bootstrap over seeds, {N_BOOT} resamples; an infinite end is one that "
        "censoring leaves unbounded"
    )
    return Statistic(name, difference.point, difference.ci_low, difference.ci_high, level, detail)


def _slope_statistic(arm: str, slope: SlopeBounds, level: float) -> Statistic:
    """One arm's slope (reported against 1/2 and 1, not judged)."""
    name = {
        "sscrl": "slope of log m* on log n, SSCRL",
        "scrl": "slope of log m* on log n, SCRL",
        "null-sscrl": "null control: slope of log m* on log n, SSCRL",
        "null-scrl": "null control: slope of log m* on log n, SCRL",
    }[arm]
    detail = f"bounds on the data [{slope.low[0]:.3g}, {slope.high[0]:.3g}]; reported against 1/2 and 1, not judged"
    return Statistic(
        name,
        float(slope.point[0]),
        lower_quantile(slope.low[1:], level),
        upper_quantile(slope.high[1:], level),
        level,
        detail,
    )


def _table(
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    by_arm: dict[str, list[np.ndarray]],
    sats: dict[str, Saturations],
    records: list[Any],
) -> list[dict[str, Any]]:
    """One row per (arm, n, m): mean metric with its se, the plateau, tol, m*(n) and its censoring, and the
    fraction of seeds whose ball constraint binds."""
    constrained = {arm: _stack(records, arm, grid_n, by_arm[arm][0].shape[0], "constrained") for arm in ARMS}
    rows = []
    for arm in ARMS:
        values, sat = by_arm[arm], sats[arm]
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
                        "plateau": float(sat.plateau[0, i]),
                        "tol": float(sat.tol[0, i]),
                        "m_star": float(math.exp(sat.log_m[0, i])),
                        "m_star_censoring": CENSOR_NAMES[int(sat.censor[0, i])],
                    }
                )
    return rows


def _notes(
    grid_n: Sequence[int],
    grids: Sequence[Sequence[int]],
    n_seeds: int,
    sats: dict[str, Saturations],
    slopes: dict[str, SlopeBounds],
    records: list[Any],
    unconverged: int,
) -> str:
    """m*(n) per arm with its bootstrap interval, the slopes beside 1/2 and 1, and the fits' KKT residuals."""
    parts = []
    for arm in ARMS:
        sat = sats[arm]
        stars = []
        for i, n in enumerate(grid_n):
            low = math.exp(lower_quantile(sat.log_m[1:, i], 0.995))
            high = math.exp(upper_quantile(sat.log_m[1:, i], 0.995))
            mark = {1: ">=", 2: "<="}.get(int(sat.censor[0, i]), "")
            stars.append(f"n={n}: m* {mark}{math.exp(sat.log_m[0, i]):.0f} [{low:.0f}, {high:.0f}]")
        parts.append(f"{arm}: " + "; ".join(stars) + f"; slope {slopes[arm].point[0]:.3g} (vs 1/2 and 1)")
    worst = max(max(record.result["kkt"]) for record in records)
    return (
        f"{n_seeds} seeds, n in {list(grid_n)}, m = 2, 4, ..., m_max(n) = "
        + ", ".join(f"{grid[-1]}" for grid in grids)
        + " (every arm). "
        + " | ".join(parts)
        + f". Largest KKT residual {worst:.2g}; fits not converged: {unconverged}."
    )


def _figure(grid_n: Sequence[int], sats: dict[str, Saturations]) -> FigureSpec:
    """m*(n) per arm on log-log axes (censored points at their bounds), with slopes 1/2 and 1 for reference."""
    labels = {
        "scrl": "SCRL",
        "sscrl": "SSCRL",
        "null-scrl": "null control SCRL (uniform anchors, s = c<x, y>)",
        "null-sscrl": "null control SSCRL (uniform anchors, s = c<x, y>)",
    }
    series = [
        points(
            labels[arm],
            list(grid_n),
            np.exp(sats[arm].log_m[0]).tolist(),
            control=arm.startswith("null"),
        )
        for arm in ARMS
    ]
    return loglog_figure(
        "m_star", "C6: m*(n) per regime", "n (pairs)", "m* (grid m)", *series, theory_slope=1.0
    )


CLAIM = Saturation()
