"""C10's embedding family, its ERM fit and the control-variate gap estimator (docs/claims/C10.md).

Family: an affine map normalised onto S^2, ``phi_theta(z) = normalise(A z + b)`` (A 3 x 3, b in R^3: one flat
parameter vector theta of 12 entries), the same phi for anchors and candidates: ``s(x, y) = <phi(x), phi(y)>``,
so |s| <= 1. Non-convex in theta (the normalisation), hence several starts.

Risk ([B]): a tuple is ``(x, y, y'_1..y'_k)``; its loss is InfoNCE minus log k,
``log(1 + sum_j exp((s(x, y'_j) - s(x, y))/tau)) - log k`` (:func:`crl.objectives.contrastive_loss`, form
``"infonce"``). ``R_hat_n`` is the mean over the n training tuples, ``R`` the expectation over a fresh tuple.

Gap per training sample, with phi_0 a reference fitted on an independent sample:

    G = [R_fresh(phi_hat) - R_fresh(phi_0)] - [R_hat_n(phi_hat) - R_hat_n(phi_0)],

unbiased for ``E[R(phi_hat) - R_hat_n(phi_hat)]`` because ``E[R(phi_0) - R_hat_n(phi_0)] = 0``.
"""

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from crl.objectives import contrastive_loss
from crl.synthetic import AsymmetricSphere

DIM = 3
N_PARAMS = DIM * DIM + DIM
"""12: A (3 x 3) and b (3)."""
GRAD_TOLERANCE = 1e-6
"""L-BFGS stops when the largest gradient entry of R_hat_n is at most this."""
MAX_ITERATIONS = 200
Negatives = Literal["own", "shared"]


@dataclass(frozen=True)
class TupleSample:
    """n tuples: anchors (n, 3), positives (n, 3), negatives (n, k, 3) ("own") or (k, 3) ("shared")."""

    anchors: Tensor
    positives: Tensor
    negatives: Tensor

    @property
    def shared(self) -> bool:
        """True when one set of k negatives serves every anchor."""
        return self.negatives.ndim == 2

    @property
    def k(self) -> int:
        """Negatives per anchor."""
        return int(self.negatives.shape[-2])


@dataclass(frozen=True)
class EmbeddingFit:
    """An ERM fit: its parameters, R_hat_n at them, the largest gradient entry, and which start won."""

    theta: Tensor
    empirical_risk: float
    grad_max: float
    start: int


def draw_pairs(model: AsymmetricSphere, n: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """n anchor/positive pairs of the model."""
    return model.sample(n, generator)


def draw_tuples(
    model: AsymmetricSphere,
    pairs: tuple[Tensor, Tensor],
    k: int,
    negatives: Negatives,
    generator: torch.Generator,
) -> TupleSample:
    """The pairs with k negatives from p- each ("own"), or one set of k shared by all anchors ("shared")."""
    anchors, positives = pairs
    shape = (k,) if negatives == "shared" else (anchors.shape[0], k)
    return TupleSample(anchors, positives, model.sample_negatives(shape, generator))


def random_parameters(generator: torch.Generator) -> Tensor:
    """A random start: the entries of A ~ N(0, 1/3), b ~ N(0, 1/3) (float64)."""
    return torch.randn(N_PARAMS, dtype=torch.float64, generator=generator) / math.sqrt(DIM)


def embed(theta: Tensor, z: Tensor) -> Tensor:
    """``phi_theta(z) = normalise(A z + b)`` for z of shape (..., 3)."""
    matrix, bias = theta[: DIM * DIM].reshape(DIM, DIM), theta[DIM * DIM :]
    return torch.nn.functional.normalize(z @ matrix.T + bias, dim=-1)


def tuple_losses(theta: Tensor, sample: TupleSample, tau: float) -> Tensor:
    """Per-tuple ``InfoNCE - log k`` of phi_theta, shape (n,)."""
    anchors, positives = embed(theta, sample.anchors), embed(theta, sample.positives)
    losses = contrastive_loss(
        anchors,
        positives,
        embed(theta, sample.negatives),
        tau=tau,
        form="infonce",
        regime="shared" if sample.shared else "independent",
        reduction="none",
    )
    return losses - math.log(sample.k)


def empirical_risk(theta: Tensor, sample: TupleSample, tau: float) -> float:
    """``R_hat(phi_theta)``: the mean per-tuple loss over the sample."""
    with torch.no_grad():
        return float(tuple_losses(theta, sample, tau).mean())


def _fit_from(start: Tensor, sample: TupleSample, tau: float) -> tuple[Tensor, float, float]:
    """L-BFGS (strong Wolfe) on R_hat_n from ``start``: (theta, R_hat_n, largest gradient entry)."""
    theta = start.clone().requires_grad_(True)
    optimiser = torch.optim.LBFGS(
        [theta],
        lr=1.0,
        max_iter=MAX_ITERATIONS,
        tolerance_grad=GRAD_TOLERANCE,
        tolerance_change=1e-14,
        history_size=20,
        line_search_fn="strong_wolfe",
    )

    def closure() -> Tensor:
        optimiser.zero_grad()
        loss = tuple_losses(theta, sample, tau).mean()
        loss.backward()
        return loss

    optimiser.step(closure)
    loss = tuple_losses(theta, sample, tau).mean()
    (grad,) = torch.autograd.grad(loss, theta)
    return theta.detach(), float(loss.detach()), float(grad.abs().max())


def fit_embedding(sample: TupleSample, tau: float, starts: list[Tensor]) -> EmbeddingFit:
    """The ERM over the family: L-BFGS from every start, the lowest R_hat_n kept.

    Raises:
        RuntimeError: if every start ends at a non-finite risk (the cell is recorded as diverged).
    """
    best: EmbeddingFit | None = None
    for index, start in enumerate(starts):
        theta, risk, grad_max = _fit_from(start, sample, tau)
        if math.isfinite(risk) and (best is None or risk < best.empirical_risk):
            best = EmbeddingFit(theta, risk, grad_max, index)
    if best is None:
        raise RuntimeError("every L-BFGS start ended at a non-finite empirical risk")
    return best


def gap_terms(
    theta_hat: Tensor, theta_ref: Tensor, train: TupleSample, fresh: TupleSample, tau: float
) -> dict[str, float]:
    """The gap estimate and its parts (module docstring): ``gap`` (control variate) and ``plain_gap``."""
    fresh_hat, fresh_ref = empirical_risk(theta_hat, fresh, tau), empirical_risk(theta_ref, fresh, tau)
    train_hat, train_ref = empirical_risk(theta_hat, train, tau), empirical_risk(theta_ref, train, tau)
    return {
        "gap": (fresh_hat - fresh_ref) - (train_hat - train_ref),
        "plain_gap": fresh_hat - train_hat,
        "fresh_risk": fresh_hat,
        "train_risk": train_hat,
        "reference_fresh_risk": fresh_ref,
        "reference_train_risk": train_ref,
    }
