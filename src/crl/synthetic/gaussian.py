"""The Gaussian two-tower model (docs/theory.md section 6.3): x ~ N(0, I_d), y = rho x + sqrt(v) eps.

Negatives y' ~ p- = N(0, I_d), the anchor law pi. With the default noise variance ``v = 1 - rho^2`` p- is also the
positives' marginal; against Lebesgue measure on R^d, ``p+_x = N(rho x, (1 - rho^2) I)`` and

- ``log p+_x(y)/p-(y) = -d/2 log(1-rho^2) - |y - rho x|^2 / (2(1-rho^2)) + |y|^2/2
  = (rho <x, y> - rho^2 |y|^2 / 2)/(1 - rho^2) + g(x)``: bilinear in the lifted features (y, |y|^2);
- ``E_x KL(p+_x || p-) = -d/2 log(1 - rho^2)``, so ``L* = tau d/2 log(1 - rho^2)``;
- ``E*``: with eps, eta, x iid N(0, I), ``E* = P[D > 0]`` for the difference D of the log-ratio's y-part at the
  positive and at a negative. D is a quadratic form ``sum_j lambda_j chi2_d`` in (x, eps, eta) whose 3 x 3
  coefficient matrix has eigenvalues lambda_j; Imhof's (1961) formula
  ``P[Q > 0] = 1/2 + (1/pi) ∫_0^inf sin(d/2 sum_j arctan(lambda_j u)) / (u prod_j (1 + lambda_j^2 u^2)^{d/4}) du``
  turns E* into one adaptive quadrature (error estimate <= 1e-8 enforced);
- ``dM/dpi (z, z') = p+_z(z')/p-(z')`` (pi = p-), and per coordinate
  ``∫ N(z'; rho z, 1-rho^2)^2 / N(z'; 0, 1) dz' = exp(rho^2 z^2/(1+rho^2)) / sqrt(1 - rho^4)``, whose mean over
  z ~ N(0, 1) is ``1/(1 - rho^2)``: ``E|dM/dpi|^2 = (1 - rho^2)^{-d}``.

**Wide positives** (``variance = v > 1``, C5's heavy-tailed control): ``log p+_x(y)/p-(y) = (rho/v) <x, y> +
(v - 1)/(2v) |y|^2 + g(x)``, so under p- ``W = exp(s*/tau)`` has the tail index ``alpha = v/(v - 1)``: E W = 1, but
``E W^2 = inf`` when ``alpha < 2`` (v > 2). In general ``E_x KL(p+_x || p-) = d/2 (v + rho^2 - 1 - log v)``,
``E|dM/dpi|^2 = (v (2 - v - 2 rho^2))^{-d/2}`` (inf unless ``v + 2 rho^2 < 2``), and E* = P[D > 0] for the score
difference ``D = h(y) - h(y')``, ``h(y) = (rho/v) <x, y> + (v - 1)/(2v) |y|^2``, again a form ``sum_j lambda_j chi2_d``
in (x, eps, eta) handed to Imhof's formula.

Pitfall (docs/theory.md): scores are unbounded, so [A]'s O(1/m) regime appears only at large m.
"""

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import integrate
from torch import Tensor

from crl._validate import Interval, check, check_count, check_generator, check_tau
from crl.synthetic._special import exp_or_inf
from crl.synthetic.base import (
    QUADRATURE_TOLERANCE,
    ExactModel,
    check_dtype,
    check_finite_points,
    check_points,
    check_shape,
)

CORRELATION = Interval(-1.0, 1.0, closed="neither", example=", e.g. rho=0.8")
"""The correlation rho: a number with |rho| < 1."""
NOISE_VARIANCE = Interval(0.0, math.inf, closed="neither", example=", e.g. variance=3.0")
"""The positives' noise variance v: a finite number > 0."""


def _score_difference_eigenvalues(rho: float, variance: float) -> np.ndarray:
    """Eigenvalues of M with ``D_coordinate = z^T M z``, z = (x, eps, eta) ~ N(0, I_3): the per-coordinate
    difference ``h(y) - h(y')`` of ``h(y) = (rho/v) x y + (v - 1)/(2v) y^2`` at ``y = rho x + sqrt(v) eps`` and
    ``y' = eta``.
    """
    x_axis = np.array([1.0, 0.0, 0.0])
    positive = np.array([rho, math.sqrt(variance), 0.0])
    negative = np.array([0.0, 0.0, 1.0])
    cross = np.outer(x_axis, positive - negative)
    curvature = (variance - 1.0) / (2.0 * variance)
    matrix = (rho / variance) * 0.5 * (cross + cross.T) + curvature * (
        np.outer(positive, positive) - np.outer(negative, negative)
    )
    return np.asarray(np.linalg.eigvalsh(matrix), dtype=np.float64)


def imhof_positive_probability(eigenvalues: np.ndarray, dim: int) -> tuple[float, float]:
    """``P[Q > 0]`` for ``Q = sum_j lambda_j chi2_dim`` by Imhof's (1961) formula, with the quadrature's error estimate.

    ``P[Q > 0] = 1/2 + (1/pi) ∫_0^inf sin(dim/2 sum_j arctan(lambda_j u)) / (u prod_j (1 + lambda_j^2 u^2)^{dim/4})
    du``.
    """
    eigenvalues = eigenvalues[np.abs(eigenvalues) > 1e-14 * np.abs(eigenvalues).max()]
    half_dim = 0.5 * dim

    def integrand(u: float) -> float:
        if u == 0.0:
            return float(half_dim * eigenvalues.sum())
        angle = half_dim * float(np.sum(np.arctan(eigenvalues * u)))
        log_modulus = 0.5 * half_dim * float(np.sum(np.log1p((eigenvalues * u) ** 2)))
        return math.sin(angle) / u * math.exp(-log_modulus)

    scale = 1.0 / float(np.abs(eigenvalues).max())
    head, head_error = integrate.quad(integrand, 0.0, 50.0 * scale, epsabs=1e-14, epsrel=1e-13, limit=400)
    tail, tail_error = integrate.quad(
        integrand, 50.0 * scale, math.inf, epsabs=1e-14, epsrel=1e-13, limit=400
    )
    return 0.5 + (head + tail) / math.pi, (head_error + tail_error) / math.pi


def gaussian_two_tower_optimal_auc(
    dim: int, rho: float, variance: float | None = None
) -> tuple[float, float]:
    """``E* = P[D > 0]`` for the Gaussian two-tower model (module docstring), by Imhof's formula.

    Args:
        dim: d.
        rho: the correlation.
        variance: the positives' noise variance v (None: 1 - rho^2).

    Returns:
        ``(E*, error estimate)``; a constant log-ratio (rho = 0, v = 1) gives (1/2, 0): every pair ties.
    """
    v = 1.0 - rho * rho if variance is None else variance
    if rho == 0.0 and v == 1.0:
        return 0.5, 0.0
    return imhof_positive_probability(_score_difference_eigenvalues(rho, v), dim)


class GaussianTwoTower(ExactModel):
    """x ~ N(0, I_d), y = rho x + sqrt(v) eps, y' ~ N(0, I_d) (docs/theory.md section 6.3), v = 1 - rho^2 by default.

    Args:
        dim: d >= 1.
        rho: correlation of each coordinate of (x, y) at the default v, |rho| < 1 (rho = 0: no signal, E* = 1/2,
            L* = 0).
        dtype: dtype of sampled tensors.
        variance: the positives' noise variance v > 0 (None: 1 - rho^2, so that y ~ N(0, I) like the negatives);
            v > 1 gives the heavy-tailed ratio of the module docstring.

    Raises:
        ValueError: d < 1, |rho| >= 1, v <= 0, or a non-floating dtype.

    Examples:
        >>> model = GaussianTwoTower(4, rho=0.8)
        >>> round(model.optimal_risk(tau=1.0), 6) == round(2 * math.log(1 - 0.64), 6)
        True
    """

    def __init__(
        self, dim: int, rho: float, dtype: torch.dtype = torch.float64, *, variance: float | None = None
    ) -> None:
        self._dim = check_count("dim", dim, 1)
        self.rho = check("rho", rho, CORRELATION)
        self._dtype = check_dtype(dtype)
        self._wide = variance is not None
        self.variance = 1.0 - self.rho**2 if variance is None else check("variance", variance, NOISE_VARIANCE)

    def __repr__(self) -> str:
        wide = f", variance={self.variance}" if self._wide else ""
        return f"GaussianTwoTower(dim={self.dim}, rho={self.rho}{wide})"

    @property
    def base_measure(self) -> str:
        """Lebesgue measure on R^d."""
        return f"Lebesgue measure on R^{self.dim}"

    @property
    def negative_law(self) -> str:
        """p- = N(0, I_d), the anchor law (and, at the default v, the positives' marginal)."""
        if self.negatives_from_positive_marginal:
            return "N(0, I_d) (= the anchor law pi = the positives' marginal)"
        return "N(0, I_d) (= the anchor law pi; the positives' marginal is wider)"

    @property
    def negatives_from_positive_marginal(self) -> bool:
        """True when ``rho^2 + v = 1`` (y ~ N(0, I))."""
        return math.isclose(self.rho**2 + self.variance, 1.0, rel_tol=0.0, abs_tol=1e-12)

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n anchors x ~ N(0, I_d), shape (n, d)."""
        check_generator(generator)
        return torch.randn(
            (check_count("n", n, 0), self.dim), generator=generator, dtype=self.dtype, device=generator.device
        )

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """``y = rho x + sqrt(v) eps`` for each row of x, eps ~ N(0, I_d)."""
        check_finite_points("x", x, self.dim)
        noise = torch.randn(x.shape, generator=check_generator(generator), dtype=self.dtype, device=x.device)
        return self.rho * x.to(self.dtype) + math.sqrt(self.variance) * noise

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Negatives y' ~ N(0, I_d), shape ``tuple(shape) + (d,)``."""
        check_generator(generator)
        return torch.randn(
            (*check_shape(shape), self.dim), generator=generator, dtype=self.dtype, device=generator.device
        )

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``log N(y; rho x, v I)`` against Lebesgue measure."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        variance = self.variance
        return -(y - self.rho * x).square().sum(dim=-1) / (2.0 * variance) - 0.5 * self.dim * math.log(
            2.0 * math.pi * variance
        )

    def log_negative_density(self, y: Tensor) -> Tensor:
        """``log N(y; 0, I)`` against Lebesgue measure."""
        check_points("y", y, self.dim)
        return -0.5 * y.square().sum(dim=-1) - 0.5 * self.dim * math.log(2.0 * math.pi)

    def log_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """``-d/2 log v - |y - rho x|^2 / (2 v) + |y|^2 / 2``, broadcasting."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        variance = self.variance
        return (
            -0.5 * self.dim * self._log_variance()
            - (y - self.rho * x).square().sum(dim=-1) / (2.0 * variance)
            + 0.5 * y.square().sum(dim=-1)
        )

    def ideal_coefficients(self, tau: float) -> tuple[float, float]:
        """(w, e) with ``s* = tau log p+_x(y)/p-(y) = w <x, y> + e |y|^2 + g(x)``: ``w = tau rho/v``,
        ``e = tau (v - 1)/(2v)`` (at the default v: ``tau rho/(1 - rho^2)`` and ``-tau rho^2/(2(1 - rho^2))``)."""
        t = check_tau(tau)
        if not self._wide:
            factor = t / (1.0 - self.rho**2)
            return factor * self.rho, -0.5 * factor * self.rho**2
        return t * self.rho / self.variance, t * (self.variance - 1.0) / (2.0 * self.variance)

    def _log_variance(self) -> float:
        """``log v``, as ``log1p(-rho^2)`` at the default v (accurate for small rho)."""
        return math.log(self.variance) if self._wide else math.log1p(-(self.rho**2))

    def mean_kl(self) -> float:
        """``E_x KL(N(rho x, v I) || N(0, I)) = d/2 (v + rho^2 - 1 - log v)`` (-d/2 log(1 - rho^2) at the default v)."""
        if not self._wide:
            return -0.5 * self.dim * math.log1p(-(self.rho**2))
        return 0.5 * self.dim * (self.variance + self.rho**2 - 1.0 - math.log(self.variance))

    def optimal_auc(self) -> float:
        """``E* = P[s*(x, y) > s*(x, y')]`` by Imhof's formula (module docstring), error estimate <= 1e-8."""
        value, error = gaussian_two_tower_optimal_auc(self.dim, self.rho, self.variance)
        if error > QUADRATURE_TOLERANCE:
            raise RuntimeError(f"E* quadrature error estimate {error:.2e} exceeds {QUADRATURE_TOLERANCE}")
        return value

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2) = exp(log_ratio(z, z2))``: pi = N(0, I) = p-."""
        return torch.exp(self.log_ratio(z, z2))

    def density_ratio_second_moment(self) -> float:
        """``E_z ∫ (dM(z, .)/dpi)^2 dpi = (v (2 - v - 2 rho^2))^{-d/2}`` (= ``(1 - rho^2)^{-d}`` at the default v);
        inf where ``v + 2 rho^2 >= 2`` or beyond float64."""
        if not self._wide:
            return exp_or_inf(-self.dim * math.log1p(-(self.rho**2)))
        spread = 2.0 - self.variance - 2.0 * self.rho**2
        if spread <= 0.0:
            return math.inf
        return exp_or_inf(-0.5 * self.dim * math.log(self.variance * spread))
