"""The bounds of [B]'s Props. 1-2 on the O(1/k) gaps, and crl's leading-order constants a (gap ~ a/k)."""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_choice, check_count, check_tau
from crl._vocab import KERNEL_FORMS, KernelForm
from crl.risk.kernel._checks import check_ratio_pair, support_log_weights


def cross_entropy_gap_bounds(n_negatives: int, tau: float, form: KernelForm) -> tuple[float, float]:
    """Prop. 1 of [B]: ``lower <= ∫ CE[M||Q] dpi - R(phi; k, tau) <= upper`` for every phi.

    InfoNCE: ``lower = -log(1 + e^{2/tau}/k)``; DCL (``R~``): ``lower = 0``; both:
    ``upper = (e^{2/tau} - 1)^2 / (8k)``.
    """
    k = check_count("n_negatives", n_negatives, 1)
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
    k = check_count("n_negatives", n_negatives, 1)
    t = check_tau(tau)
    check_choice("form", form, KERNEL_FORMS)
    if not math.isfinite(second_moment) or second_moment < 1.0:
        raise ValueError(
            f"second_moment={second_moment!r} must be finite and >= 1 (E|dM/dpi|^2 >= (E dM/dpi)^2 = 1)."
        )
    bound = 4.0 * second_moment / (t * k)
    return bound + math.log1p(math.exp(2.0 / t) / k) if form == "infonce" else bound


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
    lq, lm = check_ratio_pair(log_learned_ratio, log_kernel_ratio)
    log_pi = support_log_weights(support_weights, lq.shape[1])
    anchor_mass = torch.exp(support_log_weights(anchor_weights, lq.shape[0]))
    variance = torch.exp(torch.logsumexp(2.0 * lq + log_pi, dim=1)) - 1.0
    kernel_mean = torch.exp(torch.logsumexp(lq + lm + log_pi, dim=1))
    return GapCoefficients(
        cross_entropy_dcl=float((anchor_mass * variance / 2.0).sum()),
        cross_entropy_infonce=float((anchor_mass * (variance / 2.0 - kernel_mean)).sum()),
        ideal_search_dcl=float((anchor_mass * (kernel_mean - 1.0)).sum()),
        ideal_search_infonce=-1.0,
    )
