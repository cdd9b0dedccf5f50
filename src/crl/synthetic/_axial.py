"""Quadrature engines for the axial vMF-mixture model behind :class:`crl.synthetic.AsymmetricSphere`.

The anchor law is ``pi = sum_k w_k vMF(sigma_k e, kappa0_k)`` on S^{d-1} (means on one axis e, sigma_k = +-1),
the positive kernel ``M(z, .) = vMF(z, kappa)``; densities are against the uniform probability u on the sphere.
Everything is a function of t = <e, y> (and, for x-dependent quantities, of c = <e, x> and <x, y>), so integrals
over the sphere reduce to integrals over the polar angle theta = arccos t (law ∝ sin^{d-2} theta) and, for a
second direction, the angle phi (law ∝ sin^{d-3} phi):
``y = cos(theta) e + sin(theta) (cos(phi) e_perp + sin(phi) w)``, ``<x, y> = c cos(theta) + sqrt(1-c^2)
sin(theta) cos(phi)`` for ``x = c e + sqrt(1-c^2) e_perp``.

Closed forms used (c_d = 1/C_d, C_d = :func:`log_vmf_normaliser`):
``∫ exp(a <z, y> + b <m, z>) u(dz) = C_d(|a y + b m|)``, hence the positives' marginal
``p_Y(y) = sum_k w_k C_d(|kappa y + kappa0_k sigma_k e|) / (C_d(kappa) C_d(kappa0_k))`` and
``∫ pi(z) M(z, y)^2 u(dz) = sum_k w_k C_d(|2 kappa y + kappa0_k sigma_k e|) / (C_d(kappa0_k) C_d(kappa)^2)``.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from crl.synthetic._special import (
    FloatArray,
    clenshaw_curtis_cumulative,
    gini_auc_from_log,
    log_vmf_normaliser,
    polar_angle_rule,
)


@dataclass(frozen=True)
class AxialMixture:
    """Parameters of the axial model (see the module docstring); all tuples have one entry per component."""

    dim: int
    kappa: float
    weights: tuple[float, ...]
    signs: tuple[float, ...]
    anchor_kappas: tuple[float, ...]
    negatives_from_anchor_law: bool

    def _component_arrays(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(log w_k, kappa0_k sigma_k, log C_d(kappa0_k))`` as column vectors (K, 1)."""
        log_w = np.log(np.asarray(self.weights))[:, None]
        signed = (np.asarray(self.anchor_kappas) * np.asarray(self.signs))[:, None]
        log_c0 = log_vmf_normaliser(self.dim, np.asarray(self.anchor_kappas))[:, None]
        return log_w, signed, log_c0

    def log_anchor_density(self, t: FloatArray) -> FloatArray:
        """``log pi(y) = log sum_k w_k exp(kappa0_k sigma_k t) / C_d(kappa0_k)`` at t = <e, y>."""
        log_w, signed, log_c0 = self._component_arrays()
        return np.asarray(special.logsumexp(log_w + signed * t[None] - log_c0, axis=0), dtype=np.float64)

    def log_mixture_moment(
        self, t: FloatArray, scale: float, norm_sq: FloatArray | None = None
    ) -> FloatArray:
        """``log sum_k w_k C_d(|scale y + kappa0_k sigma_k e|) / C_d(kappa0_k)`` at t = <e, y> (|y|^2 = norm_sq)."""
        log_w, signed, log_c0 = self._component_arrays()
        y_sq = np.ones_like(t) if norm_sq is None else norm_sq
        radius_sq = scale * scale * y_sq[None] + signed * signed + 2.0 * scale * signed * t[None]
        log_c = log_vmf_normaliser(self.dim, np.sqrt(np.maximum(radius_sq, 0.0)))
        return np.asarray(special.logsumexp(log_w + log_c - log_c0, axis=0), dtype=np.float64)

    def log_marginal_density(self, t: FloatArray, norm_sq: FloatArray | None = None) -> FloatArray:
        """``log p_Y(y)``, the positives' marginal, at t = <e, y>."""
        log_c = float(log_vmf_normaliser(self.dim, self.kappa))
        return self.log_mixture_moment(t, self.kappa, norm_sq) - log_c

    def log_negative_density(self, t: FloatArray) -> FloatArray:
        """``log p-(y)``: the anchor density or the marginal density."""
        return self.log_anchor_density(t) if self.negatives_from_anchor_law else self.log_marginal_density(t)


def converge(
    evaluate: Callable[[int], float], start: int, max_nodes: int, target: float
) -> tuple[float, float]:
    """Double the number of nodes until two successive values differ by <= target (or max_nodes is reached).

    Returns:
        ``(value at the finest rule, |difference from the previous rule|)``; the difference bounds the error
        of the coarser rule and so (conservatively) of the finer one.
    """
    nodes = start
    previous = evaluate(nodes)
    while True:
        nodes *= 2
        value = evaluate(nodes)
        error = abs(value - previous)
        if error <= target * max(1.0, abs(value)) or nodes >= max_nodes:
            return value, error
        previous = value


def expected_log_negative_under_marginal(model: AxialMixture, n: int) -> float:
    """``E_{y ~ p_Y} log p-(y) = ∫ p_Y(y) log p-(y) u(dy)``, n polar nodes."""
    theta, weights = polar_angle_rule(n, model.dim - 2)
    t = np.cos(theta)
    return float(weights @ (np.exp(model.log_marginal_density(t)) * model.log_negative_density(t)))


def log_density_ratio_second_moment(model: AxialMixture, n: int) -> float:
    """``log E_{z ~ pi} ∫ (dM(z, .)/dpi)^2 dpi``, n polar nodes, summed in log space.

    ``E_{z ~ pi} ∫ (dM(z, .)/dpi)^2 dpi = ∫ [∫ pi(z) M(z, y)^2 u(dz)] / pi(y) u(dy)``.
    """
    log_c = float(log_vmf_normaliser(model.dim, model.kappa))
    theta, weights = polar_angle_rule(n, model.dim - 2)
    t = np.cos(theta)
    log_integrand = model.log_mixture_moment(t, 2.0 * model.kappa) - 2.0 * log_c - model.log_anchor_density(t)
    return float(special.logsumexp(log_integrand, b=weights))


def _anchor_polar_rule(model: AxialMixture, n: int) -> tuple[FloatArray, FloatArray]:
    """Nodes c = <e, x> and weights of the anchor law pi on them (n Gauss–Legendre polar nodes)."""
    theta, weights = polar_angle_rule(n, model.dim - 2)
    c = np.cos(theta)
    return c, weights * np.exp(model.log_anchor_density(c))


def _log_projected_vmf_density(dim: int, kappa: float, beta: FloatArray, theta: FloatArray) -> FloatArray:
    """Log density of theta = arccos<v, Y>, Y ~ vMF(x, kappa), beta = <v, x>, against d theta on [0, pi].

    ``u = <v, Y>`` has density ``exp(kappa beta u) C_{d-1}(kappa sqrt(1-beta^2) sqrt(1-u^2)) / C_d(kappa)``
    against the uniform law of u, which is ``sin^{d-2}(theta) / B((d-1)/2, 1/2)`` in theta.
    ``beta`` has shape (n_x, 1), theta (n,); the result is (n_x, n).
    """
    sin = np.sin(theta)[None, :]
    with np.errstate(divide="ignore"):
        log_uniform = (dim - 2) * np.log(sin) if dim > 2 else np.zeros_like(sin)
    log_uniform = log_uniform - special.betaln(0.5 * (dim - 1), 0.5)
    orthogonal = kappa * np.sqrt(np.clip(1.0 - beta * beta, 0.0, 1.0)) * sin
    return (
        log_uniform
        + kappa * beta * np.cos(theta)[None, :]
        + log_vmf_normaliser(dim - 1, orthogonal)
        - float(log_vmf_normaliser(dim, kappa))
    )


def linear_optimal_auc(model: AxialMixture, n: int) -> float:
    """E* when p- = pi = vMF(mu, kappa0) (one component): the log-ratio is ``<v, y> + const``, v = kappa x - kappa0 mu.

    So ``E*_x = P[<v, Y> > <v, Y'>]``, Y ~ vMF(x, kappa), Y' ~ vMF(mu, kappa0), each projection having the closed
    density of :func:`_log_projected_vmf_density`, with ``|v|^2 = kappa^2 + kappa0^2 - 2 kappa kappa0 c``,
    ``<v, x>/|v| = (kappa - kappa0 c)/|v|``, ``<v, mu>/|v| = (kappa c - kappa0)/|v|``, c = <mu, x>.
    ``E*_x = ∫ g_Y(theta) ∫_theta^pi g_Y'(theta') dtheta' dtheta`` by Clenshaw–Curtis with the spectral cumulative
    integral (n nodes), then averaged over c ~ pi with n Gauss–Legendre polar nodes.
    """
    kappa, kappa0 = model.kappa, model.anchor_kappas[0]
    c, anchor_weights = _anchor_polar_rule(model, n)
    c = c * model.signs[0]
    norm_v = np.sqrt(np.maximum(kappa * kappa + kappa0 * kappa0 - 2.0 * kappa * kappa0 * c, 1e-300))
    theta, weights, cumulative = clenshaw_curtis_cumulative(n)
    positive = np.exp(
        _log_projected_vmf_density(model.dim, kappa, ((kappa - kappa0 * c) / norm_v)[:, None], theta)
    )
    negative = np.exp(
        _log_projected_vmf_density(model.dim, kappa0, ((kappa * c - kappa0) / norm_v)[:, None], theta)
    )
    negative_below = (negative @ weights)[:, None] - negative @ cumulative.T
    per_anchor = (positive * negative_below) @ weights
    return float(anchor_weights @ per_anchor)


def _azimuth_rule(dim: int, n: int) -> tuple[FloatArray, FloatArray]:
    """Nodes and weights of phi (law ∝ sin^{d-3} phi on [0, pi]); d = 2: the two points 0 and pi."""
    if dim == 2:
        return np.array([0.0, math.pi]), np.array([0.5, 0.5])
    return polar_angle_rule(n, dim - 3)


def grid_optimal_auc(model: AxialMixture, n: int, n_anchor: int) -> float:
    """E* for any axial model, as ``E_x [1/2 + 1/4 E_{Y, Y' ~ p-} |r_x(Y) - r_x(Y')|]`` (see :func:`gini_auc_from_log`).

    For each of ``n_anchor`` Gauss–Legendre anchor nodes c, the sphere is discretised by the product of n polar
    nodes theta and n azimuth nodes phi around e (quadrature masses times p-), and the mean absolute difference
    of r_x = p+_x/p- over that discrete law is computed by sorting. The integrand |r - r'| is only Lipschitz, so
    the error decays algebraically (as n^-3 for d >= 3 and n^-2 for d = 2 in our runs): see
    :func:`extrapolated_grid_optimal_auc`.
    """
    log_c = float(log_vmf_normaliser(model.dim, model.kappa))
    c_nodes, anchor_weights = _anchor_polar_rule(model, n_anchor)
    theta, theta_weights = polar_angle_rule(n, model.dim - 2)
    phi, phi_weights = _azimuth_rule(model.dim, n)
    t = np.cos(theta)
    log_negative = model.log_negative_density(t)
    mass = ((theta_weights * np.exp(log_negative))[:, None] * phi_weights[None, :]).ravel()
    radial = np.sin(theta)[:, None] * np.cos(phi)[None, :]
    per_anchor = np.empty_like(c_nodes)
    for index, c in enumerate(c_nodes):
        inner = c * t[:, None] + math.sqrt(max(1.0 - c * c, 0.0)) * radial
        log_ratio = model.kappa * inner - log_c - log_negative[:, None]
        per_anchor[index] = gini_auc_from_log(log_ratio.ravel(), mass)
    return float(anchor_weights @ per_anchor)


def extrapolated_grid_optimal_auc(model: AxialMixture, levels: tuple[int, ...]) -> tuple[float, float]:
    """:func:`grid_optimal_auc` on successively doubled grids, extrapolated by Aitken's delta-squared process.

    With values v_1..v_L on grids n_1 < ... < n_L (n_anchor = max(32, n/4)), each triple gives
    ``A = v_3 + (v_3 - v_2)/(q - 1)``, ``q = (v_2 - v_1)/(v_3 - v_2)`` (the error ratio per doubling, about 8
    for d >= 3 and 4 for d = 2). Needs at least four levels.

    Returns:
        ``(last extrapolation, |last - previous extrapolation|)`` as the value and its error estimate.
    """
    values = [grid_optimal_auc(model, n, max(32, n // 4)) for n in levels]
    extrapolations = []
    for first, second, third in zip(values, values[1:], values[2:], strict=False):
        step = third - second
        ratio = (second - first) / step if step != 0.0 else math.inf
        extrapolations.append(
            third + step / (ratio - 1.0) if math.isfinite(ratio) and ratio != 1.0 else third
        )
    return extrapolations[-1], abs(extrapolations[-1] - extrapolations[-2])
