"""AsymmetricSphere: closed forms vs independent sphere quadrature vs Monte Carlo (docs/theory.md section 6.2)."""

import math

import numpy as np
import pytest
import torch

from crl.synthetic import AsymmetricSphere, VMFUniform
from crl.synthetic._axial import extrapolated_grid_optimal_auc, grid_optimal_auc
from crl.synthetic._special import gini_auc, log_vmf_normaliser, vmf_mean_resultant_length


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _sphere_rule_s2(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Product rule on S^2 about a random pole: t = cos(theta) Gauss–Legendre on [-1, 1], phi trapezoid.

    The uniform probability on S^2 is dt dphi / (4 pi) (Archimedes), so the weights sum to 1. The random pole
    keeps this rule independent of the model's own axial reduction.
    """
    nodes, weights = np.polynomial.legendre.leggauss(n)
    phi = 2 * math.pi * np.arange(2 * n) / (2 * n)
    t = np.repeat(nodes, 2 * n)
    radius = np.sqrt(1 - t * t)
    points = np.stack([radius * np.cos(np.tile(phi, n)), radius * np.sin(np.tile(phi, n)), t], axis=1)
    rotation, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((3, 3)))
    rule_weights = np.repeat(weights, 2 * n) / (2.0 * 2 * n)
    return torch.from_numpy(points @ rotation.T), torch.from_numpy(rule_weights)


MODELS_D3 = [
    {"dim": 3, "kappa": 4.0, "anchor_kappa": 2.0},
    {"dim": 3, "kappa": 4.0, "anchor_kappa": 2.0, "negative_law": "marginal"},
    {
        "dim": 3,
        "kappa": 5.0,
        "anchor_kappa": [3.0, 1.5],
        "anchor_means": [[0.0, 0.6, 0.8], [0.0, -0.6, -0.8]],
        "anchor_weights": [0.7, 0.3],
    },
]


@pytest.mark.parametrize("kwargs", MODELS_D3)
def test_densities_and_integrals_against_full_sphere_quadrature(kwargs: dict[str, object]) -> None:
    """On a 2-D rule over S^2 x S^2: p-, p+_x and pi integrate to 1; E_x KL and E|dM/dpi|^2 match the model.

    The double sums use only the model's pointwise densities, not its axial 1-D reductions.
    """
    model = AsymmetricSphere(**kwargs)  # type: ignore[arg-type]
    points, weights = _sphere_rule_s2(32)
    anchor_mass = weights * torch.exp(model.log_anchor_density(points))
    assert float(weights @ torch.exp(model.log_negative_density(points))) == pytest.approx(1.0, abs=1e-11)
    assert float(anchor_mass.sum()) == pytest.approx(1.0, abs=1e-11)
    log_positive = model.log_positive_density(points[:, None], points[None])
    assert torch.allclose(torch.exp(log_positive) @ weights, torch.ones(len(weights), dtype=torch.float64))
    kl_per_anchor = (torch.exp(log_positive) * model.log_ratio(points[:, None], points[None])) @ weights
    assert float(anchor_mass @ kl_per_anchor) == pytest.approx(model.mean_kl(), abs=1e-9)
    ratio = model.anchor_density_ratio(points[:, None], points[None])
    moment_per_anchor = (ratio.square() * torch.exp(model.log_anchor_density(points))[None]) @ weights
    assert float(anchor_mass @ moment_per_anchor) == pytest.approx(
        model.density_ratio_second_moment(), rel=1e-9
    )


def test_marginal_density_equals_the_integral_of_the_kernel_against_pi() -> None:
    """p_Y(y) = ∫ pi(z) M(z, y) dz (closed form via C_d(|kappa y + kappa0 mu|)) vs a sphere quadrature."""
    model = AsymmetricSphere(**MODELS_D3[2])  # type: ignore[arg-type]
    points, weights = _sphere_rule_s2(48, seed=1)
    targets = model.sample_anchors(5, _generator(0))
    kernel = torch.exp(model.log_positive_density(points[None], targets[:, None]))
    numerical = kernel @ (weights * torch.exp(model.log_anchor_density(points)))
    assert torch.allclose(torch.exp(model.log_positive_marginal_density(targets)), numerical, rtol=1e-10)


@pytest.mark.parametrize(("d", "kappa", "kappa0"), [(3, 6.0, 2.0), (2, 3.0, 1.0), (9, 12.0, 5.0)])
def test_single_anchor_law_mean_kl_closed_form(d: int, kappa: float, kappa0: float) -> None:
    """One component, p- = pi: E_x KL = k A(k) - log C(k) - k0 A(k) A(k0) + log C(k0) (E<mu, y> = A(k) A(k0))."""
    model = AsymmetricSphere(d, kappa, kappa0)
    a, a0 = (float(vmf_mean_resultant_length(d, k)) for k in (kappa, kappa0))
    log_c, log_c0 = (float(log_vmf_normaliser(d, k)) for k in (kappa, kappa0))
    assert model.mean_kl() == pytest.approx(kappa * a - log_c - kappa0 * a * a0 + log_c0, abs=1e-11)


def test_linear_case_tends_to_the_uniform_model_and_matches_the_grid_path() -> None:
    """kappa0 -> 0 recovers VMFUniform's E*, L*, E|dM/dpi|^2; the linear and the grid E* agree to 1e-6."""
    near_uniform = AsymmetricSphere(4, 5.0, 1e-7)
    uniform = VMFUniform(4, 5.0)
    assert near_uniform.optimal_auc() == pytest.approx(uniform.optimal_auc(), abs=1e-7)
    assert near_uniform.mean_kl() == pytest.approx(uniform.mean_kl(), abs=1e-7)
    assert near_uniform.density_ratio_second_moment() == pytest.approx(
        uniform.density_ratio_second_moment(), rel=1e-7
    )
    model = AsymmetricSphere(3, 6.0, 3.0)
    assert grid_optimal_auc(model._axial, 128, 48) == pytest.approx(model.optimal_auc(), abs=2e-6)


@pytest.mark.parametrize(("d", "kappa", "kappa0"), [(2, 20.0, 5.0), (3, 50.0, 20.0)])
def test_extrapolated_grid_error_estimate_bounds_its_actual_error(
    d: int, kappa: float, kappa0: float
) -> None:
    """On linear models (exact E* known to 1e-12) the grid path's Aitken estimate must cover its actual error."""
    model = AsymmetricSphere(d, kappa, kappa0)
    levels = (64, 128, 256, 512, 1024) if d == 2 else (32, 64, 128, 256)
    value, estimate = extrapolated_grid_optimal_auc(model._axial, levels)
    assert abs(value - model.optimal_auc()) <= max(estimate, 1e-12)
    assert abs(value - model.optimal_auc()) < 1e-7


def test_grid_path_on_the_circle_against_a_uniform_circle_grid() -> None:
    """d = 2, mixture, p- = p_Y: the extrapolated E* vs E_x[1/2 + 1/4 E|r - r'|] on 4000 equispaced angles."""
    model = AsymmetricSphere(
        2, 4.0, [3.0, 1.0], anchor_means=[[1.0, 0.0], [-1.0, 0.0]], negative_law="marginal"
    )
    value, error = model.optimal_auc_with_error()
    assert error < 1e-6
    angles = 2 * math.pi * (np.arange(4000) + 0.5) / 4000
    circle = torch.from_numpy(np.stack([np.cos(angles), np.sin(angles)], axis=1))
    negative_mass = (torch.exp(model.log_negative_density(circle)) / 4000).numpy()
    anchor_mass = (torch.exp(model.log_anchor_density(circle)) / 4000).numpy()
    x = circle[::8]
    ratios = torch.exp(model.log_ratio(x[:, None], circle[None])).numpy()
    per_anchor = np.array([gini_auc(row, negative_mass) for row in ratios])
    assert value == pytest.approx(float(anchor_mass[::8] @ per_anchor * 8), abs=1e-5)


@pytest.mark.parametrize("kwargs", [*MODELS_D3, {"dim": 5, "kappa": 8.0, "anchor_kappa": 4.0}])
def test_monte_carlo_agrees_with_exact_values(kwargs: dict[str, object]) -> None:
    """MC of E log_ratio (= mean KL), E* (pairs), E dM/dpi(x, y) = E|dM/dpi|^2 and E_{p-} exp(log_ratio) = 1."""
    model = AsymmetricSphere(**kwargs)  # type: ignore[arg-type]
    n = 40000
    generator = _generator(2)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((n,), generator)
    log_ratio = model.log_ratio(x, y)
    for sample, exact in (
        (log_ratio, model.mean_kl()),
        ((log_ratio > model.log_ratio(x, negatives)).double(), model.optimal_auc()),
        (model.anchor_density_ratio(x, y), model.density_ratio_second_moment()),
        (torch.exp(model.log_ratio(x, negatives)), 1.0),
    ):
        standard_error = float(sample.std()) / math.sqrt(n)
        assert abs(float(sample.mean()) - exact) < 4.5 * standard_error


def test_samplers_follow_the_anchor_law_and_the_marginal_differs_from_it() -> None:
    """Anchors have E<mu, x> = A(k0); positives' marginal has E<mu, y> = A(k) A(k0) != A(k0) ([B]: no symmetry)."""
    d, kappa, kappa0 = 3, 3.0, 5.0
    for law in ("anchor", "marginal"):
        model = AsymmetricSphere(d, kappa, kappa0, anchor_means=[0.0, 0.0, 2.0], negative_law=law)  # type: ignore[arg-type]
        generator = _generator(3)
        x, y = model.sample(30000, generator)
        negatives = model.sample_negatives((100, 300), generator)
        a, a0 = (float(vmf_mean_resultant_length(d, k)) for k in (kappa, kappa0))
        assert float(x[:, 2].mean()) == pytest.approx(a0, abs=0.01)
        assert float(y[:, 2].mean()) == pytest.approx(a * a0, abs=0.01)
        expected = a0 if law == "anchor" else a * a0
        assert float(negatives[..., 2].mean()) == pytest.approx(expected, abs=0.01)
        assert model.negatives_from_anchor_law == (law == "anchor")
        assert model.negatives_from_positive_marginal == (law == "marginal")


def test_mixture_sampler_weights() -> None:
    """Component frequencies follow anchor_weights (signs of <e, x> for well-separated antipodal components)."""
    model = AsymmetricSphere(
        3, 2.0, [30.0, 30.0], anchor_means=[[1.0, 0, 0], [-1.0, 0, 0]], anchor_weights=[3, 1]
    )
    x = model.sample_anchors(20000, _generator(4))
    assert float((x[:, 0] > 0).double().mean()) == pytest.approx(0.75, abs=0.015)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"dim": 1, "kappa": 1.0, "anchor_kappa": 1.0}, "dim"),
        ({"dim": 3, "kappa": 0.0, "anchor_kappa": 1.0}, "kappa"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": -1.0}, "anchor_kappa"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": []}, "anchor_kappa"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": [1.0, 2.0], "anchor_weights": [1.0]}, "anchor_weights"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": 1.0, "anchor_weights": [0.0]}, "anchor_weights"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": 1.0, "anchor_means": [1.0, 0.0]}, "anchor_means"),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": 1.0, "anchor_means": [0.0, 0.0, 0.0]}, "anchor_means"),
        (
            {"dim": 3, "kappa": 1.0, "anchor_kappa": [1.0, 1.0], "anchor_means": [[1.0, 0, 0], [0, 1.0, 0]]},
            "anchor_means",
        ),
        ({"dim": 3, "kappa": 1.0, "anchor_kappa": 1.0, "negative_law": "uniform"}, "negative_law"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs: dict[str, object], name: str) -> None:
    """Invalid d, concentrations, weights, means (shape, zero, off-axis) and negative laws are refused by name."""
    with pytest.raises(ValueError, match=name):
        AsymmetricSphere(**kwargs)  # type: ignore[arg-type]


def test_too_concentrated_models_raise_instead_of_returning_a_wrong_number() -> None:
    """Beyond the rules' resolution the exact methods raise RuntimeError (documented limit)."""
    model = AsymmetricSphere(3, 5000.0, 4000.0, negative_law="marginal")
    with pytest.raises(RuntimeError, match="quadrature error"):
        model.optimal_auc()
