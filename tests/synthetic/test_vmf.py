"""VMFUniform and the sphere samplers: closed forms vs quadrature vs Monte Carlo (docs/theory.md section 6.1)."""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, special, stats

from crl.synthetic import VMFUniform, sample_uniform_sphere, sample_vmf, vmf
from crl.synthetic._special import vmf_mean_resultant_length
from crl.synthetic.vmf import vmf_uniform_optimal_auc


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _coth(x: float) -> float:
    return 1.0 / math.tanh(x)


@pytest.mark.parametrize(("d", "kappa"), [(2, 0.5), (2, 8.0), (3, 4.0), (3, 1e5), (10, 3.0), (64, 40.0)])
def test_vmf_sampler_has_mean_resultant_length_a_d(d: int, kappa: float) -> None:
    """E<mu, y> = A_d(kappa) for Wood's sampler, within 4 standard errors; a biased rejection step breaks it."""
    n = 20000
    mean = sample_uniform_sphere((n,), d, _generator(0))
    y = sample_vmf(mean, kappa, _generator(1))
    cosines = (y * mean).sum(-1)
    assert torch.allclose(y.norm(dim=-1), torch.ones(n, dtype=torch.float64), atol=1e-12)
    standard_error = float(cosines.std()) / math.sqrt(n)
    assert (
        abs(float(cosines.mean()) - float(vmf_mean_resultant_length(d, kappa))) < 4 * standard_error + 1e-12
    )


def test_vmf_sampler_cosine_law_matches_the_exact_cdf() -> None:
    """In d = 3, <mu, y> has CDF (e^{k u} - e^{-k}) / (e^k - e^{-k}): Kolmogorov–Smirnov distance small."""
    kappa, n = 3.0, 20000
    mean = torch.zeros(n, 3, dtype=torch.float64)
    mean[:, 2] = 1.0
    cosines = np.sort(sample_vmf(mean, kappa, _generator(2))[:, 2].numpy())
    exact = (np.exp(kappa * cosines) - math.exp(-kappa)) / (math.exp(kappa) - math.exp(-kappa))
    empirical = np.arange(1, n + 1) / n
    assert np.max(np.abs(exact - empirical)) < 1.63 / math.sqrt(n)  # KS 1% critical value


@pytest.mark.parametrize("kappa", [1e-9, 0.3, 2.0, 30.0, 1e6])
def test_s2_inverse_cdf_matches_the_exact_cdf_and_wood(kappa: float) -> None:
    """On S^2 the cosine's exact CDF ``F(w) = e^{-kappa (1 - w)} expm1(-kappa (1 + w)) / expm1(-2 kappa)`` (the
    overflow-free form) lies within the 1% KS distance of the inverse-CDF sampler's draws, and Wood's rejection
    sampler (the d = 3 case of the general sampler) agrees with it by the two-sample KS test."""
    n = 20000
    kappas = torch.full((n,), kappa, dtype=torch.float64)
    w, root = vmf._sample_vmf_cosine_s2(kappas, _generator(5))
    assert torch.allclose(w.square() + root.square(), torch.ones(n, dtype=torch.float64), atol=1e-12)
    cosines = np.sort(w.numpy())
    exact = np.exp(-kappa * (1.0 - cosines)) * np.expm1(-kappa * (1.0 + cosines)) / math.expm1(-2.0 * kappa)
    assert np.max(np.abs(exact - np.arange(1, n + 1) / n)) < 1.63 / math.sqrt(n)
    wood, _ = vmf._sample_vmf_cosine(kappas, 3, _generator(6))
    assert stats.ks_2samp(w.numpy(), wood.numpy()).pvalue > 0.001


def _wood_gathering_every_round(kappa: torch.Tensor, dim: int, generator: torch.Generator) -> torch.Tensor:
    """Wood's rejection rounds as first written: each round gathers the pending rows' constants by index."""
    dof = dim - 1
    ratio = 0.5 * dof / kappa
    b = torch.where(
        kappa > dof,
        ratio / (1.0 + torch.sqrt(1.0 + ratio.square())),
        dof / (2.0 * kappa + torch.sqrt(4.0 * kappa.square() + dof * dof)),
    )
    one_minus_x0 = 2.0 * b / (1.0 + b)
    log_one_minus_x0_sq = torch.log(4.0 * b) - 2.0 * torch.log1p(b)
    w = torch.empty(kappa.shape[0], dtype=torch.float64)
    pending = torch.arange(kappa.shape[0])
    while pending.numel():
        b_p, k_p = b[pending], kappa[pending]
        gauss = torch.randn((2, pending.numel(), dof), generator=generator, dtype=torch.float64)
        chi2 = gauss.square().sum(dim=-1)
        z = chi2[0] / (chi2[0] + chi2[1])
        one_minus_w = 2.0 * b_p * z / (1.0 - (1.0 - b_p) * z)
        log_accept = k_p * (one_minus_x0[pending] - one_minus_w) + dof * (
            torch.log(one_minus_x0[pending] + (1.0 - one_minus_x0[pending]) * one_minus_w)
            - log_one_minus_x0_sq[pending]
        )
        accept = log_accept >= torch.log(
            torch.rand(pending.numel(), generator=generator, dtype=torch.float64)
        )
        w[pending[accept]] = (1.0 - one_minus_w)[accept]
        pending = pending[~accept]
    return w


@pytest.mark.parametrize(("dim", "kappa"), [(2, 0.3), (2, 4.0), (5, 2.0), (2, 1e4)])
def test_wood_sampler_with_one_kappa_draws_exactly_what_gathering_draws(dim: int, kappa: float) -> None:
    """If this fails, the one-kappa shortcut (views instead of gathers) changed a draw, so every stored cell of a
    claim drawn on the circle would change with it."""
    kappas = torch.full((5000,), kappa, dtype=torch.float64)
    w, _ = vmf._sample_vmf_cosine(kappas, dim, _generator(7))
    assert torch.equal(w, _wood_gathering_every_round(kappas, dim, _generator(7)))
    mixed = kappas.clone()
    mixed[::2] = 2.0 * kappa
    w, _ = vmf._sample_vmf_cosine(mixed, dim, _generator(8))
    assert torch.equal(w, _wood_gathering_every_round(mixed, dim, _generator(8)))


def test_vmf_sampler_tangent_direction_is_isotropic() -> None:
    """The component of y orthogonal to mu is uniform on the orthogonal sphere: its mean is ~0."""
    n = 20000
    mean = torch.zeros(n, 4, dtype=torch.float64)
    mean[:, 0] = 1.0
    y = sample_vmf(mean, 2.0, _generator(3))
    tangent_mean = y[:, 1:].mean(0)
    assert float(tangent_mean.abs().max()) < 4 * float(y[:, 1:].std(0).max()) / math.sqrt(n)


def test_per_row_kappa_and_determinism() -> None:
    """A per-row kappa tensor is honoured row by row; the same seed gives the same draw."""
    n = 8000
    mean = torch.zeros(2 * n, 3, dtype=torch.float64)
    mean[:, 0] = 1.0
    kappa = torch.cat([torch.full((n,), 1.0), torch.full((n,), 20.0)]).double()
    y = sample_vmf(mean, kappa, _generator(4))
    assert float(y[:n, 0].mean()) == pytest.approx(_coth(1.0) - 1.0, abs=0.02)
    assert float(y[n:, 0].mean()) == pytest.approx(_coth(20.0) - 1 / 20.0, abs=0.005)
    assert torch.equal(y, sample_vmf(mean, kappa, _generator(4)))


def test_uniform_sampler_is_isotropic() -> None:
    """Uniform points have mean 0 and second moment I/d."""
    points = sample_uniform_sphere((40000,), 5, _generator(5))
    assert float(points.mean(0).abs().max()) < 0.02
    second = points.T @ points / points.shape[0]
    assert torch.allclose(second, torch.eye(5, dtype=torch.float64) / 5, atol=0.01)


def _cosine_density_quad(d: int, function: object) -> float:
    """∫ f(u) dnu(u), nu the law of <mu, u> for u uniform on S^{d-1} (density ∝ (1-u^2)^{(d-3)/2})."""
    log_beta = special.betaln(0.5 * (d - 1), 0.5)
    value, _ = integrate.quad(
        lambda theta: function(math.cos(theta)) * math.sin(theta) ** (d - 2) * math.exp(-log_beta),  # type: ignore[operator]
        0.0,
        math.pi,
        epsabs=1e-13,
        limit=200,
    )
    return value


@pytest.mark.parametrize("d", [2, 3, 6])
def test_positive_density_integrates_to_one_and_its_kl_is_mean_kl(d: int) -> None:
    """∫ p+_x du = 1 and ∫ p+_x log(p+_x/p-) du = kappa A_d - log C_d, by quadrature over u = <x, y>."""
    model = VMFUniform(d, kappa=3.0)
    direction = torch.zeros(d, dtype=torch.float64)
    direction[0] = 1.0

    def log_ratio_at(u: float) -> float:
        y = torch.zeros(d, dtype=torch.float64)
        y[0], y[1] = u, math.sqrt(max(1.0 - u * u, 0.0))
        return float(model.log_ratio(direction, y))

    assert _cosine_density_quad(d, lambda u: math.exp(log_ratio_at(u))) == pytest.approx(1.0, abs=1e-10)
    kl = _cosine_density_quad(d, lambda u: math.exp(log_ratio_at(u)) * log_ratio_at(u))
    assert model.mean_kl() == pytest.approx(kl, abs=1e-9)


def test_closed_forms_in_d3() -> None:
    """d = 3: L* = -tau (k A_3 - log(sinh k / k)), E* = (1 + A_3)/2, E|dM/dpi|^2 = k coth k (docs/theory.md 6.1)."""
    for kappa in (0.2, 2.0, 15.0, 300.0):
        model = VMFUniform(3, kappa)
        a3 = _coth(kappa) - 1.0 / kappa
        log_c3 = kappa + math.log1p(-math.exp(-2 * kappa)) - math.log(2 * kappa)
        assert model.optimal_risk(0.5) == pytest.approx(-0.5 * (kappa * a3 - log_c3), rel=1e-12)
        assert model.optimal_auc() == pytest.approx((1.0 + a3) / 2.0, abs=1e-12)
        assert model.density_ratio_second_moment() == pytest.approx(kappa * _coth(kappa), rel=1e-12)


@pytest.mark.parametrize(("d", "kappa"), [(2, 2.5), (7, 6.0)])
def test_optimal_auc_quadrature_is_accurate_in_other_dimensions(d: int, kappa: float) -> None:
    """E* in d = 2 and d = 7 against an independent double integral P[<x,y> > <x,y'>] over both angles."""
    model = VMFUniform(d, kappa)
    log_beta = special.betaln(0.5 * (d - 1), 0.5)

    def positive(theta: float) -> float:
        return math.exp(kappa * math.cos(theta) - model.log_normaliser - log_beta) * math.sin(theta) ** (
            d - 2
        )

    def uniform(theta: float) -> float:
        return math.exp(-log_beta) * math.sin(theta) ** (d - 2)

    value, _ = integrate.dblquad(
        lambda t2, t1: positive(t1) * uniform(t2), 0.0, math.pi, lambda t1: t1, math.pi, epsabs=1e-11
    )
    assert model.optimal_auc() == pytest.approx(value, abs=1e-9)
    _, reported_error = vmf_uniform_optimal_auc(d, kappa)
    assert reported_error < 1e-8


@pytest.mark.parametrize(("d", "kappa"), [(3, 4.0), (5, 10.0)])
def test_monte_carlo_agrees_with_exact_values(d: int, kappa: float) -> None:
    """MC estimates of E log_ratio (= mean KL), E* (pairs), E dM/dpi(x, y) (= E|dM/dpi|^2), E_{p-} e^{log_ratio} = 1."""
    model = VMFUniform(d, kappa)
    n = 40000
    generator = _generator(6)
    x, y = model.sample(n, generator)
    negatives = model.sample_negatives((n,), generator)
    log_ratio = model.log_ratio(x, y)
    wins = (log_ratio > model.log_ratio(x, negatives)).double()
    ratio_at_positive = model.anchor_density_ratio(x, y)
    ratio_at_negative = torch.exp(model.log_ratio(x, negatives))
    for sample, exact in (
        (log_ratio, model.mean_kl()),
        (wins, model.optimal_auc()),
        (ratio_at_positive, model.density_ratio_second_moment()),
        (ratio_at_negative, 1.0),
    ):
        standard_error = float(sample.std()) / math.sqrt(n)
        assert abs(float(sample.mean()) - exact) < 4.5 * standard_error


def test_ideal_score_is_tau_kappa_inner_product_up_to_a_constant() -> None:
    """s* = tau kappa <x, y> - tau log C_d(kappa): the constant g(x) does not depend on y (docs/theory.md 6.1)."""
    model = VMFUniform(4, kappa=5.0)
    x, y = model.sample(50, _generator(7))
    difference = model.ideal_score(x[:, None], y[None], tau=0.3) - 0.3 * 5.0 * x @ y.T
    assert torch.allclose(difference, torch.full_like(difference, -0.3 * model.log_normaliser), atol=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"dim": 1, "kappa": 1.0}, "dim"),
        ({"dim": 3, "kappa": 0.0}, "kappa"),
        ({"dim": 3, "kappa": -2.0}, "kappa"),
        ({"dim": 3, "kappa": math.inf}, "kappa"),
        ({"dim": 3, "kappa": 1.0, "dtype": torch.int64}, "dtype"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(kwargs: dict[str, object], name: str) -> None:
    """Invalid d, kappa, dtype are refused with the argument's name in the message."""
    with pytest.raises(ValueError, match=name):
        VMFUniform(**kwargs)  # type: ignore[arg-type]


def test_bad_sampling_arguments() -> None:
    """Sizes, shapes, tau, generators and point shapes are validated."""
    model = VMFUniform(3, 2.0)
    with pytest.raises(ValueError, match="n"):
        model.sample(-1, _generator(0))
    with pytest.raises(ValueError, match="shape"):
        model.sample_negatives((2, -1), _generator(0))
    with pytest.raises(TypeError, match="generator"):
        model.sample(3, None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tau"):
        model.optimal_risk(0.0)
    with pytest.raises(ValueError, match="last dimension"):
        model.log_ratio(torch.zeros(2, 4, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="kappa"):
        sample_vmf(torch.eye(3, dtype=torch.float64), 0.0, _generator(0))


def test_sample_vmf_refuses_non_unit_means() -> None:
    """A mean that is not a unit vector would silently give the wrong law: refused."""
    with pytest.raises(ValueError, match="unit"):
        sample_vmf(2.0 * torch.eye(3, dtype=torch.float64), 1.0, _generator(0))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kappa", [math.inf, math.nan])
def test_sample_vmf_refuses_infinite_kappa_instead_of_looping(kappa: float) -> None:
    """If this fails, kappa = inf loops forever in Wood's sampler instead of a ValueError naming kappa and the fix."""
    with pytest.raises(ValueError, match=r"kappa must be finite.*use mean itself"):
        sample_vmf(torch.eye(3, dtype=torch.float64), kappa, _generator(0))


@pytest.mark.timeout(20)
@pytest.mark.parametrize("dim", [2, 3, 10])
@pytest.mark.parametrize("kappa", [1e10, 1e200, 1.7e308])
def test_sample_vmf_is_exact_at_huge_kappa(dim: int, kappa: float) -> None:
    """If this fails, a large finite kappa overflows 1 - 4 kappa^2 into a loop instead of sampling
    1 - <mu, y> ~ (d-1)/(2 kappa)."""
    y = sample_vmf(torch.eye(dim, dtype=torch.float64), kappa, _generator(1))
    assert torch.allclose(y.norm(dim=-1), torch.ones(dim, dtype=torch.float64))
    assert float((1.0 - y.diagonal()).max()) <= 50.0 * dim / kappa


@pytest.mark.timeout(20)
def test_vmf_uniform_at_kappa_1e10_is_cheap_and_exact_in_d3() -> None:
    """If this fails, VMFUniform(3, 1e10) allocates gigabytes in a series fallback instead of Hankel's expansion
    of log C_3."""
    kappa = 1e10
    model = VMFUniform(3, kappa)
    assert model.log_normaliser == pytest.approx(kappa - math.log(2.0 * kappa), rel=1e-15)
    assert model.mean_kl() == pytest.approx(math.log(2.0 * kappa) - 1.0, rel=1e-6)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kappa", [1e12, 1e300])
def test_vmf_uniform_refuses_kappa_beyond_its_stated_range(kappa: float) -> None:
    """Above 1e10 the exact answers cancel to nothing: refused, naming kappa and the bound."""
    with pytest.raises(ValueError, match=r"kappa must be <= 1e\+10.*kappa="):
        VMFUniform(3, kappa)


def test_uniform_sphere_refuses_dim_zero() -> None:
    """If this fails, dim = 0 returns an empty (n, 0) tensor of 'unit vectors' instead of an error."""
    with pytest.raises(ValueError, match="dim"):
        sample_uniform_sphere((4,), 0, _generator(0))
