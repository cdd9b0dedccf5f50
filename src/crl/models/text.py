"""An encoder of token sequences: the batch is a mapping ``{"input_ids", "attention_mask"}`` (see crl.data.Batch).

:class:`TokenBag` is the smallest text encoder that uses both tensors of a tokenised batch: a masked mean of
learned token embeddings followed by a linear map (a bag of words, as fastText / StarSpace). It is the model of
``[model] encoder = "bag"`` and the test bed of mapping batches; pretrained transformers take the same input.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from crl._validate import check_count
from crl.data.source import Batch
from crl.models.encoders import init_parameters

__all__ = ["TokenBag"]


class TokenBag(nn.Module):
    """phi(t) = W (sum_l a_l e(t_l)) / max(1, sum_l a_l) + b: a masked mean of token embeddings, then a Linear.

    Args:
        vocab_size: V, token ids are in 0..V-1.
        token_dim: width of the token embeddings e(t) (drawn N(0, 1) from ``generator``).
        out_features: embedding dimension d.
        generator: source of the initial weights.

    The input is a mapping with ``input_ids`` (n, L) int64 and ``attention_mask`` (n, L) in {0, 1} (a_l), the
    output (n, d). Padded positions (a_l = 0) do not change the embedding.

    Examples:
        >>> bag = TokenBag(10, 4, 3, generator=torch.Generator().manual_seed(0))
        >>> ids = torch.tensor([[1, 2, 0], [3, 0, 0]])
        >>> bag({"input_ids": ids, "attention_mask": (ids > 0).long()}).shape
        torch.Size([2, 3])
    """

    def __init__(
        self, vocab_size: int, token_dim: int, out_features: int, *, generator: torch.Generator
    ) -> None:
        super().__init__()
        check_count("vocab_size", vocab_size, 1)
        check_count("token_dim", token_dim, 1)
        check_count("out_features", out_features, 1)
        self.tokens = nn.Embedding(vocab_size, token_dim)
        self.head = nn.Linear(token_dim, out_features)
        with torch.no_grad():
            self.tokens.weight.normal_(generator=generator)
        init_parameters(self, generator)

    def forward(self, batch: Batch) -> Tensor:
        """Embed n token sequences: ``{"input_ids": (n, L), "attention_mask": (n, L)}`` -> (n, d)."""
        if isinstance(batch, Tensor) or not {"input_ids", "attention_mask"} <= set(batch):
            given = "a tensor" if isinstance(batch, Tensor) else f"keys {sorted(batch)}"
            raise TypeError(
                f"TokenBag needs a mapping with input_ids and attention_mask, got {given}; use a text pair source"
            )
        mask = batch["attention_mask"].unsqueeze(-1).to(self.tokens.weight.dtype)
        summed = (self.tokens(batch["input_ids"]) * mask).sum(dim=1)
        return self.head(summed / mask.sum(dim=1).clamp_min(1.0))
