"""The ``GroundTruth`` protocol: a paired-data law with every quantity of docs/theory.md known exactly.

A model is an anchor law pi (x ~ pi), a positive kernel p+_x = M(x, .) (y ~ p+_x) and a negative law p-
(y' ~ p-, independent of x). Every model gives

- samplers that take a ``torch.Generator``: anchors, positives given anchors, pairs, negatives;
- ``log_positive_density(x, y) = log p+_x(y)`` and ``log_negative_density(y) = log p-(y)`` against a stated base
  measure (``base_measure``), so that ``KL(p+_x || q_{s,x})`` with ``q_{s,x} ∝ p- exp(s/tau)`` is computable;
- ``log_ratio(x, y) = log p+_x(y)/p-(y)``, the ideal score ``s*(x, y) = tau * log_ratio(x, y)`` (g(x) = 0);
- ``mean_kl() = E_x KL(p+_x || p-)``, ``optimal_risk(tau) = L* = -tau * mean_kl()`` ([A], docs/theory.md section 2),
  ``optimal_auc() = E* = P[log_ratio(x,y) > log_ratio(x,y')] + 1/2 P[=]`` ([A], section 3);
- for [B]'s setting (section 5): ``anchor_density_ratio(z, z2) = dM(z, .)/dpi (z2)`` and
  ``density_ratio_second_moment() = E_{z ~ pi} ∫ (dM(z, .)/dpi)^2 dpi = E|dM/dpi|^2`` (Prop. 2).

Every density function broadcasts over leading dimensions: ``log_ratio(x[:, None, :], y[None, :, :])`` is the
(n, m) matrix of log-ratios of n anchors against m candidates (elementwise, so it holds an (n, m, d)
intermediate: chunk the candidates for large n m d). They are ground truth, not training losses: no gradient is
promised (AsymmetricSphere's marginal density goes through scipy).
"""

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import torch
from torch import Tensor

from crl._validate import Floats, check, check_tau

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

QUADRATURE_TOLERANCE = 1e-8
"""Largest estimated quadrature error an exact answer may carry; a computation that misses it raises."""


@runtime_checkable
class GroundTruth(Protocol):
    """A paired-data law (pi, p+, p-) with exact densities, ideal scores, L*, E* and dM/dpi.

    Attributes:
        dim: dimension d of x, y and y'.
        dtype: floating dtype of sampled tensors.
        base_measure: the measure the log-densities are taken against (e.g. the uniform probability on
            S^{d-1}, Lebesgue measure on R^d, counting measure on N one-hot vectors).
        negative_law: what p- is, as a string: a sentence for the models whose p- is fixed, the constructor's
            choice ``"anchor"`` or ``"marginal"`` for AsymmetricSphere. The two booleans below are the
            machine-readable form.
        negatives_from_anchor_law: True when p- = pi ([B]'s convention, Q ∝ exp(s/tau) pi).
        negatives_from_positive_marginal: True when p- = the law of y ([A]'s convention).
    """

    @property
    def dim(self) -> int: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def base_measure(self) -> str: ...

    @property
    def negative_law(self) -> str: ...

    @property
    def negatives_from_anchor_law(self) -> bool: ...

    @property
    def negatives_from_positive_marginal(self) -> bool: ...

    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor: ...

    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor: ...

    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]: ...

    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor: ...

    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor: ...

    def log_negative_density(self, y: Tensor) -> Tensor: ...

    def log_ratio(self, x: Tensor, y: Tensor) -> Tensor: ...

    def ideal_score(self, x: Tensor, y: Tensor, tau: float) -> Tensor: ...

    def mean_kl(self) -> float: ...

    def optimal_risk(self, tau: float) -> float: ...

    def optimal_auc(self) -> float: ...

    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor: ...

    def density_ratio_second_moment(self) -> float: ...


class ExactModel(ABC):
    """Shared implementation of :class:`GroundTruth`: pairs, log-ratio, ideal score and L* from the parts.

    Subclasses set ``_dim`` and ``_dtype`` and implement the samplers, the two log-densities, ``mean_kl``,
    ``optimal_auc``, ``anchor_density_ratio`` and ``density_ratio_second_moment``.
    """

    _dim: int
    _dtype: torch.dtype

    @property
    def dim(self) -> int:
        """Dimension d of x, y and y'."""
        return self._dim

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of sampled tensors (float64 unless the constructor was told otherwise)."""
        return self._dtype

    @property
    @abstractmethod
    def base_measure(self) -> str:
        """The measure the log-densities are taken against."""

    @property
    @abstractmethod
    def negative_law(self) -> str:
        """One sentence saying what p- is."""

    @property
    def negatives_from_anchor_law(self) -> bool:
        """True when p- = pi, the anchor law ([B]'s convention). Default: True (models whose positives' marginal
        is pi, so that [A]'s and [B]'s conventions agree); the asymmetric model overrides it."""
        return True

    @property
    def negatives_from_positive_marginal(self) -> bool:
        """True when p- is the marginal law of the positives y ([A]'s convention). Default: True (see above)."""
        return True

    @abstractmethod
    def sample_anchors(self, n: int, generator: torch.Generator) -> Tensor:
        """n anchors x ~ pi, shape (n, d)."""

    @abstractmethod
    def sample_positives(self, x: Tensor, generator: torch.Generator) -> Tensor:
        """One positive y ~ p+_x per row of x (shape (n, d)), shape (n, d)."""

    @abstractmethod
    def sample_negatives(self, shape: Sequence[int], generator: torch.Generator) -> Tensor:
        """Negatives y' ~ p-, independent of every anchor, shape ``tuple(shape) + (d,)``."""

    @abstractmethod
    def log_positive_density(self, x: Tensor, y: Tensor) -> Tensor:
        """``log p+_x(y)`` against ``base_measure``, broadcasting over leading dimensions."""

    @abstractmethod
    def log_negative_density(self, y: Tensor) -> Tensor:
        """``log p-(y)`` against ``base_measure``, over leading dimensions."""

    @abstractmethod
    def mean_kl(self) -> float:
        """``E_{x ~ pi} KL(p+_x || p-)``."""

    @abstractmethod
    def optimal_auc(self) -> float:
        """``E* = P[log_ratio(x, y) > log_ratio(x, y')] + 1/2 P[=]``, x ~ pi, y ~ p+_x, y' ~ p-."""

    @abstractmethod
    def anchor_density_ratio(self, z: Tensor, z2: Tensor) -> Tensor:
        """``dM(z, .)/dpi (z2)``, broadcasting over leading dimensions."""

    @abstractmethod
    def density_ratio_second_moment(self) -> float:
        """``E_{z ~ pi} ∫ (dM(z, .)/dpi)^2 dpi = E_{z ~ pi, z2 ~ M(z, .)} dM(z, .)/dpi (z2)``."""

    def sample(self, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """n pairs: x ~ pi, then y ~ p+_x row by row. Returns ``(x, y)``, each (n, d)."""
        x = self.sample_anchors(n, generator)
        return x, self.sample_positives(x, generator)

    def log_ratio(self, x: Tensor, y: Tensor) -> Tensor:
        """``log p+_x(y) / p-(y)``, broadcasting over leading dimensions (x[:, None], y[None] -> (n, m))."""
        return self.log_positive_density(x, y) - self.log_negative_density(y)

    def ideal_score(self, x: Tensor, y: Tensor, tau: float) -> Tensor:
        """``s*(x, y) = tau * log p+_x(y)/p-(y)``, the minimiser of [A]'s population risk L with g(x) = 0.

        Any ``s* + g(x)`` attains the same ``L* = optimal_risk(tau)`` (docs/theory.md section 2).
        """
        return check_tau(tau) * self.log_ratio(x, y)

    def optimal_risk(self, tau: float) -> float:
        """``L* = -tau * E_x KL(p+_x || p-)``, the minimum over s of the m -> infinity risk L(s) of [A].

        ``L(s) = E_x E_{y ~ p+_x} tau log E_{y' ~ p-} exp((s(x, y') - s(x, y))/tau)``, attained at s*.
        """
        return -check_tau(tau) * self.mean_kl()


def check_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """Validate a batch shape of negatives: a sequence of integers >= 0."""
    if isinstance(shape, int) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise ValueError(f"shape must be a tuple of integers >= 0 such as (n, m), got shape={shape!r}")
    return tuple(shape)


def check_dtype(dtype: torch.dtype) -> torch.dtype:
    """Validate a floating dtype for sampled tensors."""
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be a floating torch dtype, got dtype={dtype!r}; use torch.float64")
    return dtype


def check_points(name: str, points: Tensor, dim: int) -> Tensor:
    """A floating tensor of points in R^dim (last dimension = dim)."""
    return check(name, points, Floats(last_dim=dim))


def check_finite_points(name: str, points: Tensor, dim: int) -> Tensor:
    """:func:`check_points`, and every entry finite (a NaN anchor would give NaN positives silently)."""
    return check(
        name, points, Floats(last_dim=dim, finite=True, fix="pass finite points (check where they came from)")
    )
