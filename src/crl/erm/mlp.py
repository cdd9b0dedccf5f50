"""A non-convex family: a small MLP embedding onto the sphere, ``s(x, y) = B <g(x), g(y)>``, fitted from restarts.

``g(z) = h(z)/|h(z)|`` with h a one-hidden-layer tanh MLP R^d -> R^k (one tower for anchors and candidates), and a
fixed scale B (so |s| <= B: bounded scores, as [A] assumes). On ``VMFUniform(d, kappa)`` with ``B = tau kappa`` and
k >= d the class contains s* (g = id). L_hat is [A]'s gcl risk on the fixed sample (SCRL n x m or SSCRL m shared
negatives), minimised in float64 by full-batch L-BFGS (strong Wolfe line search) from ``restarts`` random
initialisations; the fit with the smallest L_hat is kept. L_hat is not convex in the weights: the fit reports every
restart's L_hat and the gradient norm of the one kept (stationarity, not global optimality), and
``converged`` means that gradient norm is at most ``tolerance``.
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from crl._validate import check_choice, check_count, check_tau
from crl._vocab import REGIMES, Regime


class SphereEmbedding(nn.Module):
    """``g(z) = h(z)/|h(z)|``, h: Linear(d, hidden) -> tanh -> Linear(hidden, k), float64."""

    def __init__(self, dim: int, hidden: int, out_dim: int, generator: torch.Generator) -> None:
        super().__init__()
        self.first = nn.Linear(dim, hidden, dtype=torch.float64)
        self.second = nn.Linear(hidden, out_dim, dtype=torch.float64)
        with torch.no_grad():
            for layer in (self.first, self.second):
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.weight.uniform_(-bound, bound, generator=generator)
                layer.bias.uniform_(-bound, bound, generator=generator)

    def forward(self, z: Tensor) -> Tensor:
        """g(z) on the unit sphere of R^k."""
        return nn.functional.normalize(self.second(torch.tanh(self.first(z.to(torch.float64)))), dim=-1)


@dataclass(frozen=True)
class EmbeddingScore:
    """``s(x, y) = scale <g(x), g(y)>`` of a fitted embedding (broadcasting; a score function for crl.metrics)."""

    embedding: SphereEmbedding
    scale: float

    def __call__(self, x: Tensor, y: Tensor) -> Tensor:
        with torch.no_grad():
            return self.scale * (self.embedding(x) * self.embedding(y)).sum(dim=-1)


@dataclass(frozen=True)
class MlpFit:
    """The best of several restarts: its score, L_hat, gradient norm, every restart's L_hat and the status."""

    score: EmbeddingScore
    risk: float
    gradient_norm: float
    restart_risks: tuple[float, ...]
    converged: bool
    reason: str


def mlp_empirical_risk(
    score: EmbeddingScore, x: Tensor, y: Tensor, negatives: Tensor, tau: float, regime: Regime
) -> Tensor:
    """[A]'s L_hat, differentiable in the weights: ``mean_i tau (logsumexp_j (s_ij - s_i+)/tau - log m)``."""
    g = score.embedding
    gx, gy, gn = g(x), g(y), g(negatives)
    positive = (gx * gy).sum(dim=-1)
    scores = torch.einsum("ik,ijk->ij", gx, gn) if regime == "independent" else gx @ gn.T
    logits = score.scale * (scores - positive[:, None]) / tau
    return tau * (torch.logsumexp(logits, dim=1) - math.log(logits.shape[1])).mean()


def fit_mlp(
    x: Tensor,
    y: Tensor,
    negatives: Tensor,
    tau: float,
    regime: Regime,
    *,
    scale: float,
    generator: torch.Generator,
    hidden: int = 16,
    out_dim: int = 3,
    restarts: int = 4,
    max_iter: int = 300,
    tolerance: float = 1e-6,
) -> MlpFit:
    """Fit the embedding by L-BFGS from ``restarts`` initialisations drawn from ``generator``; keep the best L_hat.

    Raises:
        ValueError: on a bad tau, regime, count, or a non-positive scale.
    """
    t = check_tau(tau)
    check_choice("regime", regime, REGIMES)
    for name, value in (
        ("hidden", hidden),
        ("out_dim", out_dim),
        ("restarts", restarts),
        ("max_iter", max_iter),
    ):
        check_count(name, value, 1)
    if not (math.isfinite(scale) and scale > 0.0):
        raise ValueError(f"scale={scale!r} must be a finite number > 0 (the bound B on |s|).")
    fits = [
        _one_restart(
            x,
            y,
            negatives,
            t,
            regime,
            scale,
            SphereEmbedding(x.shape[-1], hidden, out_dim, generator),
            max_iter,
        )
        for _ in range(restarts)
    ]
    best = min(fits, key=lambda fit: fit[1])
    score, risk, grad_norm = best
    finite = math.isfinite(risk) and math.isfinite(grad_norm)
    converged = finite and grad_norm <= tolerance
    reason = (
        ""
        if converged
        else (
            "non-finite L_hat or gradient"
            if not finite
            else f"gradient norm {grad_norm:.3g} > tolerance {tolerance:.3g}"
        )
    )
    return MlpFit(score, risk, grad_norm, tuple(f[1] for f in fits), converged, reason)


def _one_restart(
    x: Tensor,
    y: Tensor,
    negatives: Tensor,
    tau: float,
    regime: Regime,
    scale: float,
    model: SphereEmbedding,
    max_iter: int,
) -> tuple[EmbeddingScore, float, float]:
    """One L-BFGS run; returns the score, its L_hat and the gradient norm at the end."""
    score = EmbeddingScore(model, scale)
    optimiser = torch.optim.LBFGS(
        model.parameters(),
        lr=1.0,
        max_iter=max_iter,
        tolerance_grad=1e-12,
        tolerance_change=1e-15,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        optimiser.zero_grad()
        loss = mlp_empirical_risk(score, x, y, negatives, tau, regime)
        loss.backward()
        return loss

    optimiser.step(closure)
    loss = closure()
    grad_norm = math.sqrt(sum(float(p.grad.square().sum()) for p in model.parameters() if p.grad is not None))
    return score, float(loss.detach()), grad_norm
