"""A product Gauss rule for the uniform law on S^2: the kernel's integrals over pi, to ~1e-14 for smooth integrands."""

import math

import numpy as np
import torch
from torch import Tensor


def uniform_sphere_quadrature(n_polar: int, n_azimuth: int) -> tuple[Tensor, Tensor]:
    """A product quadrature rule for the uniform probability on S^2: ``sum_j w_j f(u_j) ~ E f(u)``.

    For u uniform on S^2, ``t = u_3`` is uniform on [-1, 1] and the azimuth is uniform on [0, 2 pi),
    independently (Archimedes). The rule is Gauss-Legendre in t (``n_polar`` nodes, weights halved) times the
    equispaced rule in the azimuth (``n_azimuth`` nodes, weights ``1/n_azimuth``); both converge spectrally for
    smooth integrands (the latter because the integrand is periodic in the azimuth).

    Args:
        n_polar: Gauss-Legendre nodes in t, >= 1.
        n_azimuth: azimuth nodes, >= 1.

    Returns:
        ``(nodes, weights)``: float64 (n_polar * n_azimuth, 3) unit vectors and weights summing to 1.

    Raises:
        ValueError: if a node count is not a positive integer.
    """
    for name, value in (("n_polar", n_polar), ("n_azimuth", n_azimuth)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer, e.g. 64.")
    t, w_t = np.polynomial.legendre.leggauss(n_polar)
    angle = 2.0 * math.pi * np.arange(n_azimuth) / n_azimuth
    radius = np.sqrt(np.clip(1.0 - t * t, 0.0, None))
    nodes = np.stack(
        [
            np.outer(radius, np.cos(angle)).ravel(),
            np.outer(radius, np.sin(angle)).ravel(),
            np.repeat(t, n_azimuth),
        ],
        axis=1,
    )
    weights = np.repeat(0.5 * w_t, n_azimuth) / n_azimuth
    return torch.from_numpy(nodes), torch.from_numpy(weights)
