"""Special functions and quadrature rules of crl.synthetic against independent references."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, special

from crl.synthetic._special import (
    _log_ive_hankel,
    clenshaw_curtis_cumulative,
    gini_auc,
    log_bessel_ive,
    log_vmf_normaliser,
    polar_angle_rule,
    vmf_mean_resultant_length,
)


def _log_normaliser_by_quadrature(d: int, kappa: float) -> float:
    """log E_{u uniform on S^{d-1}} exp(kappa <mu, u>), integrating over theta = angle(mu, u) by scipy quad.

    theta has density sin^{d-2}(theta)/B((d-1)/2, 1/2); the integrand is scaled by its value at the mode.
    """
    cos_mode = (math.sqrt((d - 2.0) ** 2 + 4.0 * kappa * kappa) - (d - 2.0)) / (2.0 * kappa)
    mode, width = math.acos(cos_mode), 1.0 / math.sqrt(kappa + d)

    def log_integrand(theta: float) -> float:
        return kappa * math.cos(theta) + (d - 2) * math.log(math.sin(theta))

    peak = log_integrand(mode) if 0.0 < mode < math.pi else kappa
    points = [p for p in (mode - 3 * width, mode, mode + 3 * width) if 0.0 < p < math.pi]
    value, _ = integrate.quad(
        lambda t: math.exp(log_integrand(t) - peak), 0.0, math.pi, points=points, epsabs=1e-15, epsrel=1e-13
    )
    return math.log(value) + peak - special.betaln(0.5 * (d - 1), 0.5)


@pytest.mark.parametrize("d", [2, 3, 4, 7, 30])
@pytest.mark.parametrize("kappa", [1e-3, 0.7, 1.0, 1.3, 12.0, 150.0])
def test_log_vmf_normaliser_matches_its_defining_integral(d: int, kappa: float) -> None:
    """log C_d(kappa) = log E_uniform exp(kappa <mu, u>); a mismatch means a wrong Bessel formula or branch."""
    expected = _log_normaliser_by_quadrature(d, kappa)
    assert float(log_vmf_normaliser(d, kappa)) == pytest.approx(expected, rel=1e-11, abs=1e-14)


def test_log_vmf_normaliser_closed_forms_in_low_dimension() -> None:
    """C_3 = sinh(k)/k, C_1 = cosh(k), C_d(0) = 1: the documented special cases."""
    kappa = np.array([1e-6, 0.5, 1.0, 2.0, 40.0, 600.0])
    assert np.allclose(log_vmf_normaliser(3, kappa), np.log(np.sinh(kappa) / kappa), rtol=1e-13, atol=1e-16)
    assert np.allclose(log_vmf_normaliser(1, kappa), np.log(np.cosh(kappa)), rtol=1e-13, atol=1e-16)
    assert float(log_vmf_normaliser(9, 0.0)) == 0.0


def test_log_vmf_normaliser_is_finite_where_bessel_underflows_or_overflows() -> None:
    """Huge d with small kappa (ive underflows) and huge kappa (I overflows) stay finite and consistent.

    Small kappa: log C_d ≈ kappa^2/(2d); elsewhere the finite-difference slope of log C_d must be A_d.
    """
    d = 4000
    small = float(log_vmf_normaliser(d, 2.0))
    assert small == pytest.approx(2.0**2 / (2 * d), rel=1e-3)
    for kappa in (3.0, 50.0, 1e5):
        step = 1e-4 * kappa
        slope = (float(log_vmf_normaliser(d, kappa + step)) - float(log_vmf_normaliser(d, kappa - step))) / (
            2 * step
        )
        assert np.isfinite(slope)
        assert float(vmf_mean_resultant_length(d, kappa)) == pytest.approx(slope, rel=1e-6)


def test_log_bessel_ive_series_branch_agrees_with_scipy_where_both_work() -> None:
    """The log-space power series (used on underflow) must agree with scipy's ive where ive is representable."""
    from crl.synthetic._special import _log_iv_series

    for nu, x in [(60.5, 3.0), (200.0, 40.0), (0.5, 2.0), (-0.5, 0.3)]:
        assert _log_iv_series(nu, x) - x == pytest.approx(float(log_bessel_ive(nu, x)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("d", [2, 3, 5, 64])
def test_mean_resultant_length_is_the_derivative_of_log_normaliser(d: int) -> None:
    """A_d(kappa) = d/dkappa log C_d(kappa); the d = 3 closed form is coth(k) - 1/k."""
    for kappa in (0.05, 1.0, 7.0, 90.0):
        step = 1e-5 * max(kappa, 1.0)
        slope = (float(log_vmf_normaliser(d, kappa + step)) - float(log_vmf_normaliser(d, kappa - step))) / (
            2 * step
        )
        assert float(vmf_mean_resultant_length(d, kappa)) == pytest.approx(slope, rel=1e-7)
    kappa = np.array([0.3, 2.0, 20.0])
    assert np.allclose(vmf_mean_resultant_length(3, kappa), 1 / np.tanh(kappa) - 1 / kappa, rtol=1e-13)


@pytest.mark.parametrize("power", [0, 1, 2, 8])
def test_polar_angle_rule_is_a_probability_law_with_the_right_moments(power: float) -> None:
    """Weights sum to 1 and E cos^2(theta) = 1/(power + 2) for theta ∝ sin^power (first coordinate of a sphere)."""
    theta, weights = polar_angle_rule(64, power)
    assert weights.sum() == pytest.approx(1.0, abs=1e-13)
    assert weights @ np.cos(theta) ** 2 == pytest.approx(1.0 / (power + 2.0), abs=1e-13)


def test_clenshaw_curtis_cumulative_integrates_smooth_functions() -> None:
    """cumulative @ g = ∫_0^theta g and weights @ g = ∫_0^pi g for g = exp(cos): spectral accuracy."""
    theta, weights, cumulative = clenshaw_curtis_cumulative(48)
    g = np.exp(np.cos(theta)) * np.sin(theta)
    assert weights @ g == pytest.approx(math.e - 1 / math.e, abs=1e-13)
    assert np.allclose(cumulative @ g, math.e - np.exp(np.cos(theta)), atol=1e-13)


def _gini_auc_brute(ratio: np.ndarray, mass: np.ndarray) -> float:
    """P[R > R'] + 1/2 P[R = R'] by a double loop: R under mass*ratio, R' under mass."""
    total = 0.0
    for i in range(len(ratio)):
        for j in range(len(ratio)):
            win = 1.0 if ratio[i] > ratio[j] else 0.5 if ratio[i] == ratio[j] else 0.0
            total += mass[i] * ratio[i] * mass[j] * win
    return total


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.5]), min_size=1, max_size=9),
    st.lists(st.floats(0.05, 1.0), min_size=9, max_size=9),
)
def test_gini_auc_equals_the_tie_aware_pairwise_auc(values: list[float], raw_mass: list[float]) -> None:
    """The sorting identity E* = 1/2 + 1/4 sum m m' |r - r'| must count ties 1/2, like the brute-force AUC."""
    mass = np.array(raw_mass[: len(values)])
    ratio = np.array(values)
    if ratio @ mass == 0:
        ratio = ratio + 1.0
    mass = mass / mass.sum()
    ratio = ratio / (ratio @ mass)
    assert gini_auc(ratio, mass) == pytest.approx(_gini_auc_brute(ratio, mass), abs=1e-12)


@pytest.mark.timeout(20)
@pytest.mark.parametrize("kappa", [2e9, 1e12, 1e300])
def test_log_normaliser_beyond_scipy_range_uses_hankel_expansion(kappa: float) -> None:
    """scipy's ive is NaN above ~1.1e9; log C_3 = kappa - log(2 kappa) there (was a 37 GiB-3.6 TiB series)."""
    assert float(log_vmf_normaliser(3, kappa)) == pytest.approx(kappa - math.log(2.0 * kappa), rel=1e-15)
    assert float(vmf_mean_resultant_length(3, kappa)) == pytest.approx(1.0 - 1.0 / kappa, rel=1e-15)


def test_log_bessel_ive_at_large_x_matches_scipy_below_its_limit() -> None:
    """Hankel's expansion (used above 1e9) agrees with scipy where both exist, for a high order too."""
    for nu in (0.0, 1.5, 49.0):
        assert _log_ive_hankel(nu, 1e9) == pytest.approx(float(np.log(special.ive(nu, 1e9))), rel=1e-14)


def test_log_bessel_ive_refuses_what_no_fallback_reaches() -> None:
    """A huge order at a huge argument: a ValueError naming nu and x, never a giant allocation."""
    with pytest.raises(ValueError, match=r"nu=.*x="):
        log_bessel_ive(1e6, 1e10)
