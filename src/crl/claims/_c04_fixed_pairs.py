"""C4's estimator: the fluctuation of ``L_hat_m(s)`` over negative draws, with the n pairs held fixed.

One *block* draws n pairs (x_i, y_i) once and then R independent sets of negatives, and returns the R values of

    ``L_hat_m(s) = (1/n) sum_i tau log((1/m) sum_j exp((s(x_i, y'_ij) - s(x_i, y_i))/tau))``

(GCL through :func:`crl.objectives.contrastive_loss_from_scores`), with negatives in one of [A]'s regimes:
``"shared"`` (SSCRL: one draw of m negatives for all anchors, y'_ij = y'_j) or ``"independent"`` (SCRL: m fresh
negatives per anchor). The sample sd of the R values, divided by Student's c4(R), estimates the conditional sd
``sd(L_hat_m | pairs)`` of docs/theory.md section 7, C4; independent blocks (fresh pairs each) are its
replicates, so a bootstrap over blocks also carries the variation of that sd from one set of pairs to another.
"""

import math

import torch
from torch import Tensor

from crl._vocab import check_count, check_tau
from crl.metrics.risk import FeatureScore
from crl.objectives import contrastive_loss_from_scores
from crl.synthetic.base import GroundTruth

_MAX_ELEMENTS = 4_000_000
"""Largest (replicates, n, m) score tensor built at once."""


def block_values(
    score: FeatureScore,
    truth: GroundTruth,
    tau: float,
    *,
    n: int,
    m: int,
    replicates: int,
    regime: str,
    generator: torch.Generator,
) -> Tensor:
    """R = ``replicates`` values of ``L_hat_m(s)`` on one fixed set of n pairs, negatives redrawn each time.

    Returns:
        float64 (R,) tensor.
    """
    t = check_tau(tau)
    check_count("n", n, 1)
    check_count("m", m, 1)
    check_count("replicates", replicates, 2)
    x, y = truth.sample(n, generator)
    positive = score(x, y)
    features = score.features(x)
    values = torch.empty(replicates, dtype=torch.float64)
    step = max(1, _MAX_ELEMENTS // (n * m))
    for start in range(0, replicates, step):
        count = min(replicates, start + step) - start
        scores = _negative_scores(score, features, truth, (count, n, m), regime, generator)
        loss = contrastive_loss_from_scores(
            positive.repeat(count), scores.reshape(count * n, m), tau=t, form="gcl", reduction="none"
        )
        values[start : start + count] = loss.reshape(count, n).mean(dim=1)
    return values


def _negative_scores(
    score: FeatureScore,
    features: Tensor,
    truth: GroundTruth,
    shape: tuple[int, int, int],
    regime: str,
    generator: torch.Generator,
) -> Tensor:
    """(R, n, m) scores ``s(x_i, y'_rij) = <f(x_i), y'> - (c/2)|y'|^2`` of R fresh sets of negatives: one set of m
    per replicate for all anchors (``"shared"``) or m per anchor and replicate (``"independent"``)."""
    count, n, m = shape
    if regime == "shared":
        negatives = truth.sample_negatives((count, m), generator)
        scores = torch.matmul(features, negatives.transpose(1, 2))
        squares = negatives.square().sum(dim=-1)[:, None, :]
    else:
        negatives = truth.sample_negatives((count, n, m), generator)
        scores = torch.einsum("id,rijd->rij", features, negatives)
        squares = negatives.square().sum(dim=-1)
    return scores if score.curvature == 0.0 else scores - 0.5 * score.curvature * squares


def c4_factor(replicates: int) -> float:
    """Student's ``c4(R) = sqrt(2/(R-1)) Gamma(R/2)/Gamma((R-1)/2)``: ``E[sample sd] = c4 sd`` for normal data."""
    r = check_count("replicates", replicates, 2)
    return math.sqrt(2.0 / (r - 1)) * math.exp(math.lgamma(r / 2.0) - math.lgamma((r - 1) / 2.0))


def block_sd(values: Tensor) -> float:
    """The bias-corrected sample sd ``s / c4(R)`` of one block's R values of ``L_hat_m``."""
    return float(values.std(unbiased=True)) / c4_factor(int(values.numel()))
