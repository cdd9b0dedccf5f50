"""C9's own parts: the embeddings phi it checks, the learned kernel's extremes, and the best KL in the lift family.

Embeddings onto the unit sphere: the lift ``phi_c(z) = (sqrt(c) z, sqrt(1-c))`` (so that ``Q = vMF(z, c/tau)``),
a random MLP 3 -> 32 -> 8 and the same MLP trained with InfoNCE, each followed by projection onto the sphere.
"""

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import Tensor

from crl.claims._sphere_kernel import DIM, Embedding
from crl.metrics.risk import (
    kernel_divergences,
    learned_log_density_ratio,
    learned_log_partition,
    temperature_bound,
    uniform_sphere_quadrature,
)
from crl.models import MLP, project_to_sphere
from crl.objectives import contrastive_loss
from crl.synthetic._special import log_vmf_normaliser, vmf_mean_resultant_length
from crl.synthetic.vmf import VMFUniform

ANCHOR_RULE = (12, 24)
"""Gauss rule (polar x azimuth nodes) of the anchors z of the bound checks."""
SUPPORT_RULE = (48, 96)
"""Gauss rule of the support z' (log N, dQ/dpi, the divergences)."""
HIDDEN, EMBED_DIM = 32, 8
TRAIN_STEPS, TRAIN_BATCH, TRAIN_LR = 300, 256, 1e-2


def lifted_embedding(c: float) -> Embedding:
    """``phi_c(z) = (sqrt(c) z, sqrt(1-c))`` on S^d, so that ``<phi_c z, phi_c z'> = c <z,z'> + 1 - c``."""
    if not 0.0 <= c <= 1.0:
        raise ValueError(f"c={c!r} must lie in [0, 1] (phi_c maps onto the unit sphere only there).")

    def embed(z: Tensor) -> Tensor:
        extra = torch.full((*z.shape[:-1], 1), (1.0 - c) ** 0.5, dtype=z.dtype)
        return torch.cat([c**0.5 * z, extra], dim=-1)

    return embed


def random_mlp_embedding(seed: int) -> Embedding:
    """A random MLP 3 -> 32 -> 8 (ReLU, PyTorch's default init law) followed by projection onto S^7."""
    mlp = MLP(DIM, [HIDDEN], EMBED_DIM, generator=torch.Generator().manual_seed(seed)).double()
    return _MLPEmbedding(mlp)


def trained_mlp_embedding(model: VMFUniform, tau: float, seed: int) -> Embedding:
    """The MLP of :func:`random_mlp_embedding` after ``TRAIN_STEPS`` Adam steps on InfoNCE at ``tau``.

    Each step draws ``TRAIN_BATCH`` fresh pairs (x, y ~ M(x,.)) and minimises
    ``contrastive_loss(phi(x), phi(y), tau=tau, form="infonce")`` with the batch's other positives as negatives.
    """
    generator = torch.Generator().manual_seed(seed)
    mlp = MLP(DIM, [HIDDEN], EMBED_DIM, generator=generator).double()
    optimiser = torch.optim.Adam(mlp.parameters(), lr=TRAIN_LR)
    for _ in range(TRAIN_STEPS):
        x, y = model.sample(TRAIN_BATCH, generator)
        loss = contrastive_loss(project_to_sphere(mlp(x)), project_to_sphere(mlp(y)), tau=tau, form="infonce")
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return _MLPEmbedding(mlp)


class _MLPEmbedding:
    """phi = projection onto the sphere of an MLP, evaluated without gradients."""

    def __init__(self, mlp: MLP) -> None:
        self.mlp = mlp

    def __call__(self, z: Tensor) -> Tensor:
        with torch.no_grad():
            return project_to_sphere(self.mlp(z))


@dataclass(frozen=True)
class KernelExtremes:
    """One bound cell's result: the learned kernel's extremes for one (phi, tau), on the Gauss rules.

    Attributes:
        bound: eq. 8's 2/tau.
        mean_kl_kernel_to_learned: ``E_z KL(M(z,.)||Q(z,.))`` over the anchor rule (descriptive).
        sup_abs_log_ratio: ``sup_{z,z'} |log dQ(z,.)/dpi (z')|``.
        sup_kl_learned_to_anchor: ``sup_z KL(Q(z,.)||pi)``.
    """

    bound: float
    mean_kl_kernel_to_learned: float
    sup_abs_log_ratio: float
    sup_kl_learned_to_anchor: float

    def to_dict(self) -> dict[str, float]:
        """The flat JSON dict the sweep stores."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "KernelExtremes":
        """The record stored by :meth:`to_dict`."""
        return cls(**{f.name: float(values[f.name]) for f in fields(cls)})


def kernel_extremes(model: VMFUniform, embed: Embedding, tau: float) -> KernelExtremes:
    """sup |log dQ/dpi|, sup_z KL(Q||pi) and the mean KL(M||Q) over the anchor rule, on the support rule."""
    anchors, anchor_weights = uniform_sphere_quadrature(*ANCHOR_RULE)
    nodes, weights = uniform_sphere_quadrature(*SUPPORT_RULE)
    log_q = learned_log_density_ratio(embed(anchors), embed(nodes), tau=tau, support_weights=weights)
    log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
    div = kernel_divergences(log_q, log_m, support_weights=weights)
    return KernelExtremes(
        bound=temperature_bound(tau),
        mean_kl_kernel_to_learned=float((anchor_weights * div.kl_kernel_to_learned).sum()),
        sup_abs_log_ratio=float(div.sup_abs_log_ratio.max()),
        sup_kl_learned_to_anchor=float(div.kl_learned_to_anchor.max()),
    )


@dataclass(frozen=True)
class BestKL:
    """One best-KL cell's result: the cross-fitted ``min_c E KL(M||Q_c)`` at one tau.

    Attributes:
        best_kl: ``E KL(M||Q_c_hat)`` on the evaluation half of the anchors.
        best_kl_se: its standard error over those anchors.
        c_hat: the c chosen on the other half.
    """

    best_kl: float
    best_kl_se: float
    c_hat: float

    def to_dict(self) -> dict[str, float]:
        """The flat JSON dict the sweep stores."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "BestKL":
        """The record stored by :meth:`to_dict`."""
        return cls(**{f.name: float(values[f.name]) for f in fields(cls)})


def kl_sampler(
    model: VMFUniform, tau: float, n_anchors: int, n_positives: int, generator: torch.Generator
) -> Callable[[float], np.ndarray]:
    """``c -> (n_anchors,)`` Monte-Carlo KL(M(z,.)||Q_c(z,.)) per anchor, on fixed draws (common random numbers).

    ``KL = E_{y~M(z,.)}[log dM/dpi(y) - (c<z,y> + 1 - c)/tau] + log N_c(z)``, log N_c by the support rule.
    """
    z = model.sample_anchors(n_anchors, generator)
    y = model.sample_positives(z.repeat_interleave(n_positives, dim=0), generator).reshape(
        n_anchors, n_positives, DIM
    )
    log_m = model.log_positive_density(z[:, None, :], y).mean(dim=1)
    cosine = (z[:, None, :] * y).sum(dim=-1).mean(dim=1)
    nodes, weights = uniform_sphere_quadrature(*SUPPORT_RULE)

    def kl(c: float) -> np.ndarray:
        embed = lifted_embedding(c)
        log_n = learned_log_partition(embed(z), embed(nodes), tau=tau, support_weights=weights)
        return (log_m - (c * cosine + 1.0 - c) / tau + log_n).numpy()

    return kl


def closed_form_best_kl(kappa: float, tau: float) -> float:
    """``min_c KL(vMF(kappa)||vMF(c/tau))``: 0 if ``kappa tau <= 1``, else ``KL(vMF(kappa)||vMF(1/tau))``.

    ``KL(vMF(a)||vMF(b)) = (a - b) A_d(a) - log C_d(a) + log C_d(b)`` (decreasing in b on [0, a]).
    """
    if kappa * tau <= 1.0:
        return 0.0
    other = 1.0 / tau
    return float(
        (kappa - other) * vmf_mean_resultant_length(DIM, kappa)
        - log_vmf_normaliser(DIM, kappa)
        + log_vmf_normaliser(DIM, other)
    )
