"""What training needs from a paired data set: a :class:`PairSource`, and the :data:`Batch` it hands out.

A source holds n training pairs (x_i, y_i). Given indices and a generator it returns the inputs of those pairs;
for augmented views every call draws fresh views, so the same index gives new views each epoch. Pool negatives
y' are the positive side of other pool items (``positives``); the symmetric loss takes their anchor side
(``anchors``). Synthetic truths instead sample negatives from p- directly (``generate_negatives``).

A batch of k inputs is a tensor (k, *shape) (images, vectors) or a mapping of tensors that each have k rows
(text: ``{"input_ids": (k, L), "attention_mask": (k, L)}``). :func:`batch_rows`, :func:`slice_rows` and
:func:`move_batch` treat both alike, so the training loop and :func:`crl.models.embed` need not know which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeAlias

import torch
from torch import Tensor

from crl.data.arrays import GenerateNegatives

__all__ = ["Batch", "PairSource", "batch_rows", "move_batch", "slice_rows"]

Batch: TypeAlias = Tensor | Mapping[str, Tensor]
"""k inputs: one tensor (k, *shape), or named tensors with k rows each (token ids, attention masks)."""


def batch_rows(batch: Batch) -> int:
    """k, the number of inputs in ``batch`` (the first axis of its tensor, or of every tensor of the mapping).

    Raises:
        ValueError: if the tensors of a mapping disagree in k, or the mapping is empty.
    """
    if isinstance(batch, Tensor):
        return batch.shape[0]
    rows = {name: tensor.shape[0] for name, tensor in batch.items()}
    if len(set(rows.values())) != 1:
        raise ValueError(f"a mapping batch needs one row count k for every tensor, got {rows}")
    return next(iter(rows.values()))


def slice_rows(batch: Batch, rows: slice) -> Batch:
    """The inputs at ``rows`` (a slice of the first axis) of a tensor or of every tensor of a mapping."""
    if isinstance(batch, Tensor):
        return batch[rows]
    return {name: tensor[rows] for name, tensor in batch.items()}


def move_batch(batch: Batch, device: torch.device) -> Batch:
    """``batch`` on ``device`` (non-blocking copies; a tensor already there is returned as is)."""
    if isinstance(batch, Tensor):
        return batch.to(device, non_blocking=True)
    return {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}


class PairSource(Protocol):
    """Paired training data, index-addressable, all randomness from the generator passed in."""

    @property
    def n_pairs(self) -> int:
        """n, the number of training pairs."""
        ...

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """Shape of one anchor input x (e.g. (28, 28); (L,) for token sequences of length L)."""
        ...

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """Shape of one positive input y."""
        ...

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """A sampler of y' ~ p- (synthetic truths), or ``None`` (negatives come from the pool)."""
        ...

    def pairs(self, indices: Tensor, generator: torch.Generator) -> tuple[Batch, Batch]:
        """Inputs (x, y) of the pairs at ``indices``: k = len(indices) rows each (float32 for tensors)."""
        ...

    def anchors(self, indices: Tensor, generator: torch.Generator) -> Batch:
        """Anchor inputs x of the pool items at ``indices`` (k rows)."""
        ...

    def positives(self, indices: Tensor, generator: torch.Generator) -> Batch:
        """Positive inputs y of the pool items at ``indices`` (k rows)."""
        ...
