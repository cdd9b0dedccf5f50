"""Special functions and quadrature rules behind the exact answers of the sphere models (docs/theory.md section 6).

Everything here is numpy/scipy float64 and works in log space, so that the vMF normaliser
``C_d(kappa) = E_{u ~ uniform(S^{d-1})} exp(kappa <mu, u>) = Gamma(d/2) (2/kappa)^{d/2-1} I_{d/2-1}(kappa)``
stays finite for every ``d >= 1`` and ``kappa >= 0`` (``C_1(kappa) = cosh(kappa)``, the "sphere" S^0 = {-1, +1}).
"""

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

FloatArray = NDArray[np.float64]

_SERIES_TERMS = 40
"""Terms of the 0F1 series of C_d used where kappa^2 <= max(2, 2d): each term is at most 1/j! of the first,
so the 40th is below 1e-47 (and the sum has no cancellation at kappa -> 0 or against lgamma(d/2) at large d)."""

_IVE_UNDERFLOW = 1e-290
"""Where ``scipy.special.ive`` falls below this, log I_nu is summed from its power series in log space."""

_SERIES_MAX_TERMS = 1_000_000
"""Most terms the log-space power series of I_nu may sum (8 MB); a longer sum raises instead of allocating."""

_HANKEL_MAX_TERMS = 40
"""Most terms of Hankel's large-x expansion of ``I_nu(x) e^{-x}`` (it is used where scipy's ``ive`` gives NaN,
x above about 1e9, where a few terms reach float64 precision unless nu^2 is comparable to x)."""


def _log_iv_series(nu: float, x: float) -> float:
    """log I_nu(x) from ``I_nu(x) = sum_j (x/2)^(2j+nu) / (j! Gamma(nu+j+1))``, summed in log space.

    Used only where ``ive`` underflows (nu large against x), where the terms peak at j* with
    ``j* (nu + j*) = x^2/4`` and decay geometrically after it; the sum keeps j* + 40 sqrt(j*) + 80 terms.
    """
    quarter_x2 = 0.25 * x * x
    peak = 0.5 * (-nu + math.sqrt(nu * nu + 4.0 * quarter_x2)) if quarter_x2 > 0 else 0.0
    n_terms = int(peak + 40.0 * math.sqrt(peak + 1.0) + 80.0)
    if n_terms > _SERIES_MAX_TERMS:
        raise ValueError(
            f"log I_nu(x) at nu={nu!r}, x={x!r} would need {n_terms} series terms (at most "
            f"{_SERIES_MAX_TERMS}); use a smaller concentration kappa or a smaller dimension"
        )
    j = np.arange(n_terms, dtype=np.float64)
    log_terms = (2.0 * j + nu) * math.log(0.5 * x) - special.gammaln(j + 1.0) - special.gammaln(nu + j + 1.0)
    return float(special.logsumexp(log_terms))


def _log_ive_hankel(nu: float, x: float) -> float:
    """``log(I_nu(x) e^{-x})`` from Hankel's expansion ``(2 pi x)^{-1/2} sum_k (-1)^k a_k(nu) / x^k``.

    ``a_k(nu) = prod_{j=1..k} (4 nu^2 - (2j-1)^2) / (k! 8^k)``; the terms are summed until they fall below
    1e-17 of the total. Raises ValueError where they stop shrinking first (nu^2 not small against x).
    """
    four_nu_sq = 4.0 * nu * nu
    term, total = 1.0, 1.0
    for k in range(1, _HANKEL_MAX_TERMS + 1):
        next_term = -term * (four_nu_sq - (2.0 * k - 1.0) ** 2) / (8.0 * k * x)
        if abs(next_term) >= abs(term) and term != 0.0:
            break
        total += next_term
        term = next_term
        if abs(term) <= 1e-17 * abs(total):
            return -0.5 * math.log(2.0 * math.pi * x) + math.log(total)
    raise ValueError(
        f"log I_nu(x) at nu={nu!r}, x={x!r} is out of reach (scipy's ive fails there and Hankel's expansion "
        "needs nu^2 small against x); use a smaller concentration kappa or a smaller dimension"
    )


def exp_or_inf(log_value: float) -> float:
    """``exp(log_value)`` as a float, ``math.inf`` where it exceeds the float64 range (instead of raising)."""
    return math.exp(log_value) if log_value < _LOG_FLOAT_MAX else math.inf


_LOG_FLOAT_MAX = math.log(np.finfo(np.float64).max)


def log_bessel_ive(nu: float, x: ArrayLike) -> FloatArray:
    """``log(I_nu(x) e^{-x})`` for x > 0, elementwise, without overflow or underflow.

    Args:
        nu: order, ``nu > -1``.
        x: positive finite arguments.

    Returns:
        float64 array of x's shape: ``log(scipy.special.ive(nu, x))``; where ``ive`` underflows (nu much
        larger than x) the power series of I_nu summed in log space, minus x; where ``ive`` gives NaN (x above
        about 1e9) Hankel's large-x expansion.

    Raises:
        ValueError: an argument that neither fallback reaches (the series would exceed 10^6 terms, or x is
            above 1e9 with nu^2 not small against x), naming nu and x.
    """
    xs = np.asarray(x, dtype=np.float64)
    scaled = special.ive(nu, xs)
    with np.errstate(divide="ignore"):
        out = np.log(scaled)
    bad = ~(scaled > _IVE_UNDERFLOW) | ~np.isfinite(scaled)
    if np.any(bad):
        flat_out = out.reshape(-1)
        flat_x = np.broadcast_to(xs, out.shape).reshape(-1)
        for index in np.flatnonzero(bad.reshape(-1)):
            x_i = float(flat_x[index])
            underflow = scaled.reshape(-1)[index] <= _IVE_UNDERFLOW
            flat_out[index] = _log_iv_series(nu, x_i) - x_i if underflow else _log_ive_hankel(nu, x_i)
        out = flat_out.reshape(out.shape)
    return np.asarray(out, dtype=np.float64)


def _log_vmf_normaliser_series(d: int, kappa: FloatArray) -> FloatArray:
    """``log C_d(kappa)`` from the 0F1 series ``sum_j (kappa^2/4)^j Gamma(d/2) / (j! Gamma(d/2 + j))``.

    Term j+1 over term j is ``kappa^2 / (4 (j+1) (d/2 + j)) <= 1/(j+1)`` when kappa^2 <= max(2, 2d).
    """
    quarter_k2 = 0.25 * kappa * kappa
    half_d = 0.5 * d
    term = np.ones_like(kappa)
    total = np.zeros_like(kappa)
    for j in range(_SERIES_TERMS):
        term = term * quarter_k2 / ((j + 1.0) * (half_d + j))
        total = total + term
    return np.asarray(np.log1p(total), dtype=np.float64)


def log_vmf_normaliser(d: int, kappa: ArrayLike) -> FloatArray:
    """``log C_d(kappa)``, the log-normaliser of vMF(mu, kappa) on S^{d-1} against the *uniform probability*.

    ``C_d(kappa) = E_{u ~ uniform} exp(kappa <mu, u>) = Gamma(d/2) (2/kappa)^{d/2-1} I_{d/2-1}(kappa)``
    (docs/theory.md section 6.1), so the vMF density w.r.t. the uniform law is ``exp(kappa <mu, y>) / C_d(kappa)``.
    ``C_d(0) = 1``; ``C_3(kappa) = sinh(kappa)/kappa``; ``C_1(kappa) = cosh(kappa)``.

    Args:
        d: ambient dimension, ``d >= 1``.
        kappa: finite concentrations, ``kappa >= 0`` (any shape); above about 1e9 Hankel's expansion of
            I_{d/2-1} is used, which raises ValueError where d^2 is not small against kappa.

    Returns:
        float64 array of kappa's shape, to a few ulps: the 0F1 series with log1p where
        kappa^2 <= max(2, 2d), scipy's exponentially scaled Bessel function above.
    """
    ks = np.asarray(kappa, dtype=np.float64)
    out = np.empty_like(ks)
    small = ks <= math.sqrt(max(2.0, 2.0 * d))
    out[small] = _log_vmf_normaliser_series(d, ks[small])
    large = ~small
    if np.any(large):
        k_large = ks[large]
        half_d = 0.5 * d
        out[large] = (
            special.gammaln(half_d)
            + (half_d - 1.0) * np.log(2.0 / k_large)
            + log_bessel_ive(half_d - 1.0, k_large)
            + k_large
        )
    return out


def vmf_mean_resultant_length(d: int, kappa: ArrayLike) -> FloatArray:
    """``A_d(kappa) = I_{d/2}(kappa) / I_{d/2-1}(kappa) = E<mu, y>`` for y ~ vMF(mu, kappa) on S^{d-1}.

    Also ``A_d = d/dkappa log C_d(kappa)``; ``A_3 = coth(kappa) - 1/kappa``; ``A_d(0) = 0``.

    Args:
        d: ambient dimension, ``d >= 2``.
        kappa: concentrations, ``kappa >= 0``.

    Returns:
        float64 array of kappa's shape.
    """
    ks = np.asarray(kappa, dtype=np.float64)
    out = np.zeros_like(ks)
    positive = ks > 0
    k_pos = ks[positive]
    half_d = 0.5 * d
    out[positive] = np.exp(log_bessel_ive(half_d, k_pos) - log_bessel_ive(half_d - 1.0, k_pos))
    return out


@functools.lru_cache(maxsize=64)
def polar_angle_rule(n_nodes: int, power: float) -> tuple[FloatArray, FloatArray]:
    """Gauss–Legendre rule for a probability law on [0, pi] with density ∝ sin(theta)^power.

    For a uniform point u on S^{d-1} and a fixed unit vector e, the angle theta = arccos<e, u> has density
    ``sin(theta)^(d-2) / B((d-1)/2, 1/2)`` (power = d - 2). The weights are the Gauss–Legendre weights on
    [0, pi] times that exact density, so ``sum(w f(theta))`` -> ``E f(theta)`` spectrally for smooth f.

    Args:
        n_nodes: number of nodes.
        power: exponent of sin(theta), ``power >= 0``.

    Returns:
        ``(theta, weights)``, both of shape (n_nodes,); cached (do not modify them in place).
    """
    nodes, weights = special.roots_legendre(n_nodes)
    theta = 0.5 * math.pi * (nodes + 1.0)
    log_norm = special.betaln(0.5 * (power + 1.0), 0.5)
    density = np.exp(power * np.log(np.sin(theta)) - log_norm)
    return theta, 0.5 * math.pi * weights * density


def gini_auc(ratio: FloatArray, mass: FloatArray) -> float:
    """``P[R > R'] + 1/2 P[R = R']`` for R ~ ratio under ``ratio * mass`` and R' ~ ratio under ``mass``.

    With r = p+/p- the likelihood ratio and ``mass`` the law p- (a discrete law, e.g. quadrature masses),
    ``E* = 1/2 + 1/4 sum_ij mass_i mass_j |r_i - r_j|`` (ties count 1/2 automatically). Proof: with
    sign(0) = 0, ``2 E* - 1 = sum_ij m_i m_j r_i sign(r_i - r_j)``; symmetrising in (i, j) gives
    ``1/2 sum_ij m_i m_j |r_i - r_j|``. Computed in O(N log N) by sorting.

    Args:
        ratio: r_i >= 0, shape (N,), with ``sum_i m_i r_i = 1``.
        mass: m_i >= 0 with sum 1, shape (N,).

    Returns:
        The AUC as a float.
    """
    return 0.5 + 0.5 * _half_mean_difference(ratio, mass)


def gini_auc_from_log(log_ratio: FloatArray, mass: FloatArray) -> float:
    """:func:`gini_auc` from ``log r`` without overflow: r is scaled by exp(-max log r) and the sum rescaled."""
    shift = float(np.max(log_ratio))
    scaled = _half_mean_difference(np.exp(log_ratio - shift), mass)
    if scaled <= 0.0:
        return 0.5
    return 0.5 + 0.5 * math.exp(math.log(scaled) + shift)


def _half_mean_difference(ratio: FloatArray, mass: FloatArray) -> float:
    """``1/2 sum_ij m_i m_j |r_i - r_j| = sum_j m_j sum_{i: r_i < r_j} m_i (r_j - r_i)`` by sorting r."""
    order = np.argsort(ratio, kind="stable")
    r = ratio[order]
    m = mass[order]
    cum_mass = np.cumsum(m) - m
    cum_moment = np.cumsum(m * r) - m * r
    return float(np.sum(m * (r * cum_mass - cum_moment)))


@functools.lru_cache(maxsize=16)
def clenshaw_curtis_cumulative(n_nodes: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Chebyshev–Lobatto nodes on [0, pi] with Clenshaw–Curtis weights and the spectral cumulative integral.

    For g sampled at the nodes theta_i (ascending from 0 to pi), ``weights @ g ≈ ∫_0^pi g`` and
    ``cumulative @ g ≈ (∫_0^{theta_i} g)_i``, both exact for polynomials in theta of degree < n_nodes
    (the interpolant's antiderivative is integrated), hence spectrally accurate for smooth g.

    Returns:
        ``(theta, weights, cumulative)`` with shapes (n,), (n,), (n, n). Cached per n_nodes.
    """
    x = np.cos(math.pi * np.arange(n_nodes) / (n_nodes - 1))
    to_coefficients = np.linalg.inv(np.polynomial.chebyshev.chebvander(x, n_nodes - 1))
    antiderivative = np.polynomial.chebyshev.chebint(to_coefficients, lbnd=-1.0, axis=0)
    from_minus_one = np.polynomial.chebyshev.chebvander(x, n_nodes) @ antiderivative
    # theta = pi (1 - x) / 2: ∫_0^{theta_i} g dtheta = (pi/2) ∫_{x_i}^{1} g dx.
    cumulative = 0.5 * math.pi * (from_minus_one[0][None, :] - from_minus_one)
    theta = 0.5 * math.pi * (1.0 - x)
    return theta, cumulative[-1].copy(), cumulative
