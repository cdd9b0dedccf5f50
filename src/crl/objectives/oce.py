"""Optimised certainty equivalents (OCE): [A]'s contrastive risk as one member of a family of risk aggregations.

[A] (Lemma 4.2) writes the GCL per-anchor value as an OCE of the score differences Delta_j = s(x, y'_j) - s(x, y):

    tau log mean_j exp(Delta_j / tau) = min_mu { mu + tau mean_j phi*((Delta_j - mu) / tau) },  phi*(t) = e^t - 1.

Replacing the disutility phi* by another convex one gives other aggregations of the m negatives. [A]'s exact list of
disutilities could not be confirmed (docs/theory.md section 2), so the family offered here is crl's own choice:

- ``Entropic()``: phi*(t) = e^t - 1, the contrastive (GCL) risk. The minimiser is mu* = tau log mean_j exp(Delta_j/tau).
- ``CVaR(alpha)``: phi*(t) = [t]_+ / alpha. The objective is mu + mean_j [Delta_j - mu]_+ / alpha (tau cancels),
  minimised exactly at mu* = the k-th largest Delta_j with k = ceil(alpha m): the mean of the worst alpha-fraction
  of negatives (alpha = 1: mean_j Delta_j; alpha <= 1/m: max_j Delta_j).

Both evaluate the OCE objective at its exact minimiser, so the value and its (sub)gradient are exact.
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_choice
from crl._vocab import Regime
from crl.objectives._checks import REDUCTIONS, Reduction, check_logit_range, check_scores, highest_score
from crl.objectives._scores import loss_from_scores
from crl.objectives.temperature import TauLike, resolve_tau


@dataclass(frozen=True)
class Entropic:
    """Entropic disutility phi*(t) = e^t - 1; its OCE is [A]'s contrastive risk (= ``form="gcl"``)."""

    def aggregate(self, delta: Tensor, tau: Tensor) -> Tensor:
        """Per-row OCE: min_mu mu + tau mean_j (exp((Delta_j - mu)/tau) - 1), evaluated at mu*.

        mu* = tau log mean_j exp(Delta_j / tau) zeroes the derivative in mu, so mu* is detached (envelope theorem)
        and the gradient in Delta is the softmax of Delta / tau, as for GCL.
        """
        mu = (tau * (torch.logsumexp(delta / tau, dim=-1) - math.log(delta.shape[-1]))).detach()
        return mu + tau * torch.expm1((delta - mu[..., None]) / tau).mean(dim=-1)


@dataclass(frozen=True)
class CVaR:
    """Conditional value at risk: phi*(t) = [t]_+ / alpha, the mean of the largest alpha-fraction of Delta.

    Args:
        alpha: fraction in (0, 1] of the hardest negatives that the risk averages.
    """

    alpha: float

    def __post_init__(self) -> None:
        valid_type = isinstance(self.alpha, int | float) and not isinstance(self.alpha, bool)
        if not (valid_type and 0.0 < self.alpha <= 1.0):
            raise ValueError(
                f"alpha={self.alpha!r} must be in (0, 1]: the fraction of hardest negatives averaged."
            )

    def aggregate(self, delta: Tensor, tau: Tensor) -> Tensor:
        """Per-row OCE: min_mu mu + mean_j [Delta_j - mu]_+ / alpha, at mu* = k-th largest Delta, k = ceil(alpha m).

        mu* keeps its gradient (it routes to the k-th largest entry), so the gradient is the exact subgradient: weight
        1/(alpha m) on each entry above mu* and the remainder 1 - #{Delta_j > mu*}/(alpha m) on the k-th.
        """
        m = delta.shape[-1]
        k = min(m, max(1, math.ceil(self.alpha * m - 1e-9)))
        mu = torch.topk(delta, k, dim=-1).values[..., -1]
        return mu + torch.relu(delta - mu[..., None]).sum(dim=-1) / (self.alpha * m)


Disutility = Entropic | CVaR


def _resolve_disutility(disutility: str | Disutility) -> Disutility:
    if isinstance(disutility, Entropic | CVaR):
        return disutility
    if disutility == "entropic":
        return Entropic()
    raise ValueError(
        f"disutility={disutility!r} is not known; use 'entropic', Entropic() or CVaR(alpha) with alpha in (0, 1]."
    )


def oce_loss_from_scores(
    positive_scores: Tensor,
    negative_scores: Tensor,
    *,
    tau: TauLike,
    disutility: str | Disutility = "entropic",
    reduction: Reduction = "mean",
) -> Tensor:
    """OCE aggregation of Delta_ij = s(x_i, y'_ij) - s(x_i, y_i) over the m negatives of each anchor.

    Args:
        positive_scores: (n,) scores s(x_i, y_i).
        negative_scores: (n, m) scores s(x_i, y'_ij).
        tau: temperature (enters the entropic disutility; CVaR is free of it).
        disutility: "entropic", :class:`Entropic` or :class:`CVaR`.
        reduction: "mean" over anchors or "none".

    Raises:
        ValueError: on shape mismatch, m = 0, NaN/Inf scores, tau <= 0, logits s/tau that overflow the dtype
            (entropic), or an unknown disutility.

    Examples:
        >>> pos, neg = torch.zeros(1), torch.tensor([[0.0, 1.0, 2.0, 3.0]])
        >>> float(oce_loss_from_scores(pos, neg, tau=1.0, disutility=CVaR(0.5)))
        2.5
    """
    check_choice("reduction", reduction, REDUCTIONS)
    rule = _resolve_disutility(disutility)
    pos, neg = check_scores(positive_scores, negative_scores)
    tau_value = resolve_tau(tau)
    if isinstance(rule, Entropic):
        check_logit_range(tau_value, pos.dtype, highest_score(pos, neg), count=neg.numel())
    t = tau_value.to(device=pos.device, dtype=pos.dtype)
    per_anchor = rule.aggregate(neg - pos[:, None], t)
    return per_anchor.mean() if reduction == "mean" else per_anchor


def oce_loss(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None = None,
    *,
    tau: TauLike,
    disutility: str | Disutility = "entropic",
    regime: Regime = "shared",
    chunk: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """OCE loss of embeddings (score = dot product): :func:`oce_loss_from_scores` over chunks of anchors.

    Args:
        anchors: (n, d).
        positives: (n, d).
        negatives: shared (m, d), in-batch ``None`` (m = n - 1), or independent (n, m, d).
        tau: temperature.
        disutility: "entropic", :class:`Entropic` or :class:`CVaR`.
        regime: "shared" or "independent".
        chunk: anchors per chunk (None: automatic).
        reduction: "mean" or "none".
    """
    rule = _resolve_disutility(disutility)
    t = resolve_tau(tau)

    def per_anchor(pos: Tensor, neg: Tensor) -> Tensor:
        return rule.aggregate(neg - pos[:, None], t.to(pos))

    return loss_from_scores(
        anchors,
        positives,
        negatives,
        per_anchor,
        regime=regime,
        chunk=chunk,
        reduction=reduction,
        tau=t if isinstance(rule, Entropic) else None,
    )
