"""The sphere model shared by C7, C8 and C9: embeddings phi of S^2, kernel draws, and typed cell records.

Model: ``VMFUniform(d = 3, kappa)``: anchors and negatives uniform on S^2 (the law pi), positives
``y ~ M(z, .) = vMF(z, kappa)``. Scores ``s(z, z') = <phi(z), phi(z')>`` for an embedding phi onto the unit
sphere: the identity, or a fixed random linear map ``phi(z) = Az/|Az|`` with ``A = U diag(1, 1.5, 2.5) V``
(U, V Haar rotations drawn from a seed), which is not rotation-invariant. ``log N(z) = log ∫ exp(s(z, z')/tau)
pi(dz')`` comes from a product Gauss rule on S^2 (exact to ~1e-14 here).

A cell's result is a typed record (:class:`GapCell`, made of :class:`FormGap` and :class:`DrawSummary`); the
sweep stores it as a flat JSON dict (keys ``"<form>_mean"``, ``"<form>_naive_sd"``, ...), converted only at that
boundary by ``to_dict`` / ``from_dict``.
"""

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch
from torch import Tensor

from crl._vocab import KernelForm
from crl.risk import (
    GapDraws,
    asymptotic_gap_coefficients,
    learned_log_density_ratio,
    learned_log_partition,
    uniform_sphere_quadrature,
)
from crl.risk.kernel import GapCoefficients
from crl.synthetic.vmf import VMFUniform

Embedding = Callable[[Tensor], Tensor]

DIM = 3
"""Dimension d of the sphere model (S^2: the Gauss rule of :func:`uniform_sphere_quadrature` is for d = 3)."""
QUADRATURE = (48, 96)
"""Gauss-Legendre x azimuth nodes of the rule for log N(z) (4608 nodes; error < 1e-13 for tau >= 0.1 here)."""
ANCHOR_QUADRATURE = (24, 48)
"""Rule for the anchors' ∫ dpi(z) in the leading-order constants drawn as theory curves."""
LINEAR_SINGULAR_VALUES = (1.0, 1.5, 2.5)
"""Singular values of the random linear map A of ``phi(z) = Az/|Az|``."""
_MAX_POINTS_PER_CHUNK = 1 << 18


@dataclass(frozen=True)
class KernelDraws:
    """R draws of [B]'s risk: anchor z_r ~ pi, positive y_r ~ M(z_r,.), k negatives xi_rj ~ pi (all embedded).

    Attributes:
        positive_scores: (R,) s(z_r, y_r) = <phi(z_r), phi(y_r)>.
        negative_scores: (R, k) s(z_r, xi_rj).
        log_partition: (R,) log N(z_r) by quadrature.
        log_kernel_ratio: (R, k) log dM(z_r,.)/dpi (xi_rj), or ``None`` when not asked for.
    """

    positive_scores: Tensor
    negative_scores: Tensor
    log_partition: Tensor
    log_kernel_ratio: Tensor | None


def haar_rotation(generator: torch.Generator, dim: int = DIM) -> Tensor:
    """A Haar-distributed orthogonal matrix: QR of a Gaussian matrix with the signs of R's diagonal fixed."""
    q, r = torch.linalg.qr(torch.randn(dim, dim, generator=generator, dtype=torch.float64))
    return q * torch.sign(torch.diagonal(r))


def sphere_embedding(kind: str, phi_seed: int) -> Embedding:
    """An embedding phi: S^2 -> S^2: ``"identity"``, or ``"linear"``: ``phi(z) = Az/|Az|``, A as in the module doc.

    Raises:
        ValueError: for another ``kind``.
    """
    if kind == "identity":
        return _identity
    if kind == "linear":
        generator = torch.Generator().manual_seed(phi_seed)
        singular = torch.diag(torch.tensor(LINEAR_SINGULAR_VALUES, dtype=torch.float64))
        matrix = haar_rotation(generator) @ singular @ haar_rotation(generator)
        return _LinearSphereMap(matrix)
    raise ValueError(f"phi kind={kind!r} must be 'identity' or 'linear'.")


def _identity(z: Tensor) -> Tensor:
    """phi = id."""
    return z


class _LinearSphereMap:
    """``z -> Az/|Az|`` for a fixed invertible A (a callable object, so that it pickles for worker processes)."""

    def __init__(self, matrix: Tensor) -> None:
        self.matrix = matrix

    def __call__(self, z: Tensor) -> Tensor:
        image = z @ self.matrix.T
        return image / image.norm(dim=-1, keepdim=True)


def quadrature_log_partition(embed: Embedding, anchor_embeddings: Tensor, tau: float) -> Tensor:
    """``log N(z) = log ∫ exp(<phi(z), phi(u)>/tau) pi(du)`` by the product Gauss rule :data:`QUADRATURE`."""
    nodes, weights = uniform_sphere_quadrature(*QUADRATURE)
    return learned_log_partition(anchor_embeddings, embed(nodes), tau=tau, support_weights=weights)


def kernel_score_chunks(
    model: VMFUniform,
    embed: Embedding,
    *,
    tau: float,
    n_draws: int,
    n_negatives: int,
    generator: torch.Generator,
    with_kernel_ratio: bool = False,
) -> Iterator[KernelDraws]:
    """R = ``n_draws`` (anchor, positive, k negatives) triples from ``model``, embedded with phi, in chunks of at most
    2^18 negatives: a consumer that reduces each chunk to per-draw values holds O(2^18) scores whatever R and k
    (:func:`joined_draws` joins them)."""
    rows = max(1, _MAX_POINTS_PER_CHUNK // n_negatives)
    for start in range(0, n_draws, rows):
        size = min(rows, n_draws - start)
        z = model.sample_anchors(size, generator)
        y = model.sample_positives(z, generator)
        xi = model.sample_negatives((size, n_negatives), generator)
        ez = embed(z)
        positive = (ez * embed(y)).sum(dim=-1)
        negative = torch.einsum("rp,rkp->rk", ez, embed(xi.reshape(-1, DIM)).reshape(size, n_negatives, -1))
        kernel = model.log_positive_density(z[:, None, :], xi) if with_kernel_ratio else None
        yield KernelDraws(positive, negative, quadrature_log_partition(embed, ez, tau), kernel)


def joined_draws(chunks: Iterable[KernelDraws]) -> KernelDraws:
    """The draws of :func:`kernel_score_chunks` joined into one set of R draws (R k scores in memory)."""
    parts = list(chunks)
    kernels = [part.log_kernel_ratio for part in parts]
    return KernelDraws(
        positive_scores=torch.cat([part.positive_scores for part in parts]),
        negative_scores=torch.cat([part.negative_scores for part in parts]),
        log_partition=torch.cat([part.log_partition for part in parts]),
        log_kernel_ratio=None if kernels[0] is None else torch.cat([k for k in kernels if k is not None]),
    )


def gap_coefficients_by_quadrature(model: VMFUniform, embed: Embedding, tau: float) -> GapCoefficients:
    """Leading-order constants a (gap ~ a/k) of :func:`crl.risk.asymptotic_gap_coefficients` for phi.

    Anchors and support both on product Gauss rules of S^2; dM/dpi from the model.
    """
    anchors, anchor_weights = uniform_sphere_quadrature(*ANCHOR_QUADRATURE)
    nodes, weights = uniform_sphere_quadrature(*QUADRATURE)
    log_q = learned_log_density_ratio(embed(anchors), embed(nodes), tau=tau, support_weights=weights)
    log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
    return asymptotic_gap_coefficients(log_q, log_m, support_weights=weights, anchor_weights=anchor_weights)


_SUMMARY_FIELDS = ("mean", "se", "sd", "sd_se")


@dataclass(frozen=True)
class DrawSummary:
    """Per-draw values v_1..v_R reduced to their mean, its standard error, their sd and the sd's standard error.

    Attributes:
        mean: ``vbar = (1/R) sum_r v_r``.
        se: ``sd / sqrt(R)``.
        sd: the sample standard deviation (ddof 1).
        sd_se: ``sqrt((m4 - sd^4)/R) / (2 sd)`` (delta method, m4 the sample fourth central moment; 0 if sd = 0).
    """

    mean: float
    se: float
    sd: float
    sd_se: float

    @classmethod
    def of(cls, values: Tensor) -> "DrawSummary":
        """The summary of per-draw ``values`` (any shape; flattened)."""
        v = values.detach().to(torch.float64).numpy()
        n = v.size
        sd = float(v.std(ddof=1))
        m4 = float(np.mean((v - v.mean()) ** 4))
        sd_se = math.sqrt(max(m4 - sd**4, 0.0) / n) / (2.0 * sd) if sd > 0 else 0.0
        return cls(mean=float(v.mean()), se=sd / math.sqrt(n), sd=sd, sd_se=sd_se)

    def to_dict(self, prefix: str) -> dict[str, float]:
        """The stored form, keys ``"<prefix>_mean"``, ``"<prefix>_se"``, ``"<prefix>_sd"``, ``"<prefix>_sd_se"``."""
        return {
            f"{prefix}_mean": self.mean,
            f"{prefix}_se": self.se,
            f"{prefix}_sd": self.sd,
            f"{prefix}_sd_se": self.sd_se,
        }

    @classmethod
    def from_dict(cls, prefix: str, values: Mapping[str, Any]) -> "DrawSummary":
        """The summary stored under ``prefix`` by :meth:`to_dict`."""
        mean, se, sd, sd_se = (float(values[f"{prefix}_{name}"]) for name in _SUMMARY_FIELDS)
        return cls(mean=mean, se=se, sd=sd, sd_se=sd_se)


@dataclass(frozen=True)
class FormGap:
    """One form's O(1/k) gap at one cell: its variance-reduced estimate and the plain per-draw difference."""

    estimate: DrawSummary
    naive: DrawSummary

    @classmethod
    def of(cls, draws: GapDraws) -> "FormGap":
        """The summaries of a :class:`crl.risk.GapDraws`."""
        return cls(estimate=DrawSummary.of(draws.estimate), naive=DrawSummary.of(draws.naive))

    def to_dict(self, form: KernelForm) -> dict[str, float]:
        """Stored under ``"<form>_*"`` (estimate) and ``"<form>_naive_*"`` (plain difference)."""
        return self.estimate.to_dict(form) | self.naive.to_dict(f"{form}_naive")

    @classmethod
    def from_dict(cls, form: KernelForm, values: Mapping[str, Any]) -> "FormGap":
        """The gap stored by :meth:`to_dict`."""
        return cls(DrawSummary.from_dict(form, values), DrawSummary.from_dict(f"{form}_naive", values))


@dataclass(frozen=True)
class GapCell:
    """The result of one (phi, tau, k) cell of C7: the gap of both forms, from the same draws.

    Attributes:
        dcl: the DCL gap (against R~).
        infonce: the InfoNCE gap (against R).
    """

    dcl: FormGap
    infonce: FormGap

    def gap(self, form: KernelForm) -> FormGap:
        """The gap of ``form``."""
        return self.dcl if form == "dcl" else self.infonce

    def to_dict(self) -> dict[str, float]:
        """The flat JSON dict the sweep stores."""
        return self.dcl.to_dict("dcl") | self.infonce.to_dict("infonce")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> Self:
        """The record stored by :meth:`to_dict`."""
        return cls(dcl=FormGap.from_dict("dcl", values), infonce=FormGap.from_dict("infonce", values))
