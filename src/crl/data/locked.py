"""Locked-feature pairs: frozen features of both sides of n training pairs, and optionally a disjoint pool.

The pair source of ``[data] source = "locked"``: item i < n is training pair i, (x_i, y_i) its anchor and positive
features (computed once by a frozen backbone, :mod:`crl.data.features`); items n..n+P-1 are a pool of P further
items, disjoint from the training pairs, that only serve as negatives (their positive features, and their anchor
features for completeness). Every item has a key (``item_ids``): items with equal keys are the same text (or
image) for the purpose of negatives, so a negative with the anchor's key is left out (the anchor's own item has
its key). The fixed negative samplers (:mod:`crl.negatives.fixed`) draw from ``negative_candidates``: the n
training items, or the P pool items.
"""

from __future__ import annotations

import torch
from torch import Tensor

from crl.data.arrays import GenerateNegatives

__all__ = ["LockedFeaturePairs"]


def rows_of(items: Tensor, indices: Tensor) -> Tensor:
    """``items[indices]``, as a view of ``items`` when ``indices`` is one ascending run a, a + 1, ..., b - 1.

    A fixed negative set's draw at large m names every candidate in order, and copying their features would be
    most of a step's memory traffic; the view holds the same values in the same row layout.
    """
    count = indices.shape[0] if indices.dim() == 1 else 0
    if count and indices.dtype == torch.int64:
        first = int(indices[0])
        inside = first >= 0 and first + count <= items.shape[0]
        if inside and torch.equal(
            indices, torch.arange(first, first + count, dtype=torch.int64, device=indices.device)
        ):
            return items[first : first + count]
    return items[indices]


class LockedFeaturePairs:
    """n pairs of locked features and P pool items (a :class:`crl.data.PairSource` of flat feature vectors).

    Args:
        items_x: (n + P, D_x) anchor features of the n training pairs, then of the P pool items.
        items_y: (n + P, D_y) positive features, in the same order.
        keys: (n + P,) int64 item keys (equal keys: the same text; distinct for distinct items).
        n_pairs: n, the training pairs (the first n items).
        labels: optional (n,) class labels of the training pairs.

    Raises:
        ValueError: on shapes that disagree, non-finite features, or n outside 1..n + P.

    Examples:
        >>> source = LockedFeaturePairs(torch.zeros(5, 3), torch.ones(5, 2), torch.arange(5), n_pairs=3)
        >>> source.n_pairs, source.anchor_shape, source.negative_candidates.tolist()
        (3, (3,), [3, 4])
    """

    def __init__(
        self, items_x: Tensor, items_y: Tensor, keys: Tensor, *, n_pairs: int, labels: Tensor | None = None
    ) -> None:
        total = items_x.shape[0] if items_x.dim() == 2 else -1
        if items_x.dim() != 2 or items_y.dim() != 2 or items_y.shape[0] != total or keys.shape != (total,):
            raise ValueError(
                f"locked features need items_x (N, D_x), items_y (N, D_y) and keys (N,) for the same N items, got "
                f"{tuple(items_x.shape)}, {tuple(items_y.shape)} and {tuple(keys.shape)}"
            )
        if keys.dtype != torch.int64:
            raise ValueError(f"keys must be int64, got {keys.dtype}")
        if not 1 <= n_pairs <= total:
            raise ValueError(f"n_pairs = {n_pairs} must lie in 1..{total} (the items)")
        for name, values in (("items_x", items_x), ("items_y", items_y)):
            if not values.is_floating_point() or not bool(torch.isfinite(values).all()):
                raise ValueError(f"{name} must be finite floating features")
        if labels is not None and labels.shape != (n_pairs,):
            raise ValueError(
                f"labels must have shape ({n_pairs},), one per training pair, got {tuple(labels.shape)}"
            )
        self.items_x = items_x.float()
        self.items_y = items_y.float()
        self.keys = keys
        self.n = n_pairs
        self.labels = labels

    @property
    def n_pairs(self) -> int:
        """n, the training pairs."""
        return self.n

    @property
    def pool_size(self) -> int:
        """P, the items of the disjoint pool (0 without one)."""
        return int(self.items_x.shape[0]) - self.n

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """(D_x,)."""
        return (int(self.items_x.shape[1]),)

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """(D_y,)."""
        return (int(self.items_y.shape[1]),)

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """``None``: negatives are items of the source."""
        return None

    @property
    def item_ids(self) -> Tensor:
        """The (n + P,) item keys, which mask false negatives (:mod:`crl.train.false_negatives`)."""
        return self.keys

    @property
    def negative_candidates(self) -> Tensor:
        """Item indices the fixed negative sets are drawn from: the pool n..n+P-1, or the n training items."""
        first = self.n if self.pool_size > 0 else 0
        return torch.arange(first, int(self.items_x.shape[0]), dtype=torch.int64)

    @property
    def x(self) -> Tensor:
        """(n, D_x) anchor features of the training pairs."""
        return self.items_x[: self.n]

    @property
    def y(self) -> Tensor:
        """(n, D_y) positive features of the training pairs."""
        return self.items_y[: self.n]

    def pairs(self, indices: Tensor, generator: torch.Generator) -> tuple[Tensor, Tensor]:
        """The features (x, y) of the pairs at ``indices`` (no randomness: the views are locked)."""
        return self.items_x[indices], self.items_y[indices]

    def anchors(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """Anchor features of the items at ``indices`` (training pairs or pool items; a view for a run)."""
        return rows_of(self.items_x, indices)

    def positives(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        """Positive features of the items at ``indices`` (training pairs or pool items; a view for a run)."""
        return rows_of(self.items_y, indices)
