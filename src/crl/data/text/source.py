"""Text pairs as a crl :class:`~crl.data.PairSource`: tokenised on the fly into mapping batches.

``pairs(indices)`` returns ``{"input_ids", "attention_mask"}`` of the queries and of the positives, each padded
to its longest text and truncated at ``max_seq_length`` word pieces. Pool negatives (``positives(indices)``) are
other pairs' positives, so a mined or uniform negative is a real document of the training set.

``item_ids`` (n,) name false negatives: two pairs get the same id when they are linked by a shared query text
or a shared positive text (connected components), so "run" as the lemma list of two synsets, or one gloss of
two synsets, never counts as a negative of its own query. The training loop passes them to the objectives'
id mask.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from crl.data.arrays import GenerateNegatives
from crl.data.text.pairs import TextPair

__all__ = ["TextPairSource", "Tokenize", "item_ids"]

Tokenize = Callable[[Sequence[str], int], dict[str, Tensor]]
"""texts, max_seq_length -> the mapping batch ``{"input_ids", "attention_mask"}`` of the texts (k, L), truncated
at max_seq_length word pieces: e.g. :func:`crl.models.minilm.tokenize` with its word-piece tokenizer bound."""


def item_ids(pairs: Sequence[TextPair]) -> Tensor:
    """(n,) int64 component id of each pair in the graph whose edges join pairs sharing a query or a positive."""
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, pair in enumerate(pairs):
        for key in ("q:" + pair.query, "p:" + pair.positive):
            j = first.setdefault(key, i)
            ri, rj = find(i), find(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    return torch.tensor([find(i) for i in range(len(pairs))], dtype=torch.int64)


class TextPairSource:
    """n text pairs (x_i = query, y_i = positive) tokenised by ``tokenize`` for a transformer or a token bag.

    Args:
        pairs: the training pairs.
        tokenize: texts, max_seq_length -> mapping batch (:data:`Tokenize`).
        max_seq_length: word pieces kept per text (longer texts are truncated).

    Raises:
        ValueError: for no pairs or ``max_seq_length`` < 2.
    """

    def __init__(self, pairs: Sequence[TextPair], tokenize: Tokenize, max_seq_length: int) -> None:
        if not pairs:
            raise ValueError("a text pair source needs at least one pair; the training split is empty")
        if max_seq_length < 2:
            raise ValueError(f"max_seq_length = {max_seq_length}; use at least 2 ([CLS] and [SEP])")
        self.texts = list(pairs)
        self._tokenize = tokenize
        self.max_seq_length = max_seq_length
        self.item_ids = item_ids(self.texts)

    @property
    def n_pairs(self) -> int:
        """n, the number of training pairs."""
        return len(self.texts)

    @property
    def anchor_shape(self) -> tuple[int, ...]:
        """(L,): token sequences of at most ``max_seq_length`` word pieces."""
        return (self.max_seq_length,)

    @property
    def positive_shape(self) -> tuple[int, ...]:
        """(L,), as the anchors."""
        return (self.max_seq_length,)

    @property
    def generate_negatives(self) -> GenerateNegatives | None:
        """None: negatives are other pairs' positives."""
        return None

    def tokenize(self, texts: Sequence[str]) -> dict[str, Tensor]:
        """The mapping batch of ``texts``, truncated at ``max_seq_length`` word pieces."""
        return self._tokenize(texts, self.max_seq_length)

    def pairs(
        self, indices: Tensor, generator: torch.Generator
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        """Tokenised queries and positives of the pairs at ``indices`` (``generator`` unused: no augmentation)."""
        return self.anchors(indices, generator), self.positives(indices, generator)

    def anchors(self, indices: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """Tokenised queries of the pairs at ``indices`` (any shape; flattened)."""
        return self.tokenize([self.texts[int(i)].query for i in indices.reshape(-1)])

    def positives(self, indices: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        """Tokenised positives of the pairs at ``indices`` (any shape; flattened)."""
        return self.tokenize([self.texts[int(i)].positive for i in indices.reshape(-1)])
