"""Tests of crl.risk.kernel against closed forms, quadrature, float64 loops and exact enumeration.

References: the vMF normaliser on S^2 written out (C_3(x) = sinh(x)/x, A_3(x) = coth(x) - 1/x); brute-force
loops over a finite Z (every anchor, positive and k-tuple of negatives enumerated with its probability), which
give Prop. 1 and Prop. 2's gaps exactly; a two-point Z whose k-negative averages are binomial, which gives the
gaps exactly for large k.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as scipy_stats

from crl._vocab import KernelForm
from crl.risk import (
    asymptotic_gap_coefficients,
    contrastive_risk_draws,
    cross_entropy_gap_bounds,
    ideal_search_bound,
    ideal_search_cross_entropy,
    ideal_search_gap,
    integrated_cross_entropy_gap,
    kernel_divergences,
    learned_log_density_ratio,
    learned_log_partition,
    temperature_bound,
    uniform_sphere_quadrature,
    vmf_identity_cross_entropy,
    vmf_kl,
)
from crl.risk.kernel import counting_gap_limit, counting_search_cross_entropy, counting_search_gap
from crl.synthetic.vmf import VMFUniform


def _log_c3(x: float) -> float:
    """log C_3(x) = log(sinh(x)/x), the vMF normaliser on S^2 against the uniform law."""
    return x + math.log1p(-math.exp(-2 * x)) - math.log(2 * x)


def _a3(x: float) -> float:
    """A_3(x) = coth(x) - 1/x = E<z, y> for y ~ vMF(z, x) on S^2."""
    return 1.0 / math.tanh(x) - 1.0 / x


def _unit_rows(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    x = rng.standard_normal((n, p))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


class FiniteModel:
    """A finite Z = {0..K-1}: pi, a Markov kernel M (rows sum to 1), unit embeddings phi; all float64 numpy."""

    def __init__(self, seed: int, n_points: int = 4, dim: int = 3) -> None:
        rng = np.random.default_rng(seed)
        self.pi = rng.dirichlet(np.ones(n_points))
        self.kernel = rng.dirichlet(np.ones(n_points), size=n_points)
        self.phi = _unit_rows(rng, n_points, dim)
        self.scores = self.phi @ self.phi.T
        self.ratio = self.kernel / self.pi[None, :]

    def log_partition(self, tau: float) -> np.ndarray:
        return np.log((self.pi[None, :] * np.exp(self.scores / tau)).sum(axis=1))

    def second_moment(self) -> float:
        return float((self.pi[:, None] * self.pi[None, :] * self.ratio**2).sum())

    def integrated_cross_entropy(self, tau: float) -> float:
        log_n = self.log_partition(tau)
        ce = [
            sum(self.kernel[z, y] * (-self.scores[z, y] / tau + log_n[z]) for y in range(len(self.pi)))
            for z in range(len(self.pi))
        ]
        return float(np.dot(self.pi, ce))

    def enumerate_draws(self, k: int) -> list[tuple[float, int, int, tuple[int, ...]]]:
        """Every (probability, z, y, negatives) with y ~ M(z,.), negatives ~ pi^k."""
        n = len(self.pi)
        draws = []
        for z, y in itertools.product(range(n), repeat=2):
            for xi in itertools.product(range(n), repeat=k):
                prob = self.pi[z] * self.kernel[z, y] * np.prod(self.pi[list(xi)])
                draws.append((float(prob), z, y, xi))
        return draws


def _loss_loop(pos: float, negs: list[float], tau: float, form: str) -> float:
    """InfoNCE log(1 + sum exp((s'-s)/tau)) or DCL log sum exp((s'-s)/tau), by a plain loop."""
    total = sum(math.exp((s - pos) / tau) for s in negs)
    return math.log1p(total) if form == "infonce" else math.log(total)


def _draw_tensors(model: FiniteModel, draws: list, tau: float) -> dict[str, torch.Tensor]:
    prob = torch.tensor([d[0] for d in draws], dtype=torch.float64)
    z = [d[1] for d in draws]
    pos = torch.tensor([model.scores[d[1], d[2]] for d in draws], dtype=torch.float64)
    neg = torch.tensor([[model.scores[d[1], j] for j in d[3]] for d in draws], dtype=torch.float64)
    log_w = torch.tensor([[math.log(model.ratio[d[1], j]) for j in d[3]] for d in draws], dtype=torch.float64)
    log_n = torch.tensor(model.log_partition(tau)[z], dtype=torch.float64)
    return {"prob": prob, "pos": pos, "neg": neg, "log_w": log_w, "log_n": log_n}


def test_quadrature_integrates_exponentials_to_machine_precision() -> None:
    """If this fails, log N(z) in C7-C9 would carry quadrature error comparable to the O(1/k) gaps."""
    nodes, weights = uniform_sphere_quadrature(32, 64)
    assert torch.allclose(nodes.norm(dim=1), torch.ones(len(nodes), dtype=torch.float64), atol=1e-14)
    assert abs(float(weights.sum()) - 1.0) < 1e-14
    rng = np.random.default_rng(0)
    for scale in (0.5, 3.0, 8.0):
        a = torch.from_numpy(scale * _unit_rows(rng, 1, 3)[0])
        value = float((weights * torch.exp(nodes @ a)).sum())
        assert math.log(value) == pytest.approx(_log_c3(scale), abs=1e-12)


@pytest.mark.parametrize("tau", [0.1, 0.5, 2.0])
def test_log_partition_of_identity_is_log_c3(tau: float) -> None:
    """If this fails, the learned kernel's normaliser ∫ exp(<z,z'>/tau) dpi would not be C_3(1/tau)."""
    nodes, weights = uniform_sphere_quadrature(48, 96)
    anchors = torch.from_numpy(_unit_rows(np.random.default_rng(1), 5, 3))
    log_n = learned_log_partition(anchors, nodes, tau=tau, support_weights=weights)
    assert torch.allclose(log_n, torch.full((5,), _log_c3(1 / tau), dtype=torch.float64), atol=1e-11)


def test_learned_log_density_ratio_matches_a_loop() -> None:
    """If this fails, log dQ/dpi = s/tau - log sum_j pi_j e^{s_j/tau} is computed wrongly."""
    model = FiniteModel(3, n_points=6)
    tau = 0.3
    phi = torch.from_numpy(model.phi)
    got = learned_log_density_ratio(phi, phi, tau=tau, support_weights=torch.from_numpy(model.pi))
    for i, j in itertools.product(range(6), repeat=2):
        norm = sum(model.pi[m] * math.exp(model.scores[i, m] / tau) for m in range(6))
        assert float(got[i, j]) == pytest.approx(model.scores[i, j] / tau - math.log(norm), abs=1e-12)


def test_kernel_divergences_match_definitions_and_ce_identity() -> None:
    """If this fails, KL(Q||pi), KL(M||Q), KL(M||pi) or CE = KL(M||Q) - KL(M||pi) is wrong on a finite Z."""
    model = FiniteModel(4, n_points=5)
    tau = 0.7
    pi = torch.from_numpy(model.pi)
    phi = torch.from_numpy(model.phi)
    log_q = learned_log_density_ratio(phi, phi, tau=tau, support_weights=pi)
    div = kernel_divergences(log_q, torch.from_numpy(np.log(model.ratio)), support_weights=pi)
    log_n = model.log_partition(tau)
    for z in range(5):
        q = model.pi * np.exp(model.scores[z] / tau - log_n[z])
        m = model.kernel[z]
        assert float(div.kl_learned_to_anchor[z]) == pytest.approx(
            np.sum(q * np.log(q / model.pi)), abs=1e-12
        )
        assert float(div.kl_kernel_to_learned[z]) == pytest.approx(np.sum(m * np.log(m / q)), abs=1e-12)
        assert float(div.kl_kernel_to_anchor[z]) == pytest.approx(np.sum(m * np.log(m / model.pi)), abs=1e-12)
        ce = -np.sum(m * model.scores[z]) / tau + log_n[z]
        assert float(div.cross_entropy[z]) == pytest.approx(ce, abs=1e-12)
        assert float(div.sup_abs_log_ratio[z]) == pytest.approx(
            np.max(np.abs(np.log(q / model.pi))), abs=1e-12
        )
    assert torch.allclose(div.cross_entropy, div.kl_kernel_to_learned - div.kl_kernel_to_anchor, atol=1e-13)


def test_kernel_divergences_treat_zero_kernel_mass_as_zero() -> None:
    """If this fails, a kernel with empty parts of Z (latent classes) would give NaN instead of 0 log 0 = 0."""
    log_q = torch.zeros(1, 3, dtype=torch.float64)
    log_m = torch.tensor([[math.log(1.5), math.log(1.5), -math.inf]], dtype=torch.float64)
    div = kernel_divergences(log_q, log_m)
    assert float(div.kl_kernel_to_anchor[0]) == pytest.approx(math.log(1.5), abs=1e-12)
    assert float(div.cross_entropy[0]) == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_points=st.integers(2, 30),
    dim=st.integers(1, 6),
    tau=st.floats(0.05, 5.0),
)
def test_eq8_bounds_hold_for_random_unit_embeddings(seed: int, n_points: int, dim: int, tau: float) -> None:
    """If this fails, eq. 8 (sup |log dQ/dpi| <= 2/tau, KL(Q||pi) <= 2/tau) is violated for some unit phi."""
    rng = np.random.default_rng(seed)
    phi = torch.from_numpy(_unit_rows(rng, n_points, dim))
    pi = torch.from_numpy(rng.dirichlet(np.ones(n_points)))
    log_q = learned_log_density_ratio(phi, phi, tau=tau, support_weights=pi)
    div = kernel_divergences(log_q, log_q, support_weights=pi)
    assert float(div.sup_abs_log_ratio.max()) <= temperature_bound(tau) + 1e-9
    assert float(div.kl_learned_to_anchor.max()) <= temperature_bound(tau) + 1e-9


def test_eq8_can_fail_off_the_unit_sphere() -> None:
    """If this fails, eq. 8's premise (unit norm) would not matter, and C9's control could not fail."""
    nodes, weights = uniform_sphere_quadrature(24, 48)
    log_q = learned_log_density_ratio(1.5 * nodes, 1.5 * nodes, tau=1.0, support_weights=weights)
    assert float(log_q.abs().max()) > temperature_bound(1.0) + 0.5


@pytest.mark.parametrize(("kappa", "tau"), [(2.0, 1.0), (4.0, 0.25), (1.0, 0.5)])
def test_cross_entropy_of_identity_on_vmf_closed_form(kappa: float, tau: float) -> None:
    """If this fails, CE[M||Q] for phi = id on vMF is not -A_3(kappa)/tau + log C_3(1/tau) (quadrature and MC)."""
    closed = -_a3(kappa) / tau + _log_c3(1 / tau)
    assert vmf_identity_cross_entropy(_log_c3(1 / tau), _a3(kappa), tau) == pytest.approx(closed, abs=1e-14)
    nodes, weights = uniform_sphere_quadrature(64, 128)
    anchors = nodes[:3]
    log_q = learned_log_density_ratio(anchors, nodes, tau=tau, support_weights=weights)
    log_m = kappa * anchors @ nodes.T - _log_c3(kappa)
    div = kernel_divergences(log_q, log_m, support_weights=weights)
    assert torch.allclose(div.cross_entropy, torch.full((3,), closed, dtype=torch.float64), atol=1e-9)
    model = VMFUniform(3, kappa)
    generator = torch.Generator().manual_seed(5)
    z, y = model.sample(20000, generator)
    per_draw = -(z * y).sum(dim=1) / tau + learned_log_partition(
        z[:1], nodes, tau=tau, support_weights=weights
    )
    se = float(per_draw.std()) / math.sqrt(len(per_draw))
    assert abs(float(per_draw.mean()) - closed) < 4 * se


@pytest.mark.parametrize(("kappa", "other"), [(4.0, 1.0), (2.0, 3.0), (4.0, 2.857)])
def test_vmf_kl_matches_quadrature(kappa: float, other: float) -> None:
    """If this fails, C9's closed-form best KL, KL(vMF(kappa)||vMF(1/tau)), is wrong."""
    closed = vmf_kl(kappa, other, _a3(kappa), _log_c3(kappa), _log_c3(other))
    nodes, weights = uniform_sphere_quadrature(64, 128)
    anchor = nodes[:1]
    log_m = kappa * anchor @ nodes.T - _log_c3(kappa)
    log_q = learned_log_density_ratio(anchor, nodes, tau=1 / other, support_weights=weights)
    div = kernel_divergences(log_q, log_m, support_weights=weights)
    assert float(div.kl_kernel_to_learned[0]) == pytest.approx(closed, abs=1e-9)


@pytest.mark.parametrize("form", ["infonce", "dcl"])
@pytest.mark.parametrize("tau", [0.3, 1.0])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_prop1_exact_by_enumeration(form: str, tau: float, k: int) -> None:
    """If this fails, Prop. 1's bounds fail on a finite Z, or the per-draw estimators are biased.

    The exact gap ∫CE dpi - R is computed by enumerating every (z, y, k negatives) with a plain loss loop; the
    estimators' probability-weighted means over the same enumeration must equal it.
    """
    model = FiniteModel(10 * k + int(10 * tau), n_points=4)
    draws = model.enumerate_draws(k)
    risk = sum(
        p * _loss_loop(model.scores[z, y], [model.scores[z, j] for j in xi], tau, form)
        for p, z, y, xi in draws
    )
    exact_gap = model.integrated_cross_entropy(tau) - (risk - math.log(k))
    lower, upper = cross_entropy_gap_bounds(k, tau, form)
    assert lower - 1e-12 <= exact_gap <= upper + 1e-12
    t = _draw_tensors(model, draws, tau)
    gap = integrated_cross_entropy_gap(t["pos"], t["neg"], t["log_n"], tau=tau, form=form)
    assert float((t["prob"] * gap.estimate).sum()) == pytest.approx(exact_gap, abs=1e-12)
    assert float((t["prob"] * gap.naive).sum()) == pytest.approx(exact_gap, abs=1e-12)
    risk_draws = contrastive_risk_draws(t["pos"], t["neg"], tau=tau, form=form)
    assert float((t["prob"] * risk_draws).sum()) == pytest.approx(risk - math.log(k), abs=1e-12)


def _brute_ce_and_gap(
    model: FiniteModel, draws: list, k: int, tau: float, form: str, *, weighted: bool
) -> tuple[float, float]:
    """(E CE, E CE - (E loss - log k)) over every draw with plain loops; CE = -(1/k) sum_i w_i log(k softmax_i),
    w_i = dM/dpi (xi_i) when ``weighted``, else 1 (the counting variant)."""
    expected_ce, risk = 0.0, 0.0
    for p, z, y, xi in draws:
        logits = [model.scores[z, j] / tau for j in xi]
        lse = math.log(sum(math.exp(v) for v in logits))
        weights = [model.ratio[z, j] if weighted else 1.0 for j in xi]
        expected_ce += p * -sum(w * (v - lse + math.log(k)) for w, v in zip(weights, logits, strict=True)) / k
        risk += p * _loss_loop(model.scores[z, y], [model.scores[z, j] for j in xi], tau, form)
    return expected_ce, expected_ce - (risk - math.log(k))


@pytest.mark.parametrize("form", ["infonce", "dcl"])
@pytest.mark.parametrize("tau", [0.3, 1.0])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_prop2_exact_by_enumeration(form: str, tau: float, k: int) -> None:
    """If this fails, Prop. 2's bound fails for crl's M_hat_k on a finite Z, or the estimator is biased.

    E CE[M_hat_k||Q_hat_k] = E[-(1/k) sum_i w_i log(k softmax_i)] by enumeration with a plain loop; the
    variance-reduced estimator must be unbiased for any centring constant log N.
    """
    model = FiniteModel(7 * k + int(10 * tau), n_points=4)
    draws = model.enumerate_draws(k)
    expected_ce, exact_gap = _brute_ce_and_gap(model, draws, k, tau, form, weighted=True)
    assert abs(exact_gap) <= ideal_search_bound(k, tau, model.second_moment(), form) + 1e-12
    t = _draw_tensors(model, draws, tau)
    for centre in (t["log_n"], torch.zeros_like(t["log_n"]) + 3.0):
        gap = ideal_search_gap(t["pos"], t["neg"], t["log_w"], centre, tau=tau, form=form)
        assert float((t["prob"] * gap.estimate).sum()) == pytest.approx(exact_gap, abs=1e-12)
        assert float((t["prob"] * gap.naive).sum()) == pytest.approx(exact_gap, abs=1e-12)
    ce = ideal_search_cross_entropy(t["neg"], t["log_w"], tau=tau)
    assert float((t["prob"] * ce).sum()) == pytest.approx(expected_ce, abs=1e-12)


@pytest.mark.parametrize("form", ["infonce", "dcl"])
@pytest.mark.parametrize("tau", [0.3, 1.0])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_counting_variant_exact_by_enumeration(form: KernelForm, tau: float, k: int) -> None:
    """If this fails, C8's counting-measure variant (M_hat_k = (1/k) sum_i delta_{xi_i}, no weights) is biased, or
    its gap does not equal D = ∫(E_M s - E_pi s)/tau dpi (DCL, every k) / D - O(1/k) (InfoNCE).

    Brute force: E[-(1/k) sum_i log(k softmax_i)] - (E loss - log k) with plain loops over every draw.
    """
    model = FiniteModel(3 * k + int(10 * tau), n_points=4)
    draws = model.enumerate_draws(k)
    expected_ce, exact_gap = _brute_ce_and_gap(model, draws, k, tau, form, weighted=False)
    limit = float((model.pi[:, None] * model.pi[None, :] * (model.ratio - 1.0) * model.scores).sum() / tau)
    t = _draw_tensors(model, draws, tau)
    assert float((t["prob"] * counting_search_gap(t["pos"], t["neg"], tau=tau, form=form)).sum()) == (
        pytest.approx(exact_gap, abs=1e-12)
    )
    ce = counting_search_cross_entropy(t["neg"], tau=tau)
    assert float((t["prob"] * ce).sum()) == pytest.approx(expected_ce, abs=1e-12)
    log_m = torch.tensor(np.log(model.ratio), dtype=torch.float64)
    scores = torch.tensor(model.scores, dtype=torch.float64)
    pi = torch.tensor(model.pi, dtype=torch.float64)
    assert counting_gap_limit(scores, log_m, tau=tau, support_weights=pi, anchor_weights=pi) == pytest.approx(
        limit, abs=1e-12
    )
    if form == "dcl":
        assert exact_gap == pytest.approx(limit, abs=1e-12)
    else:
        assert limit - math.log1p(math.exp(2.0 / tau) / k) - 1e-12 <= exact_gap <= limit


def test_counting_limit_of_identity_on_vmf_is_the_mean_resultant() -> None:
    """If this fails, D for phi = id on VMFUniform(3, kappa) is not A_3(kappa)/tau (E_M <z, y> = A_3, E_pi = 0)."""
    kappa, tau = 2.0, 0.5
    anchors, anchor_weights = uniform_sphere_quadrature(12, 24)
    nodes, weights = uniform_sphere_quadrature(48, 96)
    log_m = VMFUniform(3, kappa).log_positive_density(anchors[:, None, :], nodes[None, :, :])
    value = counting_gap_limit(
        anchors @ nodes.T, log_m, tau=tau, support_weights=weights, anchor_weights=anchor_weights
    )
    assert value == pytest.approx(_a3(kappa) / tau, abs=1e-10)


def _two_point_gaps(k: int, tau: float) -> tuple[float, float, float]:
    """Exact Prop. 1 (DCL, InfoNCE) and Prop. 2 (DCL) gaps on Z = {0, 1}: the negatives' count is binomial."""
    pi = np.array([0.3, 0.7])
    kernel = np.array([[0.8, 0.2], [0.1, 0.9]])
    scores = np.array([[1.0, -0.2], [-0.2, 1.0]])
    ratio = kernel / pi[None, :]
    count = np.arange(k + 1)
    dcl = infonce = ideal = 0.0
    for z in range(2):
        weights = np.exp(scores[z] / tau)
        log_n = math.log(float(pi @ weights))
        prob = scipy_stats.binom.pmf(count, k, pi[0])
        wbar = (count * weights[0] + (k - count) * weights[1]) / k
        mbar = (count * ratio[z, 0] + (k - count) * ratio[z, 1]) / k
        dcl += pi[z] * float(prob @ -(np.log(wbar) - log_n))
        ideal += pi[z] * float(prob @ ((mbar - 1.0) * np.log(wbar)))
        for y in range(2):
            infonce += pi[z] * kernel[z, y] * float(prob @ -(np.log(wbar + weights[y] / k) - log_n))
    return dcl, infonce, ideal


def test_asymptotic_coefficients_match_exact_large_k_gaps() -> None:
    """If this fails, crl's constants a (gap ~ a/k, drawn as C7/C8's theory curves) are wrong.

    A two-point Z gives the exact gaps at k = 4000 (binomial counts); k * gap must be a up to O(1/k).
    """
    pi = torch.tensor([0.3, 0.7], dtype=torch.float64)
    kernel = torch.tensor([[0.8, 0.2], [0.1, 0.9]], dtype=torch.float64)
    phi = torch.tensor([[1.0, 0.0], [-0.2, math.sqrt(1 - 0.04)]], dtype=torch.float64)
    tau, k = 0.5, 4000
    log_q = learned_log_density_ratio(phi, phi, tau=tau, support_weights=pi)
    coef = asymptotic_gap_coefficients(log_q, torch.log(kernel / pi), support_weights=pi, anchor_weights=pi)
    dcl, infonce, ideal = _two_point_gaps(k, tau)
    assert k * dcl == pytest.approx(coef.cross_entropy_dcl, rel=2e-3)
    assert k * infonce == pytest.approx(coef.cross_entropy_infonce, rel=2e-3)
    assert k * ideal == pytest.approx(coef.ideal_search_dcl, rel=2e-3)
    assert coef.ideal_search_infonce == -1.0


def test_asymptotic_coefficients_of_identity_on_vmf() -> None:
    """If this fails, a for phi = id on vMF differs from Var(W/N)/2 = (C(2/tau)/C(1/tau)^2 - 1)/2 etc."""
    kappa, tau = 2.0, 1.0
    anchors, anchor_weights = uniform_sphere_quadrature(6, 12)
    nodes, weights = uniform_sphere_quadrature(48, 96)
    log_q = learned_log_density_ratio(anchors, nodes, tau=tau, support_weights=weights)
    log_m = kappa * anchors @ nodes.T - _log_c3(kappa)
    coef = asymptotic_gap_coefficients(log_q, log_m, support_weights=weights, anchor_weights=anchor_weights)
    variance = math.exp(_log_c3(2 / tau) - 2 * _log_c3(1 / tau)) - 1
    kernel_mean = math.exp(_log_c3(kappa + 1 / tau) - _log_c3(kappa) - _log_c3(1 / tau))
    assert coef.cross_entropy_dcl == pytest.approx(variance / 2, abs=1e-10)
    assert coef.cross_entropy_infonce == pytest.approx(variance / 2 - kernel_mean, abs=1e-10)
    assert coef.ideal_search_dcl == pytest.approx(kernel_mean - 1, abs=1e-10)


def test_variance_reduction_keeps_relative_error_flat_in_k() -> None:
    """If this fails, the estimators lose their point: at k = 512 the plain difference would be as precise."""
    model = VMFUniform(3, 2.0)
    generator = torch.Generator().manual_seed(11)
    tau, n, k = 1.0, 400, 512
    z, y = model.sample(n, generator)
    xi = model.sample_negatives((n, k), generator)
    pos = (z * y).sum(dim=1)
    neg = torch.einsum("rd,rkd->rk", z, xi)
    log_n = torch.full((n,), _log_c3(1 / tau), dtype=torch.float64)
    gap = integrated_cross_entropy_gap(pos, neg, log_n, tau=tau, form="dcl")
    assert float(gap.naive.std()) > 10 * float(gap.estimate.std())
    assert float(gap.estimate.min()) >= 0.0
    ideal = ideal_search_gap(
        pos, neg, model.log_positive_density(z[:, None, :], xi), log_n, tau=tau, form="dcl"
    )
    assert float(ideal.naive.std()) > 10 * float(ideal.estimate.std())


def test_bad_inputs_raise_with_the_argument_named() -> None:
    """If this fails, a bad tau, form, k or shape would give NaN or a cryptic error instead of a fix."""
    pos, neg = torch.zeros(3, dtype=torch.float64), torch.zeros(3, 4, dtype=torch.float64)
    log_n = torch.zeros(3, dtype=torch.float64)
    with pytest.raises(ValueError, match="tau"):
        integrated_cross_entropy_gap(pos, neg, log_n, tau=0.0, form="dcl")
    with pytest.raises(ValueError, match="form"):
        integrated_cross_entropy_gap(pos, neg, log_n, tau=1.0, form="gcl")
    with pytest.raises(ValueError, match="log_partition"):
        integrated_cross_entropy_gap(pos, neg, torch.zeros(2, dtype=torch.float64), tau=1.0, form="dcl")
    with pytest.raises(ValueError, match="negative_scores"):
        integrated_cross_entropy_gap(pos, torch.full((3, 4), math.nan), log_n, tau=1.0, form="dcl")
    with pytest.raises(ValueError, match="log_kernel_ratio"):
        ideal_search_gap(pos, neg, torch.zeros(3, 5, dtype=torch.float64), log_n, tau=1.0, form="dcl")
    with pytest.raises(ValueError, match="n_negatives"):
        cross_entropy_gap_bounds(0, 1.0, "dcl")
    with pytest.raises(ValueError, match="second_moment"):
        ideal_search_bound(4, 1.0, 0.5, "dcl")
    with pytest.raises(ValueError, match="support_weights"):
        learned_log_partition(
            neg[:, :3], neg[:, :3], tau=1.0, support_weights=torch.ones(3, dtype=torch.float64)
        )
    with pytest.raises(ValueError, match="n_polar"):
        uniform_sphere_quadrature(0, 4)
    with pytest.raises(ValueError, match="p ="):
        learned_log_partition(torch.zeros(2, 3), torch.zeros(4, 2), tau=1.0)
