"""What the trainer needs from a paired data set: a :class:`PairSource`.

A source holds n training pairs (x_i, y_i). Given indices and a generator it returns the inputs of those pairs;
for augmented views every call draws fresh views, so the same index gives new views each epoch. Pool negatives
y' are the positive side of other pool items (``positives``); the symmetric loss takes their anchor side
(``anchors``). Synthetic truths instead sample negatives from p- directly (``generate_negatives``).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from crl.negatives import Generate

__all__ = ["PairSource"]


class PairSource(Protocol):
    """Paired training data, index-addressable, all randomness from the generator passed in."""

    @property
    def n_pairs(self) -> int:
        """n, the number of training pairs."""
        ...

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """Shape of one anchor input x (e.g. (28, 28))."""
        ...

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """Shape of one positive input y."""
        ...

    @property
    def generate_negatives(self) -> Generate | None:
        """A sampler of y' ~ p- (synthetic truths), or ``None`` (negatives come from the pool)."""
        ...

    def pairs(self, indices: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """Inputs (x, y) of the pairs at ``indices``, each (k, *shape), float32."""
        ...

    def anchors(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """Anchor inputs x of the pool items at ``indices`` (k, *anchor_shape)."""
        ...

    def positives(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """Positive inputs y of the pool items at ``indices`` (k, *positive_shape)."""
        ...
