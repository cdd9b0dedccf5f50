"""The Gaussian two-tower model (docs/theory.md section 6.3): x ~ N(0, I_d), y = rho x + sqrt(1 - rho^2) eps.

Negatives y' ~ p- = N(0, I_d), which is both the anchor law pi and the positives' marginal. Against Lebesgue
measure on R^d, ``p+_x = N(rho x, (1 - rho^2) I)`` and

- ``log p+_x(y)/p-(y) = -d/2 log(1-rho^2) - |y - rho x|^2 / (2(1-rho^2)) + |y|^2/2
  = (rho <x, y> - rho^2 |y|^2 / 2)/(1 - rho^2) + g(x)``: bilinear in the lifted features (y, |y|^2);
- ``E_x KL(p+_x || p-) = -d/2 log(1 - rho^2)``, so ``L* = tau d/2 log(1 - rho^2)``;
- ``E*``: the log-ratio ranks y by ``|y - x/rho|^2`` (smaller is better), so with eps, eta, x iid N(0, I)
  ``E* = P[Q < 0]``, ``Q = (1-rho^2)|rho eps - sqrt(1-rho^2) x|^2 - |rho eta - x|^2`` (= rho^2 times the
  difference of the two squared distances). Q is a quadratic form ``sum_j lambda_j chi2_d`` in (x, eps, eta)
  whose 3 x 3 coefficient matrix has eigenvalues lambda_j; Imhof's (1961) formula
  ``P[Q > 0] = 1/2 + (1/pi) ∫_0^inf sin(d/2 sum_j arctan(lambda_j u)) / (u prod_j (1 + lambda_j^2 u^2)^{d/4}) du``
  turns E* into one adaptive quadrature (error estimate <= 1e-8 enforced);
- ``dM/dpi (z, z') = p+_z(z')/p-(z')`` (pi = p-), and per coordinate
  ``∫ N(z'; rho z, 1-rho^2)^2 / N(z'; 0, 1) dz' = exp(rho^2 z^2/(1+rho^2)) / sqrt(1 - rho^4)``, whose mean over
  z ~ N(0, 1) is ``1/(1 - rho^2)``: ``E|dM/dpi|^2 = (1 - rho^2)^{-d}``.

Pitfall (docs/theory.md): scores are unbounded, so [A]'s O(1/m) regime appears only at large m.
"""

import math
from collections.abc import Sequence

import numpy as np
import torch
from scipy import integrate
from torch import Tensor

from crl._validate import Interval, check, check_count, check_generator
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


def _ranking_form_eigenvalues(rho: float) -> np.ndarray:
    """Eigenvalues of M with ``Q_coordinate = z^T M z``, z = (x, eps, eta) ~ N(0, I_3).

    ``M = (1 - rho^2) v1 v1^T - v2 v2^T``, ``v1 = (-sqrt(1-rho^2), rho, 0)``, ``v2 = (-1, 0, rho)``.
    """
    v1 = np.array([-math.sqrt(1.0 - rho * rho), rho, 0.0])
    v2 = np.array([-1.0, 0.0, rho])
    matrix = (1.0 - rho * rho) * np.outer(v1, v1) - np.outer(v2, v2)
    return np.asarray(np.linalg.eigvalsh(matrix), dtype=np.float64)


def gaussian_two_tower_optimal_auc(dim: int, rho: float) -> tuple[float, float]:
    """``E* = P[Q < 0]`` for the Gaussian two-tower model, by Imhof's formula (see the module docstring).

    Returns:
        ``(E*, error estimate)``; rho = 0 gives (1/2, 0): the log-ratio is 0, every pair ties.
    """
    if rho == 0.0:
        return 0.5, 0.0
    eigenvalues = _ranking_form_eigenvalues(rho)
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
    prob_positive = 0.5 + (head + tail) / math.pi
    return 1.0 - prob_positive, (head_error + tail_error) / math.pi


class GaussianTwoTower(ExactModel):
    """x ~ N(0, I_d), y = rho x + sqrt(1 - rho^2) eps, y' ~ N(0, I_d) (docs/theory.md section 6.3).

    Args:
        dim: d >= 1.
        rho: correlation of each coordinate of (x, y), |rho| < 1 (rho = 0: no signal, E* = 1/2, L* = 0).
        dtype: dtype of sampled tensors.

    Raises:
        ValueError: d < 1, |rho| >= 1, or a non-floating dtype.

    Examples:
        >>> model = GaussianTwoTower(4, rho=0.8)
        >>> round(model.optimal_risk(tau=1.0), 6) == round(2 * math.log(1 - 0.64), 6)
        True
    """

    def __init__(self, dim: int, rho: float, dtype: torch.dtype = torch.float64) -> None:
        self._dim = check_count("dim", dim, 1)
        self.rho = check("rho", rho, CORRELATION)
        self._dtype = check_dtype(dtype)

    def __repr__(self) -> str:
        return f"GaussianTwoTower(dim={self.dim}, rho={self.rho})"

    @property
    def base_measure(self) -> str:
        """Lebesgue measure on R^d."""
        return f"Lebesgue measure on R^{self.dim}"

    @property
    def negative_law(self) -> str:
        """p- = N(0, I_d), the anchor law and the positives' marginal."""
        return "N(0, I_d) (= the anchor law pi = the positives' marginal)"

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n anchors x ~ N(0, I_d), shape (n, d)."""
        check_generator(generator)
        return torch.randn(
            (check_count("n", n, 0), self.dim), generator=generator, dtype=self.dtype, device=generator.device
        )

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """``y = rho x + sqrt(1 - rho^2) eps`` for each row of x, eps ~ N(0, I_d)."""
        check_finite_points("x", x, self.dim)
        noise = torch.randn(x.shape, generator=check_generator(generator), dtype=self.dtype, device=x.device)
        return self.rho * x.to(self.dtype) + math.sqrt(1.0 - self.rho**2) * noise

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Negatives y' ~ N(0, I_d), shape ``tuple(shape) + (d,)``."""
        check_generator(generator)
        return torch.randn(
            (*check_shape(shape), self.dim), generator=generator, dtype=self.dtype, device=generator.device
        )

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``log N(y; rho x, (1 - rho^2) I)`` against Lebesgue measure."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        variance = 1.0 - self.rho**2
        return -(y - self.rho * x).square().sum(dim=-1) / (2.0 * variance) - 0.5 * self.dim * math.log(
            2.0 * math.pi * variance
        )

    def log_negative_density(self, y: Tensor) -> Tensor:
        """``log N(y; 0, I)`` against Lebesgue measure."""
        check_points("y", y, self.dim)
        return -0.5 * y.square().sum(dim=-1) - 0.5 * self.dim * math.log(2.0 * math.pi)

    def log_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """``-d/2 log(1 - rho^2) - |y - rho x|^2 / (2(1 - rho^2)) + |y|^2 / 2``, broadcasting."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        variance = 1.0 - self.rho**2
        return (
            -0.5 * self.dim * math.log1p(-(self.rho**2))
            - (y - self.rho * x).square().sum(dim=-1) / (2.0 * variance)
            + 0.5 * y.square().sum(dim=-1)
        )

    def mean_kl(self) -> float:
        """``E_x KL(N(rho x, (1-rho^2) I) || N(0, I)) = -d/2 log(1 - rho^2)``."""
        return -0.5 * self.dim * math.log1p(-(self.rho**2))

    def optimal_auc(self) -> float:
        """``E* = P[|y - x/rho| < |y' - x/rho|]`` by Imhof's formula, error estimate <= 1e-8."""
        value, error = gaussian_two_tower_optimal_auc(self.dim, self.rho)
        if error > QUADRATURE_TOLERANCE:
            raise RuntimeError(f"E* quadrature error estimate {error:.2e} exceeds {QUADRATURE_TOLERANCE}")
        return value

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2) = exp(log_ratio(z, z2))``: pi = N(0, I) = p-."""
        return torch.exp(self.log_ratio(z, z2))

    def density_ratio_second_moment(self) -> float:
        """``E_z ∫ (dM(z, .)/dpi)^2 dpi = (1 - rho^2)^{-d}``; inf beyond float64."""
        return exp_or_inf(-self.dim * math.log1p(-(self.rho**2)))
