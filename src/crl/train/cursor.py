"""The data order of a run: an explicit per-epoch permutation and the position within it.

No DataLoader and no worker processes: the order is ``torch.randperm(n, generator=order)`` at the start of each
epoch, and a step takes the next global batch of K*b indices; rank r uses the slice [r*b, (r+1)*b). The whole
state (permutation, position, epoch; the generator state is saved by the trainer) fits in a checkpoint, so a
resumed run sees exactly the batches an uninterrupted run would. The last incomplete global batch of an epoch
is dropped, so every step has K*b pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["CursorState", "DataCursor"]


@dataclass(frozen=True)
class CursorState:
    """Where a run stands in its data: the epoch's permutation (empty before the first batch), the position of
    the next global batch in it, and the epoch (from 0)."""

    permutation: Tensor
    position: int
    epoch: int


class DataCursor:
    """Hands out global batches of indices in 0..n-1 in a seeded random order, epoch after epoch.

    Args:
        n_pairs: n, the size of the training set.
        global_batch: K*b indices per step (<= n).
        generator: draws each epoch's permutation (its state is part of the run's state).

    Examples:
        >>> cursor = DataCursor(10, 4, torch.Generator().manual_seed(0))
        >>> sorted(torch.cat([cursor.next_batch(), cursor.next_batch()]).tolist()) == sorted(
        ...     cursor.permutation[:8].tolist())
        True
    """

    def __init__(self, n_pairs: int, global_batch: int, generator: torch.Generator) -> None:
        if global_batch > n_pairs:
            raise ValueError(
                f"the global batch of {global_batch} pairs exceeds the {n_pairs} training pairs; "
                "lower data.batch_size (or the number of processes), or use more data (data.n_train)"
            )
        self.n_pairs = n_pairs
        self.global_batch = global_batch
        self.generator = generator
        self.permutation = torch.empty(0, dtype=torch.int64)
        self.position = 0
        self.epoch = 0

    def next_batch(self) -> Tensor:
        """The next K*b indices; starts a new epoch (a new permutation) when the current one is used up."""
        if self.permutation.numel() == 0 or self.position + self.global_batch > self.n_pairs:
            if self.permutation.numel() > 0:
                self.epoch += 1
            self.permutation = torch.randperm(self.n_pairs, generator=self.generator)
            self.position = 0
        batch = self.permutation[self.position : self.position + self.global_batch]
        self.position += self.global_batch
        return batch

    def state(self) -> CursorState:
        """The current permutation, position and epoch, for a checkpoint."""
        return CursorState(self.permutation.clone(), self.position, self.epoch)

    def restore(self, state: CursorState) -> None:
        """Continue from a saved :meth:`state`."""
        if state.permutation.numel() not in (0, self.n_pairs):
            raise ValueError(
                f"saved permutation has {state.permutation.numel()} entries but the data set has {self.n_pairs} "
                "pairs; the run was made with other data"
            )
        self.permutation = state.permutation.clone()
        self.position = state.position
        self.epoch = state.epoch
