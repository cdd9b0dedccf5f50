"""The gradient fit of the claims' small models: a torch optimiser run on a scalar objective.

C2's trained scores (Adam on GCL minibatches, :func:`crl.claims._random_scores.trained_weights`), C9's affine
embeddings (Adam on a quadrature KL, :func:`crl.claims._temperature_parts.train_affine_embedding`) and C10's
embedding ERM (L-BFGS with a strong-Wolfe line search on R_hat_n, :func:`crl.claims.c10_generalisation.fit_embedding`)
each minimise a differentiable objective of a few parameter tensors: :func:`descend` is their one loop, the
optimiser and the objective are each fit's own.
"""

from collections.abc import Callable

import torch
from torch import Tensor


def descend(optimiser: torch.optim.Optimizer, objective: Callable[[], Tensor], steps: int) -> None:
    """``steps`` steps of ``optimiser`` on the scalar ``objective()``.

    The objective (and its gradient) is re-evaluated whenever the optimiser asks: once per Adam step, as often as
    L-BFGS's line search needs within its one step. An objective that draws a minibatch draws a fresh one each
    time.
    """

    def closure() -> float:
        optimiser.zero_grad()
        loss = objective()
        loss.backward()
        return float(loss.detach())

    for _ in range(steps):
        optimiser.step(closure)
