"""The ``[loss]`` fields of the loss estimator and the negatives' pool (docs/estimators.md).

``estimator = "fastclip"`` trains with :func:`crl.objectives.moving_average_loss`: SogCLR / FastCLIP's running
estimate u_i of each training item's pool mean, so that a step embedding b = ``n_negatives`` negatives drawn from
a fixed pool of m = ``pool_size`` items follows the gradient of [A]'s GCL loss with all m negatives. These fields
sit in a base class of :class:`crl.train.config.LossConfig`; :func:`check_estimator` is its validator's part.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from crl.train.config_kinds import Section

if TYPE_CHECKING:
    from crl.train.config import LossConfig

__all__ = ["EstimatorFields", "check_estimator"]

_GAMMA_FIELDS = ("gamma", "gamma_schedule", "gamma_decay_steps")
"""Fields that only ``estimator = "fastclip"`` reads."""


class EstimatorFields(Section):
    """``[loss]`` fields of the estimator (minibatch or fastclip) and of the pool the negatives come from."""

    estimator: Literal["minibatch", "fastclip"] = Field(
        default="minibatch",
        description="minibatch: the loss over the step's own negatives. fastclip: SogCLR/FastCLIP's moving "
        "average u_i of each item's pool mean (1/m) sum_j exp(Delta_ij/tau), so the gradient targets the gcl "
        "loss over all m = pool_size negatives while a step embeds n_negatives of them (form = 'gcl', "
        "negatives = 'shared_pool').",
    )
    gamma: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="fastclip: the weight of the step's estimate in u_i <- (1 - gamma) u_i + gamma g_hat_i; "
        "with gamma_schedule = 'cosine' the floor the schedule decays to (1 uses only the step's negatives).",
    )
    gamma_schedule: Literal["constant", "cosine"] = Field(
        default="constant",
        description="fastclip: constant gamma, or FastCLIP's cosine gamma_t = gamma + (1 - gamma) "
        "(1 + cos(pi min(t, D) / D)) / 2 from 1 at step 0 down to gamma at D = gamma_decay_steps.",
    )
    gamma_decay_steps: int = Field(
        default=0,
        ge=0,
        description="fastclip with gamma_schedule = 'cosine': D, the steps to the floor (0: optim.total_steps).",
    )
    pool_size: int = Field(
        default=0,
        ge=0,
        description="shared_pool and independent_pool: the step's n_negatives are drawn from the first pool_size "
        "training pairs, a fixed pool (fastclip's m; 0: all training pairs).",
    )


def check_estimator(loss: LossConfig) -> None:
    """Refuse estimator settings that cannot work together, naming the fields and the fix.

    Raises:
        ValueError: fastclip without form = 'gcl', negatives = 'shared_pool', a fixed tau or one-sided loss;
            gamma settings with the minibatch estimator; decay steps without the cosine schedule; a pool size
            with samplers that do not read it.
    """
    if loss.pool_size > 0 and loss.negatives not in ("shared_pool", "independent_pool"):
        raise ValueError(
            f"pool_size = {loss.pool_size} needs negatives = 'shared_pool' or 'independent_pool' "
            f"(negatives = '{loss.negatives}' does not read it); set pool_size = 0"
        )
    if loss.gamma_decay_steps > 0 and loss.gamma_schedule != "cosine":
        raise ValueError(
            f"gamma_decay_steps = {loss.gamma_decay_steps} is read only by gamma_schedule = 'cosine'; "
            "set gamma_schedule = 'cosine' or gamma_decay_steps = 0"
        )
    if loss.estimator == "minibatch":
        changed = [
            name
            for name in _GAMMA_FIELDS
            if getattr(loss, name) != EstimatorFields.model_fields[name].default
        ]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} set with estimator = 'minibatch', which keeps no moving average; "
                "set estimator = 'fastclip' or remove them"
            )
        return
    needs = {
        "form": (loss.form, "gcl"),
        "negatives": (loss.negatives, "shared_pool"),
        "symmetric": (loss.symmetric, False),
        "learnable_tau": (loss.learnable_tau, False),
    }
    wrong = [f"{name} = {got!r} (needs {want!r})" for name, (got, want) in needs.items() if got != want]
    if wrong:
        raise ValueError(
            "estimator = 'fastclip' (the moving-average GCL loss over a fixed pool of shared negatives, "
            f"one-sided, at a fixed tau) does not work with {'; '.join(wrong)}"
        )
