"""[A]'s empirical contrastive risk with m negatives: its draws, its expectation, and the SCRL inner gap.

``L_hat_m = (1/n) sum_i tau log((1/m) sum_j exp(Delta_ij/tau))``, Delta_ij = s(x_i, y'_ij) - s(x_i, y_i)
(docs/theory.md section 2), with negatives in one of the two regimes of [A]:

- SCRL (``regime="independent"``): m fresh negatives per anchor, so the n per-anchor terms are i.i.d.;
- SSCRL (``regime="shared"``): one draw of m negatives for all anchors.

``E L_hat_m`` is the same in both regimes (each anchor sees m negatives ~ p- either way); the fluctuation is not
(C4). ``L(s) - E L_hat_m(s) >= 0`` (Jensen) is [A]'s inner error, O(1/m) for bounded scores (Thm 4.5, C3). Every
loss value comes from :func:`crl.objectives.contrastive_loss_from_scores`; "infonce"/"dcl" are centred by
``- log m`` ([B]'s R).
"""

import math

import torch
from torch import Tensor

from crl._validate import check_choice, check_count, check_generator, check_tau
from crl._vocab import FORMS, REGIMES, Estimate, Form, Regime
from crl.objectives import contrastive_loss_from_scores
from crl.risk.estimate import (
    ScoreFn,
    anchor_chunks,
    estimate_from_draws,
    evaluate_scores,
)
from crl.risk.exact import FeatureScore, NegativeLaw, feature_log_partition, resolve_negative_law
from crl.risk.kernel import GapDraws, integrated_cross_entropy_gap
from crl.synthetic.base import GroundTruth


def _negative_scores(
    score_fn: ScoreFn, truth: GroundTruth, x: Tensor, m: int, regime: str, generator: torch.Generator
) -> Tensor:
    """(n, m) scores s(x_i, y'_ij): fresh negatives per anchor (independent) or one shared draw (shared)."""
    if regime == "shared":
        negatives = truth.sample_negatives((m,), generator)
        return evaluate_scores(score_fn, x[:, None, :], negatives[None, :, :])
    blocks = []
    for start, stop in anchor_chunks(x.shape[0], m * x.shape[-1]):
        negatives = truth.sample_negatives((stop - start, m), generator)
        blocks.append(evaluate_scores(score_fn, x[start:stop, None, :], negatives))
    return torch.cat(blocks)


def empirical_risk_per_anchor(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int,
    *,
    generator: torch.Generator,
    n_anchors: int,
    regime: Regime = "independent",
    form: Form = "gcl",
) -> Tensor:
    """The per-anchor terms of one empirical risk ``L_hat_m(s)``: one data set of n = ``n_anchors`` pairs.

    Draws n pairs and their negatives (``"independent"``: m per anchor, SCRL; ``"shared"``: one draw of m for
    all anchors, SSCRL) and returns :func:`crl.objectives.contrastive_loss_from_scores` with reduction "none";
    "infonce"/"dcl" are centred by ``- log m`` ([B]'s R). Their mean is ``L_hat_m``. In the SCRL regime the n
    terms are i.i.d. (each anchor has its own pair and negatives), so ``Var(L_hat_m) = Var(term)/n`` exactly;
    in the SSCRL regime they are dependent through the shared negatives.

    Returns:
        float64 (n_anchors,) tensor.
    """
    t = check_tau(tau)
    check_count("m", m, 1)
    check_count("n_anchors", n_anchors, 1)
    check_choice("regime", regime, REGIMES)
    check_choice("form", form, FORMS)
    check_generator(generator)
    x, y = truth.sample(n_anchors, generator)
    positive = evaluate_scores(score_fn, x, y)
    negative = _negative_scores(score_fn, truth, x, m, regime, generator)
    loss = contrastive_loss_from_scores(positive, negative, tau=t, form=form, reduction="none")
    return loss - (0.0 if form == "gcl" else math.log(m))


def empirical_risk_draws(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int,
    *,
    generator: torch.Generator,
    n_anchors: int,
    n_replicates: int,
    regime: Regime = "independent",
    form: Form = "gcl",
) -> Tensor:
    """``n_replicates`` independent values of the empirical risk ``L_hat_m(s)`` of n = ``n_anchors`` pairs.

    Each value is the mean of :func:`empirical_risk_per_anchor` over a fresh data set (pairs and negatives).

    Returns:
        float64 (n_replicates,) tensor: draws of L_hat_m whose mean is ``E L_hat_m`` and whose sd is the
        fluctuation over data sets (C4).
    """
    check_count("n_replicates", n_replicates, 1)
    values = torch.empty(n_replicates, dtype=torch.float64)
    for r in range(n_replicates):
        terms = empirical_risk_per_anchor(
            score_fn, truth, tau, m, generator=generator, n_anchors=n_anchors, regime=regime, form=form
        )
        values[r] = terms.mean()
    return values


def expected_empirical_risk(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int,
    *,
    generator: torch.Generator,
    form: Form = "gcl",
    regime: Regime = "independent",
    n_anchors: int = 1024,
    n_replicates: int = 64,
) -> Estimate:
    """``E L_hat_m(s)``: the mean of :func:`empirical_risk_draws` with its standard error over replicates.

    The expectation is the same in both regimes (each anchor sees m negatives ~ p- either way); the regime
    changes only the standard error. ``L(s) - E L_hat_m(s) >= 0`` (Jensen) and is O(1/m) ([A] Thm 4.5).
    """
    check_count("n_replicates", n_replicates, 2)
    draws = empirical_risk_draws(
        score_fn,
        truth,
        tau,
        m,
        generator=generator,
        n_anchors=n_anchors,
        n_replicates=n_replicates,
        regime=regime,
        form=form,
    )
    return estimate_from_draws(draws)


def inner_gap_draws(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int,
    *,
    generator: torch.Generator,
    n_draws: int,
    negative_law: NegativeLaw | None = None,
) -> GapDraws:
    """Per-draw unbiased estimates of [A]'s SCRL inner error ``L(s) - E L_hat_m(s)`` (C3), and the plain ones.

    Draw r is one anchor x_r, its positive and m fresh negatives. The plain estimate is
    ``naive_r = ell_r - L_hat_r = -tau log(Wbar_r / Z_s(x_r))`` (``ell_r`` the m -> infinity per-pair risk with
    the exact log Z, ``L_hat_r`` the GCL value of the objectives); since ``E[Wbar/Z] = 1`` exactly, adding the
    control variate ``tau (Wbar/Z - 1)`` gives ``tau (z - 1 - log z)`` (z = Wbar/Z) >= 0, whose mean is the same
    and whose relative sd is about sqrt(2) for every m (the plain one grows like sqrt(m)).

    Because GCL = tau (DCL - log m) and ``L = tau ∫ CE dpi``, this is tau times [B]'s DCL gap of Prop. 1, and is
    computed by :func:`crl.risk.kernel.integrated_cross_entropy_gap` (form "dcl") scaled by tau.

    Raises:
        ValueError: if log Z_s has no closed form for this score and model (a sampled log Z would bias the
            O(1/m) gap by O(1/M)).
    """
    t = check_tau(tau)
    check_count("m", m, 1)
    check_count("n_draws", n_draws, 2)
    check_generator(generator)
    law = resolve_negative_law(score_fn, truth, negative_law, "auto")
    if law is None or not isinstance(score_fn, FeatureScore):
        raise ValueError(
            f"inner_gap_draws needs log Z_s in closed form: a FeatureScore (got {type(score_fn).__name__}) under "
            f"a closed-form negative law (VMFUniform, GaussianTwoTower; got {truth!r}). A sampled log Z would "
            "bias the O(1/m) gap by O(1/M)."
        )
    estimates, naives = [], []
    for start, stop in anchor_chunks(n_draws, m * truth.dim):
        x, y = truth.sample(stop - start, generator)
        positive = evaluate_scores(score_fn, x, y)
        negative = _negative_scores(score_fn, truth, x, m, "independent", generator)
        log_z = feature_log_partition(score_fn, law, x, t)
        gap = integrated_cross_entropy_gap(positive, negative, log_z, tau=t, form="dcl")
        estimates.append(t * gap.estimate)
        naives.append(t * gap.naive)
    return GapDraws(estimate=torch.cat(estimates), naive=torch.cat(naives))


def inner_gap(
    score_fn: ScoreFn,
    truth: GroundTruth,
    tau: float,
    m: int,
    *,
    generator: torch.Generator,
    n_draws: int = 4096,
) -> Estimate:
    """``L(s) - E L_hat_m(s)`` for SCRL ([A] Thm 4.5: O(1/m)), the variance-reduced mean of :func:`inner_gap_draws`."""
    return estimate_from_draws(
        inner_gap_draws(score_fn, truth, tau, m, generator=generator, n_draws=n_draws).estimate
    )
