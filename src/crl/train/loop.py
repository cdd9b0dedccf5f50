"""The training loop, pure: a config, a pair source and generators in; a trained model and per-step metrics out.

No files, no logging, no process-wide state (no thread count, no process group, no global seed): a sweep worker
can train hundreds of small models in one process with :func:`train`, and the :class:`~crl.train.trainer.Trainer`
wraps the same :class:`TrainingLoop` with a run folder, checkpoints, TensorBoard and DDP.

One step: take the next global batch of K*b pair indices (:class:`~crl.train.cursor.DataCursor`), make this
rank's b pairs (fresh augmented views from the "views" generator), embed them, draw negatives with the sampler
of ``[loss] negatives`` (:mod:`crl.negatives`; pool items are embedded by the positive tower), compute the loss
(:class:`crl.train.estimator.StepLoss`: :func:`crl.objectives.contrastive_loss`, or the moving average of
``[loss] estimator = "fastclip"`` over the batch's item ids), and take an AdamW step
with gradient-norm clipping and the warm-up + cosine schedule. Inputs may be tensors or mappings of tensors
(:data:`crl.data.Batch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from crl.data.source import Batch, PairSource, move_batch
from crl.models import DualEncoder
from crl.negatives import Draw, EmbeddedBatch, Sampler, embed_negatives
from crl.train.build import Streams, build_model, build_optimizer, build_sampler, build_schedule
from crl.train.checkpoint import StreamStates, TrainState, load_optimizer_state, optimizer_state
from crl.train.config import TrainConfig
from crl.train.cursor import DataCursor
from crl.train.estimator import StepLoss
from crl.train.false_negatives import false_negative_ids
from crl.train.gradcache import GradCache

__all__ = ["Shard", "StepMetrics", "TrainOutcome", "TrainingLoop", "check_finite_loss", "train"]


@dataclass(frozen=True)
class Shard:
    """This process's part of the global batch: rank r of K takes pairs [r*b, (r+1)*b) of each K*b batch."""

    rank: int = 0
    world_size: int = 1


@dataclass(frozen=True)
class StepMetrics:
    """The figures of one optimiser step t (from 1): this rank's mean loss, the lr and tau it used, the epoch."""

    step: int
    epoch: int
    loss: float
    lr: float
    tau: float


@dataclass(frozen=True)
class TrainOutcome:
    """What :func:`train` returns: the trained model (on the device it trained on) and one row per step."""

    model: DualEncoder
    metrics: tuple[StepMetrics, ...]


def check_finite_loss(loss: float, first_step: int, last_step: int) -> None:
    """Raise ``FloatingPointError`` naming the steps and the fixes when the mean loss of steps
    first_step..last_step is NaN or infinite."""
    if not math.isfinite(loss):
        raise FloatingPointError(
            f"the training loss is {loss} in steps {first_step}..{last_step}; lower optim.lr, "
            "raise loss.tau or set optim.grad_clip"
        )


def _identity(module: nn.Module) -> nn.Module:
    return module


class TrainingLoop:
    """The state of a run in progress (model, AdamW, schedule, cursor, sampler, streams, step) and its step.

    Args:
        config: the validated config (``[data] batch_size``, ``[model]``, ``[loss]``, ``[optim]``).
        source: the training pairs.
        streams: the run's random streams (``Streams.derive(config.run.seed)`` for one process).
        device: where the model trains.
        shard: this rank's slice of the global batch (one process: the whole batch).
        sampler: the negative sampler (default :func:`~crl.train.build.build_sampler` for one process).
        wrap: applied to the model for the forward pass of the batch (the trainer's DDP wrapper).
    """

    def __init__(
        self,
        config: TrainConfig,
        source: PairSource,
        streams: Streams,
        *,
        device: torch.device | None = None,
        shard: Shard | None = None,
        sampler: Sampler | None = None,
        wrap: Callable[[nn.Module], nn.Module] = _identity,
    ) -> None:
        self.config = config
        self.source = source
        self.streams = streams
        self.device = device if device is not None else torch.device("cpu")
        self.shard = shard if shard is not None else Shard()
        self.model = build_model(
            config.model, config.loss, source.anchor_shape, source.positive_shape, streams.init
        ).to(self.device)
        self.network = wrap(self.model)
        self.optimizer = build_optimizer(self.model, config.optim)
        self.schedule = build_schedule(self.optimizer, config.optim)
        global_batch = config.data.batch_size * self.shard.world_size
        self.cursor = DataCursor(source.n_pairs, global_batch, streams.order)
        self.sampler = sampler if sampler is not None else build_sampler(config, source)
        if config.optim.chunk_size and self.shard.world_size > 1:
            raise ValueError(
                "[optim] chunk_size (GradCache) runs in one process; set chunk_size = 0 with DDP"
            )
        self.step_loss = StepLoss(
            config.loss, source.n_pairs, config.optim.total_steps, self.device, self.shard.world_size
        )
        self.step = 0

    @property
    def done(self) -> bool:
        """True once ``optim.total_steps`` steps are taken."""
        return self.step >= self.config.optim.total_steps

    def train_step(self) -> Tensor:
        """One optimiser step on this rank's slice of the next global batch; returns the detached loss."""
        b, rank = self.config.data.batch_size, self.shard.rank
        indices = self.cursor.next_batch()[rank * b : (rank + 1) * b]
        x, y = self.source.pairs(indices, self.streams.views)
        cache = GradCache(self.config.optim.chunk_size) if self.config.optim.chunk_size else None
        bf16 = self.config.run.precision == "bf16"
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bf16):
            if cache is None:
                anchors, positives = self.network(move_batch(x, self.device), move_batch(y, self.device))
            else:
                anchors = cache.embed(self.model.encode_anchors, move_batch(x, self.device))
                positives = cache.embed(self.model.encode_positives, move_batch(y, self.device))
            batch = EmbeddedBatch(anchors, positives, indices=indices)
            drawn = self.sampler.draw(batch, self.streams.negatives)
            ids = false_negative_ids(
                self.source, indices, drawn, symmetric=self.config.loss.symmetric, device=self.device
            )
            negatives = self._embedded_negatives(drawn, cache)
            loss = self.step_loss(batch, negatives, indices, self.model.tau(), ids)
        self.optimizer.zero_grad(set_to_none=True)
        if cache is None:
            loss.backward()
        else:
            cache.backward(loss)
        if self.config.optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.optim.grad_clip)
        self.optimizer.step()
        self.schedule.step()
        self.sampler.update(batch)
        self.step += 1
        return loss.detach()

    def _embedded_negatives(self, drawn: Draw, cache: GradCache | None = None) -> Draw:
        generator = self.streams.negatives
        if drawn.kind == "indices":

            def embed_y(indices: Tensor) -> Tensor:
                inputs = self._on_device(self.source.positives(indices, generator))
                encode = self.model.encode_positives
                return encode(inputs) if cache is None else cache.embed(encode, inputs)

            def embed_x(indices: Tensor) -> Tensor:
                inputs = self._on_device(self.source.anchors(indices, generator))
                return (
                    self.model.encode_anchors(inputs)
                    if cache is None
                    else cache.embed(self.model.encode_anchors, inputs)
                )

            return embed_negatives(drawn, embed_y, embed_x if self.config.loss.symmetric else None)
        if cache is not None and drawn.kind == "samples":
            raise ValueError(
                "[optim] chunk_size (GradCache) embeds pool negatives only; set chunk_size = 0 here"
            )
        return embed_negatives(drawn, lambda samples: self.model.encode_positives(samples.to(self.device)))

    def _on_device(self, batch: Batch) -> Batch:
        return move_batch(batch, self.device)

    def last_lr(self) -> float:
        """The learning rate of the last step (the peak lr times the schedule's factor)."""
        return float(self.schedule.get_last_lr()[0])

    def stream_states(self) -> StreamStates:
        """This rank's generator states (data order, views, negatives)."""
        return StreamStates(
            self.streams.order.get_state(), self.streams.views.get_state(), self.streams.negatives.get_state()
        )

    def state(self, streams: tuple[StreamStates, ...] | None = None) -> TrainState:
        """The run's :class:`TrainState`; ``streams`` are every rank's generator states (default: this one's)."""
        return TrainState(
            step=self.step,
            model=dict(self.model.state_dict()),
            optimizer=optimizer_state(self.optimizer, self.model),
            schedule=self.schedule.state_dict(),
            streams=streams if streams is not None else (self.stream_states(),),
            sampler=self.sampler.state_dict(),
            estimator=self.step_loss.state_dict(),
            cursor=self.cursor.state(),
            config=self.config,
            anchor_shape=tuple(self.source.anchor_shape),
            positive_shape=tuple(self.source.positive_shape),
        )

    def restore(self, state: TrainState) -> None:
        """Continue from ``state`` (this rank's streams are ``state.streams[shard.rank]``).

        Raises:
            ValueError: if the state was written by another number of processes.
        """
        if state.world_size != self.shard.world_size:
            raise ValueError(
                f"the saved state was written by {state.world_size} processes, this run has "
                f"{self.shard.world_size}; resume with the same number of processes"
            )
        self.model.load_state_dict(state.model)
        load_optimizer_state(self.optimizer, self.model, state.optimizer)
        self.schedule.load_state_dict(state.schedule)
        mine = state.streams[self.shard.rank]
        self.streams.order.set_state(mine.order)
        self.streams.views.set_state(mine.views)
        self.streams.negatives.set_state(mine.negatives)
        self.sampler.load_state_dict(state.sampler)
        self.step_loss.load_state_dict(state.estimator)
        self.cursor.restore(state.cursor)
        self.step = state.step


def train(
    config: TrainConfig, source: PairSource, streams: Streams, *, device: torch.device | None = None
) -> TrainOutcome:
    """Train the model of ``config`` on ``source`` for ``optim.total_steps`` steps, in this process.

    Reads no file and writes none, logs nothing and leaves torch's threads, seeds and process group alone; the
    result depends only on the arguments (and the thread count, through floating-point rounding). Losses stay
    on the device until the end, so a step costs no host synchronisation.

    Args:
        config: the validated config (``[run]`` and ``[eval]`` are not read).
        source: the training pairs.
        streams: the random streams, e.g. ``Streams.derive(seed, regime=config.loss.regime)``.
        device: where to train (default CPU).

    Raises:
        FloatingPointError: if a step's loss is NaN or infinite (naming the step).

    Examples:
        >>> outcome = train(config, source, Streams.derive(0))  # doctest: +SKIP
        >>> outcome.metrics[-1].loss  # doctest: +SKIP
    """
    loop = TrainingLoop(config, source, streams, device=device)
    losses, taus, lrs, epochs = [], [], [], []
    while not loop.done:
        losses.append(loop.train_step())
        taus.append(loop.model.tau().detach())
        lrs.append(loop.last_lr())
        epochs.append(loop.cursor.epoch)
    loss_values = torch.stack(losses).tolist()
    tau_values = torch.stack(taus).tolist()
    for step, loss in enumerate(loss_values, start=1):
        check_finite_loss(loss, step, step)
    metrics = tuple(
        StepMetrics(step, epoch, loss, lr, tau)
        for step, (epoch, loss, lr, tau) in enumerate(
            zip(epochs, loss_values, lrs, tau_values, strict=True), 1
        )
    )
    return TrainOutcome(loop.model, metrics)
