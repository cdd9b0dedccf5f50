"""Exact inner expectations over the negative law p- for scores that are quadratic in the candidate y.

[A]'s population risk needs, for every anchor x, the log-partition ``log Z_s(x) = log E_{y' ~ p-} exp(s(x, y')/tau)``
and the AUC needs the law of ``s(x, y')`` under p-. For a :class:`FeatureScore`
``s(x, y) = <f(x), y> - (c/2)|y|^2`` (any feature map f, e.g. a linear map or an MLP) and the two continuous
negative laws of the synthetic models both are closed forms, so only the outer expectation over (x, y) is left
to Monte Carlo:

- :class:`UniformSphere` (``VMFUniform``): ``|y'| = 1``, so ``-(c/2)|y'|^2`` is the constant ``-c/2`` and
  ``E exp(<v, y'>) = C_d(|v|)`` (the vMF normaliser, ``crl.synthetic._special.log_vmf_normaliser``);
  ``u = <v/|v|, y'>`` has ``(1 + u)/2 ~ Beta((d-1)/2, (d-1)/2)``.
- :class:`IsotropicGaussian` N(0, sigma^2 I) (``GaussianTwoTower``, sigma = 1):
  ``E exp(<v, y'> - (b/2)|y'|^2) = (1 + b sigma^2)^{-d/2} exp(sigma^2 |v|^2 / (2 (1 + b sigma^2)))`` for
  ``b sigma^2 > -1``; for b != 0, ``s = -(b/2)|y' - v/b|^2 + |v|^2/(2b)``, so ``|y' - v/b|^2 / sigma^2`` is
  non-central chi-square with d degrees of freedom and non-centrality ``|v/b|^2 / sigma^2``; for b = 0,
  ``<v, y'> ~ N(0, sigma^2 |v|^2)``.

The models whose p- has no such closed form (the asymmetric sphere) fall back to sampled negatives in
:mod:`crl.risk.contrastive`; finite supports are enumerated exactly in :mod:`crl.risk.finite`.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from scipy import special
from torch import Tensor

from crl._validate import check_choice, check_tau
from crl.synthetic import log_vmf_normaliser
from crl.synthetic.gaussian import GaussianTwoTower
from crl.synthetic.vmf import VMFUniform

FeatureMap = Callable[[Tensor], Tensor]
Inner = Literal["auto", "exact", "sampled"]
_INNER = ("auto", "exact", "sampled")


@dataclass(frozen=True)
class FeatureScore:
    """The score ``s(x, y) = <f(x), y> - (curvature/2) |y|^2``: linear in y plus an isotropic quadratic term.

    Two-tower scores with an identity candidate tower are of this form, and so are the ideal scores of the
    vMF model (``f(x) = tau kappa x``) and of the Gaussian two-tower model
    (``f(x) = tau rho x/(1-rho^2)``, ``curvature = tau rho^2/(1-rho^2)``), up to a g(x) that no risk sees.

    Attributes:
        features: f, mapping (..., d) anchors to (..., d) vectors (e.g. ``lambda x: x @ W.T`` or an MLP).
        curvature: c, the coefficient of ``-|y|^2/2`` (a constant on the sphere).
    """

    features: FeatureMap
    curvature: float = 0.0

    def __post_init__(self) -> None:
        if not callable(self.features):
            raise TypeError(
                f"features must be callable (..., d) -> (..., d), got {type(self.features).__name__}."
            )
        if isinstance(self.curvature, bool) or not math.isfinite(self.curvature):
            raise ValueError(f"curvature={self.curvature!r} must be a finite number (0 for a linear score).")

    def __call__(self, x: Tensor, y: Tensor) -> Tensor:
        """``<f(x), y> - (c/2)|y|^2``, broadcasting over leading dimensions (einsum: no (..., d) product tensor)."""
        value = torch.einsum("...d,...d->...", self.features(x), y)
        if self.curvature != 0.0:
            value = value - 0.5 * self.curvature * y.square().sum(dim=-1)
        return value


@dataclass(frozen=True)
class UniformSphere:
    """The uniform probability on the unit sphere S^{d-1} as a negative law."""

    dim: int


@dataclass(frozen=True)
class IsotropicGaussian:
    """The negative law N(0, variance * I_d)."""

    dim: int
    variance: float = 1.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.variance) and self.variance > 0):
            raise ValueError(f"variance={self.variance!r} must be a finite number > 0.")


NegativeLaw = UniformSphere | IsotropicGaussian


def negative_law_of(truth: object) -> NegativeLaw | None:
    """The closed-form negative law p- of a synthetic model, or None when it has none here.

    ``VMFUniform`` -> :class:`UniformSphere`; ``GaussianTwoTower`` -> :class:`IsotropicGaussian` (variance 1).
    """
    if isinstance(truth, VMFUniform):
        return UniformSphere(truth.dim)
    if isinstance(truth, GaussianTwoTower):
        return IsotropicGaussian(truth.dim, 1.0)
    return None


def ideal_feature_score(truth: object, tau: float) -> FeatureScore | None:
    """s* of a model as a :class:`FeatureScore` (equal to ``truth.ideal_score`` up to a g(x)), or None.

    VMFUniform: ``s* = tau kappa <x, y>`` (+ ``-tau log C_d(kappa)``); GaussianTwoTower:
    ``s* = w <x, y> + e |y|^2`` (+ g(x)) with (w, e) of :meth:`GaussianTwoTower.ideal_coefficients`.
    """
    t = check_tau(tau)
    if isinstance(truth, VMFUniform):
        scale = t * truth.kappa
        return FeatureScore(lambda x: scale * x)
    if isinstance(truth, GaussianTwoTower):
        weight, quadratic = truth.ideal_coefficients(t)
        return FeatureScore(lambda x: weight * x, curvature=-2.0 * quadratic)
    return None


def _check_law(score: FeatureScore, x: Tensor, law: NegativeLaw) -> Tensor:
    """f(x) in float64 after checking that x lives in the law's dimension."""
    if x.ndim < 1 or x.shape[-1] != law.dim:
        raise ValueError(f"x has shape {tuple(x.shape)}; the negative law lives in dimension d = {law.dim}.")
    v = score.features(x).detach().to(torch.float64)
    if v.shape != x.shape:
        raise ValueError(
            f"features mapped x {tuple(x.shape)} to {tuple(v.shape)}; f must keep the shape (..., d)."
        )
    if not bool(torch.isfinite(v).all()):
        raise ValueError("features returned NaN/Inf; the score's feature map f(x) must be finite.")
    return v


def feature_log_partition(score: FeatureScore, law: NegativeLaw, x: Tensor, tau: float) -> Tensor:
    """``log E_{y' ~ p-} exp(s(x, y')/tau)`` per anchor, in closed form (module docstring).

    Args:
        score: the feature score s.
        law: the negative law p-.
        x: (..., d) anchors.
        tau: temperature > 0.

    Returns:
        float64 tensor of shape ``x.shape[:-1]``.

    Raises:
        ValueError: on a dimension mismatch, non-finite features, or a Gaussian law with
            ``curvature * variance / tau <= -1`` (the expectation is infinite).
    """
    t = check_tau(tau)
    v = _check_law(score, x, law) / t
    b = score.curvature / t
    if isinstance(law, UniformSphere):
        norms = v.norm(dim=-1).cpu().numpy()
        log_c = torch.from_numpy(np.asarray(log_vmf_normaliser(law.dim, norms), dtype=np.float64))
        return log_c.to(v.device) - 0.5 * b
    scaled = 1.0 + b * law.variance
    if scaled <= 0.0:
        raise ValueError(
            f"curvature/tau * variance = {b * law.variance:.4g} <= -1: E exp(s/tau) is infinite under "
            "N(0, variance I); use a smaller negative curvature."
        )
    return -0.5 * law.dim * math.log(scaled) + law.variance * v.square().sum(dim=-1) / (2.0 * scaled)


def feature_score_cdf(score: FeatureScore, law: NegativeLaw, x: Tensor, threshold: Tensor) -> Tensor:
    """``P[s(x, y') < t] + 1/2 P[s(x, y') = t]`` for y' ~ p-, per anchor: the exact inner AUC.

    ``E(s) = E_{x, y} [cdf(x, s(x, y))]``. Ties have positive probability only for a constant score
    (``f(x) = 0`` on the sphere, or ``f(x) = 0`` and curvature 0 under the Gaussian), counted 1/2.

    Args:
        score: the feature score s.
        law: the negative law p-.
        x: (..., d) anchors.
        threshold: t, broadcastable to ``x.shape[:-1]`` (usually s(x, y) of the positive).

    Returns:
        float64 tensor of the broadcast shape.
    """
    v = _check_law(score, x, law)
    t = threshold.detach().to(torch.float64)
    shape = np.broadcast_shapes(tuple(v.shape[:-1]), tuple(t.shape))
    v = v.expand(*shape, law.dim)
    t = t.expand(shape)
    norm = v.norm(dim=-1)
    c = score.curvature
    if isinstance(law, UniformSphere):
        centred = (t + 0.5 * c).cpu().numpy()
        r = norm.cpu().numpy()
        half = 0.5 * (law.dim - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.clip(0.5 * (1.0 + centred / r), 0.0, 1.0)
        cdf = special.betainc(half, half, u)
        constant = r == 0.0
        cdf = np.where(constant, _step(centred), cdf)
        return torch.from_numpy(np.asarray(cdf, dtype=np.float64)).to(v.device)
    sigma2 = law.variance
    r2 = norm.square().cpu().numpy()
    tt = t.cpu().numpy()
    if c == 0.0:
        with np.errstate(divide="ignore", invalid="ignore"):
            z = tt / np.sqrt(sigma2 * r2)
        cdf = np.where(r2 == 0.0, _step(tt), special.ndtr(z))
        return torch.from_numpy(np.asarray(cdf, dtype=np.float64)).to(v.device)
    nonc = r2 / (c * c * sigma2)
    if c > 0:
        radius = (r2 / c - 2.0 * tt) / c
        outside = 1.0 - special.chndtr(np.maximum(radius, 0.0) / sigma2, law.dim, nonc)
        cdf = np.where(radius <= 0.0, 1.0, outside)
    else:
        radius = (2.0 * tt - r2 / c) / (-c)
        cdf = np.where(radius <= 0.0, 0.0, special.chndtr(np.maximum(radius, 0.0) / sigma2, law.dim, nonc))
    return torch.from_numpy(np.asarray(cdf, dtype=np.float64)).to(v.device)


def _step(t: np.ndarray) -> np.ndarray:
    """P[0 < t] + 1/2 P[0 = t]: the CDF of a point mass at 0 with ties counted 1/2."""
    return np.where(t > 0.0, 1.0, np.where(t == 0.0, 0.5, 0.0))


def resolve_negative_law(
    score_fn: object, truth: object, negative_law: NegativeLaw | None, inner: str
) -> NegativeLaw | None:
    """The law to integrate the inner expectation over exactly, or None when it must be sampled from p-.

    ``inner="auto"``: exact when ``score_fn`` is a :class:`FeatureScore` and the law (``negative_law``, else the
    model's p- via :func:`negative_law_of`) has a closed form; ``"exact"``: that, or ``ValueError``;
    ``"sampled"``: None. A ``negative_law`` is only ever integrated exactly.
    """
    check_choice("inner", inner, _INNER)
    law = negative_law if negative_law is not None else negative_law_of(truth)
    exact_possible = isinstance(score_fn, FeatureScore) and law is not None
    if inner == "exact" and not exact_possible:
        raise ValueError(
            f"inner='exact' needs a FeatureScore and a closed-form negative law; got {type(score_fn).__name__} "
            f"and {truth!r}. Use inner='sampled' (or 'auto')."
        )
    if negative_law is not None and not exact_possible:
        raise ValueError(
            "negative_law is integrated in closed form only, which needs a FeatureScore score_fn; "
            f"got {type(score_fn).__name__}."
        )
    if inner == "sampled" and negative_law is not None:
        raise ValueError("negative_law is integrated exactly; it cannot be combined with inner='sampled'.")
    return law if exact_possible and inner != "sampled" else None
