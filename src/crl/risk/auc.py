"""[A]'s retrieval criterion: the population AUC E(s) of ranking a positive above a negative, and E* - E(s).

``E(s) = P[s(x, y) > s(x, y')] + 1/2 P[s(x, y) = s(x, y')]``, x ~ pi, y ~ p+_x, y' ~ p- (docs/theory.md section 3);
``E* = sup_s E(s)`` is attained by any score that ranks y by the likelihood ratio p+_x(y)/p-_x(y), e.g. s* or
the model's ``log_ratio`` itself (``truth.optimal_auc()`` gives it exactly).

Inner probability over y' (``inner="auto"`` picks the first that applies):

- ``"exact"``: for a :class:`~crl.risk.exact.FeatureScore` under the uniform-sphere or Gaussian negative
  law, ``P[s(x, y') < t]`` is a Beta or (non-central) chi-square CDF, so ``E(s) = E_{x,y} F_x(s(x, y))`` with
  only the outer expectation sampled (unbiased);
- ``"sampled"``: ``n_negatives`` fresh negatives per anchor, ``mean_j (1 + sign(s(x,y) - s(x,y'_j)))/2``
  (unbiased; ties count 1/2).

Standard errors are over independent anchors. (:mod:`crl.metrics.retrieval` computes the *empirical* AUC of a
fixed query set against a fixed gallery; this module estimates the population E(s) of a synthetic model.)
"""

import torch
from torch import Tensor

from crl._validate import check_count, check_generator
from crl._vocab import Estimate
from crl.risk.estimate import (
    ScoreFn,
    anchor_chunks,
    estimate_from_draws,
    evaluate_scores,
)
from crl.risk.exact import (
    FeatureScore,
    Inner,
    NegativeLaw,
    feature_score_cdf,
    ideal_feature_score,
    resolve_negative_law,
)
from crl.synthetic.base import GroundTruth


def _exact_terms(score: FeatureScore, law: NegativeLaw, x: Tensor, y: Tensor) -> Tensor:
    """Per pair ``F_x(s(x, y)) = P[s(x, y') < s(x, y)] + 1/2 P[=]``."""
    return feature_score_cdf(score, law, x, evaluate_scores(score, x, y))


def _pair_wins(positive: Tensor, negative: Tensor) -> Tensor:
    """``mean_j (1 + sign(pos_i - neg_ij))/2`` per anchor; ``-inf`` negatives (zero likelihood ratio) lose."""
    return (0.5 * (1.0 + torch.sign(positive[:, None] - negative))).mean(dim=1)


def _log_ratio_scores(truth: GroundTruth, x: Tensor, y: Tensor) -> Tensor:
    """``truth.log_ratio`` in float64 (may be -inf off the support of p+_x); NaN or +inf raise."""
    values = truth.log_ratio(x, y).detach().to(torch.float64)
    if bool(torch.isnan(values).any()) or bool(torch.isposinf(values).any()):
        raise ValueError("truth.log_ratio returned NaN or +inf; the model's densities are inconsistent.")
    return values


def auc(
    score_fn: ScoreFn,
    truth: GroundTruth,
    *,
    generator: torch.Generator,
    n_anchors: int = 8192,
    n_negatives: int = 256,
    inner: Inner = "auto",
) -> Estimate:
    """The population AUC ``E(s)`` of a score under a synthetic model, with its Monte-Carlo standard error.

    Args:
        score_fn: s(x, y), broadcasting.
        truth: the synthetic model.
        generator: the source of every draw.
        n_anchors: pairs (x, y) drawn.
        n_negatives: negatives per anchor when the inner probability is sampled.
        inner: "auto", "exact" or "sampled" (module docstring).

    Examples:
        >>> from crl.synthetic.vmf import VMFUniform
        >>> truth = VMFUniform(3, kappa=2.0)
        >>> est = auc(FeatureScore(lambda x: x), truth, generator=torch.Generator().manual_seed(0))
        >>> abs(est.mean - truth.optimal_auc()) < 4 * est.se
        True
    """
    check_generator(generator)
    check_count("n_anchors", n_anchors, 2)
    law = resolve_negative_law(score_fn, truth, None, inner)
    x, y = truth.sample(n_anchors, generator)
    if law is not None:
        assert isinstance(score_fn, FeatureScore)
        return estimate_from_draws(_exact_terms(score_fn, law, x, y))
    check_count("n_negatives", n_negatives, 1)
    terms = []
    for start, stop in anchor_chunks(n_anchors, n_negatives * truth.dim):
        negatives = truth.sample_negatives((stop - start, n_negatives), generator)
        positive = evaluate_scores(score_fn, x[start:stop], y[start:stop])
        negative = evaluate_scores(score_fn, x[start:stop, None, :], negatives)
        terms.append(_pair_wins(positive, negative))
    return estimate_from_draws(torch.cat(terms))


def auc_gap(
    score_fn: ScoreFn,
    truth: GroundTruth,
    *,
    generator: torch.Generator,
    reference: ScoreFn | None = None,
    n_anchors: int = 8192,
    n_negatives: int = 256,
    inner: Inner = "auto",
) -> Estimate:
    """``E(reference) - E(s)`` estimated pair by pair on common draws; ``reference=None`` gives ``E* - E(s)``.

    Both AUCs are evaluated on the same (x, y) (and, when sampled, the same negatives), so their difference
    has far less variance than two separate estimates when s is close to the reference. ``reference=None``
    uses s* as a FeatureScore when the inner probability is exact, else ``truth.log_ratio`` (which ranks like
    s*, may be -inf, and is compared with ties 1/2).

    Args:
        score_fn: s(x, y).
        truth: the synthetic model.
        generator: the source of every draw.
        reference: the score to compare with, or None for the ideal ranking (E*).
        n_anchors: pairs drawn.
        n_negatives: negatives per anchor when sampled.
        inner: "auto", "exact" or "sampled".
    """
    check_generator(generator)
    check_count("n_anchors", n_anchors, 2)
    law = resolve_negative_law(score_fn, truth, None, inner)
    ref = ideal_feature_score(truth, 1.0) if reference is None else reference
    x, y = truth.sample(n_anchors, generator)
    if law is not None and isinstance(ref, FeatureScore):
        assert isinstance(score_fn, FeatureScore)
        return estimate_from_draws(_exact_terms(ref, law, x, y) - _exact_terms(score_fn, law, x, y))
    check_count("n_negatives", n_negatives, 1)
    terms = []
    for start, stop in anchor_chunks(n_anchors, n_negatives * truth.dim):
        xc, yc = x[start:stop], y[start:stop]
        negatives = truth.sample_negatives((stop - start, n_negatives), generator)
        if reference is None:
            ref_pos, ref_neg = (
                _log_ratio_scores(truth, xc, yc),
                _log_ratio_scores(truth, xc[:, None, :], negatives),
            )
        else:
            ref_pos, ref_neg = (
                evaluate_scores(reference, xc, yc),
                evaluate_scores(reference, xc[:, None, :], negatives),
            )
        pos = evaluate_scores(score_fn, xc, yc)
        neg = evaluate_scores(score_fn, xc[:, None, :], negatives)
        terms.append(_pair_wins(ref_pos, ref_neg) - _pair_wins(pos, neg))
    return estimate_from_draws(torch.cat(terms))
