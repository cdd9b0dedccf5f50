"""[A]'s contrastive risks of a score s: population risk L(s), expected finite-m risk, excess risk, KL, inner bias.

Definitions (docs/theory.md sections 2 and 4), x ~ pi, y ~ p+_x, y' ~ p-:

- population risk (m -> infinity): ``L(s) = E_{x,y}[tau log E_{y'} exp((s(x,y') - s(x,y))/tau)]
  = E_{x,y}[tau log Z_s(x) - s(x, y)]`` with ``Z_s(x) = E_{y'} exp(s(x, y')/tau)``;
- with m negatives per anchor (``m=...`` in :func:`population_risk`), the expected empirical risk
  ``E L_hat_m`` of :mod:`crl.risk.empirical`;
- ``L(s) - L* = tau E_x KL(p+_x || q_{s,x})``, ``q_{s,x} ∝ p- exp(s(x, .)/tau)``, ``L* = -tau E_x KL(p+_x || p-)``.

Every loss value comes from :mod:`crl.objectives`: the m -> infinity limit through ``contrastive_form`` with
``log Z_s(x)`` in place of ``log sum_j exp(s_ij/tau) - log m`` (finite m: ``contrastive_loss_from_scores``).
Forms: ``"gcl"`` is [A]'s risk (above). ``"infonce"`` and ``"dcl"`` are [B]'s risks centred by log k:
``R = E[loss] - log m``, whose common m -> infinity limit is ``∫ CE dpi = E[log Z_s(x) - s(x,y)/tau] = L(s)/tau``.

Inner expectation ``log Z_s(x)`` (``inner="auto"`` picks the first that applies):

- ``"exact"``: closed form for a :class:`~crl.risk.exact.FeatureScore` under the uniform-sphere or
  Gaussian negative law (VMFUniform, GaussianTwoTower; :mod:`crl.risk.exact`): no inner error.
- ``"sampled"``: ``n_negatives`` fresh negatives per anchor, ``log Wbar + v_hat/(2M)`` with ``Wbar`` the mean of
  ``W_j = exp(s(x, y'_j)/tau)`` and ``v_hat`` the sample variance of ``W_j/Wbar`` (delta-method correction of
  ``E log Wbar = log Z - Var(W/Z)/(2M) + O(M^-2)``): residual bias O(1/M^2) per anchor, i.e. negligible against
  the Monte-Carlo error for bounded scores and M in the thousands, but not zero.

Standard errors are over independent anchors.
"""

import math

import torch
from torch import Tensor

from crl._validate import check_choice, check_count, check_generator, check_tau
from crl._vocab import FORMS, Estimate, Form, Regime
from crl.objectives import contrastive_form
from crl.risk.empirical import expected_empirical_risk
from crl.risk.estimate import (
    ScoreFn,
    anchor_chunks,
    estimate_from_draws,
    evaluate_scores,
    limit_form,
)
from crl.risk.exact import (
    FeatureScore,
    Inner,
    NegativeLaw,
    feature_log_partition,
    resolve_negative_law,
)
from crl.synthetic.base import GroundTruth


def sampled_log_partition(
    score_fn: ScoreFn,
    truth: GroundTruth,
    x: Tensor,
    tau: float,
    *,
    n_negatives: int,
    generator: torch.Generator,
) -> Tensor:
    """``log Z_s(x_i)`` from ``n_negatives`` fresh negatives per anchor, delta-method bias corrected.

    ``log Wbar_i + (M sum_j p_ij^2 - 1)/(2(M - 1))`` with ``p_ij = softmax_j(s(x_i, y'_ij)/tau)``: the second
    term is ``v_hat/(2M)``, v_hat the unbiased sample variance of ``W_ij/Wbar_i``, which removes the O(1/M) bias
    of ``log Wbar``; what is left is O(1/M^2).

    Returns:
        float64 (n,) tensor.
    """
    t = check_tau(tau)
    m = check_count("n_negatives", n_negatives, 2)
    out = []
    for start, stop in anchor_chunks(x.shape[0], m * x.shape[-1]):
        chunk = x[start:stop]
        negatives = truth.sample_negatives((stop - start, m), generator)
        logits = evaluate_scores(score_fn, chunk[:, None, :], negatives) / t
        lse = torch.logsumexp(logits, dim=1)
        p = torch.softmax(logits, dim=1)
        correction = (m * p.square().sum(dim=1) - 1.0) / (2.0 * (m - 1))
        out.append(lse - math.log(m) + correction)
    return torch.cat(out)


def log_partition(
    score_fn: ScoreFn,
    truth: GroundTruth,
    x: Tensor,
    tau: float,
    *,
    generator: torch.Generator | None = None,
    n_negatives: int = 4096,
    negative_law: NegativeLaw | None = None,
    inner: Inner = "auto",
) -> Tensor:
    """``log Z_s(x) = log E_{y' ~ p-} exp(s(x, y')/tau)`` per anchor: exact when possible, else sampled.

    Args:
        score_fn: the score s (a :class:`FeatureScore` enables the closed forms).
        truth: the synthetic model (its p- unless ``negative_law`` is given).
        x: (n, d) anchors.
        tau: temperature > 0.
        generator: source of the sampled negatives (needed only when sampling).
        n_negatives: M, negatives per anchor when sampling.
        negative_law: integrate over this law instead of the model's p- (closed form only).
        inner: "auto", "exact" or "sampled" (module docstring).

    Returns:
        float64 (n,) tensor.
    """
    law = resolve_negative_law(score_fn, truth, negative_law, inner)
    if law is not None:
        assert isinstance(score_fn, FeatureScore)
        return feature_log_partition(score_fn, law, x, tau)
    if generator is None:
        raise ValueError(
            "sampling the inner expectation needs generator=torch.Generator().manual_seed(seed)."
        )
    return sampled_log_partition(
        score_fn, truth, x, tau, n_negatives=n_negatives, generator=check_generator(generator)
    )


def population_risk_terms(
    score_fn: ScoreFn, x: Tensor, y: Tensor, log_z: Tensor, *, tau: float, form: Form = "gcl"
) -> Tensor:
    """Per-pair m -> infinity risk ``tau log Z_s(x) - s(x, y)`` (gcl) or ``log Z_s(x) - s(x, y)/tau`` (dcl, infonce).

    Evaluated by :func:`crl.objectives.contrastive_form` with one "negative" whose log-sum-exp is log Z_s(x):
    the per-anchor loss at m -> infinity after the ``- log m`` centring.

    Args:
        score_fn: the score s.
        x: (n, d) anchors; y: (n, d) positives.
        log_z: (n,) ``log Z_s(x_i)``.
        tau: temperature > 0.
        form: "gcl", "dcl" or "infonce" (the last two share their centred limit).
    """
    t = check_tau(tau)
    check_choice("form", form, FORMS)
    positive_logits = evaluate_scores(score_fn, x, y) / t
    tau_t = torch.tensor(t, dtype=torch.float64)
    return contrastive_form(positive_logits, log_z, n_negatives=1, tau=tau_t, form=limit_form(form))


def population_risk(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int | None = None,
    *,
    generator: torch.Generator,
    form: Form = "gcl",
    regime: Regime = "independent",
    n_anchors: int = 8192,
    n_negatives: int = 4096,
    n_replicates: int = 64,
    negative_law: NegativeLaw | None = None,
    inner: Inner = "auto",
) -> Estimate:
    """[A]'s population risk L(s) (``m=None``) or the expected empirical risk ``E L_hat_m(s)`` (``m`` an int).

    ``m=None``: the mean over ``n_anchors`` pairs (x, y) of :func:`population_risk_terms`, the inner
    expectation exact or sampled with ``n_negatives`` per anchor (module docstring; sampled: O(1/M^2) bias).
    ``m`` given: :func:`expected_empirical_risk` with ``n_replicates`` data sets of ``n_anchors`` anchors.

    Args:
        score_fn: the score s(x, y), broadcasting.
        truth: the synthetic model (x ~ pi, y ~ p+_x, y' ~ p-).
        tau: temperature > 0.
        m: negatives per anchor, or None for the m -> infinity limit.
        generator: the source of every draw.
        form: "gcl" ([A]'s L), or "infonce"/"dcl" ([B]'s R centred by log m; limit L/tau).
        regime: "independent" (SCRL) or "shared" (SSCRL); finite m only (the mean is the same).
        n_anchors: anchors (m=None) or anchors per replicate (finite m).
        n_negatives: negatives per anchor for a sampled inner expectation (m=None).
        n_replicates: replicate data sets (finite m).
        negative_law: integrate over this law instead of p- (m=None, closed form only).
        inner: "auto", "exact" or "sampled" (m=None).

    Returns:
        The :class:`~crl.risk.estimate.Estimate`.

    Examples:
        >>> from crl.synthetic.vmf import VMFUniform
        >>> truth = VMFUniform(3, kappa=4.0)
        >>> s_star = FeatureScore(lambda x: 0.5 * 4.0 * x)
        >>> est = population_risk(s_star, truth, 0.5, generator=torch.Generator().manual_seed(0), n_anchors=256)
        >>> abs(est.mean - truth.optimal_risk(0.5)) < 4 * est.se + 1e-9
        True
    """
    check_generator(generator)
    if m is not None:
        return expected_empirical_risk(
            score_fn,
            truth,
            tau,
            m,
            generator=generator,
            form=form,
            regime=regime,
            n_anchors=n_anchors,
            n_replicates=n_replicates,
        )
    check_count("n_anchors", n_anchors, 2)
    x, y = truth.sample(n_anchors, generator)
    log_z = log_partition(
        score_fn,
        truth,
        x,
        tau,
        generator=generator,
        n_negatives=n_negatives,
        negative_law=negative_law,
        inner=inner,
    )
    return estimate_from_draws(population_risk_terms(score_fn, x, y, log_z, tau=tau, form=form))


def excess_risk_terms(
    score_fn: ScoreFn, truth: GroundTruth, x: Tensor, y: Tensor, log_z: Tensor, *, tau: float
) -> Tensor:
    """Per-pair ``tau log r(x, y) + tau log Z_s(x) - s(x, y)`` = ``tau [log p+_x(y) - log q_{s,x}(y)]``.

    Its mean is ``tau E_x KL(p+_x || q_{s,x}) = L(s) - L*``: the m -> infinity risk term of
    :func:`population_risk_terms` plus ``tau log r``, whose mean is ``tau E KL(p+||p-) = -L*``. The two parts
    cancel draw by draw as s -> s*, so the variance vanishes at s* (exactly 0 there with an exact log Z).
    """
    terms = population_risk_terms(score_fn, x, y, log_z, tau=tau, form="gcl")
    log_ratio = truth.log_ratio(x, y).detach().to(torch.float64)
    if not bool(torch.isfinite(log_ratio).all()):
        raise ValueError(
            "truth.log_ratio is not finite at a sampled positive; the model's p+ and p- disagree."
        )
    return terms + check_tau(tau) * log_ratio


def excess_risk(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    *,
    generator: torch.Generator,
    n_anchors: int = 8192,
    n_negatives: int = 4096,
    negative_law: NegativeLaw | None = None,
    inner: Inner = "auto",
) -> Estimate:
    """``L(s) - L* = tau E_x KL(p+_x || q_{s,x})`` ([A], docs/theory.md section 2), paired draw by draw.

    The mean of :func:`excess_risk_terms` over ``n_anchors`` pairs; its standard error shrinks to 0 as s -> s*
    (an estimate of ``population_risk(...) - truth.optimal_risk(tau)`` with far less variance near s*).
    A ``negative_law`` other than p- gives ``E[tau log Z_s^q - s + tau log r]``, which is the excess risk of the
    loss whose negatives come from q only relative to p-'s L* (used for C1's control).
    """
    check_generator(generator)
    check_count("n_anchors", n_anchors, 2)
    x, y = truth.sample(n_anchors, generator)
    log_z = log_partition(
        score_fn,
        truth,
        x,
        tau,
        generator=generator,
        n_negatives=n_negatives,
        negative_law=negative_law,
        inner=inner,
    )
    return estimate_from_draws(excess_risk_terms(score_fn, truth, x, y, log_z, tau=tau))


def kl_to_ideal(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    *,
    generator: torch.Generator,
    n_anchors: int = 8192,
    n_negatives: int = 4096,
    inner: Inner = "auto",
) -> Estimate:
    """``E_x KL(p+_x || q_{s,x})``, ``q_{s,x}(y) = p-(y) exp(s(x, y)/tau) / Z_s(x)`` (the learned kernel).

    Per pair ``log p+_x(y) - log q_{s,x}(y) = log r(x, y) - s(x, y)/tau + log Z_s(x)``; the mean over
    ``n_anchors`` pairs y ~ p+_x. Equals ``(L(s) - L*)/tau``.
    """
    t = check_tau(tau)
    check_generator(generator)
    check_count("n_anchors", n_anchors, 2)
    x, y = truth.sample(n_anchors, generator)
    log_z = log_partition(score_fn, truth, x, t, generator=generator, n_negatives=n_negatives, inner=inner)
    return estimate_from_draws(excess_risk_terms(score_fn, truth, x, y, log_z, tau=t) / t)
