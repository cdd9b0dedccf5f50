"""C6's fits: [A]'s gcl empirical risk minimised over a norm ball of linear scores on the circle, and its exact
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
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from crl._vocab import Regime
from crl.synthetic import AsymmetricSphere
from crl.synthetic._special import log_vmf_normaliser, vmf_mean_resultant_length

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

    def model(self) -> AsymmetricSphere:
        """The same law as a :class:`crl.synthetic.AsymmetricSphere` (its samplers draw the training data)."""
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


def _kkt_residual(theta: Tensor, grad: Tensor, lam: float, radius: float) -> float:
    """``|grad + lam theta| + lam |radius - |theta||``: stationarity plus complementary slackness."""
    return float((grad + lam * theta).norm()) + lam * abs(radius - float(theta.norm()))
