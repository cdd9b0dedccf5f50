"""The counting-measure variant of the ideal search (reported beside crl's reconstruction of [B] Prop. 2).

crl's ideal search (:mod:`crl.risk.kernel`) weights the k unseen points xi_i ~ pi by
``w_i = dM(z,.)/dpi (xi_i)``. The variant here drops the weights: ``M_hat_k^# = (1/k) sum_i delta_{xi_i}``, the
empirical measure of the k points, against the same learned search ``Q_hat_k = softmax_i(s(z, xi_i)/tau)`` and
the same reference law (the empirical law pi_k of the points):

    ``CE[M_hat_k^# || Q_hat_k] = -(1/k) sum_i log(k softmax_i) = log Wbar - (1/k) sum_i s(z, xi_i)/tau``,

``Wbar = (1/k) sum_j exp(s(z, xi_j)/tau)``. With [B]'s risk ``R~ = E log Wbar - E_M s/tau`` (DCL) the gap is

    ``∫ E CE[M_hat_k^#||Q_hat_k] dpi - R~ = D = ∫ (E_{M(z,.)} s(z,.) - E_pi s(z,.))/tau dpi(z)``

for every k, and InfoNCE adds ``-E log(1 + e^{s/tau}/(k Wbar)) = O(1/k)``: without the weights the search
does not estimate M and the gap does not vanish (unless ``D = 0``).
"""

import math

import torch
from torch import Tensor

from crl._validate import check_tau
from crl._vocab import KernelForm
from crl.risk.kernel._checks import check_draws, check_matrix, check_matrix_pair, support_log_weights
from crl.risk.kernel.gaps import contrastive_risk_draws


def counting_search_cross_entropy(search_scores: Tensor, *, tau: float) -> Tensor:
    """``CE[M_hat_k^# || Q_hat_k] = -(1/k) sum_i log(k softmax_i(s(z, xi_.)/tau))`` per draw (no weights).

    Args:
        search_scores: (R, k) s(z_r, xi_ri) of the k unseen points.
        tau: temperature > 0.

    Returns:
        (R,) float64 cross-entropies.
    """
    scores = check_matrix("search_scores", search_scores)
    k = scores.shape[1]
    return -(torch.log_softmax(scores / check_tau(tau), dim=1) + math.log(k)).mean(dim=1)


def counting_search_gap(
    positive_scores: Tensor, negative_scores: Tensor, *, tau: float, form: KernelForm
) -> Tensor:
    """Per-draw unbiased estimates of ``∫ E CE[M_hat_k^#||Q_hat_k] dpi - R`` (or ``- R~`` for DCL).

    ``gap_r = CE^#_r - (loss_r - log k)`` with the draw's k negatives as the unseen points (module docstring);
    its mean tends to D, not to 0.

    Args:
        positive_scores: (R,) s(z_r, y_r), y_r ~ M(z_r, .).
        negative_scores: (R, k) s(z_r, xi_rj), xi_rj ~ pi: the negatives and the unseen points.
        tau: temperature > 0.
        form: "infonce" (R) or "dcl" (R~).

    Returns:
        (R,) float64 per-draw gaps.
    """
    pos, neg = check_draws(positive_scores, negative_scores)
    t = check_tau(tau)
    return counting_search_cross_entropy(neg, tau=t) - contrastive_risk_draws(pos, neg, tau=t, form=form)


def counting_gap_limit(
    scores: Tensor,
    log_kernel_ratio: Tensor,
    *,
    tau: float,
    support_weights: Tensor | None = None,
    anchor_weights: Tensor | None = None,
) -> float:
    """``D = ∫ (E_{M(z,.)} s(z,.) - E_pi s(z,.))/tau dpi(z) = ∫ ∫ (dM/dpi - 1) s dpi dpi(z) / tau`` on a rule.

    Args:
        scores: (n, N) s(z_i, u_j) for anchors z_i and support points u_j.
        log_kernel_ratio: (n, N) log dM(z_i, .)/dpi (u_j).
        tau: temperature > 0.
        support_weights: (N,) pi_j (None: 1/N).
        anchor_weights: (n,) weights of the anchors for ∫ dpi(z) (None: 1/n).
    """
    s, log_m = check_matrix_pair(
        ("scores", scores),
        ("log_kernel_ratio", log_kernel_ratio),
        "evaluate both on the same anchors and support",
        allow_minus_inf=True,
    )
    pi = torch.exp(support_log_weights(support_weights, s.shape[1]))
    anchor_mass = torch.exp(support_log_weights(anchor_weights, s.shape[0]))
    per_anchor = ((torch.exp(log_m) - 1.0) * s) @ pi
    return float((anchor_mass * per_anchor).sum()) / check_tau(tau)
