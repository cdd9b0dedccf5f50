"""The item ids that mask in-batch and pool false negatives during training.

A source may name, for each of its n pairs, the item its positive is (``item_ids``, (n,) int64: the text sources
give pairs linked by a shared query or positive text one id, :func:`crl.data.text.item_ids`). A candidate whose id
equals an anchor's positive id is then left out of that anchor's negatives by the objectives' id mask
(``contrastive_loss(positive_ids=..., negative_ids=...)``): a duplicate text in the batch, or a mined "negative"
that is another copy of the positive, is not pushed away. Sources without ``item_ids`` train unmasked, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from crl.data.source import PairSource
from crl.negatives import Draw

__all__ = ["FalseNegativeIds", "false_negative_ids"]


@dataclass(frozen=True)
class FalseNegativeIds:
    """``positive_ids`` (n,) and ``negative_ids`` (None in batch; (m,), a pair, or (n, m)) of one step."""

    positive_ids: Tensor | None = None
    negative_ids: Tensor | tuple[Tensor, Tensor] | None = None


def false_negative_ids(
    source: PairSource, indices: Tensor, drawn: Draw, *, symmetric: bool, device: torch.device
) -> FalseNegativeIds:
    """The ids of the batch at ``indices`` and of the drawn negatives, from ``source.item_ids`` when it has them.

    In batch (one process) only the positives' ids are needed; pool indices give the negatives' ids; samples of
    p- and gathered batches carry no ids (no mask), and fixed sets none either (their mask already leaves out the
    items that share the anchor's key). The ids are moved to ``device``, where the embeddings are.
    """
    table = getattr(source, "item_ids", None)
    if not isinstance(table, Tensor) or drawn.mask is not None:
        return FalseNegativeIds()
    positive_ids = table[indices.cpu()].to(device)
    if drawn.kind == "in_batch" and drawn.y is None:
        return FalseNegativeIds(positive_ids)
    if drawn.kind != "indices" or drawn.y is None:
        return FalseNegativeIds()
    negative_ids = table[drawn.y.cpu()].to(device)
    if symmetric and drawn.regime == "shared":
        return FalseNegativeIds(positive_ids, (negative_ids, negative_ids))
    return FalseNegativeIds(positive_ids, negative_ids)
