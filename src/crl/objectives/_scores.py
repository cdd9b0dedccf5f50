"""Scores of embeddings, chunk by chunk, for the losses that need each score rather than a log-sum-exp.

The pairwise, sigmoid and OCE losses are means over anchors of a function of the anchor's positive score
s_ii = <a_i, p_i> and its m negative scores; :func:`loss_from_scores` evaluates such a function over chunks of
anchors (checkpointed, see :mod:`crl.objectives._chunking`), so the n x m matrix never exists at once. The sigmoid
and pairwise losses pass a ``shared`` kernel for the shared regime (:mod:`crl.objectives._score_kernel`), whose
extra memory is two reused chunk buffers instead of the allocator's cache of freed temporaries.
"""

from collections.abc import Callable

import torch
from torch import Tensor

from crl._validate import check_choice, check_count
from crl._vocab import REGIMES, Regime
from crl.objectives._checks import (
    REDUCTIONS,
    Reduction,
    check_inputs,
    check_logit_range,
    check_pair,
    check_score_range,
    score_bound,
    upcast,
)
from crl.objectives._chunking import chunk_rows, per_anchor_in_chunks
from crl.objectives._negatives import NegativeSet, resolve_negatives

ScoreFn = Callable[[Tensor, Tensor], Tensor]
"""Maps (positive scores (c,), negative scores (c, m)) to per-anchor values (c,)."""

SharedFn = Callable[[Tensor, Tensor, Tensor, int | None, int], Tensor]
"""Maps (anchors, positives, shared candidates, own-positive offset, rows per chunk) to per-anchor values (n,):
a workspace-reusing kernel (:func:`crl.objectives._score_kernel.chunked_kernel_values`) for the shared regime."""


def _leave_out_own_positive(scores: Tensor, column_offset: int) -> Tensor:
    """Row r of a (c, M) chunk without its column r + column_offset (the anchor's own positive): (c, M - 1)."""
    rows = torch.arange(scores.shape[0], device=scores.device)
    keep = torch.ones_like(scores, dtype=torch.bool)
    keep[rows, rows + column_offset] = False
    return scores[keep].view(scores.shape[0], scores.shape[1] - 1)


def _shared_values(
    negs: NegativeSet, fn: ScoreFn, shared: SharedFn | None, rows: int, a: Tensor, p: Tensor
) -> Tensor:
    """fn over chunks of anchors against one shared candidate set (the batch's positives, or (M, d) negatives);
    ``shared`` instead where given (its extra memory is two reused chunk buffers)."""
    candidates = negs.candidates(p)
    if shared is not None:
        return shared(a, p, candidates, negs.offset, rows)

    def chunk(a_c: Tensor, p_c: Tensor, start: int) -> Tensor:
        scores = a_c @ candidates.T
        if negs.offset is not None:
            scores = _leave_out_own_positive(scores, start + negs.offset)
        return fn((a_c * p_c).sum(dim=1), scores)

    return per_anchor_in_chunks(chunk, (a, p), rows)


def _independent_values(neg: Tensor, fn: ScoreFn, rows: int, a: Tensor, p: Tensor) -> Tensor:
    """fn over chunks of anchors, anchor i scored against its own (m, d) negatives neg_i."""

    def chunk(a_c: Tensor, p_c: Tensor, neg_c: Tensor, _start: int) -> Tensor:
        return fn((a_c * p_c).sum(dim=1), torch.einsum("nd,nmd->nm", a_c, neg_c))

    return per_anchor_in_chunks(chunk, (a, p, neg), rows)


def loss_from_scores(
    anchors: Tensor,
    positives: Tensor,
    negatives: Tensor | None,
    fn: ScoreFn,
    *,
    regime: Regime,
    chunk: int | None = None,
    reduction: Reduction = "mean",
    shared: SharedFn | None = None,
    tau: Tensor | None = None,
) -> Tensor:
    """Validate the embeddings and reduce ``fn(s_ii, s_i.)`` over anchors i ("mean", or "none": the (n,) values).

    Shared regime: ``negatives`` (m, d), or ``None`` for the other positives of the batch (m = n - 1); computed by
    ``shared`` when given (the same values as ``fn``, in reused workspaces). Independent regime: ``negatives``
    (n, m, d). fp16/bf16 inputs are computed in float32. ``tau``: the temperature ``fn`` divides the scores by,
    checked with them (:func:`crl.objectives._checks.check_logit_range`); None when it divides by none (the
    scores alone are checked then).

    Raises:
        ValueError: on shape/dtype/device mismatch, NaN/Inf, m = 0, an unknown regime, or scores or logits s/tau
            that overflow the dtype.
    """
    check_choice("regime", regime, REGIMES)
    check_choice("reduction", reduction, REDUCTIONS)
    if chunk is not None:
        check_count("chunk", chunk, 1)
    a, p = check_pair(anchors, positives)
    n, dim = a.shape
    negs = resolve_negatives(negatives, n=n, dim=dim, regime=regime)
    check_inputs({"anchors": a, "positives": p, **negs.named()})
    a, p, negs = upcast(a), upcast(p), negs.upcast()
    bound = score_bound(negs.scored_pairs(a, p))
    if tau is None:
        check_score_range(bound, a.dtype, count=n * negs.m)
    else:
        check_logit_range(tau, a.dtype, bound, count=n * negs.m)
    if negs.kind == "independent":
        rows = chunk or chunk_rows(n, negs.m * dim)
        values = _independent_values(negs.candidates(p), fn, rows, a, p)
    else:
        values = _shared_values(negs, fn, shared, chunk or chunk_rows(n, negs.m), a, p)
    return values.mean() if reduction == "mean" else values
