"""Per-draw estimators of [B]'s risk and of the O(1/k) gaps of Props. 1-2, plain and variance-reduced.

The normalisation of the ideal search (crl's choice) and the variance reduction are explained in
:mod:`crl.risk.kernel`.
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_choice, check_tau
from crl._vocab import KERNEL_FORMS, KernelForm
from crl.objectives import contrastive_loss_from_scores
from crl.risk.kernel._checks import check_draws, check_matrix, check_matrix_pair, check_vector


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
    pos, neg = check_draws(positive_scores, negative_scores)
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
    pos, neg = check_draws(positive_scores, negative_scores)
    log_n = check_vector("log_partition", log_partition, pos.shape[0])
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
    ``-∫ log(dQ_hat_k/dpi_k) dM_hat_k``. See :mod:`crl.risk.kernel` for this normalisation (crl's choice).

    Args:
        search_scores: (R, k) s(z_r, xi_ri) of the k unseen points.
        log_kernel_ratio: (R, k) log dM(z_r, .)/dpi (xi_ri) (may be -inf where M has no mass).
        tau: temperature > 0.

    Returns:
        (R,) float64 cross-entropies.
    """
    scores, log_w = check_matrix_pair(
        ("search_scores", search_scores),
        ("log_kernel_ratio", log_kernel_ratio),
        "pass one weight per unseen point",
        allow_minus_inf=True,
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
    pos, neg = check_draws(positive_scores, negative_scores)
    log_w = check_matrix("log_kernel_ratio", log_kernel_ratio, allow_minus_inf=True)
    if log_w.shape != neg.shape:
        raise ValueError(
            f"log_kernel_ratio {tuple(log_w.shape)} must match negative_scores {tuple(neg.shape)}: "
            "one weight dM/dpi per unseen point."
        )
    log_n = check_vector("log_partition", log_partition, pos.shape[0])
    t = check_tau(tau)
    k = neg.shape[1]
    risk = contrastive_risk_draws(pos, neg, tau=t, form=form)
    naive = ideal_search_cross_entropy(neg, log_w, tau=t) - risk
    log_wbar = torch.logsumexp(neg / t, dim=1) - math.log(k)
    wbar = torch.exp(log_w).mean(dim=1)
    log_partition_with_positive = risk + pos / t
    estimate = (wbar - 1.0) * (log_wbar - log_n) + log_wbar - log_partition_with_positive
    return GapDraws(estimate=estimate, naive=naive)
