"""Scores of embeddings, chunk by chunk, for the losses that need each score rather than a log-sum-exp.

The pairwise, sigmoid and OCE losses are means over anchors of a function of the anchor's positive score
s_ii = <a_i, p_i> and its m negative scores; :func:`loss_from_scores` evaluates such a function over chunks of
anchors (checkpointed, see :mod:`crl.objectives._chunking`), so the n x m matrix never exists at once.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from crl._vocab import REGIMES, Regime, check_choice
from crl.objectives._checks import REDUCTIONS, Reduction, check_embeddings, check_inputs, upcast
from crl.objectives._chunking import chunk_rows, per_anchor_in_chunks

ScoreFn = Callable[[Tensor, Tensor], Tensor]
"""Maps (positive scores (c,), negative scores (c, m)) to per-anchor values (c,)."""


def _in_batch_scores(a: Tensor, p: Tensor, start: int) -> Tensor:
    """Row i of a chunk: <a_i, p_j> for all j != i (the other positives of the batch), shape (c, n - 1)."""
    scores = a @ p.T
    rows = torch.arange(a.shape[0], device=a.device)
    keep = torch.ones_like(scores, dtype=torch.bool)
    keep[rows, rows + start] = False
    return scores[keep].view(a.shape[0], p.shape[0] - 1)


def _chunk_values(
    a: Tensor, p: Tensor, negatives: Tensor | None, all_positives: Tensor | None, fn: ScoreFn, start: int
) -> Tensor:
    positive_scores = (a * p).sum(dim=1)
    if all_positives is not None:
        negative_scores = _in_batch_scores(a, all_positives, start)
    elif negatives is not None and negatives.ndim == 3:
        negative_scores = torch.einsum("nd,nmd->nm", a, negatives)
    else:
        assert negatives is not None
        negative_scores = a @ negatives.T
    return fn(positive_scores, negative_scores)


def loss_from_scores(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None,
    fn: ScoreFn,
    *,
    regime: Regime,
    chunk: int | None = None,
    reduction: Reduction = "mean",
) -> Tensor:
    """Validate the embeddings and reduce ``fn(s_ii, s_i.)`` over anchors i ("mean", or "none": the (n,) values).

    Shared regime: ``negatives`` (m, d), or ``None`` for the other positives of the batch (m = n - 1).
    Independent regime: ``negatives`` (n, m, d). fp16/bf16 inputs are computed in float32.

    Raises:
        ValueError: on shape/dtype/device mismatch, NaN/Inf, m = 0 or an unknown regime.
    """
    check_choice("regime", regime, REGIMES)
    check_choice("reduction", reduction, REDUCTIONS)
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk={chunk!r} must be a positive number of anchors (or None for automatic).")
    a = check_embeddings("anchors", anchors, 2)
    p = check_embeddings("positives", positives, 2)
    if a.shape != p.shape:
        raise ValueError(
            f"anchors {tuple(a.shape)} and positives {tuple(p.shape)} differ; pass (n, d) pairs."
        )
    named = {"anchors": a, "positives": p}
    if negatives is not None:
        named["negatives"] = check_embeddings("negatives", negatives, 3 if regime == "independent" else 2)
    check_inputs(named)
    n, dim = a.shape
    a, p = upcast(a), upcast(p)
    neg = None if negatives is None else upcast(negatives)
    if regime == "independent":
        if neg is None or neg.shape[0] != n or neg.shape[2] != dim or neg.shape[1] == 0:
            shape = None if neg is None else tuple(neg.shape)
            raise ValueError(
                f"negatives has shape {shape}; regime='independent' needs (n, m, d) = ({n}, m>=1, {dim})."
            )
        m = neg.shape[1]
    elif neg is None:
        if n < 2:
            raise ValueError(
                "negatives=None uses the other positives of the batch, so it needs n >= 2 anchors."
            )
        m = n - 1
    else:
        if neg.shape[1] != dim:
            raise ValueError(
                f"negatives has dimension {neg.shape[1]} but the anchors have d = {dim}; embed both alike."
            )
        m = neg.shape[0]
    rows = chunk or chunk_rows(n, m * (dim if regime == "independent" else 1))
    all_positives = p if neg is None else None

    def shared_chunk(a_chunk: Tensor, p_chunk: Tensor, start: int) -> Tensor:
        return _chunk_values(a_chunk, p_chunk, neg, all_positives, fn, start)

    def independent_chunk(a_chunk: Tensor, p_chunk: Tensor, neg_chunk: Tensor, start: int) -> Tensor:
        return _chunk_values(a_chunk, p_chunk, neg_chunk, None, fn, start)

    if regime == "independent" and neg is not None:
        values = per_anchor_in_chunks(independent_chunk, (a, p, neg), rows)
    else:
        values = per_anchor_in_chunks(shared_chunk, (a, p), rows)
    return values.mean() if reduction == "mean" else values
