"""Which logits a log-sum-exp leaves out: the anchor's own positive, and false negatives named by item ids.

A false negative is a candidate that is the same item as the anchor's positive (a duplicate text in a batch of
captions, the same product twice): it must not be pushed away. With ids, candidate j is left out of anchor i's
negatives when ``col_ids[j] == row_ids[i]``; the anchor's positive itself stays where the loss puts it (the
numerator of InfoNCE). The anchor's own positive among the candidates (in batch: j = i; a gathered batch: j = i +
offset) is left out by ``offset`` as before, whatever the ids say.

Masking is a compare and a fill per block (no host synchronisation), paid only when ids are given.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import Integers, check


@dataclass(frozen=True)
class LeaveOut:
    """The logits S_ij left out (set to -inf) of the log-sum-exps.

    Attributes:
        offset: leave out S_{i, i + offset} (the anchor's own positive among the candidates); None: none.
        row_ids: (n,) integer ids of the rows (the id of each anchor's positive); None: no id mask.
        col_ids: (m,) integer ids of the candidates; given together with ``row_ids``.
    """

    offset: int | None = None
    row_ids: Tensor | None = None
    col_ids: Tensor | None = None

    def apply(self, out: Tensor, r0: int, r1: int, c0: int, c1: int) -> Tensor:
        """Set the left-out entries of the block S[r0:r1, c0:c1] (held in ``out``) to -inf, in place."""
        if self.offset is not None:
            out.diagonal(r0 + self.offset - c0).fill_(-torch.inf)
        if self.row_ids is not None and self.col_ids is not None:
            same = self.row_ids[r0:r1, None] == self.col_ids[None, c0:c1]
            out.masked_fill_(same, -torch.inf)
        return out

    def dense(self, logits: Tensor) -> Tensor:
        """The whole (n, m) logit matrix with the left-out entries at -inf (out of place, differentiable)."""
        n, m = logits.shape
        rows = torch.arange(n, device=logits.device)
        drop = torch.zeros(n, m, dtype=torch.bool, device=logits.device)
        if self.offset is not None:
            drop |= torch.arange(m, device=logits.device)[None, :] == (rows + self.offset)[:, None]
        if self.row_ids is not None and self.col_ids is not None:
            drop |= self.row_ids[:, None] == self.col_ids[None, :]
        return logits.masked_fill(drop, -torch.inf)

    def kept(self, m: int) -> Tensor | None:
        """Candidates each anchor keeps, (n,) int64, or None when ids leave out nothing beyond ``offset``.

        ``m`` counts all candidates; the own positive (offset) and every candidate sharing the anchor's id go.
        Computed by sorting the candidate ids (O((n + m) log m), no n x m matrix).
        """
        if self.row_ids is None or self.col_ids is None:
            return None
        ordered = torch.sort(self.col_ids).values
        same = torch.searchsorted(ordered, self.row_ids, right=True) - torch.searchsorted(
            ordered, self.row_ids
        )
        if self.offset is not None:
            rows = torch.arange(self.row_ids.shape[0], device=self.row_ids.device)
            own_differs = self.col_ids[rows + self.offset] != self.row_ids
            same = same + own_differs.long()
        return m - same


@dataclass(frozen=True)
class ItemIds:
    """Checked ids of one loss evaluation: the anchors' positives and the candidates of each direction.

    Attributes:
        positive: (n,) id of each anchor's positive (the pair's item).
        y: ids of the candidates scored against the anchors ((m,) shared or in batch, (n, m) independent).
        x: ids of the candidates scored against the positives (y -> x direction of a symmetric loss), or None.
    """

    positive: Tensor
    y: Tensor
    x: Tensor | None


def _id_tensor(name: str, ids: object, shape: tuple[int, ...], device: torch.device) -> Tensor:
    """An integer tensor of ``shape`` on ``device`` named ``name``."""
    ids = check(name, ids, Integers(shape))
    if ids.device != device:
        raise ValueError(f"{name} is on {ids.device} but the embeddings are on {device}; move it with .to().")
    return ids


def resolve_ids(
    positive_ids: object,
    negative_ids: object,
    *,
    kind: str,
    n: int,
    sizes: tuple[int, int | None],
    device: torch.device,
) -> ItemIds | None:
    """Check the false-negative ids against the negatives' ``kind`` and candidate counts ``sizes`` = (M, M').

    In batch the candidates are the batch's own pairs, so ``negative_ids`` must be None (the positives' ids serve
    both directions); explicit negatives need ids of their own: (M,), a pair ((M,), (M',)), or (n, m) independent.

    Raises:
        ValueError / TypeError: ids without the other half, of the wrong shape, dtype or device.
    """
    if positive_ids is None:
        if negative_ids is not None:
            raise ValueError(
                "negative_ids needs positive_ids too (the ids the candidates are compared with)."
            )
        return None
    pos = _id_tensor("positive_ids", positive_ids, (n,), device)
    if kind == "in_batch":
        if negative_ids is not None:
            raise ValueError(
                "negative_ids is for explicit negatives; in batch the candidates are the positives, whose ids "
                "positive_ids already gives. Drop negative_ids."
            )
        return ItemIds(pos, pos, pos)
    if negative_ids is None:
        raise ValueError("positive_ids with explicit negatives needs negative_ids, one id per negative.")
    size, size_x = sizes
    if kind == "pair":
        if not (isinstance(negative_ids, tuple) and len(negative_ids) == 2) or size_x is None:
            raise ValueError("a pair of negatives needs negative_ids as a pair (ids_y (M,), ids_x (M',)).")
        ids_y = _id_tensor("negative_ids[0]", negative_ids[0], (size,), device)
        return ItemIds(pos, ids_y, _id_tensor("negative_ids[1]", negative_ids[1], (size_x,), device))
    shape = (n, size) if kind == "independent" else (size,)
    return ItemIds(pos, _id_tensor("negative_ids", negative_ids, shape, device), None)
