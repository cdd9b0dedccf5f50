"""Per-anchor losses computed over chunks of anchors, each chunk recomputed in the backward pass.

A loss that is a mean over anchors of a per-anchor value needs, for each chunk of anchors, only that chunk's
scores. Wrapping each chunk in activation checkpointing keeps the autograd graph to the chunk's inputs, so extra
memory is O(chunk x m) instead of O(n x m), at the price of one recomputation of the chunk's scores.
"""

from collections.abc import Callable

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

DEFAULT_CHUNK_ELEMENTS = 1 << 22


def chunk_rows(n_rows: int, row_cost: int, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> int:
    """Rows per chunk so that one chunk holds about ``chunk_elements`` scores (at least one row)."""
    return max(1, min(n_rows, chunk_elements // max(1, row_cost)))


def per_anchor_in_chunks(
    fn: Callable[..., Tensor], row_tensors: tuple[Tensor, ...], rows_per_chunk: int
) -> Tensor:
    """Concatenate ``fn(*row_chunk, row_offset)`` over chunks of the leading dimension of ``row_tensors``.

    ``fn`` returns one value per row of its chunk; tensors it closes over (tau, shared negatives) are fine. With
    gradients enabled and more than one chunk, each chunk runs under non-reentrant ``torch.utils.checkpoint``, so
    only the chunk's inputs stay alive between the forward and the backward pass.
    """
    n = row_tensors[0].shape[0]
    recompute = torch.is_grad_enabled() and rows_per_chunk < n
    pieces = []
    for start in range(0, n, rows_per_chunk):
        chunk = tuple(t[start : start + rows_per_chunk] for t in row_tensors)
        if recompute:
            pieces.append(checkpoint(fn, *chunk, start, use_reentrant=False))
        else:
            pieces.append(fn(*chunk, start))
    return torch.cat(pieces)
