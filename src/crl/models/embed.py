"""Embedding many inputs with a trained encoder: :func:`embed`, in batches, without gradients."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from crl.data.source import Batch, batch_rows, move_batch, slice_rows

__all__ = ["embed"]


@torch.no_grad()
def embed(
    encode: Callable[[Batch], Tensor], inputs: Batch, *, batch_size: int, device: torch.device
) -> Tensor:
    """phi(x_i) for every input i, computed ``batch_size`` inputs at a time; float32 on the CPU, (N, d).

    Args:
        encode: an encoder, e.g. ``model.encode_anchors`` (f) or ``model.encode_positives`` (g).
        inputs: N inputs, a tensor (N, ...) or a mapping of tensors with N rows (token ids, attention masks).
        batch_size: inputs per forward pass (>= 1).
        device: where ``encode`` runs; each slice of inputs is moved there.

    Raises:
        ValueError: if ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size = {batch_size} must be >= 1 (inputs per forward pass)")
    total = batch_rows(inputs)
    parts = [
        encode(move_batch(slice_rows(inputs, slice(start, start + batch_size)), device)).float().cpu()
        for start in range(0, total, batch_size)
    ]
    return torch.cat(parts)
