"""GaussianTwoTower: closed forms vs quadrature vs Monte Carlo (docs/theory.md section 6.3)."""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from crl.synthetic import GaussianTwoTower


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _gauss_legendre(lo: float, hi: float, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    return lo + 0.5 * (hi - lo) * (nodes + 1.0), 0.5 * (hi - lo) * weights


def _assert_means_agree(*pairs: tuple[torch.Tensor, float]) -> None:
    """Each sample's mean lies within 4.5 of its standard errors of the exact value beside it."""
    for sample, exact in pairs:
        standard_error = float(sample.std()) / math.sqrt(sample.numel())
        assert abs(float(sample.mean()) - exact) < 4.5 * standard_error


def _on_quadrature_grid(model: GaussianTwoTower) -> tuple[np.ndarray, ...]:
    """d = 1: Gauss–Legendre weights over x (times the N(0, 1) density) and y, and the model's p+_x(y), p-(y),
    log-ratio and dM/dpi on that (x, y) grid."""
    x_nodes, x_weights = _gauss_legendre(-25.0, 25.0, 200)
    x_weights = x_weights * stats.norm.pdf(x_nodes)
    v_nodes, v_weights = _gauss_legendre(-45.0, 45.0, 700)
    x = torch.from_numpy(x_nodes)[:, None, None]
    v = torch.from_numpy(v_nodes)[None, :, None]
    positive = torch.exp(model.log_positive_density(x, v)).numpy()
    negative = torch.exp(model.log_negative_density(v)).numpy()[0]
    log_ratio = model.log_ratio(x, v).numpy()
    ratio = model.anchor_density_ratio(x, v).numpy()
    return x_weights, v_weights, positive, negative, log_ratio, ratio


def _auc_by_noncentral_chi2(d: int, rho: float, n_nodes: int = 80) -> float:
    """E* = E_{s ~ chi2_d} P[(1-rho^2) A < B], A ~ ncx2(d, (1-rho^2) s/rho^2), B ~ ncx2(d, s/rho^2).

    An independent route to E* (the brief's formula), with scipy's noncentral chi-square. Both chi-square
    variables are integrated in their square roots (s = v^2, a = w^2), whose densities are smooth, by
    Gauss–Legendre over their bulk.
    """
    v, v_weights = _gauss_legendre(0.0, math.sqrt(stats.chi2.isf(1e-15, d)), n_nodes)
    v_weights = v_weights * stats.chi2.pdf(v * v, d) * 2.0 * v
    total = 0.0
    for v_value, v_weight in zip(v, v_weights, strict=True):
        law_a = stats.ncx2(d, (1 - rho**2) * v_value**2 / rho**2)
        w, w_weights = _gauss_legendre(0.0, math.sqrt(law_a.isf(1e-15)), n_nodes)
        a = w * w
        survival = stats.ncx2.sf((1 - rho**2) * a, d, v_value**2 / rho**2)
        total += v_weight * float(w_weights @ (law_a.pdf(a) * 2.0 * w * survival))
    return total


@pytest.mark.parametrize(("d", "rho"), [(1, 0.5), (3, 0.9), (4, -0.6)])
def test_optimal_auc_imhof_matches_noncentral_chi2_quadrature(d: int, rho: float) -> None:
    """Imhof's one-dimensional formula for E* must agree with the two-level ncx2 quadrature of the brief."""
    assert GaussianTwoTower(d, rho).optimal_auc() == pytest.approx(_auc_by_noncentral_chi2(d, rho), abs=1e-7)


@pytest.mark.parametrize(("d", "rho"), [(2, 0.7), (8, 0.4)])
def test_monte_carlo_agrees_with_exact_values(d: int, rho: float) -> None:
    """MC of E log_ratio (= -d/2 log(1-rho^2)), E* (pairs), E dM/dpi(x, y) = (1-rho^2)^-d, E_{p-} e^{log_ratio} = 1."""
    model = GaussianTwoTower(d, rho)
    n = 60000
    generator = _generator(1)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((n,), generator)
    log_ratio = model.log_ratio(x, y)
    _assert_means_agree(
        (log_ratio, model.mean_kl()),
        ((log_ratio > model.log_ratio(x, negatives)).double(), model.optimal_auc()),
        (model.anchor_density_ratio(x, y), model.density_ratio_second_moment()),
        (torch.exp(model.log_ratio(x, negatives)), 1.0),
    )


def test_closed_forms() -> None:
    """L* = tau d/2 log(1 - rho^2); E|dM/dpi|^2 = (1 - rho^2)^-d (inf past float64); rho = 0: E* = 1/2."""
    model = GaussianTwoTower(5, 0.6)
    assert model.optimal_risk(0.2) == pytest.approx(0.2 * 2.5 * math.log(1 - 0.36), rel=1e-14)
    assert model.density_ratio_second_moment() == pytest.approx((1 - 0.36) ** -5, rel=1e-14)
    assert GaussianTwoTower(64, 0.999).density_ratio_second_moment() == pytest.approx((1 - 0.999**2) ** -64)
    assert (
        GaussianTwoTower(2048, 0.999).density_ratio_second_moment() == math.inf
    )  # beyond float64, not an error
    null = GaussianTwoTower(3, 0.0)
    assert null.optimal_auc() == 0.5
    assert null.mean_kl() == 0.0


def test_densities_and_second_moment_by_quadrature_in_one_dimension() -> None:
    """d = 1: ∫ p+_x = 1, ∫ p- = 1, E_x KL(p+_x || p-) and E_x ∫ (dM/dpi)^2 dpi by Gauss–Legendre over (x, v)."""
    rho = 0.75
    model = GaussianTwoTower(1, rho)
    x_weights, v_weights, positive, negative, log_ratio, ratio = _on_quadrature_grid(model)
    assert np.allclose(positive @ v_weights, 1.0, atol=1e-12)
    assert negative @ v_weights == pytest.approx(1.0, abs=1e-12)
    assert model.mean_kl() == pytest.approx(x_weights @ ((positive * log_ratio) @ v_weights), abs=1e-10)
    second_moment = x_weights @ ((ratio * ratio * negative[None, :]) @ v_weights)
    assert model.density_ratio_second_moment() == pytest.approx(second_moment, rel=1e-10)


def test_sampler_correlation_is_rho_and_marginals_are_standard() -> None:
    """Coordinates of (x, y) have correlation rho and unit variance; negatives are N(0, I)."""
    model = GaussianTwoTower(3, -0.45)
    x, y = model.sample(50000, _generator(2))
    correlation = (x * y).mean(0)
    assert torch.allclose(correlation, torch.full((3,), -0.45, dtype=torch.float64), atol=0.02)
    assert torch.allclose(y.var(0), torch.ones(3, dtype=torch.float64), atol=0.03)
    negatives = model.sample_negatives((200, 250), _generator(3))
    assert negatives.shape == (200, 250, 3)
    assert torch.allclose(negatives.reshape(-1, 3).var(0), torch.ones(3, dtype=torch.float64), atol=0.03)


def test_log_ratio_is_bilinear_in_lifted_features_up_to_g_of_x() -> None:
    """log p+/p- - (rho <x,y> - rho^2 |y|^2/2)/(1-rho^2) depends on x only (docs/theory.md 6.3)."""
    rho = 0.8
    model = GaussianTwoTower(4, rho)
    x, y = model.sample(30, _generator(4))
    lifted = (rho * x @ y.T - 0.5 * rho**2 * (y * y).sum(-1)[None, :]) / (1 - rho**2)
    remainder = model.log_ratio(x[:, None], y[None]) - lifted
    assert torch.allclose(remainder, remainder[:, :1].expand_as(remainder), atol=1e-10)
    assert torch.allclose(
        model.log_ratio(x, y), model.log_positive_density(x, y) - model.log_negative_density(y)
    )


@pytest.mark.parametrize("rho", [1.0, -1.0, 1.5, math.nan])
def test_bad_rho_raises_value_error_naming_it(rho: float) -> None:
    """|rho| >= 1 (or NaN) is not a valid correlation."""
    with pytest.raises(ValueError, match="rho"):
        GaussianTwoTower(3, rho)


def test_bad_dim_raises_value_error_naming_it() -> None:
    """d must be an integer >= 1."""
    with pytest.raises(ValueError, match="dim"):
        GaussianTwoTower(0, 0.5)


@pytest.mark.parametrize(("d", "rho"), [(1, 0.5), (3, 0.9), (4, -0.6)])
def test_explicit_default_variance_gives_the_same_model(d: int, rho: float) -> None:
    """variance = 1 - rho^2 passed explicitly must give the default's E*, KL, second moment and log-ratio."""
    default, explicit = GaussianTwoTower(d, rho), GaussianTwoTower(d, rho, variance=1.0 - rho**2)
    assert explicit.optimal_auc() == pytest.approx(default.optimal_auc(), abs=1e-12)
    assert explicit.mean_kl() == pytest.approx(default.mean_kl(), rel=1e-12)
    assert explicit.density_ratio_second_moment() == pytest.approx(
        default.density_ratio_second_moment(), rel=1e-10
    )
    assert explicit.negatives_from_positive_marginal
    x, y = default.sample(20, _generator(5))
    assert torch.allclose(explicit.log_ratio(x, y), default.log_ratio(x, y), atol=1e-12)


@pytest.mark.parametrize(("d", "rho", "variance"), [(3, 0.5, 3.0), (2, 0.8, 1.5), (1, 0.3, 0.4)])
def test_wide_positives_monte_carlo_agrees_with_exact_values(d: int, rho: float, variance: float) -> None:
    """v != 1 - rho^2: MC of E log_ratio (= mean_kl), E* by pairs, E_{p-} e^{log_ratio} = 1 (heavy-tailed for v > 2,
    so only its median-of-means is checked loosely), and positives with variance rho^2 + v."""
    model = GaussianTwoTower(d, rho, variance=variance)
    n = 80000
    generator = _generator(6)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((n,), generator)
    log_ratio = model.log_ratio(x, y)
    _assert_means_agree(
        (log_ratio, model.mean_kl()),
        ((log_ratio > model.log_ratio(x, negatives)).double(), model.optimal_auc()),
    )
    assert torch.allclose(y.var(0), torch.full((d,), rho**2 + variance, dtype=torch.float64), rtol=0.04)
    assert not model.negatives_from_positive_marginal
    block_means = torch.exp(model.log_ratio(x, negatives)).reshape(40, -1).mean(dim=1)
    assert float(block_means.median()) == pytest.approx(1.0, abs=0.15)


def test_wide_positives_closed_forms_by_quadrature_in_one_dimension() -> None:
    """d = 1, v = 0.6, rho = 0.5 (v + 2 rho^2 < 2): mean_kl and E|dM/dpi|^2 by Gauss–Legendre over (x, y)."""
    model = GaussianTwoTower(1, 0.5, variance=0.6)
    x_weights, v_weights, positive, negative, log_ratio, ratio = _on_quadrature_grid(model)
    assert np.allclose(positive @ v_weights, 1.0, atol=1e-12)
    assert model.mean_kl() == pytest.approx(x_weights @ ((positive * log_ratio) @ v_weights), abs=1e-10)
    second_moment = x_weights @ ((ratio * ratio * negative[None, :]) @ v_weights)
    assert model.density_ratio_second_moment() == pytest.approx(second_moment, rel=1e-8)
    assert GaussianTwoTower(2, 0.5, variance=3.0).density_ratio_second_moment() == math.inf


@pytest.mark.parametrize(("rho", "variance"), [(0.8, None), (0.5, 3.0), (-0.3, 1.7)])
def test_ideal_coefficients_give_the_log_ratio_up_to_g_of_x(rho: float, variance: float | None) -> None:
    """tau log p+/p- - (w <x, y> + e |y|^2) depends on x only, with (w, e) = ideal_coefficients(tau)."""
    model = GaussianTwoTower(3, rho, variance=variance)
    tau = 0.5
    w, e = model.ideal_coefficients(tau)
    x, y = model.sample(30, _generator(7))
    remainder = tau * model.log_ratio(x[:, None], y[None]) - (w * x @ y.T + e * (y * y).sum(-1)[None, :])
    assert torch.allclose(remainder, remainder[:, :1].expand_as(remainder), atol=1e-10)


def test_wide_positives_make_exp_of_the_ideal_score_heavy_tailed() -> None:
    """v = 3: under p-, W = p+/p- has tail index v/(v - 1) = 1.5: the log-log slope of P(W > w) between its 1e-2 and
    1e-4 quantiles is near -1.5 (a light tail would fall much faster there)."""
    model = GaussianTwoTower(3, 0.5, variance=3.0)
    generator = _generator(8)
    x = model.sample_anchors(1, generator).expand(2_000_000, 3)
    w = torch.exp(model.log_ratio(x, model.sample_negatives((2_000_000,), generator))).numpy()
    upper, lower = np.quantile(w, [1 - 1e-2, 1 - 1e-4])
    slope = math.log(1e-4 / 1e-2) / math.log(lower / upper)
    assert slope == pytest.approx(-1.5, abs=0.3)


@pytest.mark.parametrize("variance", [0.0, -1.0, math.inf, math.nan])
def test_bad_variance_raises_value_error_naming_it(variance: float) -> None:
    """The positives' noise variance must be a finite number > 0."""
    with pytest.raises(ValueError, match="variance"):
        GaussianTwoTower(3, 0.5, variance=variance)
