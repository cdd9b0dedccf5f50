"""The asymmetric sphere model (docs/theory.md section 6.2, [B]'s "no symmetry"): vMF anchors, vMF positives.

Anchors ``x ~ pi = sum_k w_k vMF(mu_k, kappa0_k)`` on S^{d-1} (one component, or a mixture whose means lie on
one axis: mu_k = +-e), positives ``y ~ M(x, .) = vMF(x, kappa)``. The positives' marginal
``p_Y(y) = sum_k w_k C_d(|kappa y + kappa0_k mu_k|) / (C_d(kappa) C_d(kappa0_k))`` differs from pi. Negatives
follow ``negative_law``:

- ``"anchor"``: p- = pi ([B]'s convention: the learned kernel is Q ∝ exp(<phi(z), phi(z')>/tau) pi);
- ``"marginal"``: p- = p_Y ([A]'s convention: negatives are other positives).

Against the uniform probability on the sphere, ``log p+_x(y) = kappa <x, y> - log C_d(kappa)`` and
``log_ratio(x, y) = kappa <x, y> - log C_d(kappa) - log p-(y)`` (closed form, any d);
``dM(z, .)/dpi (z2) = exp(kappa <z, z2>) / (C_d(kappa) pi(z2))``.

Exact integrals (docs/theory.md sections 2, 3, 5), all reduced to the polar angle around the axis e:

- ``E_x KL(p+_x || p-) = kappa A_d(kappa) - log C_d(kappa) - E_{y ~ p_Y} log p-(y)``: one smooth 1-D integral,
  Gauss–Legendre, doubled until two rules agree to 1e-12 (error <= 1e-8 enforced). For one component and
  p- = pi it equals ``kappa A_d(kappa) - log C_d(kappa) - kappa0 A_d(kappa) A_d(kappa0) + log C_d(kappa0)``.
- ``E|dM/dpi|^2 = ∫ [sum_k w_k C_d(|2 kappa y + kappa0_k mu_k|)/C_d(kappa0_k)] / (C_d(kappa)^2 pi(y)) u(dy)``:
  same 1-D rule, error <= 1e-8 enforced.
- ``E*``: with one component and p- = pi the log-ratio is linear in y, ``<kappa x - kappa0 mu, y>``, and E*
  reduces to smooth 1-D integrals of closed-form projected vMF densities (Clenshaw–Curtis with a spectral
  cumulative integral, averaged over <mu, x>); error <= 1e-8 enforced. Otherwise (mixtures, or p- = p_Y) E* is
  ``E_x [1/2 + 1/4 E_{Y,Y' ~ p-} |r_x(Y) - r_x(Y')|]`` on product grids in (theta, phi), extrapolated over
  grid doublings (Aitken); the error estimate is the difference of the last two extrapolations
  (:meth:`AsymmetricSphere.optimal_auc_with_error`). The integrand is only Lipschitz, so 1e-8 is not always
  reached: run on the one-component p- = pi models, where the exact path gives the truth, this path was off by
  5e-10 to 1.5e-8 (d in {2, 3, 5, 10, 20}, kappa <= 100, kappa0 <= 50), always below its estimate
  (1e-9 to 2e-7). :meth:`AsymmetricSphere.optimal_auc` raises if the estimate exceeds 1e-6.

Range: the 1-D rules (L*, E|dM/dpi|^2, the linear E*) converge up to kappa = 1e4, kappa0 = 1e3 (checked in
d = 3); the grid path of E* needs about sqrt(kappa) nodes per radian and raises (estimate > 1e-6) from about
kappa = 1000, kappa0 = 500. Nothing returns an unchecked number: a rule that does not converge raises
RuntimeError. Note that E|dM/dpi|^2 grows roughly like exp(kappa0^2 / (4 kappa)) (rare anchors far from the mode,
where dM/dpi is huge): it is ~1e29 at kappa = 1000, kappa0 = 500.
"""

import math
from collections.abc import Sequence
from functools import cached_property
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from crl._validate import POSITIVE, check, check_count, check_generator
from crl.synthetic._axial import (
    AxialMixture,
    converge,
    expected_log_negative_under_marginal,
    extrapolated_grid_optimal_auc,
    linear_optimal_auc,
    log_density_ratio_second_moment,
)
from crl.synthetic._special import exp_or_inf, log_vmf_normaliser, vmf_mean_resultant_length
from crl.synthetic.base import (
    QUADRATURE_TOLERANCE,
    ExactModel,
    check_dtype,
    check_finite_points,
    check_points,
    check_shape,
)
from crl.synthetic.vmf import sample_vmf, vmf_log_density

NegativeLaw = Literal["anchor", "marginal"]

GRID_AUC_TOLERANCE = 1e-6
"""Largest error estimate accepted from the extrapolated grid path of E* (mixtures, or p- = p_Y)."""

_SMOOTH_TARGET = 1e-12
"""Two successive Gauss–Legendre rules must agree to this (relative to max(1, |value|)) for the 1-D integrals."""

_MAX_NODES = 4096
"""Largest polar rule tried for the smooth 1-D integrals (resolves kappa up to ~1e5)."""

_LINEAR_AUC_MAX_NODES = 1024
"""Largest Clenshaw–Curtis rule tried for the linear-case E*."""

_GRID_LEVELS = (32, 64, 128, 256)
"""Grid sizes n (n x n sphere nodes) of the extrapolated E* path for d >= 3."""

_GRID_LEVELS_CIRCLE = (64, 128, 256, 512, 1024)
"""Grid sizes for d = 2 (n x 2 nodes: cheap, but the error decays only as n^-2)."""

_COLLINEAR_TOLERANCE = 1e-9


def _as_float_tuple(name: str, values: float | Sequence[float]) -> tuple[float, ...]:
    """A number or a non-empty sequence of numbers, as a tuple of floats > 0."""
    items = (values,) if isinstance(values, int | float) else tuple(values)
    if not items:
        raise ValueError(
            f"{name} must be a number > 0 or a non-empty sequence of them, got {name}={values!r}"
        )
    return tuple(check(name, v, POSITIVE) for v in items)


def _anchor_means(
    anchor_means: Tensor | Sequence[float] | Sequence[Sequence[float]] | None, dim: int, k: int
) -> Tensor:
    """Validate the component means: None (all e_1), one direction (d,), or one per component (K, d)."""
    if anchor_means is None:
        means = torch.zeros(k, dim, dtype=torch.float64)
        means[:, 0] = 1.0
        return means
    means = torch.as_tensor(anchor_means, dtype=torch.float64)
    if means.ndim == 1:
        means = means.expand(k, -1)
    if means.shape != (k, dim):
        raise ValueError(f"anchor_means must have shape ({dim},) or ({k}, {dim}), got {tuple(means.shape)}")
    norms = means.norm(dim=-1, keepdim=True)
    if not bool(torch.all(torch.isfinite(means))) or not bool(torch.all(norms > 0)):
        raise ValueError(
            "anchor_means must be finite non-zero directions (they are normalised to unit length)"
        )
    return means / norms


def _axis_and_signs(means: Tensor) -> tuple[Tensor, tuple[float, ...]]:
    """Axis e = means[0] and signs sigma_k with means[k] = sigma_k e; ValueError if the means are not collinear."""
    axis = means[0]
    cosines = means @ axis
    if not bool(torch.all(cosines.abs() >= 1.0 - _COLLINEAR_TOLERANCE)):
        raise ValueError(
            "anchor_means must lie on one axis (each mean = +e or -e) so that L*, E* and E|dM/dpi|^2 stay "
            f"exact; got cosines to the first mean {cosines.tolist()}"
        )
    return axis, tuple(1.0 if float(c) > 0 else -1.0 for c in cosines)


class AsymmetricSphere(ExactModel):
    """vMF-mixture anchors on one axis, vMF(x, kappa) positives; p- = pi or the positives' marginal.

    Args:
        dim: d >= 2.
        kappa: concentration > 0 of the positive kernel M(x, .) = vMF(x, kappa).
        anchor_kappa: kappa0 > 0 of the anchor law, or one per mixture component.
        anchor_means: None (every component centred on e_1), one direction (d,) shared by all components,
            or one direction per component (K, d) with every mean = +e or -e (normalised to unit length).
        anchor_weights: mixture weights w_k > 0 (normalised); None: equal weights.
        negative_law: ``"anchor"`` (p- = pi, [B]) or ``"marginal"`` (p- = law of y, [A]).
        dtype: dtype of sampled tensors.

    Raises:
        ValueError: d < 2, kappa or a kappa0 <= 0, weights that are not > 0 or not one per component, means of
            the wrong shape or not on one axis, an unknown negative_law, a non-floating dtype.

    Examples:
        >>> model = AsymmetricSphere(3, kappa=8.0, anchor_kappa=2.0, negative_law="anchor")
        >>> x, y = model.sample(5, torch.Generator().manual_seed(0))
        >>> model.log_ratio(x, y).shape
        torch.Size([5])
    """

    def __init__(
        self,
        dim: int,
        kappa: float,
        anchor_kappa: float | Sequence[float],
        anchor_means: Tensor | Sequence[float] | Sequence[Sequence[float]] | None = None,
        anchor_weights: Sequence[float] | None = None,
        negative_law: NegativeLaw = "anchor",
        dtype: torch.dtype = torch.float64,
    ) -> None:
        self._dim = check_count("dim", dim, 2)
        self.kappa = check("kappa", kappa, POSITIVE)
        self.anchor_kappas = _as_float_tuple("anchor_kappa", anchor_kappa)
        k = len(self.anchor_kappas)
        weights = (1.0,) * k if anchor_weights is None else _as_float_tuple("anchor_weights", anchor_weights)
        if len(weights) != k:
            raise ValueError(
                f"anchor_weights must hold {k} weights (one per anchor_kappa), got {len(weights)}"
            )
        self.anchor_weights = tuple(w / sum(weights) for w in weights)
        self.anchor_means = _anchor_means(anchor_means, dim, k)
        """Unit component means, shape (K, d), float64."""
        self.axis, self.anchor_signs = _axis_and_signs(self.anchor_means)
        if negative_law not in ("anchor", "marginal"):
            raise ValueError(
                f"negative_law must be 'anchor' or 'marginal', got negative_law={negative_law!r}"
            )
        self._negative_law: NegativeLaw = negative_law
        self._dtype = check_dtype(dtype)
        self.log_normaliser = float(log_vmf_normaliser(dim, self.kappa))
        """log C_d(kappa)."""
        self._axial = AxialMixture(
            dim,
            self.kappa,
            self.anchor_weights,
            self.anchor_signs,
            self.anchor_kappas,
            negative_law == "anchor",
        )

    def __repr__(self) -> str:
        return (
            f"AsymmetricSphere(dim={self.dim}, kappa={self.kappa}, anchor_kappa={list(self.anchor_kappas)}, "
            f"anchor_signs={list(self.anchor_signs)}, anchor_weights={[round(w, 6) for w in self.anchor_weights]}, "
            f"negative_law={self._negative_law!r})"
        )

    @property
    def base_measure(self) -> str:
        """The uniform probability measure on S^{d-1}."""
        return f"uniform probability measure on the unit sphere S^{self.dim - 1}"

    @property
    def negative_law(self) -> str:
        """``"anchor"`` (p- = pi) or ``"marginal"`` (p- = the positives' marginal p_Y)."""
        return self._negative_law

    @property
    def negatives_from_anchor_law(self) -> bool:
        """True iff negative_law == "anchor"."""
        return self._negative_law == "anchor"

    @property
    def negatives_from_positive_marginal(self) -> bool:
        """True iff negative_law == "marginal" (pi is never the positives' marginal here)."""
        return self._negative_law == "marginal"

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n anchors from the vMF mixture pi: a component k ~ w, then vMF(mu_k, kappa0_k). Shape (n, d)."""
        check_generator(generator)
        device = generator.device
        if check_count("n", n, 0) == 0:
            return torch.zeros(0, self.dim, dtype=self.dtype, device=device)
        weights = torch.tensor(self.anchor_weights, dtype=torch.float64, device=device)
        component = torch.multinomial(weights, n, replacement=True, generator=generator)
        kappas = torch.tensor(self.anchor_kappas, dtype=torch.float64, device=device)[component]
        return sample_vmf(self.anchor_means.to(device)[component], kappas, generator, self.dtype)

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """y_i ~ vMF(x_i, kappa) for each row of x (n, d); x must be unit vectors."""
        check_finite_points("x", x, self.dim)
        return sample_vmf(x.reshape(-1, self.dim), self.kappa, generator, self.dtype).reshape(x.shape)

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Negatives y' ~ p- (pi, or p_Y by drawing an anchor then its positive), shape ``tuple(shape) + (d,)``."""
        sizes = check_shape(shape)
        points = self.sample_anchors(math.prod(sizes), generator)
        if self._negative_law == "marginal":
            points = self.sample_positives(points, generator)
        return points.reshape(*sizes, self.dim)

    def log_anchor_density(self, y: Tensor) -> Tensor:
        """``log pi(y) = log sum_k w_k exp(kappa0_k <mu_k, y>) / C_d(kappa0_k)`` against the uniform law."""
        check_points("y", y, self.dim)
        log_w = torch.log(torch.tensor(self.anchor_weights, dtype=y.dtype, device=y.device))
        log_c0 = torch.as_tensor(
            log_vmf_normaliser(self.dim, np.asarray(self.anchor_kappas)), device=y.device
        )
        kappas = torch.tensor(self.anchor_kappas, dtype=y.dtype, device=y.device)
        cosines = y @ self.anchor_means.to(device=y.device, dtype=y.dtype).T
        return torch.logsumexp(log_w + kappas * cosines - log_c0.to(y.dtype), dim=-1)

    def log_positive_marginal_density(self, y: Tensor) -> Tensor:
        """``log p_Y(y) = log sum_k w_k C_d(|kappa y + kappa0_k mu_k|) / (C_d(kappa) C_d(kappa0_k))``.

        Evaluated in float64 with scipy's Bessel functions (on the CPU) and returned in y's dtype and device.
        """
        check_points("y", y, self.dim)
        flat = y.detach().reshape(-1, self.dim).to(device="cpu", dtype=torch.float64)
        t = (flat @ self.axis).numpy()
        norm_sq = flat.square().sum(dim=-1).numpy()
        log_density = self._axial.log_marginal_density(t, norm_sq)
        return torch.from_numpy(log_density).reshape(y.shape[:-1]).to(device=y.device, dtype=y.dtype)

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``kappa <x, y> - log C_d(kappa)`` against the uniform probability on the sphere."""
        check_points("x", x, self.dim)
        check_points("y", y, self.dim)
        return vmf_log_density(x, y, self.kappa, self.log_normaliser)

    def log_negative_density(self, y: Tensor) -> Tensor:
        """``log pi(y)`` (negative_law="anchor") or ``log p_Y(y)`` ("marginal")."""
        if self._negative_law == "anchor":
            return self.log_anchor_density(y)
        return self.log_positive_marginal_density(y)

    def mean_kl(self) -> float:
        """``E_x KL(p+_x || p-) = kappa A_d(kappa) - log C_d(kappa) - E_{y ~ p_Y} log p-(y)`` (1-D quadrature)."""
        return self._mean_kl

    @cached_property
    def _mean_kl(self) -> float:
        cross_entropy, error = converge(
            lambda n: expected_log_negative_under_marginal(self._axial, n), 64, _MAX_NODES, _SMOOTH_TARGET
        )
        _require(error, QUADRATURE_TOLERANCE, "E_x KL(p+_x || p-)")
        entropy_term = (
            self.kappa * float(vmf_mean_resultant_length(self.dim, self.kappa)) - self.log_normaliser
        )
        return entropy_term - cross_entropy

    def optimal_auc(self) -> float:
        """``E*``; error <= 1e-8 when the log-ratio is linear in y, else <= 1e-6 (see the module docstring)."""
        value, error = self._optimal_auc
        _require(error, QUADRATURE_TOLERANCE if self._is_linear else GRID_AUC_TOLERANCE, "E*")
        return value

    def optimal_auc_with_error(self) -> tuple[float, float]:
        """``(E*, estimated quadrature error)``."""
        return self._optimal_auc

    @property
    def _is_linear(self) -> bool:
        """One component and p- = pi: log_ratio(x, .) is linear in y."""
        return len(self.anchor_kappas) == 1 and self._negative_law == "anchor"

    @cached_property
    def _optimal_auc(self) -> tuple[float, float]:
        if self._is_linear:
            return converge(
                lambda n: linear_optimal_auc(self._axial, n),
                64,
                _LINEAR_AUC_MAX_NODES,
                0.1 * QUADRATURE_TOLERANCE,
            )
        levels = _GRID_LEVELS_CIRCLE if self.dim == 2 else _GRID_LEVELS
        return extrapolated_grid_optimal_auc(self._axial, levels)

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2) = exp(kappa <z, z2> - log C_d(kappa) - log pi(z2))``, broadcasting."""
        return torch.exp(self.log_positive_density(z, z2) - self.log_anchor_density(z2))

    def density_ratio_second_moment(self) -> float:
        """``E_{z ~ pi} ∫ (dM(z, .)/dpi)^2 dpi`` by the 1-D polar quadrature (relative error <= 1e-8 enforced).

        Returns ``math.inf`` beyond the float64 range.
        """
        return self._second_moment

    @cached_property
    def _second_moment(self) -> float:
        log_value, error = converge(
            lambda n: log_density_ratio_second_moment(self._axial, n), 64, _MAX_NODES, _SMOOTH_TARGET
        )
        _require(error, QUADRATURE_TOLERANCE, "log E|dM/dpi|^2")
        return exp_or_inf(log_value)


def _require(error: float, tolerance: float, what: str) -> None:
    """Raise if a quadrature's error estimate exceeds its tolerance (the parameters are too concentrated)."""
    if not error <= tolerance:
        raise RuntimeError(
            f"{what}: quadrature error estimate {error:.2e} exceeds {tolerance:.0e}; the concentrations are too "
            "large for the built-in rules (see the crl.synthetic.asymmetric docstring for the supported range)"
        )
