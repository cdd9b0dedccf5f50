"""From a config to the objects of a run: model, optimiser, learning-rate schedule, negative sampler, generators.

Shared by the training loop, the trainer and ``crl eval`` (which rebuilds the model of a checkpoint from its saved
config). The model's kinds and :func:`build_model` live in :mod:`crl.train.model_kinds` and are re-exported here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from crl._vocab import Regime
from crl.data.source import PairSource
from crl.negatives import Gathered, Independent, Queue, Sampler, Shared
from crl.negatives.fixed import FixedPool, FixedSets
from crl.negatives.mining import Mined
from crl.train.config import OptimConfig, TrainConfig
from crl.train.data import labelled_inputs
from crl.train.estimator import pool_size_of
from crl.train.model_kinds import MODEL_KINDS, build_model
from crl.train.negative_kinds import NEGATIVES_FACTS, NegativesFacts
from crl.train.streams import derive_generator

__all__ = [
    "MODEL_KINDS",
    "NEGATIVE_KINDS",
    "Streams",
    "WarmupCosine",
    "build_model",
    "build_optimizer",
    "build_sampler",
    "build_schedule",
    "negative_buffer_bytes",
]

SCORE_WORKSPACE_BYTES = 4 * 4 * (1 << 22)
"""Score buffers of the losses: at most 2^22 float32 scores per chunk or tile, four such workspaces (64 MiB)."""


@dataclass(frozen=True)
class Streams:
    """The named random streams of one rank of a run, each a CPU ``torch.Generator``.

    Attributes:
        init: the initial weights.
        order: the data permutation of each epoch (the same on every rank).
        views: the augmented views of the batch (per rank).
        negatives: pool draws and their views (the same on every rank in the shared regime, so shared negatives
            are shared by the global batch; per rank in the independent regime).
    """

    init: torch.Generator
    order: torch.Generator
    views: torch.Generator
    negatives: torch.Generator

    @classmethod
    def derive(cls, seed: int, *, rank: int = 0, regime: Regime = "shared") -> Streams:
        """The streams of ``rank`` from :func:`derive_generator` (seed, stream name, rank)."""
        negatives_rank = rank if regime == "independent" else 0
        return cls(
            init=derive_generator(seed, "init"),
            order=derive_generator(seed, "order"),
            views=derive_generator(seed, "views", rank),
            negatives=derive_generator(seed, "negatives", negatives_rank),
        )


def negative_buffer_bytes(
    config: TrainConfig, positive_shape: tuple[int, ...], candidates: int | None = None
) -> int:
    """Bytes of crl's own per-step negative and score buffers, checked against the machine before training.

    ``4 R (P + S D) + 64 MiB``: R rows of negatives per step (m for shared_pool, queue and fixed_pool, n m for
    independent_pool with n = batch_size, min(C, n m) for fixed_sets with C = ``candidates``, the items its sets
    come from, 0 for in_batch), P numbers per positive input (0 for the queue, which stores embeddings only),
    D = embedding_dim, S = 2 when symmetric (both towers embed the pool) else 1, 4 bytes per float32 number, and
    64 MiB of score chunks and tiles (:data:`SCORE_WORKSPACE_BYTES`). The encoders' activations on the negatives
    come on top, so this is a lower bound of what a step needs.
    """
    rows, inputs, sides = _buffer_terms(config, positive_shape, candidates)
    return 4 * rows * (inputs + sides * config.model.embedding_dim) + SCORE_WORKSPACE_BYTES


def _buffer_terms(
    config: TrainConfig, positive_shape: tuple[int, ...], candidates: int | None = None
) -> tuple[int, int, int]:
    """(R, P, S) of :func:`negative_buffer_bytes`."""
    loss = config.loss
    facts = NEGATIVE_KINDS[loss.negatives].facts
    rows = (config.data.batch_size if facts.per_anchor else 1) * loss.n_negatives
    if facts.fixed and facts.per_anchor and candidates is not None:
        rows = min(rows, candidates)
    inputs = math.prod(positive_shape) if facts.holds_inputs else 0
    return rows, inputs, 2 if loss.symmetric else 1


def _machine_memory_bytes() -> int:
    """Physical memory of this machine (``SC_PHYS_PAGES * SC_PAGE_SIZE``)."""
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_negative_memory(
    config: TrainConfig, positive_shape: tuple[int, ...], candidates: int | None = None
) -> None:
    """Refuse a config whose :func:`negative_buffer_bytes` exceed the machine's physical memory.

    Raises:
        ValueError: naming ``[loss] n_negatives``, the formula, its value and the memory available.
    """
    needed = negative_buffer_bytes(config, positive_shape, candidates)
    available = _machine_memory_bytes()
    if needed > available:
        rows, inputs, sides = _buffer_terms(config, positive_shape, candidates)
        raise ValueError(
            f"[loss] n_negatives = {config.loss.n_negatives} with negatives = '{config.loss.negatives}' needs "
            f"{needed / 1e9:.3g} GB for crl's negative and score buffers alone (4 R (P + S D) + 64 MiB with "
            f"R = {rows} rows of negatives per step, P = {inputs} numbers per input, D = embedding_dim = "
            f"{config.model.embedding_dim}, S = {sides}), more than this machine's {available / 1e9:.3g} GB of "
            "memory; lower n_negatives"
        )


def build_sampler(config: TrainConfig, source: PairSource, *, distributed: bool = False) -> Sampler:
    """The negative sampler of ``[loss] negatives`` (in-batch becomes :class:`Gathered` with K > 1 ranks).

    Pool samplers draw indices into the source's first ``[loss] pool_size`` pairs (0: all n), or samples y' ~ p-
    when the source generates them. The fixed kinds choose their sets once, by the keyed hash of ``[run] seed``,
    among the source's ``negative_candidates`` (a locked source's training items or disjoint pool; else its n
    pairs), leaving out the items that share the anchor's key (the source's ``item_ids``; else its own index).

    Raises:
        ValueError: when crl's own negative and score buffers cannot fit in memory
            (:func:`check_negative_memory`), before anything is allocated.
    """
    check_negative_memory(config, source.positive_shape, len(_fixed_candidates(source)))
    return NEGATIVE_KINDS[config.loss.negatives].sampler(config, source, distributed)


def build_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.AdamW:
    """AdamW with decoupled weight decay on weight matrices and kernels only (not biases, not tau)."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [
        {"params": decay, "weight_decay": config.weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(config.beta1, config.beta2))


@dataclass
class WarmupCosine:
    """Learning-rate factor at step t (t = 0 for the first optimiser step).

    ``f(t) = (t + 1) / W`` for t < W (linear warm-up), then
    ``f(t) = r + (1 - r) (1 + cos(pi min(1, (t - W) / max(1, T - W)))) / 2`` (cosine decay to r at t = T),
    with W = warmup_steps, T = total_steps, r = min_lr_ratio.
    """

    warmup_steps: int
    total_steps: int
    min_lr_ratio: float

    def __call__(self, step: int) -> float:
        """The factor f(step) that multiplies the peak learning rate."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        return self.min_lr_ratio + (1.0 - self.min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def build_schedule(
    optimizer: torch.optim.Optimizer, config: OptimConfig
) -> torch.optim.lr_scheduler.LambdaLR:
    """Warm-up + cosine (:class:`WarmupCosine`) as a LambdaLR, whose state_dict is JSON-serialisable."""
    factor = WarmupCosine(config.warmup_steps, config.total_steps, config.min_lr_ratio)
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _in_batch(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
    return Gathered() if distributed else Shared.in_batch()


def _queue(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
    loss = config.loss
    return Queue(
        loss.n_negatives, config.model.embedding_dim, two_sided=loss.symmetric, distributed=distributed
    )


def _pool(config: TrainConfig, source: PairSource) -> int:
    """``[loss] pool_size`` checked against the source (:func:`pool_size_of`): the pool of the pool kinds."""
    return pool_size_of(config.loss, source.n_pairs, generated=source.generate_negatives is not None)


def _shared_pool(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
    pool, generate, m = _pool(config, source), source.generate_negatives, config.loss.n_negatives
    return Shared.from_generator(generate, m) if generate is not None else Shared.from_pool(pool, m)


def _independent_pool(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
    pool, generate, m = _pool(config, source), source.generate_negatives, config.loss.n_negatives
    return Independent.from_generator(generate, m) if generate is not None else Independent.from_pool(pool, m)


def _mined_sampler(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
    """``negatives = "mined"``: hard negatives from an index of the pool (:class:`crl.negatives.mining.Mined`),
    excluding the positive's class when the data have labels."""
    _pool(config, source)
    if source.generate_negatives is not None:
        raise ValueError(
            "[loss] negatives = 'mined' needs a pool of training pairs to index; synthetic truths draw "
            "negatives from p- (use independent_pool)"
        )
    labelled = labelled_inputs(config.data, "train")
    labels = labelled.labels if labelled is not None and len(labelled.labels) == source.n_pairs else None
    loss = config.loss
    return Mined(
        source.n_pairs,
        config.model.embedding_dim,
        loss.n_negatives,
        window=(loss.mine_window[0], loss.mine_window[1]),
        margin=loss.mine_margin,
        refresh_every=loss.mine_refresh_every,
        labels=labels,
    )


def _fixed_candidates(source: PairSource) -> Tensor:
    """The item indices fixed negatives come from: the source's ``negative_candidates``, else its n pairs."""
    candidates = getattr(source, "negative_candidates", None)
    return candidates if isinstance(candidates, Tensor) else torch.arange(source.n_pairs, dtype=torch.int64)


def _fixed_keys(source: PairSource, candidates: Tensor) -> Tensor:
    """A key per item index: the source's ``item_ids`` (identical texts share one), else the index itself."""
    keys = getattr(source, "item_ids", None)
    if isinstance(keys, Tensor):
        return keys.to(torch.int64)
    return torch.arange(max(source.n_pairs, int(candidates.max()) + 1), dtype=torch.int64)


def _fixed(kind: type[FixedPool] | type[FixedSets]) -> SamplerBuilder:
    """The builder of a fixed kind: m = ``[loss] n_negatives`` of the source's candidates, hashed with run.seed."""

    def build(config: TrainConfig, source: PairSource, distributed: bool) -> Sampler:
        if source.generate_negatives is not None:
            raise ValueError(
                f"[loss] negatives = '{config.loss.negatives}' draws its fixed sets from the source's items, but this "
                "data draws fresh negatives from p- (a synthetic truth); use shared_pool or independent_pool"
            )
        candidates = _fixed_candidates(source)
        return kind(config.loss.n_negatives, candidates, _fixed_keys(source, candidates), config.run.seed)

    return build


SamplerBuilder = Callable[[TrainConfig, PairSource, bool], Sampler]
"""``builder(config, source, distributed)``: the :class:`crl.negatives.Sampler` of one ``[loss] negatives`` kind."""


@dataclass(frozen=True)
class NegativeKind:
    """What crl does with one ``[loss] negatives`` kind; :data:`NEGATIVE_KINDS` holds one per kind.

    Attributes:
        sampler: builds the kind's sampler.
        facts: what the kind is (:data:`crl.train.negative_kinds.NEGATIVES_FACTS`).
    """

    sampler: SamplerBuilder
    facts: NegativesFacts


def _kinds(samplers: dict[str, SamplerBuilder]) -> dict[str, NegativeKind]:
    """Each kind's sampler beside its facts."""
    return {name: NegativeKind(sampler, NEGATIVES_FACTS[name]) for name, sampler in samplers.items()}


NEGATIVE_KINDS: dict[str, NegativeKind] = _kinds(
    {
        "in_batch": _in_batch,
        "shared_pool": _shared_pool,
        "independent_pool": _independent_pool,
        "queue": _queue,
        "mined": _mined_sampler,
        "fixed_pool": _fixed(FixedPool),
        "fixed_sets": _fixed(FixedSets),
    }
)
"""The negative samplers by ``[loss] negatives``: a new kind is its name and facts in
:mod:`crl.train.negative_kinds` and one entry here."""
