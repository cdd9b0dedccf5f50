"""The estimator of a training step's loss (``[loss] estimator``): the minibatch loss, or FastCLIP's moving average.

``minibatch`` is :func:`crl.train.loss.batch_loss`: the step's loss over its own negatives, with no state.
``fastclip`` is :func:`crl.objectives.moving_average_loss` (SogCLR / FastCLIP, docs/estimators.md): the GCL loss
over a fixed pool of m shared negatives (``[loss] pool_size``), of which each step embeds b = ``n_negatives``; it
keeps one running estimate u_i of the pool mean g_i = (1/m) sum_j exp(Delta_ij / tau) per training item i (the
ids come from the data cursor), so its gradient targets [A]'s L_hat with all m negatives. gamma is a constant or
FastCLIP's cosine schedule read at the optimiser step (the state counts one update per step); u, the seen mask
and the step go into every checkpoint (``TrainState.estimator``), so a resumed run continues bit for bit.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crl.negatives import Draw, EmbeddedBatch
from crl.objectives import (
    IndividualTemperatureState,
    MovingAverageState,
    TemperatureRule,
    cosine_gamma,
    individual_temperature_loss,
    moving_average_loss,
)
from crl.objectives.moving_average import GammaLike
from crl.train.config import LossConfig
from crl.train.false_negatives import FalseNegativeIds
from crl.train.loss import batch_loss

__all__ = ["StepLoss", "gamma_of", "pool_size_of"]


def pool_size_of(config: LossConfig, n_pairs: int, *, generated: bool) -> int:
    """The pool the negatives are drawn from: the first ``[loss] pool_size`` training pairs (0: all n_pairs).

    Raises:
        ValueError: if pool_size exceeds the training pairs, or is set while negatives are generated from p-.
    """
    if config.pool_size == 0:
        return n_pairs
    if generated:
        raise ValueError(
            f"[loss] pool_size = {config.pool_size}: this data draws fresh negatives from p- (a synthetic truth), "
            "not from a pool of training pairs; set pool_size = 0"
        )
    if config.pool_size > n_pairs:
        raise ValueError(
            f"[loss] pool_size = {config.pool_size} exceeds the {n_pairs} training pairs; use at most {n_pairs} "
            "(0: all of them)"
        )
    return config.pool_size


def gamma_of(config: LossConfig, total_steps: int) -> GammaLike:
    """gamma of ``[loss]``: the constant ``gamma``, or ``cosine_gamma(decay, floor=gamma)`` with decay =
    ``gamma_decay_steps`` (0: ``total_steps``), i.e. gamma_t = gamma + (1 - gamma)(1 + cos(pi t / decay)) / 2."""
    if config.gamma_schedule == "constant":
        return config.gamma
    return cosine_gamma(config.gamma_decay_steps or total_steps, config.gamma)


class StepLoss:
    """The loss of one step by ``[loss] estimator``, with the state the estimator keeps between steps.

    Args:
        config: the ``[loss]`` section.
        n_items: N, the number of training pairs (item ids 0..N-1; the size of the fastclip state).
        total_steps: ``optim.total_steps`` (the default decay of the cosine gamma schedule).
        device: where the state lives (the model's device).
        world_size: K processes; fastclip keeps one state per run and needs K = 1.

    Raises:
        ValueError: for fastclip with K > 1.

    Examples:
        >>> step_loss = StepLoss(LossConfig(), n_items=100, total_steps=10)
        >>> step_loss.state_dict()
        {}
    """

    def __init__(
        self,
        config: LossConfig,
        n_items: int,
        total_steps: int,
        device: torch.device | str = "cpu",
        world_size: int = 1,
    ) -> None:
        self.config = config
        self.state: MovingAverageState | None = None
        self.temperatures: IndividualTemperatureState | None = None
        if config.temperature == "per_sample":
            if world_size != 1:
                raise ValueError(
                    f"[loss] temperature = 'per_sample' keeps one tau_i per item in one process, but this run has "
                    f"{world_size} processes; train it in one process or use temperature = 'global'"
                )
            self.temperatures = IndividualTemperatureState(n_items, tau_init=config.tau, device=device)
            self.rule = TemperatureRule(
                tau_min=config.tau_min,
                tau_max=config.tau_max,
                rho=config.tau_rho,
                eta=config.tau_lr,
                beta=config.tau_momentum,
            )
        if config.estimator == "fastclip":
            if world_size != 1:
                raise ValueError(
                    f"[loss] estimator = 'fastclip' keeps one u_i per item in one process, but this run has "
                    f"{world_size} processes; train it in one process or use estimator = 'minibatch'"
                )
            self.state = MovingAverageState(n_items, device=device)
            self.gamma = gamma_of(config, total_steps)

    def __call__(
        self,
        batch: EmbeddedBatch,
        negatives: Draw,
        item_ids: Tensor,
        tau: Tensor,
        false_negatives: FalseNegativeIds | None = None,
    ) -> Tensor:
        """The mean loss of ``batch`` (anchors with training-set ids ``item_ids``) against embedded ``negatives``.

        fastclip updates u_i of the batch's items (one step of the gamma schedule) and returns the moving-average
        loss (value (1/n) sum_i tau log u_i, gradient (1/n) sum_i tau grad g_hat_i / u_i).

        Raises:
            ValueError: for fastclip with negatives that are not embedded shared ones, or with false-negative ids
                (data whose pairs name item ids: fastclip's u_i has no mask).
        """
        config = self.config
        if self.temperatures is not None:
            return self._per_sample(batch, negatives, item_ids, false_negatives)
        if self.state is None:
            return batch_loss(
                batch, negatives, tau=tau, form=config.form, symmetric=config.symmetric, ids=false_negatives
            )
        if negatives.kind != "embeddings" or negatives.regime != "shared" or negatives.y is None:
            raise ValueError(
                f"estimator = 'fastclip' needs embedded shared negatives, got kind {negatives.kind!r} of "
                f"regime {negatives.regime!r}; use [loss] negatives = 'shared_pool'"
            )
        if false_negatives is not None and false_negatives.positive_ids is not None:
            raise ValueError(
                "estimator = 'fastclip' cannot leave false negatives out of the pool means u_i, but this data names "
                "an item id per pair (duplicate texts); use estimator = 'minibatch', which masks them"
            )
        return moving_average_loss(
            batch.anchors,
            batch.positives,
            negatives.y,
            item_ids.to(batch.anchors.device),
            self.state,
            tau=float(tau),
            gamma=self.gamma,
        )

    def _per_sample(
        self,
        batch: EmbeddedBatch,
        negatives: Draw,
        item_ids: Tensor,
        false_negatives: FalseNegativeIds | None,
    ) -> Tensor:
        """iSogCLR's step (``[loss] temperature = 'per_sample'``): in-batch or embedded shared negatives."""
        assert self.temperatures is not None
        if false_negatives is not None and false_negatives.positive_ids is not None:
            raise ValueError(
                "temperature = 'per_sample' has no false-negative mask, but this data names an item id per pair "
                "(duplicate texts); use temperature = 'global'"
            )
        local = negatives.kind == "in_batch" and negatives.y is None
        shared = negatives.kind == "embeddings" and negatives.regime == "shared" and negatives.y is not None
        if not (local or shared):
            raise ValueError(
                f"temperature = 'per_sample' needs in-batch (one process) or embedded shared negatives, got kind "
                f"{negatives.kind!r}; use [loss] negatives = 'in_batch' or 'shared_pool'"
            )
        return individual_temperature_loss(
            batch.anchors,
            batch.positives,
            None if local else negatives.y,
            item_ids.to(batch.anchors.device),
            self.temperatures,
            self.rule,
        )

    def state_dict(self) -> dict[str, Tensor]:
        """The estimator's tensors for a checkpoint: fastclip's ``log_u``, ``seen``, ``step``; per_sample's
        ``tau``, ``log_s``, ``v``, ``seen``, ``step``; {} for minibatch at a global tau."""
        if self.temperatures is not None:
            return self.temperatures.state_dict()
        return {} if self.state is None else self.state.state_dict()

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore :meth:`state_dict` (a checkpoint without estimator tensors restores the minibatch estimator).

        Raises:
            ValueError: if the tensors do not belong to this estimator (or were saved for other data).
        """
        if self.temperatures is not None:
            self.temperatures.load_state_dict(state)
            return
        if self.state is None:
            if state:
                raise ValueError(
                    f"the checkpoint holds estimator state {sorted(state)} but [loss] estimator = 'minibatch'; "
                    "resume with the run's own config"
                )
            return
        self.state.load_state_dict(state)
