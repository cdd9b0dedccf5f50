"""[B]'s learned kernel Q_tau^phi: its log-partition, its density ratio to pi, its divergences, eq. 8's bound.

``log dQ(z, .)/dpi (z') = s(z, z')/tau - log N(z)`` with ``log N(z) = log ∫ exp(s(z, z')/tau) pi(dz')`` and
``s(z, z') = <phi(z), phi(z')>`` (docs/theory.md section 5).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_tau
from crl.risk.kernel._checks import check_ratio_pair, pair_scores, support_log_weights


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
    scores = pair_scores(anchor_embeddings, support_embeddings)
    log_weights = support_log_weights(support_weights, scores.shape[1])
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
    scores = pair_scores(anchor_embeddings, support_embeddings)
    log_weights = support_log_weights(support_weights, scores.shape[1])
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
    lq, lm = check_ratio_pair(log_learned_ratio, log_kernel_ratio)
    if torch.isneginf(lq).any():
        raise ValueError(
            "log_learned_ratio contains -inf; the learned kernel has full support (|log r| <= 2/tau)."
        )
    log_weights = support_log_weights(support_weights, lq.shape[1])
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
