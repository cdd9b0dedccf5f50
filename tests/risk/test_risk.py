"""Tests of crl.risk's [A] estimators against closed forms, quadrature, enumeration and brute force.

Identities of docs/theory.md section 2 checked here: L - L* = tau E KL(p+ || q_s) (two independent computations),
L* = -tau E KL(p+ || p-), s* attains L*, invariance to adding g(x); the AUC against brute force and E*.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from crl._vocab import Estimate
from crl.risk import (
    FeatureScore,
    FiniteLaw,
    IsotropicGaussian,
    UniformSphere,
    auc,
    auc_gap,
    empirical_risk_draws,
    estimate_from_draws,
    excess_risk,
    expected_empirical_risk,
    feature_log_partition,
    feature_score_cdf,
    finite_auc,
    finite_kl_to_ideal,
    finite_law_of,
    finite_optimal_auc,
    finite_optimal_risk,
    finite_population_risk,
    ideal_feature_score,
    inner_gap,
    inner_gap_draws,
    kl_to_ideal,
    log_partition,
    population_risk,
    sampled_log_partition,
    score_table,
)
from crl.synthetic import AsymmetricSphere, DiscreteLatent, GaussianTwoTower, VMFUniform
from crl.synthetic._special import log_vmf_normaliser, vmf_mean_resultant_length

Z = 4.5
"""Tolerance in standard errors for Monte-Carlo checks (two-sided, many checks: a false alarm is ~1e-5)."""


@pytest.fixture(autouse=True)
def _single_thread(one_thread: None) -> None:
    """Every test here runs with one torch thread (tests/conftest.py)."""


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def linear(beta: float, rotation: torch.Tensor | None = None) -> FeatureScore:
    """s(x, y) = beta <R x, y>."""
    r = torch.eye(3, dtype=torch.float64) if rotation is None else rotation
    return FeatureScore(lambda x: beta * (x @ r.T))


def rotation_z(theta: float) -> torch.Tensor:
    c, s = math.cos(theta), math.sin(theta)
    return torch.tensor([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]], dtype=torch.float64)


def log_c3(kappa: float) -> float:
    """log C_3(kappa) = log(sinh(kappa)/kappa), written independently of crl.synthetic._special."""
    return kappa + math.log1p(-math.exp(-2.0 * kappa)) - math.log(2.0 * kappa)


def a3(kappa: float) -> float:
    """A_3(kappa) = coth(kappa) - 1/kappa."""
    return 1.0 / math.tanh(kappa) - 1.0 / kappa


def vmf_linear_risk(beta: float, kappa: float, tau: float, trace_over_d: float = 1.0) -> float:
    """Closed form L(beta <R x, y>) on VMFUniform(3, kappa): tau log C_3(beta/tau) - beta A_3(kappa) tr(R)/3."""
    return tau * log_c3(beta / tau) - beta * a3(kappa) * trace_over_d


def vmf_kl(kappa: float, kappa2: float, cosine: float) -> float:
    """KL(vMF(mu, kappa) || vMF(mu2, kappa2)) with <mu, mu2> = cosine, on S^2."""
    return kappa * a3(kappa) - kappa2 * a3(kappa) * cosine - log_c3(kappa) + log_c3(kappa2)


def exact_inner_gap(beta: float, tau: float, m: int) -> float:
    """L(s) - E L_hat_m(s) for s = beta <x, y> on VMFUniform(3): tau E[-log z], z = mean of m W/Z, by quadrature.

    With u = <x, y'> uniform on [-1, 1] and a = beta/tau, W/Z = e^{a u}/C_3(a); Frullani's integral gives
    ``-E log z = ∫_0^inf (phi(t/m)^m - e^{-t}) dt/t``, phi(s) = E exp(-s W/Z).
    """
    a = beta / tau
    mu = math.sinh(a) / a

    def phi(s: float) -> float:
        return integrate.quad(lambda u: 0.5 * math.exp(-s * math.exp(a * u) / mu), -1.0, 1.0, epsabs=1e-15)[0]

    def integrand(t: float) -> float:
        return (phi(t / m) ** m - math.exp(-t)) / t

    head = integrate.quad(integrand, 0.0, 1.0, epsabs=1e-15, limit=200)[0]
    tail = integrate.quad(integrand, 1.0, 80.0, epsabs=1e-15, limit=400)[0]
    return tau * (head + tail)


def ring_law(k: int, kappa: float) -> FiniteLaw:
    items = torch.arange(k)
    offset = (items[:, None] - items[None, :]) % k
    plus = torch.softmax(kappa * torch.cos(2 * math.pi * offset.double() / k), dim=1)
    uniform = torch.full((k,), 1.0 / k, dtype=torch.float64)
    return FiniteLaw(uniform, plus, uniform)


# ---- population risk L(s) -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("beta", "kappa", "tau"), [(1.3, 4.0, 0.5), (0.2, 1.0, 2.0), (3.0, 8.0, 0.1)])
def test_vmf_linear_risk_matches_closed_form_exact_and_sampled_inner(
    beta: float, kappa: float, tau: float
) -> None:
    """If this fails, L(beta <x,y>) on the vMF model is wrong in the exact or in the sampled inner path."""
    truth = VMFUniform(3, kappa)
    reference = vmf_linear_risk(beta, kappa, tau)
    exact = population_risk(linear(beta), truth, tau, generator=gen(0), n_anchors=20_000)
    sampled = population_risk(
        linear(beta), truth, tau, generator=gen(1), n_anchors=2_000, n_negatives=512, inner="sampled"
    )
    assert abs(exact.mean - reference) < Z * exact.se
    assert abs(sampled.mean - reference) < Z * sampled.se + 1e-3 * abs(reference)


def test_rotated_score_risk_matches_closed_form() -> None:
    """If this fails, a non-rotation-invariant score's L is wrong (tr(R)/3 enters through E<Rx, x>)."""
    rot = rotation_z(0.7)
    truth = VMFUniform(3, 4.0)
    est = population_risk(linear(1.5, rot), truth, 0.5, generator=gen(2), n_anchors=20_000)
    assert abs(est.mean - vmf_linear_risk(1.5, 4.0, 0.5, float(torch.trace(rot)) / 3.0)) < Z * est.se


@pytest.mark.parametrize(
    "truth", [VMFUniform(3, 4.0), VMFUniform(5, 2.0), GaussianTwoTower(4, 0.6)], ids=repr
)
def test_ideal_score_attains_the_optimal_risk(truth: VMFUniform | GaussianTwoTower) -> None:
    """If this fails, s* does not attain L* = -tau E KL(p+||p-), or the excess risk is not exactly 0 there."""
    tau = 0.5
    ideal = ideal_feature_score(truth, tau)
    assert ideal is not None
    est = population_risk(ideal, truth, tau, generator=gen(3), n_anchors=20_000)
    assert abs(est.mean - truth.optimal_risk(tau)) < Z * est.se
    excess = excess_risk(ideal, truth, tau, generator=gen(4), n_anchors=4_096)
    assert abs(excess.mean) < 1e-12 and excess.se < 1e-12
    model_score = population_risk(
        lambda x, y: truth.ideal_score(x, y, tau),
        truth,
        tau,
        generator=gen(3),
        n_anchors=2_000,
        n_negatives=256,
    )
    assert abs(model_score.mean - truth.optimal_risk(tau)) < Z * model_score.se


def test_excess_risk_is_tau_times_kl_to_the_learned_kernel() -> None:
    """If this fails, L(s) - L* != tau E KL(p+ || q_s) (population risk vs the closed-form vMF-vMF KL)."""
    kappa, tau, beta, theta = 4.0, 0.5, 1.2, 0.6
    truth = VMFUniform(3, kappa)
    score = linear(beta, rotation_z(theta))
    cosine = (1.0 + 2.0 * math.cos(theta)) / 3.0  # E_x <x, R x> for x uniform on S^2
    closed_kl = vmf_kl(kappa, beta / tau, cosine)
    risk = population_risk(score, truth, tau, generator=gen(5), n_anchors=40_000)
    assert abs((risk.mean - truth.optimal_risk(tau)) - tau * closed_kl) < Z * risk.se
    kl = kl_to_ideal(score, truth, tau, generator=gen(6), n_anchors=20_000)
    assert abs(kl.mean - closed_kl) < Z * kl.se
    excess = excess_risk(score, truth, tau, generator=gen(6), n_anchors=20_000)
    assert excess.mean == pytest.approx(tau * kl.mean, rel=1e-12)


def test_gaussian_quadratic_log_partition_exact_vs_sampled() -> None:
    """If this fails, the Gaussian closed-form log-partition (with curvature) disagrees with sampled negatives."""
    truth = GaussianTwoTower(3, 0.5)
    score = FeatureScore(lambda x: 0.3 * x + 0.1 * x.flip(-1), curvature=-0.05)
    x = truth.sample_anchors(4_000, gen(7))
    exact = log_partition(score, truth, x, 0.5)
    sampled = log_partition(score, truth, x, 0.5, generator=gen(8), n_negatives=1_024, inner="sampled")
    diff = estimate_from_draws(sampled - exact)
    assert abs(diff.mean) < Z * diff.se


def test_forms_share_the_centred_limit_l_over_tau() -> None:
    """If this fails, [B]'s centred InfoNCE/DCL limits are not L/tau (the m -> infinity limit of E[loss] - log m)."""
    truth, tau, score = VMFUniform(3, 2.0), 0.25, linear(0.8)
    values = {
        form: population_risk(score, truth, tau, generator=gen(8), form=form, n_anchors=512)
        for form in ("gcl", "dcl", "infonce")
    }
    assert values["dcl"].mean == pytest.approx(values["gcl"].mean / tau, rel=1e-12)
    assert values["infonce"].mean == pytest.approx(values["dcl"].mean, rel=1e-12)


def test_invariance_to_adding_a_function_of_the_anchor() -> None:
    """If this fails, L, E L_hat_m or E(s) change when g(x) is added to the score (they must not)."""
    truth, tau, score = VMFUniform(3, 3.0), 0.5, linear(1.0)

    def shifted(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return score(x, y) + 5.0 * x[..., 0] - 2.0 * x[..., 1].square()

    a = population_risk(score, truth, tau, generator=gen(9), n_anchors=512, inner="sampled", n_negatives=64)
    b = population_risk(shifted, truth, tau, generator=gen(9), n_anchors=512, inner="sampled", n_negatives=64)
    assert a.mean == pytest.approx(b.mean, abs=1e-10)
    for regime in ("independent", "shared"):
        a = expected_empirical_risk(
            score, truth, tau, 16, generator=gen(10), regime=regime, n_anchors=64, n_replicates=4
        )
        b = expected_empirical_risk(
            shifted, truth, tau, 16, generator=gen(10), regime=regime, n_anchors=64, n_replicates=4
        )
        assert a.mean == pytest.approx(b.mean, abs=1e-10)
    e_a = auc(score, truth, generator=gen(11), n_anchors=512, inner="sampled")
    e_b = auc(shifted, truth, generator=gen(11), n_anchors=512, inner="sampled")
    assert e_a.mean == e_b.mean


# ---- finite supports --------------------------------------------------------------------------------------------


def brute_force(law: FiniteLaw, scores: torch.Tensor, tau: float) -> tuple[float, float, float, float]:
    """(L(s), L*, E(s), E*) by plain float64 loops over anchors, positives and negatives."""
    pi, plus, minus = law.anchor_probs.tolist(), law.positive_probs.tolist(), law.negative_probs.tolist()
    s = scores.tolist()
    n_x, n_y = len(pi), len(minus)
    risk = optimal = auc_value = auc_star = 0.0
    for i in range(n_x):
        z = sum(minus[k] * math.exp(s[i][k] / tau) for k in range(n_y))
        for j in range(n_y):
            if plus[i][j] == 0.0:
                continue
            risk += pi[i] * plus[i][j] * (tau * math.log(z) - s[i][j])
            ratio_j = plus[i][j] / minus[j]
            optimal -= tau * pi[i] * plus[i][j] * math.log(ratio_j)
            for k in range(n_y):
                ratio_k = plus[i][k] / minus[k]
                win = 1.0 if s[i][j] > s[i][k] else 0.5 if s[i][j] == s[i][k] else 0.0
                win_star = 1.0 if ratio_j > ratio_k else 0.5 if ratio_j == ratio_k else 0.0
                auc_value += pi[i] * plus[i][j] * minus[k] * win
                auc_star += pi[i] * plus[i][j] * minus[k] * win_star
    return risk, optimal, auc_value, auc_star


def test_finite_quantities_match_brute_force_and_the_discrete_model() -> None:
    """If this fails, the enumerated L, L*, E, E* disagree with float64 loops or with DiscreteLatent's closed forms."""
    truth = DiscreteLatent([2, 3, 4], class_weights=[0.2, 0.5, 0.3])
    law = finite_law_of(truth)
    tau = 0.7
    scores = torch.randn(law.positive_probs.shape, generator=gen(12), dtype=torch.float64)
    risk, optimal, auc_value, auc_star = brute_force(law, scores, tau)
    assert finite_population_risk(law, scores, tau) == pytest.approx(risk, rel=1e-12)
    assert finite_optimal_risk(law, tau) == pytest.approx(optimal, rel=1e-12)
    assert finite_optimal_risk(law, tau) == pytest.approx(truth.optimal_risk(tau), rel=1e-12)
    assert finite_auc(law, scores) == pytest.approx(auc_value, rel=1e-12)
    assert finite_optimal_auc(law) == pytest.approx(auc_star, rel=1e-12)
    assert finite_optimal_auc(law) == pytest.approx(truth.optimal_auc(), rel=1e-12)
    items = truth.one_hot(torch.arange(truth.n_items))
    ideal = score_table(
        lambda x, y: torch.nan_to_num(truth.ideal_score(x, y, tau), neginf=-1e300), items, items
    )
    assert finite_population_risk(law, ideal, tau) == pytest.approx(truth.optimal_risk(tau), rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    tau=st.floats(0.05, 5.0),
    n_y=st.integers(2, 6),
    shift=st.floats(-3.0, 3.0),
)
def test_finite_identities_hold_for_random_laws(seed: int, tau: float, n_y: int, shift: float) -> None:
    """If this fails, L - L* = tau sum pi KL(p+||q_s), L >= L*, E <= E*, or invariance to g(x) breaks somewhere."""
    g = gen(seed)
    n_x = 3
    pi = torch.softmax(torch.randn(n_x, generator=g, dtype=torch.float64), 0)
    plus = torch.softmax(2.0 * torch.randn(n_x, n_y, generator=g, dtype=torch.float64), 1)
    minus = torch.softmax(torch.randn(n_y, generator=g, dtype=torch.float64), 0)
    law = FiniteLaw(pi, plus, minus)
    scores = torch.randn(n_x, n_y, generator=g, dtype=torch.float64)
    excess = finite_population_risk(law, scores, tau) - finite_optimal_risk(law, tau)
    kl = float((pi * finite_kl_to_ideal(law, scores, tau)).sum())
    assert excess == pytest.approx(tau * kl, rel=1e-9, abs=1e-12)
    assert excess >= -1e-12
    assert finite_auc(law, scores) <= finite_optimal_auc(law) + 1e-12
    g_of_x = shift * torch.arange(n_x, dtype=torch.float64)[:, None]
    assert finite_population_risk(law, scores + g_of_x, tau) == pytest.approx(
        finite_population_risk(law, scores, tau), rel=1e-9, abs=1e-12
    )
    assert finite_auc(law, scores + g_of_x) == pytest.approx(finite_auc(law, scores), abs=1e-15)
    assert finite_population_risk(law, tau * law.log_ratio(), tau) == pytest.approx(
        finite_optimal_risk(law, tau), rel=1e-9, abs=1e-12
    )


@pytest.mark.parametrize("kappa", [1e-3, 0.1, 3.0])
def test_finite_auc_counts_ties_broken_by_rounding_as_ties(kappa: float) -> None:
    """If this fails, E of a ring table depends on how its arithmetic rounded (a tie must count 1/2).

    K = 4 ring, each row of the log-ratio table with its item's and its right neighbour's entries swapped: the
    item now ties with its left neighbour (both hold r_1 = p+(offset 1)/p-, with different p+). Closed form with
    exact ties (p = 1/4, r_0 = p+(offset 0)/p-): E* - E = p^2 (r_0 - r_1) for the flipped pair plus half that for
    the tied one, 1.5 p^2 (r_0 - r_1). A few ulps of noise on the table must not move it.
    """
    law = ring_law(4, kappa)
    ratio = law.log_ratio()
    items = torch.arange(4)
    swapped = ratio.clone()
    swapped[items, items], swapped[items, (items + 1) % 4] = (
        ratio[items, (items + 1) % 4],
        ratio[items, items],
    )
    rounded = swapped * (1.0 + 4e-16 * torch.randn(swapped.shape, generator=gen(3), dtype=torch.float64))
    ratios = torch.exp(ratio)
    expected = 1.5 * float(ratios[0, 0] - ratios[0, 1]) / 16.0
    for table in (swapped, rounded):
        assert finite_optimal_auc(law) - finite_auc(law, table) == pytest.approx(expected, rel=1e-9)
    strict = finite_optimal_auc(law) - finite_auc(law, rounded, rtol=0.0, atol=0.0)
    assert strict != pytest.approx(expected, rel=0.1)


def test_finite_auc_tie_tolerance_is_relative_and_absolute() -> None:
    """If this fails, finite_auc's tolerance is not |a - b| <= atol + rtol max(|a|, |b|), or it ties real gaps."""
    # One anchor, p+ on candidate 0, p- uniform: E = 1/2 w(s_0, s_0) + 1/2 w(s_0, s_1) = 1/4 + w(s_0, s_1)/2.
    law = FiniteLaw(
        torch.ones(1, dtype=torch.float64),
        torch.tensor([[1.0, 0.0]], dtype=torch.float64),
        torch.tensor([0.5, 0.5], dtype=torch.float64),
    )
    big, small = 1e6, 1e-15

    def table(a: float, b: float) -> torch.Tensor:
        return torch.tensor([[a, b]], dtype=torch.float64)

    assert finite_auc(law, table(big, math.nextafter(big, 0.0))) == 0.5
    assert finite_auc(law, table(small, -small)) == 0.5
    assert finite_auc(law, table(big, math.nextafter(big, 0.0)), rtol=0.0, atol=0.0) == 0.75
    assert finite_auc(law, table(1.0, 1.0 - 1e-9)) == 0.75
    assert finite_auc(law, table(1e-9, 0.0)) == 0.75
    assert finite_auc(law, table(0.0, -math.inf)) == 0.75
    with pytest.raises(ValueError, match="rtol"):
        finite_auc(law, table(0.0, 0.0), rtol=-1.0)
    with pytest.raises(ValueError, match="atol"):
        finite_auc(law, table(0.0, 0.0), atol=math.inf)


# ---- AUC ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "truth", [VMFUniform(3, 2.0), VMFUniform(4, 5.0), GaussianTwoTower(3, 0.7)], ids=repr
)
def test_auc_of_the_ideal_score_is_e_star_exact_and_sampled(truth: VMFUniform | GaussianTwoTower) -> None:
    """If this fails, the exact-CDF or the sampled AUC of s* misses the model's E* (quadrature)."""
    ideal = ideal_feature_score(truth, 1.0)
    assert ideal is not None
    exact = auc(ideal, truth, generator=gen(13), n_anchors=20_000)
    sampled = auc(ideal, truth, generator=gen(14), n_anchors=4_000, n_negatives=64, inner="sampled")
    assert abs(exact.mean - truth.optimal_auc()) < Z * exact.se
    assert abs(sampled.mean - truth.optimal_auc()) < Z * sampled.se
    gap = auc_gap(ideal, truth, generator=gen(15), n_anchors=1_000)
    assert gap.mean == 0.0 and gap.se == 0.0


def test_auc_exact_cdf_agrees_with_brute_force_on_the_same_pairs() -> None:
    """If this fails, the closed-form inner probability differs from counting wins against many negatives."""
    truth = GaussianTwoTower(4, 0.6)
    score = FeatureScore(lambda x: 0.4 * x + 0.2 * x.roll(1, -1), curvature=0.15)
    g = gen(16)
    x, y = truth.sample(100, g)
    negatives = truth.sample_negatives((100, 10_000), g)
    positive = score(x, y)
    brute = (positive[:, None] > score(x[:, None, :], negatives)).double().mean(dim=1)
    closed = feature_score_cdf(score, IsotropicGaussian(4), x, positive)
    assert torch.allclose(closed, brute, atol=0.025)  # 5 binomial sd


@pytest.mark.parametrize(
    ("law", "curvature"),
    [
        (UniformSphere(3), 0.0),
        (UniformSphere(5), 0.7),
        (IsotropicGaussian(3, 1.0), 0.0),
        (IsotropicGaussian(3, 2.0), 0.4),
        (IsotropicGaussian(2, 0.5), -0.6),
    ],
)
def test_closed_form_partition_and_cdf_match_monte_carlo(
    law: UniformSphere | IsotropicGaussian, curvature: float
) -> None:
    """If this fails, log E exp(s/tau) or P[s(x, y') < t] is wrong for that negative law and curvature."""
    g = gen(17)
    d = law.dim
    score = FeatureScore(lambda x: 0.8 * x, curvature=curvature)
    x = torch.randn(4, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    sample = torch.randn(400_000, d, generator=g, dtype=torch.float64)
    if isinstance(law, UniformSphere):
        sample = sample / sample.norm(dim=-1, keepdim=True)
    else:
        sample = math.sqrt(law.variance) * sample
    tau = 0.9
    scores = score(x[:, None, :], sample[None, :, :])
    monte_carlo = torch.logsumexp(scores / tau, dim=1) - math.log(sample.shape[0])
    assert torch.allclose(feature_log_partition(score, law, x, tau), monte_carlo, atol=0.01)
    thresholds = scores[:, :5].median(dim=1).values
    empirical = (scores < thresholds[:, None]).double().mean(dim=1)
    assert torch.allclose(feature_score_cdf(score, law, x, thresholds), empirical, atol=0.005)


def test_constant_score_ties_count_one_half() -> None:
    """If this fails, ties (a constant score) are not counted 1/2 in E(s): E must be exactly 1/2."""
    zero = FeatureScore(lambda x: 0.0 * x)
    for truth in (VMFUniform(3, 2.0), GaussianTwoTower(3, 0.5)):
        assert auc(zero, truth, generator=gen(18), n_anchors=100).mean == 0.5


# ---- finite m: expected empirical risk and the inner gap --------------------------------------------------------


@pytest.mark.parametrize("regime", ["independent", "shared"])
def test_one_negative_gcl_has_the_closed_form_mean(regime: str) -> None:
    """If this fails, E L_hat_1 != E[s(x,y') - s(x,y)] = -beta A_3(kappa) (GCL with m = 1 is linear)."""
    truth, beta = VMFUniform(3, 4.0), 0.9
    est = expected_empirical_risk(
        linear(beta), truth, 0.5, 1, generator=gen(19), regime=regime, n_anchors=256, n_replicates=64
    )
    assert abs(est.mean + beta * a3(4.0)) < Z * est.se


@pytest.mark.parametrize("m", [8, 64])
def test_inner_gap_matches_quadrature(m: int) -> None:
    """If this fails, the variance-reduced L(s) - E L_hat_m(s) misses the exact value (1-D quadrature)."""
    beta, tau = 0.6, 0.5
    est = inner_gap(linear(beta), VMFUniform(3, 4.0), tau, m, generator=gen(20), n_draws=20_000)
    assert abs(est.mean - exact_inner_gap(beta, tau, m)) < Z * est.se
    assert est.se < 0.03 * est.mean


def test_inner_gap_draws_plain_and_variance_reduced_agree() -> None:
    """If this fails, the control variate changed the mean of the inner gap (it must only cut the variance)."""
    draws = inner_gap_draws(linear(0.6), VMFUniform(3, 2.0), 0.5, 32, generator=gen(21), n_draws=20_000)
    naive, reduced = estimate_from_draws(draws.naive), estimate_from_draws(draws.estimate)
    assert abs(naive.mean - reduced.mean) < Z * naive.se
    assert reduced.se < naive.se / 4
    assert bool((draws.estimate >= 0).all())


def test_expected_empirical_risk_is_below_the_population_risk_in_both_regimes() -> None:
    """If this fails, E L_hat_m differs between regimes or exceeds L (Jensen: L - E L_hat_m >= 0)."""
    truth, tau, score = VMFUniform(3, 4.0), 0.5, linear(1.5)
    full = vmf_linear_risk(1.5, 4.0, tau)
    a = expected_empirical_risk(
        score, truth, tau, 4, generator=gen(22), regime="independent", n_anchors=512, n_replicates=32
    )
    b = expected_empirical_risk(
        score, truth, tau, 4, generator=gen(23), regime="shared", n_anchors=512, n_replicates=32
    )
    assert abs(a.mean - b.mean) < Z * math.hypot(a.se, b.se)
    assert full - a.mean > Z * a.se
    asymmetric = AsymmetricSphere(3, kappa=1.0, anchor_kappa=10.0, negative_law="marginal")
    kwargs = {"generator": gen(24), "n_anchors": 512, "n_replicates": 32}
    shared = empirical_risk_draws(linear(0.5), asymmetric, 1.0, 4, regime="shared", **kwargs)
    independent = empirical_risk_draws(linear(0.5), asymmetric, 1.0, 4, regime="independent", **kwargs)
    assert float(shared.std()) > 3.0 * float(independent.std())  # C = Var_y'(E_x W/Z) > 0: the shared term


def test_sampled_log_partition_bias_correction() -> None:
    """If this fails, the sampled log Z keeps the O(1/M) downward bias of log Wbar (the delta correction is off)."""
    truth, tau, score, m = VMFUniform(3, 4.0), 0.5, linear(1.5), 16
    x = truth.sample_anchors(20_000, gen(25))
    exact = feature_log_partition(score, UniformSphere(3), x, tau)
    corrected = estimate_from_draws(
        sampled_log_partition(score, truth, x, tau, n_negatives=m, generator=gen(26)) - exact
    )
    negatives = truth.sample_negatives((x.shape[0], m), gen(26))
    plain = torch.logsumexp(score(x[:, None, :], negatives) / tau, dim=1) - math.log(m)
    uncorrected = estimate_from_draws(plain - exact)
    assert abs(corrected.mean) < Z * corrected.se
    assert uncorrected.mean < -Z * uncorrected.se


# ---- validation -------------------------------------------------------------------------------------------------


def test_bad_inputs_raise_with_the_argument_named() -> None:
    """If this fails, bad input surfaces as a traceback from inside torch or as a silent NaN."""
    truth = VMFUniform(3, 2.0)
    score = linear(1.0)
    with pytest.raises(ValueError, match="tau"):
        population_risk(score, truth, 0.0, generator=gen(0))
    with pytest.raises(ValueError, match="form"):
        population_risk(score, truth, 0.5, generator=gen(0), form="nce")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inner='exact'"):
        population_risk(lambda x, y: (x * y).sum(-1), truth, 0.5, generator=gen(0), inner="exact")
    with pytest.raises(ValueError, match="negative_law"):
        population_risk(score, truth, 0.5, generator=gen(0), inner="sampled", negative_law=UniformSphere(3))
    with pytest.raises(ValueError, match="NaN/Inf"):
        population_risk(
            lambda x, y: (x * y).sum(-1) / 0.0, truth, 0.5, generator=gen(0), n_anchors=8, n_negatives=4
        )
    with pytest.raises(ValueError, match="return shape"):
        population_risk(lambda x, y: x.sum(-1), truth, 0.5, generator=gen(0), n_anchors=8, n_negatives=4)
    with pytest.raises(TypeError, match="generator"):
        population_risk(score, truth, 0.5, generator=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="closed form"):
        inner_gap(lambda x, y: (x * y).sum(-1), truth, 0.5, 4, generator=gen(0), n_draws=8)
    with pytest.raises(ValueError, match="infinite"):
        log_partition(
            FeatureScore(lambda x: x, curvature=-2.0), GaussianTwoTower(3, 0.5), torch.zeros(2, 3), 1.0
        )
    with pytest.raises(ValueError, match="sum to 1"):
        FiniteLaw(
            torch.ones(2, dtype=torch.float64),
            torch.eye(2, dtype=torch.float64),
            torch.ones(2, dtype=torch.float64) / 2,
        )
    law = ring_law(4, 1.0)
    with pytest.raises(ValueError, match="-inf where p\\+ has mass"):
        finite_auc(law, torch.full((4, 4), -math.inf, dtype=torch.float64))
    with pytest.raises(ValueError, match="at least 2"):
        estimate_from_draws(torch.ones(1))


def test_estimate_interval() -> None:
    """If this fails, Estimate.ci is not value -/+ 1.96 se at 95%."""
    low, high = Estimate(1.0, 0.5, 10).normal_ci(0.95)
    assert (low, high) == pytest.approx((1.0 - 1.959964 * 0.5, 1.0 + 1.959964 * 0.5), rel=1e-6)
    draws = estimate_from_draws(torch.tensor([1.0, 2.0, 3.0, 4.0]))
    assert (draws.mean, draws.n) == (2.5, 4)
    assert draws.se == pytest.approx(float(np.std([1, 2, 3, 4], ddof=1)) / 2.0)


def test_vmf_normaliser_reference_agrees_with_the_library() -> None:
    """If this fails, this file's independent log C_3 / A_3 (used as references above) is itself wrong."""
    for kappa in (0.3, 2.0, 9.0):
        assert log_c3(kappa) == pytest.approx(float(log_vmf_normaliser(3, kappa)), rel=1e-12)
        assert a3(kappa) == pytest.approx(float(vmf_mean_resultant_length(3, kappa)), rel=1e-12)


def test_an_item_without_mass_under_either_law_has_log_ratio_minus_infinity() -> None:
    """If this fails, an item with p+ = p- = 0 (the adversarial search of C2 drives both softmax logits to -inf, as
    at seed 7310) gives a NaN log-ratio and E* raises instead of ignoring the item."""
    plus = torch.tensor([[0.5, 0.5, 0.0]], dtype=torch.float64)
    minus = torch.tensor([0.25, 0.75, 0.0], dtype=torch.float64)
    law = FiniteLaw(torch.ones(1, dtype=torch.float64), plus, minus)
    ratio = law.log_ratio()
    assert ratio[0, 2] == -math.inf and torch.isfinite(ratio[0, :2]).all()
    reduced = FiniteLaw(torch.ones(1, dtype=torch.float64), plus[:, :2], minus[:2])
    assert finite_optimal_auc(law) == pytest.approx(finite_optimal_auc(reduced), abs=1e-15)
