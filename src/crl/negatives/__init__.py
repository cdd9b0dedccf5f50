"""How negatives y' are drawn: the two regimes of [A] and their practical sources.

docs/theory.md, section 1: in **SCRL** every anchor x_i gets its own m independent negatives y'_{i1..im}; in
**SSCRL** one set y'_1..y'_m is shared by all anchors of the batch. The number of negatives m is a
parameter of its own, independent of the batch size n, in both regimes.

Samplers (``sampler.draw(batch, rng) -> Draw``):

- :class:`Shared`: SSCRL. ``Shared.in_batch()``: the other positives of the batch (CLIP; m = n - 1);
  ``Shared.from_pool(pool_size, m)``: one draw of m pool indices shared by the batch;
  ``Shared.from_generator(generate, m)``: m fresh samples y' ~ p- from a generator (synthetic truths).
- :class:`Independent`: SCRL. ``Independent.from_pool(pool_size, m)``: an (n, m) array of pool indices;
  ``Independent.from_generator(generate, m)``: (n, m) fresh samples.
- :class:`Queue`: SSCRL with a memory of the m most recent positive embeddings (MoCo); its state goes into
  checkpoints (``state_dict``).
- :class:`Gathered`: SSCRL over the global batch of all ranks: the embeddings of every rank are all-gathered
  **with gradient** (:func:`all_gather_with_grad`), so each anchor sees the K*n - 1 other positives.

Pool draws are i.i.d. uniform over the pool, i.e. from the empirical marginal of y (the p- of docs/theory.md;
a draw may hit the anchor's own positive, as an i.i.d. draw from p- can). Indices and samples are not yet
embeddings: the caller embeds them with the positive tower g (and, for the symmetric loss, the anchor side
with f).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
from torch import Tensor

from crl._gather import all_gather, all_gather_with_grad
from crl._validate import check_count
from crl._vocab import Regime

__all__ = [
    "Draw",
    "DrawKind",
    "EmbeddedBatch",
    "Gathered",
    "Independent",
    "Negatives",
    "Queue",
    "Regime",
    "Sampler",
    "Shared",
    "all_gather_with_grad",
    "embed_negatives",
]

DrawKind = Literal["in_batch", "embeddings", "indices", "samples"]
Negatives = Tensor | tuple[Tensor, Tensor] | None
"""The ``negatives`` argument of the losses (:func:`crl.objectives.contrastive_loss`): None (in batch), (m, d)
shared, (n, m, d) independent, or a pair (negatives_y, negatives_x) for the symmetric loss."""
Generate = Callable[[tuple[int, ...], torch.Generator], Tensor]
"""``generate(shape, rng)`` returns samples y' ~ p- of shape (*shape, *sample_shape)."""


@dataclass(frozen=True)
class EmbeddedBatch:
    """One batch of embedded pairs: anchors f(x_i) and positives g(y_i), each (n, d); ``indices`` (n,), when
    known, are the pairs' pool indices (the mined-negatives sampler needs them)."""

    anchors: Tensor
    positives: Tensor
    indices: Tensor | None = None

    @property
    def n_anchors(self) -> int:
        """n, the number of pairs in the batch."""
        return int(self.anchors.shape[0])


@dataclass(frozen=True)
class Draw:
    """The negatives a sampler drew for one step: their regime and what holds them (indices and samples until
    :func:`embed_negatives` embeds them; the step's loss then takes them as :data:`Negatives`).

    Attributes:
        regime: "shared" (SSCRL: one set for the batch) or "independent" (SCRL: m per anchor).
        kind: what ``y`` (and ``x``) hold:
            "in_batch": the positives of the batch are the candidates (y'_j = y_j, j != i). ``y``/``x`` are
            ``None`` for the local batch, or the gathered global positives/anchors (K*n, d) with this process's
            pairs at rows ``batch_offset .. batch_offset + n``;
            "embeddings": ``y`` holds g(y'_j), (m, d); ``x`` holds f(x'_j), (m, d), for the symmetric
            direction (or ``None``);
            "indices": ``y`` holds pool indices, (m,) shared or (n, m) independent; the same rows of the pool's
            anchors give the symmetric side;
            "samples": ``y`` holds raw samples y' of shape (m, ...) or (n, m, ...).
        x: see ``kind``.
        batch_offset: row of this process's first pair in the gathered batch ("in_batch" only).
        mask: fixed negative sets over shared candidates (:mod:`crl.negatives.fixed`): ``y`` holds M candidates
            (indices (M,), then embeddings (M, d)) and ``mask`` (n, M) bool says which are anchor i's negatives
            (its set S_i, exclusions already applied); the loss is then
            :func:`crl.objectives.masked_contrastive_loss`, one-sided. ``None`` otherwise.
    """

    regime: Regime
    kind: DrawKind
    y: Tensor | None = None
    x: Tensor | None = None
    batch_offset: int = 0
    mask: Tensor | None = None

    @property
    def n_negatives(self) -> int | None:
        """m, when it is known without the batch (``None`` for in-batch negatives, where m = n - 1, and for
        masked sets, whose sizes m_i are the mask's row sums)."""
        if self.kind == "in_batch" or self.y is None or self.mask is not None:
            return None
        return int(self.y.shape[0] if self.regime == "shared" else self.y.shape[1])


class Sampler(ABC):
    """A rule that draws the negatives of a step: ``draw(batch, rng) -> Draw``.

    ``update(batch)`` is called after the optimiser step (a queue enqueues there); ``state_dict`` /
    ``load_state_dict`` carry the state a checkpoint must keep (tensors only).
    """

    regime: Regime

    @abstractmethod
    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """Draw the negatives for ``batch`` using only ``rng`` for randomness."""

    def update(self, batch: EmbeddedBatch) -> None:  # noqa: B027 (stateless samplers keep nothing)
        """Record the batch after the step; stateless samplers ignore it."""

    def state_dict(self) -> dict[str, Tensor]:
        """Tensors that a checkpoint must save to resume this sampler exactly."""
        return {}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore what :meth:`state_dict` returned."""
        if state:
            raise ValueError(f"{type(self).__name__} keeps no state, got keys {sorted(state)}")


class _Source:
    """Where drawn negatives come from: a pool of ``pool_size`` items, or a generator of samples y' ~ p-."""

    def __init__(self, pool_size: int | None, generate: Generate | None) -> None:
        if (pool_size is None) == (generate is None):
            raise ValueError("give exactly one of pool_size and generate (the source of the negatives)")
        if pool_size is not None:
            check_count("pool_size", pool_size, 1)
        self.pool_size = pool_size
        self.generate = generate

    def draw(self, regime: Regime, shape: tuple[int, ...], rng: torch.Generator) -> Draw:
        """I.i.d. uniform pool indices of ``shape``, or ``generate(shape, rng)``."""
        if self.pool_size is not None:
            indices = torch.randint(self.pool_size, shape, generator=rng, device=rng.device)
            return Draw(regime, "indices", y=indices)
        assert self.generate is not None
        return Draw(regime, "samples", y=self.generate(shape, rng))


class Shared(Sampler):
    """SSCRL negatives: one set y'_1..y'_m for the whole batch.

    Use the constructors: :meth:`in_batch` (the other positives of the batch), :meth:`from_pool` (m i.i.d.
    uniform pool indices per step) or :meth:`from_generator` (m samples y' ~ p-).

    Args:
        n_negatives: m; ``None`` for in-batch negatives.
        pool_size: draw indices into a pool of this many items.
        generate: draw samples ``generate((m,), rng)``.

    Examples:
        >>> rng = torch.Generator().manual_seed(0)
        >>> batch = EmbeddedBatch(torch.zeros(4, 2), torch.zeros(4, 2))
        >>> Shared.from_pool(100, 8).draw(batch, rng).y.shape
        torch.Size([8])
    """

    regime: Regime = "shared"

    def __init__(
        self,
        n_negatives: int | None = None,
        *,
        pool_size: int | None = None,
        generate: Generate | None = None,
    ) -> None:
        self.n_negatives = n_negatives
        self.source: _Source | None = None
        if n_negatives is None:
            if pool_size is not None or generate is not None:
                raise ValueError(
                    "in-batch negatives take no pool_size or generate; give n_negatives for a draw"
                )
        else:
            check_count("n_negatives", n_negatives, 1)
            self.source = _Source(pool_size, generate)

    @classmethod
    def in_batch(cls) -> Shared:
        """The other positives of the batch are the negatives (m = n - 1)."""
        return cls()

    @classmethod
    def from_pool(cls, pool_size: int, n_negatives: int) -> Shared:
        """m i.i.d. uniform indices into a pool of ``pool_size`` items, shared by the batch."""
        return cls(n_negatives, pool_size=pool_size)

    @classmethod
    def from_generator(cls, generate: Generate, n_negatives: int) -> Shared:
        """m samples ``generate((m,), rng)``, shared by the batch."""
        return cls(n_negatives, generate=generate)

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """Indices (m,), samples (m, ...), or the in-batch marker."""
        if self.source is None or self.n_negatives is None:
            return Draw("shared", "in_batch")
        return self.source.draw("shared", (self.n_negatives,), rng)


class Independent(Sampler):
    """SCRL negatives: anchor i gets its own m i.i.d. negatives y'_{i1..im}; m does not depend on n.

    Args:
        n_negatives: m, per anchor.
        pool_size: draw indices into a pool of this many items.
        generate: draw samples ``generate((n, m), rng)``.

    Examples:
        >>> rng = torch.Generator().manual_seed(0)
        >>> batch = EmbeddedBatch(torch.zeros(4, 2), torch.zeros(4, 2))
        >>> Independent.from_pool(100, 8).draw(batch, rng).y.shape
        torch.Size([4, 8])
    """

    regime: Regime = "independent"

    def __init__(
        self, n_negatives: int, *, pool_size: int | None = None, generate: Generate | None = None
    ) -> None:
        check_count("n_negatives", n_negatives, 1)
        self.n_negatives = n_negatives
        self.source = _Source(pool_size, generate)

    @classmethod
    def from_pool(cls, pool_size: int, n_negatives: int) -> Independent:
        """An (n, m) array of i.i.d. uniform indices into a pool of ``pool_size`` items."""
        return cls(n_negatives, pool_size=pool_size)

    @classmethod
    def from_generator(cls, generate: Generate, n_negatives: int) -> Independent:
        """(n, m) samples ``generate((n, m), rng)``."""
        return cls(n_negatives, generate=generate)

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """Indices (n, m) or samples (n, m, ...)."""
        return self.source.draw("independent", (batch.n_anchors, self.n_negatives), rng)


class Queue(Sampler):
    """SSCRL negatives from a first-in-first-out memory of the m most recent positive embeddings.

    ``draw`` returns the filled part of the memory (detached; m grows to ``size`` over the first steps; with
    an empty memory the first step falls back to in-batch negatives). ``update`` enqueues the step's
    positives g(y_i) (and anchors f(x_i) when ``two_sided``, for the symmetric loss), all-gathered over
    ranks when ``distributed`` so that every rank keeps the same memory.

    Args:
        size: m, the capacity of the memory.
        dim: embedding dimension d.
        two_sided: also remember anchors, giving x' negatives for the symmetric direction.
        distributed: enqueue the global batch of all ranks (requires an initialised process group).
    """

    regime: Regime = "shared"

    def __init__(self, size: int, dim: int, *, two_sided: bool = False, distributed: bool = False) -> None:
        check_count("n_negatives", size, 1)
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive integer, got {dim!r}")
        self.size = size
        self.dim = dim
        self.two_sided = two_sided
        self.distributed = distributed
        self.memory_y = torch.zeros(size, dim)
        self.memory_x = torch.zeros(size, dim) if two_sided else None
        self.pointer = 0
        self.filled = 0

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """The stored embeddings, (filled, d) each; in-batch negatives while the memory is empty."""
        if self.filled == 0:
            return Draw("shared", "in_batch")
        device = batch.positives.device
        y = self.memory_y[: self.filled].to(device)
        x = self.memory_x[: self.filled].to(device) if self.memory_x is not None else None
        return Draw("shared", "embeddings", y=y, x=x)

    def update(self, batch: EmbeddedBatch) -> None:
        """Enqueue the batch's positives (and anchors), detached, overwriting the oldest entries."""
        positives = batch.positives.detach()
        anchors = batch.anchors.detach()
        if self.distributed:
            positives = all_gather(positives)
            anchors = all_gather(anchors)
        self.memory_y = self.memory_y.to(positives.device)
        self._write(self.memory_y, positives)
        if self.memory_x is not None:
            self.memory_x = self.memory_x.to(anchors.device)
            self._write(self.memory_x, anchors)
        count = min(int(positives.shape[0]), self.size)
        self.pointer = (self.pointer + count) % self.size
        self.filled = min(self.filled + count, self.size)

    def _write(self, memory: Tensor, rows: Tensor) -> None:
        rows = rows[-self.size :]
        slots = (self.pointer + torch.arange(rows.shape[0], device=memory.device)) % self.size
        memory[slots] = rows.to(memory.dtype)

    def state_dict(self) -> dict[str, Tensor]:
        """The memory, the write pointer and the fill count, as tensors."""
        state = {
            "memory_y": self.memory_y.detach().cpu().clone(),
            "pointer": torch.tensor(self.pointer, dtype=torch.int64),
            "filled": torch.tensor(self.filled, dtype=torch.int64),
        }
        if self.memory_x is not None:
            state["memory_x"] = self.memory_x.detach().cpu().clone()
        return state

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore the memory written by :meth:`state_dict`; the shapes must match (size, dim)."""
        expected = {"memory_y", "pointer", "filled"} | ({"memory_x"} if self.two_sided else set())
        if set(state) != expected:
            raise ValueError(f"queue state must have keys {sorted(expected)}, got {sorted(state)}")
        if tuple(state["memory_y"].shape) != (self.size, self.dim):
            raise ValueError(
                f"queue state has memory of shape {tuple(state['memory_y'].shape)}, "
                f"this queue has (size, dim) = {(self.size, self.dim)}"
            )
        self.memory_y = state["memory_y"].clone()
        if self.two_sided:
            self.memory_x = state["memory_x"].clone()
        self.pointer = int(state["pointer"])
        self.filled = int(state["filled"])


class Gathered(Sampler):
    """SSCRL in-batch negatives over the global batch of all K ranks, with gradient.

    ``draw`` all-gathers the anchors and positives of every rank (:func:`all_gather_with_grad`) and returns
    them as in-batch candidates with this rank's offset r*n: anchor i of rank r is scored against all K*n
    positives, its own at row r*n + i, so m = K*n - 1, exactly as one process with batch K*n.
    """

    regime: Regime = "shared"

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """In-batch negatives over the gathered global batch."""
        if not (dist.is_available() and dist.is_initialized()):
            return Draw("shared", "in_batch")
        gathered_y = all_gather_with_grad(batch.positives)
        gathered_x = all_gather_with_grad(batch.anchors)
        offset = dist.get_rank() * batch.n_anchors
        return Draw("shared", "in_batch", y=gathered_y, x=gathered_x, batch_offset=offset)


def embed_negatives(
    drawn: Draw,
    embed_y: Callable[[Tensor], Tensor],
    embed_x: Callable[[Tensor], Tensor] | None = None,
) -> Draw:
    """Turn drawn indices or samples into embeddings; in-batch and embedded negatives pass through.

    The leading (m,) or (n, m) axes are flattened, ``embed_y`` (the positive tower g applied to pool items or
    samples) maps the flat batch to (n*m, d) embeddings, and the axes are restored: (m, d) or (n, m, d). In the
    shared regime ``embed_x`` (the anchor tower f on the same pool rows) gives the x' negatives of the symmetric
    direction. Masked sets (``drawn.mask``) embed their M candidates once, (M, d), and keep the mask.

    Args:
        drawn: the output of a sampler's ``draw``.
        embed_y: flat indices (k,) or samples (k, ...) -> embeddings (k, d).
        embed_x: the same for the anchor side, or ``None``.
    """
    if drawn.kind in ("in_batch", "embeddings"):
        return drawn
    assert drawn.y is not None
    if drawn.mask is not None:
        return Draw(drawn.regime, "embeddings", y=embed_y(drawn.y), mask=drawn.mask)
    lead = 1 if drawn.regime == "shared" else 2
    shape = tuple(drawn.y.shape[:lead])
    flat = drawn.y.reshape(-1, *drawn.y.shape[lead:])
    y = embed_y(flat).reshape(*shape, -1)
    x = embed_x(flat).reshape(*shape, -1) if embed_x is not None and drawn.regime == "shared" else None
    return Draw(drawn.regime, "embeddings", y=y, x=x)
