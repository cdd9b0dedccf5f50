"""[B]'s learned kernel Q_tau^phi, its cross-entropy to the positive kernel M, and the O(1/k) gaps of Props. 1-2.

Setting ([B], THEORY.md section 5): anchors z ~ pi, positives y ~ M(z, .), negatives ~ pi, an embedding phi onto
the unit sphere and scores s(z, z') = <phi(z), phi(z')>. With the log-partition
``log N(z) = log ∫ exp(s(z, z')/tau) pi(dz')`` the learned kernel and its divergences are

- ``log dQ(z, .)/dpi (z') = s(z, z')/tau - log N(z)``; eq. 8: ``|log dQ/dpi| <= 2/tau`` for every phi;
- ``KL(Q(z,.) || pi) = ∫ (dQ/dpi) log(dQ/dpi) dpi``; ``KL(M(z,.) || Q(z,.)) = ∫ log(dM/dQ) dM``;
- ``CE[M(z,.) || Q(z,.)] = -∫ log(dQ/dpi) dM = -(1/tau) ∫ s(z, z') M(z, dz') + log N(z)
  = KL(M||Q) - KL(M||pi)``.

[B]'s risk is ``R(phi; k, tau) = E[infonce] - log k`` (DCL variant ``R~ = E[dcl] - log k``), the loss values
coming from :func:`crl.objectives.contrastive_loss_from_scores`. Prop. 1 bounds ``∫ CE dpi - R`` by O(1/k);
Prop. 2 bounds the distance of R to the *ideal search* over k unseen points xi_i ~ pi.

**crl's choice for the ideal search (Prop. 2).** [B]'s exact normalisation of ``M_hat_k`` was not confirmed;
crl uses the unbiased importance-weighted estimate of M(z, .) on the k unseen points,
``M_hat_k(z, .) = (1/k) sum_i w_i delta_{xi_i}`` with ``w_i = dM(z, .)/dpi (xi_i)`` (total mass
``wbar = (1/k) sum_i w_i``, mean 1), the learned search ``Q_hat_k(z, {xi_i}) = softmax_i(s(z, xi_i)/tau)``,
and the cross-entropy taken, like CE[M||Q] above, relative to the reference law, here the empirical law
``pi_k = (1/k) sum_i delta_{xi_i}`` of the unseen points:
``CE[M_hat_k || Q_hat_k] = -∫ log(dQ_hat_k/dpi_k) dM_hat_k = -(1/k) sum_i w_i log(k softmax_i)``
(= KL(M_hat_k||Q_hat_k) - KL(M_hat_k||pi_k), as for the population kernels). Because ``E wbar = 1``,
``E CE[M_hat_k||Q_hat_k] - R~ = Cov(wbar, log Wbar)`` exactly (``W_j = exp(s(z, xi_j)/tau)``), an O(1/k)
quantity of the size ``(4/(tau k)) E|dM/dpi|^2`` bounds. (Relative to the counting measure instead, the
cross-entropy would exceed R by log k + O(1/k): the choice of reference law is what makes Prop. 2 an O(1/k)
statement.)

**Variance reduction.** Both gaps are O(1/k) differences of O(1) quantities, so the plain per-draw
differences have a relative error growing like sqrt(k) (C7/C8 would need k times more draws at each k). The
estimators here are algebraically rearranged, unbiased per-draw versions whose relative standard error does
not grow with k (details in :func:`integrated_cross_entropy_gap` and :func:`ideal_search_gap`); the plain
versions are returned alongside as ``naive``.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from crl._vocab import KERNEL_FORMS, KernelForm, check_choice, check_tau
from crl.objectives import contrastive_loss_from_scores


@dataclass(frozen=True)
class KernelDivergences:
    """Per-anchor divergences between M(z, .), the learned kernel Q(z, .) and pi on a weighted support.

    Attributes:
        sup_abs_log_ratio: ``max_j |log dQ(z,.)/dpi (z'_j)|`` over the support (eq. 8: <= 2/tau).
        kl_learned_to_anchor: ``KL(Q(z,.) || pi)`` (<= 2/tau).
        kl_kernel_to_learned: ``KL(M(z,.) || Q(z,.))``.
        kl_kernel_to_anchor: ``KL(M(z,.) || pi)``.
        cross_entropy: ``CE[M(z,.) || Q(z,.)] = kl_kernel_to_learned - kl_kernel_to_anchor``.
    """

    sup_abs_log_ratio: Tensor
    kl_learned_to_anchor: Tensor
    kl_kernel_to_learned: Tensor
    kl_kernel_to_anchor: Tensor
    cross_entropy: Tensor


@dataclass(frozen=True)
class GapDraws:
    """Per-draw unbiased estimates of an O(1/k) gap: a variance-reduced one and the plain difference.

    Attributes:
        estimate: (R,) variance-reduced per-draw estimates; their mean estimates the gap with a relative
            standard error that does not grow with k.
        naive: (R,) the plain per-draw differences (same expectation, variance O(1) per draw).
    """

    estimate: Tensor
    naive: Tensor


def uniform_sphere_quadrature(n_polar: int, n_azimuth: int) -> tuple[Tensor, Tensor]:
    """A product quadrature rule for the uniform probability on S^2: ``sum_j w_j f(u_j) ~ E f(u)``.

    For u uniform on S^2, ``t = u_3`` is uniform on [-1, 1] and the azimuth is uniform on [0, 2 pi),
    independently (Archimedes). The rule is Gauss-Legendre in t (``n_polar`` nodes, weights halved) times the
    equispaced rule in the azimuth (``n_azimuth`` nodes, weights ``1/n_azimuth``); both converge spectrally for
    smooth integrands (the latter because the integrand is periodic in the azimuth).

    Args:
        n_polar: Gauss-Legendre nodes in t, >= 1.
        n_azimuth: azimuth nodes, >= 1.

    Returns:
        ``(nodes, weights)``: float64 (n_polar * n_azimuth, 3) unit vectors and weights summing to 1.

    Raises:
        ValueError: if a node count is not a positive integer.
    """
    for name, value in (("n_polar", n_polar), ("n_azimuth", n_azimuth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer, e.g. 64.")
    t, w_t = np.polynomial.legendre.leggauss(n_polar)
    angle = 2.0 * math.pi * np.arange(n_azimuth) / n_azimuth
    radius = np.sqrt(np.clip(1.0 - t * t, 0.0, None))
    nodes = np.stack(
        [
            np.outer(radius, np.cos(angle)).ravel(),
            np.outer(radius, np.sin(angle)).ravel(),
            np.repeat(t, n_azimuth),
        ],
        axis=1,
    )
    weights = np.repeat(0.5 * w_t, n_azimuth) / n_azimuth
    return torch.from_numpy(nodes), torch.from_numpy(weights)


def learned_log_partition(
    anchor_embeddings: Tensor,
    support_embeddings: Tensor,
    *,
    tau: float,
    support_weights: Tensor | None = None,
) -> Tensor:
    """``log N(z_i) = log sum_j pi_j exp(<phi(z_i), phi(z'_j)>/tau)``: the normaliser of the learned kernel.

    With ``support_weights`` a quadrature rule (or the masses of a finite Z) this is ``log ∫ exp(s/tau) dpi``;
    with ``None`` the support is a sample of pi with weights 1/N (a Monte-Carlo estimate).

    Args:
        anchor_embeddings: (n, p) phi(z_i).
        support_embeddings: (N, p) phi(z'_j).
        tau: temperature > 0.
        support_weights: (N,) weights pi_j > 0 summing to 1, or ``None`` for 1/N.

    Returns:
        (n,) float64 log-partitions.

    Raises:
        ValueError: on shape mismatch, non-finite embeddings, tau <= 0 or bad weights.
    """
    scores = _pair_scores(anchor_embeddings, support_embeddings)
    log_weights = _log_weights(support_weights, scores.shape[1])
    return torch.logsumexp(scores / check_tau(tau) + log_weights, dim=1)


def learned_log_density_ratio(
    anchor_embeddings: Tensor,
    support_embeddings: Tensor,
    *,
    tau: float,
    support_weights: Tensor | None = None,
) -> Tensor:
    """``log dQ(z_i, .)/dpi (z'_j) = <phi(z_i), phi(z'_j)>/tau - log N(z_i)`` on the support ([B], section 5).

    ``log N`` is :func:`learned_log_partition` on the same support, so ``sum_j pi_j dQ/dpi = 1`` exactly and
    eq. 8's ``|log dQ/dpi| <= 2/tau`` holds on the support for unit-norm embeddings.

    Returns:
        (n, N) float64 log density ratios.
    """
    scores = _pair_scores(anchor_embeddings, support_embeddings)
    log_weights = _log_weights(support_weights, scores.shape[1])
    logits = scores / check_tau(tau)
    return logits - torch.logsumexp(logits + log_weights, dim=1, keepdim=True)


def kernel_divergences(
    log_learned_ratio: Tensor, log_kernel_ratio: Tensor, *, support_weights: Tensor | None = None
) -> KernelDivergences:
    """KL(Q||pi), KL(M||Q), KL(M||pi) and CE[M||Q] per anchor from log dQ/dpi and log dM/dpi on a support.

    Formulas (sums over the support with weights pi_j; ``r = dQ/dpi``, ``m = dM/dpi``):
    ``KL(Q||pi) = sum pi r log r``, ``KL(M||Q) = sum pi m (log m - log r)``, ``KL(M||pi) = sum pi m log m``,
    ``CE = -sum pi m log r``. Both kernels are renormalised on the support (``sum pi m = sum pi r = 1``; a no-op
    on a finite Z or for exact ratios under an exact rule), so ``CE = KL(M||Q) - KL(M||pi)`` holds exactly.
    Points where ``m = 0`` (``log m = -inf``) contribute 0.

    Args:
        log_learned_ratio: (n, N) log dQ(z_i,.)/dpi (z'_j), e.g. from :func:`learned_log_density_ratio`.
        log_kernel_ratio: (n, N) log dM(z_i,.)/dpi (z'_j) (may contain -inf).
        support_weights: (N,) pi_j, or ``None`` for 1/N.

    Raises:
        ValueError: on shape mismatch, NaN, or +inf in either ratio, or -inf in ``log_learned_ratio``.
    """
    lq = _check_matrix("log_learned_ratio", log_learned_ratio)
    lm = _check_matrix("log_kernel_ratio", log_kernel_ratio, allow_minus_inf=True)
    if lq.shape != lm.shape:
        raise ValueError(
            f"log_learned_ratio {tuple(lq.shape)} and log_kernel_ratio {tuple(lm.shape)} differ; "
            "evaluate both on the same anchors and support."
        )
    if torch.isneginf(lq).any():
        raise ValueError(
            "log_learned_ratio contains -inf; the learned kernel has full support (|log r| <= 2/tau)."
        )
    log_weights = _log_weights(support_weights, lq.shape[1])
    lq = lq - torch.logsumexp(lq + log_weights, dim=1, keepdim=True)
    lm = lm - torch.logsumexp(lm + log_weights, dim=1, keepdim=True)
    q_mass = torch.exp(lq + log_weights)
    m_mass = torch.exp(lm + log_weights)
    m_log_m = torch.where(m_mass > 0, m_mass * lm, torch.zeros_like(m_mass))
    kl_m_pi = m_log_m.sum(dim=1)
    cross_entropy = -(m_mass * lq).sum(dim=1)
    return KernelDivergences(
        sup_abs_log_ratio=lq.abs().amax(dim=1),
        kl_learned_to_anchor=(q_mass * lq).sum(dim=1),
        kl_kernel_to_learned=kl_m_pi + cross_entropy,
        kl_kernel_to_anchor=kl_m_pi,
        cross_entropy=cross_entropy,
    )


def temperature_bound(tau: float) -> float:
    """eq. 8 of [B]: ``sup_{z, z'} |log dQ(z,.)/dpi (z')| <= 2/tau``, hence also ``KL(Q(z,.)||pi) <= 2/tau``."""
    return 2.0 / check_tau(tau)


def cross_entropy_gap_bounds(n_negatives: int, tau: float, form: KernelForm) -> tuple[float, float]:
    """Prop. 1 of [B]: ``lower <= ∫ CE[M||Q] dpi - R(phi; k, tau) <= upper`` for every phi.

    InfoNCE: ``lower = -log(1 + e^{2/tau}/k)``; DCL (``R~``): ``lower = 0``; both:
    ``upper = (e^{2/tau} - 1)^2 / (8k)``.
    """
    k = _check_k(n_negatives)
    t = check_tau(tau)
    check_choice("form", form, KERNEL_FORMS)
    upper = math.expm1(2.0 / t) ** 2 / (8.0 * k)
    lower = -math.log1p(math.exp(2.0 / t) / k) if form == "infonce" else 0.0
    return lower, upper


def ideal_search_bound(n_negatives: int, tau: float, second_moment: float, form: KernelForm) -> float:
    """Prop. 2 of [B]: ``|∫ E CE[M_hat_k||Q_hat_k] dpi - R| <= (4/(tau k)) E|dM/dpi|^2 + log(1 + e^{2/tau}/k)``.

    The log term is InfoNCE's only; the DCL variant (``R~``) has none.

    Args:
        n_negatives: k >= 1.
        tau: temperature > 0.
        second_moment: ``E|dM/dpi|^2 = E_{z~pi} ∫ (dM(z,.)/dpi)^2 dpi >= 1`` (``density_ratio_second_moment()``).
        form: "infonce" or "dcl".
    """
    k = _check_k(n_negatives)
    t = check_tau(tau)
    check_choice("form", form, KERNEL_FORMS)
    if not math.isfinite(second_moment) or second_moment < 1.0:
        raise ValueError(
            f"second_moment={second_moment!r} must be finite and >= 1 (E|dM/dpi|^2 >= (E dM/dpi)^2 = 1)."
        )
    bound = 4.0 * second_moment / (t * k)
    return bound + math.log1p(math.exp(2.0 / t) / k) if form == "infonce" else bound


def contrastive_risk_draws(
    positive_scores: Tensor, negative_scores: Tensor, *, tau: float, form: KernelForm
) -> Tensor:
    """Per-draw values of [B]'s risk: ``loss_r - log k``, whose mean estimates R(phi; k, tau) (or R~ for DCL).

    ``loss_r`` is :func:`crl.objectives.contrastive_loss_from_scores` with ``reduction="none"``: InfoNCE
    ``log(1 + sum_j exp((s'_rj - s_r)/tau))`` or DCL ``log sum_j exp((s'_rj - s_r)/tau)``.

    Args:
        positive_scores: (R,) s(z_r, y_r), y_r ~ M(z_r, .).
        negative_scores: (R, k) s(z_r, xi_rj), xi_rj ~ pi.
        tau: temperature > 0.
        form: "infonce" or "dcl".
    """
    check_choice("form", form, KERNEL_FORMS)
    pos, neg = _check_draws(positive_scores, negative_scores)
    loss = contrastive_loss_from_scores(pos, neg, tau=check_tau(tau), form=form, reduction="none")
    return loss - math.log(neg.shape[1])


def integrated_cross_entropy_gap(
    positive_scores: Tensor,
    negative_scores: Tensor,
    log_partition: Tensor,
    *,
    tau: float,
    form: KernelForm,
) -> GapDraws:
    """Per-draw unbiased estimates of Prop. 1's gap ``∫ CE[M||Q] dpi - R(phi; k, tau)`` (or ``- R~`` for DCL).

    Each draw r has an anchor z_r ~ pi, a positive y_r ~ M(z_r, .) (score ``s_r``), k negatives xi_rj ~ pi
    (scores ``s'_rj``) and the exact ``log N(z_r)``. The plain estimate is
    ``naive_r = CE_r - (loss_r - log k)`` with the one-sample ``CE_r = -s_r/tau + log N(z_r)``; it equals
    ``-log(V_r / N(z_r))`` with ``V_r = Wbar_r (+ e^{s_r/tau}/k for InfoNCE)``, ``Wbar_r = (1/k) sum_j
    exp(s'_rj/tau)``. Since ``E[Wbar_r/N(z_r) | z_r] = 1`` exactly, the control variate ``V_r/N - 1`` has the
    known mean ``0`` (DCL) or ``E[e^{s/tau}]/(kN)`` (InfoNCE, estimated without bias by the draw's own
    ``e^{s_r/tau}/(kN)``), and

        ``estimate_r = naive_r + (V_r/N - 1) - [InfoNCE] e^{s_r/tau}/(k N)``,

    whose DCL part ``x - 1 - log x`` (x = Wbar/N) is ~ (x-1)^2/2: mean ~ sigma^2/(2k) and relative standard
    deviation ~ sqrt(2), for every k. ``log N`` must be exact (closed form or quadrature): an estimate from N'
    samples biases the gap by about ``Var(W/N)/(2N')``.

    Args:
        positive_scores: (R,) s(z_r, y_r).
        negative_scores: (R, k) s(z_r, xi_rj).
        log_partition: (R,) log N(z_r) = log ∫ exp(s(z_r, z')/tau) pi(dz').
        tau: temperature > 0.
        form: "infonce" (R) or "dcl" (R~).

    Returns:
        The :class:`GapDraws` (float64, shape (R,)).
    """
    pos, neg = _check_draws(positive_scores, negative_scores)
    log_n = _check_vector("log_partition", log_partition, pos.shape[0])
    t = check_tau(tau)
    risk = contrastive_risk_draws(pos, neg, tau=t, form=form)
    naive = (log_n - pos / t) - risk
    ratio = torch.exp(-naive)
    estimate = naive + (ratio - 1.0)
    if form == "infonce":
        estimate = estimate - torch.exp(pos / t - log_n) / neg.shape[1]
    return GapDraws(estimate=estimate, naive=naive)


def ideal_search_cross_entropy(search_scores: Tensor, log_kernel_ratio: Tensor, *, tau: float) -> Tensor:
    """``CE[M_hat_k || Q_hat_k] = -(1/k) sum_i w_i log(k softmax_i(s(z, xi_.)/tau))`` per draw (crl's M_hat_k).

    ``w_i = dM(z, .)/dpi (xi_i)``; the cross-entropy is relative to the empirical law pi_k of the k points,
    ``-∫ log(dQ_hat_k/dpi_k) dM_hat_k``. See the module docstring for this normalisation (crl's choice).

    Args:
        search_scores: (R, k) s(z_r, xi_ri) of the k unseen points.
        log_kernel_ratio: (R, k) log dM(z_r, .)/dpi (xi_ri) (may be -inf where M has no mass).
        tau: temperature > 0.

    Returns:
        (R,) float64 cross-entropies.
    """
    scores = _check_matrix("search_scores", search_scores)
    log_w = _check_matrix("log_kernel_ratio", log_kernel_ratio, allow_minus_inf=True)
    if scores.shape != log_w.shape:
        raise ValueError(
            f"search_scores {tuple(scores.shape)} and log_kernel_ratio {tuple(log_w.shape)} differ; "
            "pass one weight per unseen point."
        )
    k = scores.shape[1]
    log_ratio_to_empirical = torch.log_softmax(scores / check_tau(tau), dim=1) + math.log(k)
    return -(torch.exp(log_w) * log_ratio_to_empirical).sum(dim=1) / k


def ideal_search_gap(
    positive_scores: Tensor,
    negative_scores: Tensor,
    log_kernel_ratio: Tensor,
    log_partition: Tensor,
    *,
    tau: float,
    form: KernelForm,
) -> GapDraws:
    """Per-draw unbiased estimates of Prop. 2's gap ``∫ E CE[M_hat_k||Q_hat_k] dpi - R`` (or ``- R~``).

    The k unseen points of the search are the draw's k negatives (common random numbers: both expectations are
    over k points ~ pi). With ``wbar = (1/k) sum_i w_i`` and ``Wbar = (1/k) sum_j exp(s'_j/tau)``,

        ``CE_r - (loss_r - log k) = wbar log Wbar - (1/k) sum_i w_i s'_i/tau - log(Wbar + [InfoNCE] e^{s/tau}/k)
        + s/tau``  (the plain ``naive_r``).

    Using the exact means ``E wbar = 1`` and ``E[(1/k) sum_i w_i s'_i] = E_M s = E s`` (importance sampling),
    the terms whose fluctuations are O(1) are replaced by their common mean and cancel; subtracting
    ``(wbar - 1) log N(z)`` (mean 0 for any anchor-wise constant) centres the rest:

        ``estimate_r = (wbar - 1) log(Wbar/N) + log Wbar - log(Wbar + [InfoNCE] e^{s/tau}/k)``,

    with ``log(Wbar + e^{s/tau}/k) = loss_r + s/tau - log k`` taken from the objective. For DCL the estimate is
    ``(wbar - 1) log(Wbar/N)``, a product of two O(k^{-1/2}) fluctuations: mean ``Cov(w, W/N)/k + O(k^-2)`` and
    a standard deviation of the same order, for every k. ``log N`` need not be exact (any value keeps the
    estimate unbiased); the closer to log N(z), the smaller its variance.

    Args:
        positive_scores: (R,) s(z_r, y_r), y_r ~ M(z_r, .).
        negative_scores: (R, k) s(z_r, xi_rj), xi_rj ~ pi: the negatives and the unseen points.
        log_kernel_ratio: (R, k) log dM(z_r, .)/dpi (xi_rj).
        log_partition: (R,) log N(z_r) (or an approximation, see above).
        tau: temperature > 0.
        form: "infonce" (R) or "dcl" (R~).
    """
    pos, neg = _check_draws(positive_scores, negative_scores)
    log_w = _check_matrix("log_kernel_ratio", log_kernel_ratio, allow_minus_inf=True)
    if log_w.shape != neg.shape:
        raise ValueError(
            f"log_kernel_ratio {tuple(log_w.shape)} must match negative_scores {tuple(neg.shape)}: "
            "one weight dM/dpi per unseen point."
        )
    log_n = _check_vector("log_partition", log_partition, pos.shape[0])
    t = check_tau(tau)
    k = neg.shape[1]
    risk = contrastive_risk_draws(pos, neg, tau=t, form=form)
    naive = ideal_search_cross_entropy(neg, log_w, tau=t) - risk
    log_wbar = torch.logsumexp(neg / t, dim=1) - math.log(k)
    wbar = torch.exp(log_w).mean(dim=1)
    log_partition_with_positive = risk + pos / t
    estimate = (wbar - 1.0) * (log_wbar - log_n) + log_wbar - log_partition_with_positive
    return GapDraws(estimate=estimate, naive=naive)


@dataclass(frozen=True)
class GapCoefficients:
    """Leading-order constants a of the four gaps, each ``gap = a/k + O(k^-2)`` (crl's expansion, not in [B]).

    With ``r = dQ(z,.)/dpi``, ``m = dM(z,.)/dpi`` and ``Var_pi(r) = ∫ r^2 dpi - 1``, a second-order expansion of
    ``-log(Wbar/N)`` about 1 (``E[Wbar/N] = 1``, ``Var(Wbar/N) = Var_pi(r)/k``) gives

    Attributes:
        cross_entropy_dcl: ``∫ Var_pi(r)/2 dpi(z)`` (Prop. 1, DCL).
        cross_entropy_infonce: ``∫ [Var_pi(r)/2 - ∫ r dM] dpi(z)`` (Prop. 1, InfoNCE).
        ideal_search_dcl: ``∫ [∫ r dM - 1] dpi(z) = ∫ Cov_pi(m, r) dpi(z)`` (Prop. 2, DCL).
        ideal_search_infonce: ``-1`` for every phi (Prop. 2, InfoNCE: the Cov term minus ``∫ r dM``).
    """

    cross_entropy_dcl: float
    cross_entropy_infonce: float
    ideal_search_dcl: float
    ideal_search_infonce: float


def asymptotic_gap_coefficients(
    log_learned_ratio: Tensor,
    log_kernel_ratio: Tensor,
    *,
    support_weights: Tensor | None = None,
    anchor_weights: Tensor | None = None,
) -> GapCoefficients:
    """The constants a of :class:`GapCoefficients` from dQ/dpi and dM/dpi on an (anchor x support) rule.

    Args:
        log_learned_ratio: (n, N) log dQ(z_i,.)/dpi (z'_j) (e.g. :func:`learned_log_density_ratio` on a
            quadrature rule, for anchors z_i on a second rule).
        log_kernel_ratio: (n, N) log dM(z_i,.)/dpi (z'_j).
        support_weights: (N,) pi_j (None: 1/N).
        anchor_weights: (n,) weights of the anchors for ∫ dpi(z) (None: 1/n).
    """
    lq = _check_matrix("log_learned_ratio", log_learned_ratio)
    lm = _check_matrix("log_kernel_ratio", log_kernel_ratio, allow_minus_inf=True)
    if lq.shape != lm.shape:
        raise ValueError(
            f"log_learned_ratio {tuple(lq.shape)} and log_kernel_ratio {tuple(lm.shape)} differ; "
            "evaluate both on the same anchors and support."
        )
    log_pi = _log_weights(support_weights, lq.shape[1])
    anchor_mass = torch.exp(_log_weights(anchor_weights, lq.shape[0]))
    variance = torch.exp(torch.logsumexp(2.0 * lq + log_pi, dim=1)) - 1.0
    kernel_mean = torch.exp(torch.logsumexp(lq + lm + log_pi, dim=1))
    return GapCoefficients(
        cross_entropy_dcl=float((anchor_mass * variance / 2.0).sum()),
        cross_entropy_infonce=float((anchor_mass * (variance / 2.0 - kernel_mean)).sum()),
        ideal_search_dcl=float((anchor_mass * (kernel_mean - 1.0)).sum()),
        ideal_search_infonce=-1.0,
    )


def vmf_identity_cross_entropy(log_normaliser_tau: float, mean_resultant_kappa: float, tau: float) -> float:
    """Closed form of ``CE[M(z,.)||Q(z,.)]`` for phi = id, M = vMF(z, kappa), pi uniform on S^{d-1}.

    ``CE = -(1/tau) E_{y ~ vMF(z, kappa)} <z, y> + log E_{u ~ pi} exp(<z, u>/tau) = -A_d(kappa)/tau + log C_d(1/tau)``
    (the same for every z).

    Args:
        log_normaliser_tau: ``log C_d(1/tau)`` (e.g. ``VMFUniform(d, 1/tau).log_normaliser``).
        mean_resultant_kappa: ``A_d(kappa) = E<z, y>``.
        tau: temperature > 0.
    """
    return -mean_resultant_kappa / check_tau(tau) + log_normaliser_tau


def vmf_kl(
    kappa_from: float,
    kappa_to: float,
    mean_resultant_from: float,
    log_normaliser_from: float,
    log_normaliser_to: float,
) -> float:
    """``KL(vMF(z, kappa_from) || vMF(z, kappa_to))`` for the same mean direction, in closed form.

    ``= (kappa_from - kappa_to) A_d(kappa_from) - log C_d(kappa_from) + log C_d(kappa_to)`` (log densities
    ``kappa <z, y> - log C_d(kappa)`` against the uniform law). With phi_c(z) = (sqrt(c) z, sqrt(1-c)), the
    learned kernel is ``Q = vMF(z, c/tau)``, so ``min_c KL(M||Q)`` is 0 when ``kappa tau <= 1`` and
    ``KL(vMF(kappa) || vMF(1/tau))`` otherwise (C9).
    """
    return (kappa_from - kappa_to) * mean_resultant_from - log_normaliser_from + log_normaliser_to


def _pair_scores(anchor_embeddings: Tensor, support_embeddings: Tensor) -> Tensor:
    """(n, N) inner products in float64, after checking both (n, p), (N, p) inputs."""
    a = _check_matrix("anchor_embeddings", anchor_embeddings)
    c = _check_matrix("support_embeddings", support_embeddings)
    if a.shape[1] != c.shape[1]:
        raise ValueError(
            f"anchor_embeddings have p = {a.shape[1]} but support_embeddings have p = {c.shape[1]}; "
            "embed both with the same phi."
        )
    return a @ c.T


def _log_weights(support_weights: Tensor | None, size: int) -> Tensor:
    """log pi_j of the support: from the given weights (positive, summing to 1) or log(1/N)."""
    if support_weights is None:
        return torch.full((size,), -math.log(size), dtype=torch.float64)
    w = _check_vector("support_weights", support_weights, size)
    if bool((w <= 0).any()):
        raise ValueError(
            "support_weights has entries <= 0; pass positive weights pi_j (drop zero-mass points)."
        )
    total = float(w.sum())
    if abs(total - 1.0) > 1e-9:
        raise ValueError(f"support_weights sum to {total!r}; pass a probability vector (divide by its sum).")
    return torch.log(w)


def _check_matrix(name: str, value: Tensor, *, allow_minus_inf: bool = False) -> Tensor:
    """A 2-D floating tensor as float64, without NaN or +inf (and without -inf unless allowed)."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    if value.ndim != 2 or not value.is_floating_point():
        raise ValueError(
            f"{name} must be a 2-D floating tensor, got shape {tuple(value.shape)}, {value.dtype}."
        )
    x = value.detach().to(torch.float64)
    bad = torch.isnan(x) | torch.isposinf(x)
    if not allow_minus_inf:
        bad = bad | torch.isneginf(x)
    if bool(bad.any()):
        raise ValueError(f"{name} contains NaN or infinite values; pass finite numbers.")
    return x


def _check_vector(name: str, value: Tensor, size: int) -> Tensor:
    """A finite 1-D floating tensor of the given length, as float64."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}.")
    if value.shape != (size,) or not value.is_floating_point():
        raise ValueError(f"{name} must be a floating tensor of shape ({size},), got {tuple(value.shape)}.")
    x = value.detach().to(torch.float64)
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or infinite values; pass finite numbers.")
    return x


def _check_draws(positive_scores: Tensor, negative_scores: Tensor) -> tuple[Tensor, Tensor]:
    """(R,) positive and (R, k) negative scores as float64, with matching R and k >= 1."""
    neg = _check_matrix("negative_scores", negative_scores)
    if neg.shape[1] == 0:
        raise ValueError("negative_scores has k = 0 columns; the risk needs at least one negative.")
    pos = _check_vector("positive_scores", positive_scores, neg.shape[0])
    return pos, neg


def _check_k(n_negatives: int) -> int:
    """A number of negatives k >= 1."""
    if isinstance(n_negatives, bool) or not isinstance(n_negatives, int) or n_negatives < 1:
        raise ValueError(f"n_negatives={n_negatives!r} must be an integer k >= 1.")
    return n_negatives
