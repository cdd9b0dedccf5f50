"""GradCache: a contrastive step whose memory is set by a chunk of inputs, not by the batch (Gao et al. 2021).

The loss L(e_1, ..., e_N) of a batch depends on the encoder's parameters theta only through the N embeddings
e_k = phi_theta(t_k). By the chain rule dL/dtheta = sum_k (dL/de_k)^T de_k/dtheta, so a step can be taken in three
passes, each holding the activations of at most ``chunk_size`` inputs:

1. :meth:`GradCache.embed`: e_k for every input, in chunks, without an autograd graph (the random state of each
   chunk, e.g. dropout's, and the autocast mixed-precision setting are remembered);
2. the loss is computed exactly on leaf copies of the embeddings (crl's own :func:`crl.objectives.contrastive_loss`,
   tiled for large n and m), and ``backward`` gives g_k = dL/de_k, and the gradients of anything the loss uses
   directly (the learnable temperature tau);
3. :meth:`GradCache.backward`: each chunk is embedded again, with its graph, the same random state and autocast, and
   backpropagated with the vector g_k, adding its share of dL/dtheta to ``.grad``.

The parameter gradients equal those of the plain step (one graph over the whole batch) up to floating-point
rounding; the price is a second forward pass of every input.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import Integer, check
from crl.data.source import Batch, batch_rows, slice_rows

__all__ = ["GradCache", "check_chunk_size"]

Encode = Callable[[Batch], Tensor]


def check_chunk_size(chunk_size: int) -> int:
    """``chunk_size`` checked to be an integer >= 1."""
    return check("chunk_size", chunk_size, Integer(1, example=" (inputs per forward pass)"))


@dataclass
class _Cached:
    """One embedded batch: how to embed it again, its leaf embeddings, and each chunk's random state."""

    encode: Encode
    inputs: Batch
    leaf: Tensor
    rng_states: list[tuple[Tensor, list[Tensor]]]
    autocast: tuple[str, torch.dtype, bool]


def _rng_state(device: torch.device) -> tuple[Tensor, list[Tensor]]:
    """The CPU generator's state and, on CUDA, the device generators' states."""
    cuda = torch.cuda.get_rng_state_all() if device.type == "cuda" else []
    return torch.get_rng_state(), cuda


def _autocast_state(device: torch.device) -> tuple[str, torch.dtype, bool]:
    """(device type, dtype, enabled) of autocast where ``embed`` ran, so the recomputation runs under the same."""
    return device.type, torch.get_autocast_dtype(device.type), torch.is_autocast_enabled(device.type)


def _set_rng_state(state: tuple[Tensor, list[Tensor]]) -> None:
    torch.set_rng_state(state[0])
    if state[1]:
        torch.cuda.set_rng_state_all(state[1])


class GradCache:
    """The three passes of a GradCache step (module docstring) for any number of embedded batches.

    Args:
        chunk_size: inputs per forward pass (>= 1); peak activation memory is that of one chunk.

    Examples:
        >>> cache = GradCache(chunk_size=32)  # doctest: +SKIP
        >>> a, p = cache.embed(model.encode_anchors, x), cache.embed(model.encode_positives, y)  # doctest: +SKIP
        >>> loss = contrastive_loss(a, p, tau=model.tau())  # doctest: +SKIP
        >>> cache.backward(loss)  # doctest: +SKIP
    """

    def __init__(self, chunk_size: int) -> None:
        self.chunk_size = check_chunk_size(chunk_size)
        self._cached: list[_Cached] = []

    def embed(self, encode: Encode, inputs: Batch) -> Tensor:
        """e = encode(inputs) computed chunk by chunk without a graph, returned as a leaf that requires grad.

        Raises:
            ValueError: for a batch of no inputs.
        """
        total = batch_rows(inputs)
        if total == 0:
            raise ValueError("GradCache.embed got a batch of 0 inputs; pass at least one")
        parts, states = [], []
        with torch.no_grad():
            for start in range(0, total, self.chunk_size):
                chunk = slice_rows(inputs, slice(start, start + self.chunk_size))
                first = chunk if isinstance(chunk, Tensor) else next(iter(chunk.values()))
                states.append(_rng_state(first.device))
                parts.append(encode(chunk))
        leaf = torch.cat(parts).requires_grad_(True)
        self._cached.append(_Cached(encode, inputs, leaf, states, _autocast_state(first.device)))
        return leaf

    def backward(self, loss: Tensor) -> None:
        """Backpropagate ``loss`` (a scalar of the embeddings from :meth:`embed`) into the encoders' ``.grad``.

        Gradients accumulate, as ``loss.backward()`` would; the cache is emptied for the next step.

        Raises:
            ValueError: if nothing was embedded, or the loss is not a scalar.
        """
        if not self._cached:
            raise ValueError("GradCache.backward: nothing was embedded; call embed() before backward()")
        if loss.dim() != 0:
            raise ValueError(f"GradCache.backward needs a scalar loss, got shape {tuple(loss.shape)}")
        cached, self._cached = self._cached, []
        loss.backward()
        for item in cached:
            if item.leaf.grad is None:
                continue
            total = batch_rows(item.inputs)
            restore = torch.get_rng_state()
            for chunk_index, start in enumerate(range(0, total, self.chunk_size)):
                stop = min(start + self.chunk_size, total)
                _set_rng_state(item.rng_states[chunk_index])
                device_type, dtype, enabled = item.autocast
                with torch.enable_grad(), torch.autocast(device_type, dtype=dtype, enabled=enabled):
                    embedded = item.encode(slice_rows(item.inputs, slice(start, stop)))
                embedded.backward(item.leaf.grad[start:stop])
            torch.set_rng_state(restore)
