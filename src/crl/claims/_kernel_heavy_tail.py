"""The heavy-tailed model of C7's and C8's negative controls: scores that leave the sphere, with exact gaps.

Model (d = 2): anchors x ~ N(0, I), negatives (the unseen points of the search) y ~ pi = N(0, I), and the
anchor-free score ``s(x, y) = c |y|^2`` with ``c = tau/(2 alpha)``. Since ``|y|^2 ~ Exp(1/2)`` in d = 2,
``W = exp(s/tau) = exp(|y|^2/(2 alpha))`` is exactly Pareto: ``P_pi(W > w) = w^-alpha`` for ``w >= 1``. For
``alpha`` in (1, 2), ``N = E_pi W = alpha/(alpha - 1)`` is finite but ``E_pi exp(2s/tau) = E_pi W^2`` is not:
the bounded-score premise of [B]'s Props. 1-2 fails. Positives come in two kinds:

- C7 (:data:`C7_POSITIVES`): Gaussian two-tower pairs ``y = rho x + sqrt(1 - rho^2) eps``; y ~ N(0, I)
  marginally, so the positive's ``W`` is Pareto(alpha) and independent of the negatives.
- C8 (:data:`C8_POSITIVES`): ``M(x, .) = N(0, sigma^2 I)`` with ``sigma^2 = alpha/(alpha - gamma)``, i.e.
  ``dM/dpi = W^gamma / E_pi W^gamma``: under M, ``W`` is Pareto(alpha - gamma), so ``E_M W = inf`` when
  ``gamma >= alpha - 1``, while ``E|dM/dpi|^2 = (alpha - gamma)^2 / (alpha (alpha - 2 gamma))`` is finite when
  ``2 gamma < alpha`` (Prop. 2's bound is finite, and so is the variance of crl's per-draw C8 estimate).

**Exact expected gaps.** With ``S_k`` a sum of k independent Pareto(alpha) and L the Laplace transform,
``E log A - E log B = ∫_0^inf (L_B(t) - L_A(t)) dt/t`` (Frullani), and for W ~ Pareto(a)
``L(t) = E e^{-tW} = a E_{a+1}(t)`` (generalised exponential integral). Then

- C7, DCL: ``log N - E log(S_k/k)`` (``E[-log(Wbar/N)]``), ~ ``k^(1 - alpha)``;
- C7, InfoNCE: ``log N - E log((S_k + W_+)/k)``, ``W_+ ~ Pareto(alpha)``;
- C8, DCL: ``Cov(wbar, log Wbar) = E log(P + S_{k-1}) - E log S_k``, ``P ~ Pareto(alpha - gamma)`` (size-biasing
  one point by w gives it M's law), ~ ``k^-(alpha - gamma)``;
- C8, InfoNCE: ``E log(P + S_{k-1}) - E log(S_k + P')``, P, P' ~ Pareto(alpha - gamma): ``-1/k + o(1/k)``
  (the heavy parts cancel).

With bounded scores the same quantities are O(1/k); heavy-tailed negatives alone (gamma = 0) leave C8's gap
``(E_M W / N - 1)/k + o(1/k)``: crl's importance-weighted gap needs ``E_M exp(s/tau) = inf`` to slow down.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from scipy import integrate, special
from torch import Tensor

from crl._vocab import KernelForm

ALPHA = 1.2
"""Tail index of ``exp(s/tau)`` under pi (C7's gap ~ k^(1 - alpha) = k^-0.2)."""
GAMMA = 0.45
"""C8's positives: ``dM/dpi ∝ exp(gamma s/tau)`` (C8's DCL gap ~ k^-(alpha - gamma) = k^-0.75)."""
TAU = 1.0
"""Temperature of the controls."""
RHO = 0.5
"""Correlation of C7's Gaussian two-tower positives (the C7 gaps do not depend on it)."""
DIM = 2
"""Dimension of the Gaussian data (d = 2 makes W exactly Pareto)."""
C7_POSITIVES = "two-tower"
C8_POSITIVES = "wide"
_MAX_POINTS_PER_CHUNK = 1 << 18


@dataclass(frozen=True)
class HeavyTailDraws:
    """R draws of the control model: scores of the positive and the k negatives, and what the estimators need.

    Attributes:
        positive_scores: (R,) ``s(x_r, y_r)``.
        negative_scores: (R, k) ``s(x_r, xi_rj)``.
        log_partition: (R,) ``log N = log(alpha/(alpha - 1))`` (exact, the same for every anchor).
        log_kernel_ratio: (R, k) ``log dM/dpi (xi_rj) = gamma s/tau - log E_pi W^gamma`` (C8's positives).
    """

    positive_scores: Tensor
    negative_scores: Tensor
    log_partition: Tensor
    log_kernel_ratio: Tensor


def score_scale(alpha: float = ALPHA, tau: float = TAU) -> float:
    """``c = tau/(2 alpha)``, so that ``exp(c|y|^2/tau)`` has tail index alpha for y ~ N(0, I_2)."""
    return tau / (2.0 * alpha)


def log_partition(alpha: float = ALPHA) -> float:
    """``log N = log E_pi exp(s/tau) = log(alpha/(alpha - 1))``."""
    return math.log(alpha / (alpha - 1.0))


def log_weight_normaliser(alpha: float = ALPHA, gamma: float = GAMMA) -> float:
    """``log E_pi W^gamma = log(alpha/(alpha - gamma))`` (C8's dM/dpi = W^gamma / E_pi W^gamma)."""
    return math.log(alpha / (alpha - gamma))


def kernel_ratio_second_moment(alpha: float = ALPHA, gamma: float = GAMMA) -> float:
    """``E|dM/dpi|^2 = E_pi W^(2 gamma) / (E_pi W^gamma)^2 = (alpha - gamma)^2 / (alpha (alpha - 2 gamma))``.

    Raises:
        ValueError: if ``2 gamma >= alpha`` (the moment is infinite).
    """
    if 2.0 * gamma >= alpha:
        raise ValueError(f"gamma={gamma!r} must be < alpha/2={alpha / 2!r} for a finite E|dM/dpi|^2.")
    return (alpha - gamma) ** 2 / (alpha * (alpha - 2.0 * gamma))


def draw_heavy_tail(
    positives: str,
    *,
    n_draws: int,
    n_negatives: int,
    generator: torch.Generator,
    alpha: float = ALPHA,
    gamma: float = GAMMA,
    tau: float = TAU,
) -> HeavyTailDraws:
    """Draw R = ``n_draws`` (anchor, positive, k negatives) triples of the control model (module docstring).

    ``positives`` is :data:`C7_POSITIVES` (two-tower, rho = :data:`RHO`) or :data:`C8_POSITIVES` (N(0,
    alpha/(alpha - gamma) I)). Negatives are drawn in chunks of at most 2^18 points.
    """
    if positives not in (C7_POSITIVES, C8_POSITIVES):
        raise ValueError(f"positives={positives!r} must be {C7_POSITIVES!r} or {C8_POSITIVES!r}.")
    c = score_scale(alpha, tau)
    rows = max(1, _MAX_POINTS_PER_CHUNK // n_negatives)
    positive, negative = [], []
    for start in range(0, n_draws, rows):
        size = min(rows, n_draws - start)
        x = torch.randn(size, DIM, generator=generator, dtype=torch.float64)
        noise = torch.randn(size, DIM, generator=generator, dtype=torch.float64)
        if positives == C7_POSITIVES:
            y = RHO * x + math.sqrt(1.0 - RHO**2) * noise
        else:
            y = math.sqrt(alpha / (alpha - gamma)) * noise
        xi = torch.randn(size, n_negatives, DIM, generator=generator, dtype=torch.float64)
        positive.append(c * (y * y).sum(dim=-1))
        negative.append(c * (xi * xi).sum(dim=-1))
    negative_scores = torch.cat(negative)
    return HeavyTailDraws(
        positive_scores=torch.cat(positive),
        negative_scores=negative_scores,
        log_partition=torch.full((n_draws,), log_partition(alpha), dtype=torch.float64),
        log_kernel_ratio=gamma * negative_scores / tau - log_weight_normaliser(alpha, gamma),
    )


def pareto_log_laplace(a: float, t: float) -> float:
    """``log E exp(-t W)`` for ``W ~ Pareto(a)`` (``P(W > w) = w^-a``, w >= 1), a > 0, t >= 0.

    ``E e^{-tW} = a E_{a+1}(t)`` and ``1 - E e^{-tW} = 1 - e^{-t} + t E_a(t)``, with
    ``E_p(t) = t^(p-1) e^{-t} U(p, p, t)`` (U: Tricomi's confluent hypergeometric function); the second form is
    used below t = 1, where the transform is close to 1.
    """
    if t == 0.0:
        return 0.0
    if t < 1.0:
        one_minus = -math.expm1(-t) + t**a * math.exp(-t) * float(special.hyperu(a, a, t))
        return math.log1p(-one_minus)
    return math.log(a) + a * math.log(t) - t + math.log(float(special.hyperu(a + 1.0, a + 1.0, t)))


def expected_log_difference(
    first: Sequence[tuple[float, int]], second: Sequence[tuple[float, int]], scale: float
) -> float:
    """``E log A - E log B`` for A, B sums of independent Paretos, each given as ``(tail index, count)`` pairs.

    Frullani: ``log a - log b = ∫_0^inf (e^{-tb} - e^{-ta}) dt/t``, so
    ``E log A - E log B = ∫_0^inf (L_B(t) - L_A(t)) dt/t``, integrated in ``v = t scale`` (scale ~ the sums'
    size) by adaptive quadrature.
    """

    def log_transform(terms: Sequence[tuple[float, int]], t: float) -> float:
        return sum(count * pareto_log_laplace(a, t) for a, count in terms)

    def integrand(v: float) -> float:
        t = v / scale
        return (math.exp(log_transform(second, t)) - math.exp(log_transform(first, t))) / v

    value, _ = integrate.quad(integrand, 0.0, math.inf, limit=400, epsabs=1e-14, epsrel=1e-10)
    return float(value)


def _log_mean_gap(k: int, alpha: float) -> float:
    """``E log(S_k/k) - log N`` for S_k a sum of k Pareto(alpha) (B = the constant kN, ``L_B = e^{-tkN}``)."""
    mean = alpha / (alpha - 1.0)

    def integrand(v: float) -> float:
        t = v / (k * mean)
        return (math.exp(-v) - math.exp(k * pareto_log_laplace(alpha, t))) / v

    value, _ = integrate.quad(integrand, 0.0, math.inf, limit=400, epsabs=1e-14, epsrel=1e-10)
    return float(value)


def cross_entropy_gap(k: int, form: KernelForm, alpha: float = ALPHA) -> float:
    """The exact ``∫CE dpi - R`` (C7's gap) of the control model with two-tower positives (module docstring)."""
    gap = -_log_mean_gap(k, alpha)
    if form == "infonce":
        gap -= expected_log_difference([(alpha, k + 1)], [(alpha, k)], k * alpha / (alpha - 1.0))
    return gap


def ideal_search_gap(k: int, form: KernelForm, alpha: float = ALPHA, gamma: float = GAMMA) -> float:
    """The exact ``∫E CE[M_hat_k||Q_hat_k] dpi - R`` (C8's gap, crl's M_hat_k) of the control model."""
    size_biased = [(alpha - gamma, 1), (alpha, k - 1)]
    other = [(alpha, k)] if form == "dcl" else [(alpha, k), (alpha - gamma, 1)]
    return expected_log_difference(size_biased, other, k * alpha / (alpha - 1.0))
