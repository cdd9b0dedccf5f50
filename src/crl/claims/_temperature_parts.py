"""C9's parts: embeddings phi of S^2 onto a unit sphere, the KL(M||Q) they reach, and the optimiser that trains them.

Model ``VMFUniform(d = 3, kappa)``: ``M(z, .) = vMF(z, kappa)``, ``pi`` uniform on S^2. An embedding phi gives
the learned kernel ([B] section 5) ``dQ(z,.)/dpi (z') = exp(<phi z, phi z'>/tau) / N(z)``,
``N(z) = ∫ exp(<phi z, u>/tau) pi(du)`` (with ``u = phi z'``). The family trained here is the affine map onto the
unit sphere of R^D,

    phi_{A,b}(z) = (A z + b) / |A z + b|,   A in R^{D x d}, b in R^D,

which contains the exact construction of docs/theory.md section 7 (C9) when D = d + 1:
``phi(z) = (sqrt(lambda) z, sqrt(1 - lambda))``, ``lambda = tau kappa <= 1``, for which
``<phi z, phi z'> = lambda <z,z'> + 1 - lambda`` and so ``Q = vMF(z, lambda/tau) = vMF(z, kappa) = M``.
With D = d (the control) that kernel is out of reach unless lambda = 1: its Gram matrix on S^2 has rank d + 1.

Every integral over pi is a product Gauss rule of S^2 (:func:`uniform_sphere_quadrature`): the training
objective on a coarse pair of rules, the reported KL on a fine pair, so the reported numbers carry no Monte-Carlo
error; the spread over seeds is the optimiser's (random initial A, b).
"""

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch
from torch import Tensor

from crl.claims._gradient_fit import descend
from crl.claims._sphere_kernel import DIM
from crl.risk import kernel_divergences, learned_log_density_ratio, uniform_sphere_quadrature
from crl.synthetic import log_vmf_normaliser, vmf_mean_resultant_length
from crl.synthetic.vmf import VMFUniform

TRAIN_RULES = ((4, 8), (16, 32))
"""(anchor rule, support rule) of the training objective: 32 anchors z, 512 support points z'."""
EVAL_RULES = ((12, 24), (48, 96))
"""(anchor rule, support rule) of the reported E_z KL(M||Q) and sup |log dQ/dpi|: 288 anchors, 4608 points."""
TRAIN_STEPS = 200
"""Adam steps of :func:`train_affine_embedding` (full batch: the objective is a quadrature, no sampling)."""
TRAIN_LR = 0.05
"""Adam's learning rate."""


@dataclass(frozen=True)
class AffineSphereMap:
    """``phi(z) = (A z + b) / |A z + b|`` onto the unit sphere of R^D (D = ``matrix.shape[0]``).

    Attributes:
        matrix: (D, d) A.
        offset: (D,) b.
    """

    matrix: Tensor
    offset: Tensor

    @property
    def out_dim(self) -> int:
        """D, the output dimension."""
        return int(self.matrix.shape[0])

    def __call__(self, z: Tensor) -> Tensor:
        """phi of each row of ``z`` (..., d) -> (..., D), on the unit sphere."""
        image = z @ self.matrix.T + self.offset
        return image / image.norm(dim=-1, keepdim=True)


def lift_map(lam: float, dim: int = DIM) -> AffineSphereMap:
    """The exact construction ``phi(z) = (sqrt(lambda) z, sqrt(1 - lambda))`` in R^{d+1} (``Q = vMF(lambda/tau)``).

    Raises:
        ValueError: unless ``0 <= lambda <= 1``.
    """
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lambda={lam!r} must lie in [0, 1] (lambda = tau kappa; tau kappa <= 1 here).")
    matrix = torch.cat([math.sqrt(lam) * torch.eye(dim, dtype=torch.float64), torch.zeros(1, dim).double()])
    offset = torch.zeros(dim + 1, dtype=torch.float64)
    offset[-1] = math.sqrt(1.0 - lam)
    return AffineSphereMap(matrix, offset)


def random_affine_map(out_dim: int, generator: torch.Generator, dim: int = DIM) -> AffineSphereMap:
    """A random start: A and b with i.i.d. N(0, 1/d) entries (the optimiser's initialisation)."""
    scale = 1.0 / math.sqrt(dim)
    matrix = scale * torch.randn(out_dim, dim, generator=generator, dtype=torch.float64)
    offset = scale * torch.randn(out_dim, generator=generator, dtype=torch.float64)
    return AffineSphereMap(matrix, offset)


@dataclass(frozen=True)
class SphereRules:
    """A pair of Gauss rules and M's density ratio on them, renormalised on the rule (``sum_j pi_j m_ij = 1``).

    Attributes:
        anchors: (n, d) anchors z_i with weights ``anchor_weights`` (n,).
        nodes: (N, d) support points z'_j with log weights ``log_weights`` (N,).
        log_m: (n, N) ``log m_ij = log dM(z_i,.)/dpi (z'_j)``, renormalised on the rule.
        m_mass: (n, N) ``pi_j m_ij``.
    """

    anchors: Tensor
    anchor_weights: Tensor
    nodes: Tensor
    log_weights: Tensor
    log_m: Tensor
    m_mass: Tensor

    @classmethod
    def of(cls, model: VMFUniform, rules: tuple[tuple[int, int], tuple[int, int]]) -> "SphereRules":
        """The rules ``(anchor rule, support rule)`` (polar x azimuth nodes each) for ``model``."""
        anchors, anchor_weights = uniform_sphere_quadrature(*rules[0])
        nodes, weights = uniform_sphere_quadrature(*rules[1])
        log_weights = weights.log()
        log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
        log_m = log_m - torch.logsumexp(log_m + log_weights, dim=1, keepdim=True)
        return cls(anchors, anchor_weights, nodes, log_weights, log_m, torch.exp(log_m + log_weights))


def expected_kl(embed: AffineSphereMap, rules: SphereRules, tau: float) -> Tensor:
    """Differentiable ``E_z KL(M(z,.)||Q(z,.)) = sum_i w_i sum_j pi_j m_ij (log m_ij - log r_ij)`` on ``rules``.

    ``log r_ij = <phi z_i, phi z'_j>/tau - log sum_j pi_j exp(<phi z_i, phi z'_j>/tau)``, so with m renormalised
    on the rule (as :func:`kernel_divergences` does) the value is >= 0 on the rule itself.
    """
    logits = embed(rules.anchors) @ embed(rules.nodes).T / tau
    log_r = logits - torch.logsumexp(logits + rules.log_weights, dim=1, keepdim=True)
    per_anchor = (rules.m_mass * (rules.log_m - log_r)).sum(dim=1)
    return (rules.anchor_weights * per_anchor).sum()


def train_affine_embedding(model: VMFUniform, tau: float, out_dim: int, seed: int) -> AffineSphereMap:
    """min over (A, b) of ``E_z KL(M||Q_phi)`` on :data:`TRAIN_RULES`: Adam (lr :data:`TRAIN_LR`), full batch,
    :data:`TRAIN_STEPS` steps from :func:`random_affine_map` with a generator seeded by ``seed``."""
    start = random_affine_map(out_dim, torch.Generator().manual_seed(seed))
    matrix, offset = start.matrix.requires_grad_(), start.offset.requires_grad_()
    rules = SphereRules.of(model, TRAIN_RULES)
    optimiser = torch.optim.Adam([matrix, offset], lr=TRAIN_LR)
    descend(optimiser, lambda: expected_kl(AffineSphereMap(matrix, offset), rules, tau), TRAIN_STEPS)
    return AffineSphereMap(matrix.detach(), offset.detach())


@dataclass(frozen=True)
class KernelFit:
    """What one embedding reaches at one tau, on :data:`EVAL_RULES`.

    Attributes:
        mean_kl: ``E_z KL(M(z,.)||Q(z,.))`` (C9's measured quantity).
        sup_abs_log_ratio: ``sup_{z,z'} |log dQ(z,.)/dpi (z')|`` (<= 2/tau for every unit-norm phi: eq. 8).
        sup_kl_learned_to_anchor: ``sup_z KL(Q(z,.)||pi)`` (<= 2/tau likewise).
    """

    mean_kl: float
    sup_abs_log_ratio: float
    sup_kl_learned_to_anchor: float

    def to_dict(self) -> dict[str, float]:
        """The flat JSON dict the sweep stores."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "KernelFit":
        """The record stored by :meth:`to_dict`."""
        return cls(**{f.name: float(values[f.name]) for f in fields(cls)})


def kernel_fit(model: VMFUniform, embed: AffineSphereMap, tau: float) -> KernelFit:
    """E_z KL(M||Q), sup |log dQ/dpi| and sup_z KL(Q||pi) of ``embed`` at ``tau`` on :data:`EVAL_RULES`."""
    anchors, anchor_weights = uniform_sphere_quadrature(*EVAL_RULES[0])
    nodes, weights = uniform_sphere_quadrature(*EVAL_RULES[1])
    with torch.no_grad():
        log_q = learned_log_density_ratio(embed(anchors), embed(nodes), tau=tau, support_weights=weights)
    log_m = model.log_positive_density(anchors[:, None, :], nodes[None, :, :])
    div = kernel_divergences(log_q, log_m, support_weights=weights)
    return KernelFit(
        mean_kl=float((anchor_weights * div.kl_kernel_to_learned).sum()),
        sup_abs_log_ratio=float(div.sup_abs_log_ratio.max()),
        sup_kl_learned_to_anchor=float(div.kl_learned_to_anchor.max()),
    )


def closed_form_lift_kl(kappa: float, tau: float) -> float:
    """Best KL of the lift family ``min_lambda KL(vMF(kappa)||vMF(lambda/tau))``: 0 if ``kappa tau <= 1``, else
    ``KL(vMF(kappa)||vMF(1/tau)) = (kappa - 1/tau) A_d(kappa) - log C_d(kappa) + log C_d(1/tau)``."""
    if kappa * tau <= 1.0:
        return 0.0
    other = 1.0 / tau
    return float(
        (kappa - other) * vmf_mean_resultant_length(DIM, kappa)
        - log_vmf_normaliser(DIM, kappa)
        + log_vmf_normaliser(DIM, other)
    )
