"""Score families linear in lifted features, and [A]'s empirical risk L_hat on a fixed sample with its derivatives.

A lifted family scores ``s_theta(x, y) = a(x)^T Theta c(y)`` with anchor lift ``a(x) = (x, 1)`` and candidate lift
``c(y) = y`` (sphere: |y| = 1, so |y|^2 adds nothing) or ``c(y) = (y, |y|^2)`` (Gaussian two-tower, whose
``s* = tau (rho <x, y> - rho^2 |y|^2 / 2)/(1 - rho^2)`` needs the |y|^2 term, docs/theory.md section 6). Entries of
Theta outside the family's mask are fixed at 0 (the x |y|^2 block), so

    s_theta(x, y) = x^T W y + b^T y (+ e |y|^2),  theta = (vec W, b[, e]).

A family may instead fix e at a given ``offset`` e0 (not a parameter): ``s_theta = x^T W y + b^T y + e0 |y|^2``.
With e0 > 0 under N(0, I) negatives every member's ``exp(s/tau)`` has the tail index ``tau/(2 e0)`` (C5's
heavy-tailed control, ``e0`` = the wide Gaussian truth's own e*); a learned e could leave the class of finite
risks (``e >= tau/2``), a fixed one cannot. The offset adds ``e0 (|y'|^2 - |y|^2)/tau`` to every logit and nothing
to the derivatives.

Every member is a :class:`crl.risk.FeatureScore` (``f(x) = W^T x + b``, curvature ``-2e``), so L, L* and
E have exact inner expectations under the sphere and Gaussian negative laws.

On a fixed sample (n pairs and a fixed negative set: SCRL, each anchor its own m; SSCRL, one set of m shared)
``L_hat(theta) = (1/n) sum_i tau log((1/m) sum_j exp((s_ij - s_i+)/tau))`` ([A]'s gcl) is a log-sum-exp of affine
functions of theta, hence convex. With ``p_ij = softmax_j(s_ij/tau)``, ``cbar_i = sum_j p_ij c(y'_ij)``:

    grad = (1/n) sum_i a_i (x) (cbar_i - c(y_i)),
    Hess = (1/(n tau)) sum_i (a_i a_i^T) (x) (sum_j p_ij c_ij c_ij^T - cbar_i cbar_i^T)   (Kronecker structure).
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import check_choice, check_tau
from crl._vocab import REGIMES, Regime
from crl.risk import FeatureScore

_CHUNK_ELEMENTS = 1 << 19
"""Anchors are processed in chunks of about this many (anchor, negative) pairs (bounded memory)."""


@dataclass(frozen=True)
class LiftedFamily:
    """``s(x, y) = x^T W y + b^T y (+ e |y|^2)`` on R^d: the lift and the mask of free entries of Theta.

    Attributes:
        dim: d, the dimension of x and y.
        quadratic: whether c(y) carries |y|^2 (the coefficient e, learned).
        offset: a fixed coefficient e0 of |y|^2 (0: none); only without ``quadratic``.
    """

    dim: int
    quadratic: bool = False
    offset: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim={self.dim!r} must be an integer >= 1 (the dimension of x and y).")
        if not math.isfinite(self.offset):
            raise ValueError(
                f"offset={self.offset!r} must be a finite number (the fixed coefficient of |y|^2)."
            )
        if self.quadratic and self.offset != 0.0:
            raise ValueError(
                "offset fixes the coefficient of |y|^2 that quadratic=True learns; use one of the two."
            )

    @property
    def n_params(self) -> int:
        """p = d^2 + d (+ 1 with the |y|^2 term)."""
        return self.dim * self.dim + self.dim + int(self.quadratic)

    @property
    def mask(self) -> Tensor:
        """(d + 1, d_c) booleans: the free entries of Theta (row d is the constant anchor feature)."""
        width = self.dim + int(self.quadratic)
        mask = torch.ones(self.dim + 1, width, dtype=torch.bool)
        if self.quadratic:
            mask[: self.dim, self.dim] = False
        return mask

    def lift_anchor(self, x: Tensor) -> Tensor:
        """``a(x) = (x, 1)``, shape (..., d + 1)."""
        return torch.cat([x, torch.ones_like(x[..., :1])], dim=-1)

    def lift_candidate(self, y: Tensor) -> Tensor:
        """``c(y) = y`` or ``(y, |y|^2)``, shape (..., d_c)."""
        if not self.quadratic:
            return y
        return torch.cat([y, y.square().sum(dim=-1, keepdim=True)], dim=-1)

    def matrix(self, theta: Tensor) -> Tensor:
        """Theta (d + 1, d_c) with ``theta`` in its free entries (row-major order of the mask)."""
        if theta.shape != (self.n_params,):
            raise ValueError(f"theta has shape {tuple(theta.shape)}; this family needs ({self.n_params},).")
        mask = self.mask
        full = torch.zeros(mask.shape, dtype=torch.float64)
        full[mask] = theta.to(torch.float64)
        return full

    def parameters_of(self, weight: Tensor, bias: Tensor, quadratic: float = 0.0) -> Tensor:
        """theta of ``x^T W y + b^T y + e |y|^2`` from W (d, d), b (d,) and e."""
        parts = [weight.to(torch.float64).reshape(-1), bias.to(torch.float64).reshape(-1)]
        if self.quadratic:
            parts.append(torch.tensor([quadratic], dtype=torch.float64))
        theta = torch.cat(parts)
        if theta.shape != (self.n_params,):
            raise ValueError(
                f"W {tuple(weight.shape)} and b {tuple(bias.shape)} do not fit dimension {self.dim}."
            )
        return theta

    def score(self, theta: Tensor) -> FeatureScore:
        """The member as a FeatureScore: ``f(x) = W^T x + b`` (as ``x @ W + b``), curvature ``-2e`` (or ``-2 e0``)."""
        full = self.matrix(theta)
        weight, bias = full[: self.dim, : self.dim].clone(), full[self.dim, : self.dim].clone()
        curvature = -2.0 * float(full[self.dim, self.dim]) if self.quadratic else -2.0 * self.offset
        return FeatureScore(lambda x: x.to(torch.float64) @ weight + bias, curvature=curvature)


@dataclass(frozen=True)
class RiskDerivatives:
    """``L_hat`` at theta with its gradient (p,) and Hessian (p, p), float64."""

    value: float
    gradient: Tensor
    hessian: Tensor


class EmpiricalRisk:
    """[A]'s ``L_hat`` of a lifted family on one fixed sample (module docstring), float64.

    Args:
        family: the lifted family.
        x: (n, d) anchors; y: (n, d) positives.
        negatives: (n, m, d) for SCRL (``regime="independent"``) or (m, d) for SSCRL (``regime="shared"``).
        tau: temperature > 0.
        regime: "independent" (SCRL) or "shared" (SSCRL).
    """

    def __init__(
        self, family: LiftedFamily, x: Tensor, y: Tensor, negatives: Tensor, tau: float, regime: Regime
    ) -> None:
        self.family = family
        self.tau = check_tau(tau)
        self.regime = check_choice("regime", regime, REGIMES)
        d = family.dim
        if x.ndim != 2 or x.shape[1] != d or y.shape != x.shape:
            raise ValueError(f"x {tuple(x.shape)} and y {tuple(y.shape)} must both be (n, {d}).")
        want = 3 if regime == "independent" else 2
        if negatives.ndim != want or negatives.shape[-1] != d:
            raise ValueError(
                f"negatives {tuple(negatives.shape)} must be {'(n, m, d)' if want == 3 else '(m, d)'} with d = {d} "
                f"for regime={regime!r}."
            )
        if regime == "independent" and negatives.shape[0] != x.shape[0]:
            raise ValueError(
                f"negatives has {negatives.shape[0]} rows; SCRL needs one per anchor ({x.shape[0]})."
            )
        self.n = int(x.shape[0])
        self.m = int(negatives.shape[-2])
        self.anchors = family.lift_anchor(x.to(torch.float64))
        self.positives = family.lift_candidate(y.to(torch.float64))
        self.negatives = family.lift_candidate(negatives.to(torch.float64))
        self._positive_offset = family.offset * y.to(torch.float64).square().sum(dim=-1)
        self._negative_offset = family.offset * negatives.to(torch.float64).square().sum(dim=-1)
        self._mask = family.mask.reshape(-1)

    def _chunks(self) -> list[tuple[int, int]]:
        """Anchor ranges of about ``_CHUNK_ELEMENTS`` (anchor, negative) pairs each."""
        step = max(1, _CHUNK_ELEMENTS // self.m)
        return [(start, min(start + step, self.n)) for start in range(0, self.n, step)]

    def _logits(self, theta_matrix: Tensor, start: int, stop: int) -> tuple[Tensor, Tensor]:
        """``(s_ij - s_i+)/tau`` (chunk, m) and the chunk's candidate lifts of the negatives."""
        u = self.anchors[start:stop] @ theta_matrix
        positive = (u * self.positives[start:stop]).sum(dim=-1) + self._positive_offset[start:stop]
        if self.regime == "independent":
            negatives = self.negatives[start:stop]
            scores = torch.einsum("ic,ijc->ij", u, negatives) + self._negative_offset[start:stop]
        else:
            negatives = self.negatives
            scores = u @ negatives.T + self._negative_offset[None, :]
        return (scores - positive[:, None]) / self.tau, negatives

    def value(self, theta: Tensor) -> float:
        """``L_hat(theta) = (1/n) sum_i tau (logsumexp_j logits_ij - log m)``."""
        full = self.family.matrix(theta)
        total = 0.0
        for start, stop in self._chunks():
            logits, _ = self._logits(full, start, stop)
            total += float(torch.logsumexp(logits, dim=1).sum())
        return self.tau * (total / self.n - math.log(self.m))

    def derivatives(self, theta: Tensor, *, hessian: bool = True) -> RiskDerivatives:
        """``L_hat``, its gradient and (``hessian=True``) its Hessian at theta (module docstring)."""
        full = self.family.matrix(theta)
        pa, pc = full.shape
        total = 0.0
        grad = torch.zeros(pa, pc, dtype=torch.float64)
        hess = torch.zeros(pa, pc, pa, pc, dtype=torch.float64)
        for start, stop in self._chunks():
            logits, negatives = self._logits(full, start, stop)
            total += float(torch.logsumexp(logits, dim=1).sum())
            p = torch.softmax(logits, dim=1)
            a = self.anchors[start:stop]
            shared = self.regime == "shared"
            cbar = p @ negatives if shared else torch.einsum("ij,ijc->ic", p, negatives)
            grad += a.T @ (cbar - self.positives[start:stop])
            if hessian:
                if self.regime == "independent":
                    second = torch.einsum("ij,ijc,ijd->icd", p, negatives, negatives)
                else:
                    outer = (negatives[:, :, None] * negatives[:, None, :]).reshape(self.m, pc * pc)
                    second = (p @ outer).reshape(-1, pc, pc)
                cov = second - cbar[:, :, None] * cbar[:, None, :]
                hess += torch.einsum("ia,ib,icd->acbd", a, a, cov)
        value = self.tau * (total / self.n - math.log(self.m))
        gradient = grad.reshape(-1)[self._mask] / self.n
        flat = hess.reshape(pa * pc, pa * pc)[self._mask][:, self._mask] / (self.n * self.tau)
        return RiskDerivatives(value, gradient, flat)
