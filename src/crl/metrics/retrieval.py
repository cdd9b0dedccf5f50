"""Retrieval metrics of queries against a gallery: accuracy@k, recall@k, MRR, nDCG@k, MAP and the AUC E(s).

Score. The score of query q against gallery item g is the dot product s(q, g) = <q, g> (docs/theory.md section 1,
two-tower s = <f(x), g(y)>). Normalise the embeddings first if cosine similarity is wanted.

Positives. Either one positive per query, ``positive_index[i]`` (the paired-data case: y_i is the positive of
x_i), or many: gallery item j is a positive of query i iff ``query_labels[i] == gallery_labels[j]``. Every
other gallery item is a negative, except the query's own item when queries and gallery are the same set
(``exclude_self`` / ``query_ids``), which is removed from that query's ranking altogether.

Tie convention (stated once, used everywhere; :mod:`crl.metrics.ir` follows the same rule):

- Ranking metrics (accuracy@k, recall@k, MRR, nDCG@k, MAP) are pessimistic: among equal scores, negatives
  are ranked before positives. The r-th best positive of a query (r = 1..P) then has rank
  ``R_r = r + #{negatives g : s(q, g) >= s(q, pos_r)}``. A constant embedding therefore scores as badly as
  it deserves instead of being rewarded by lucky tie-breaking.
- The AUC counts ties one half, as in [A]'s retrieval criterion (docs/theory.md section 3):
  ``E(s) = P[s(x, y) > s(x, y')] + 1/2 P[s(x, y) = s(x, y')]``.

Definitions, per query with P positives, N negatives and pessimistic ranks R_1 < ... < R_P:

- hit@k = 1[R_1 <= k]; accuracy@k is its mean over queries (the fraction of queries with at least one
  positive in the top k, sentence-transformers' accuracy@k).
- recall@k = #{r : R_r <= k} / P, the share of the query's positives in its top k (sentence-transformers'
  recall@k); with one positive per query it equals hit@k.
- reciprocal rank = 1 / R_1; MRR is its mean.
- DCG@k = sum_{r: R_r <= k} 1 / log2(R_r + 1), IDCG@k = sum_{i=1}^{min(P, k)} 1 / log2(i + 1),
  nDCG@k = DCG@k / IDCG@k (binary relevance).
- AP = (1/P) sum_r r / R_r (precision at each positive's rank); MAP is its mean.
- AUC_q = (1 / (P N)) sum_{pos p, neg n} (1[s_p > s_n] + 1/2 1[s_p = s_n]), the empirical E(s) of this
  anchor; the reported AUC is its mean over queries, i.e. E(s) with x ~ the query set, y ~ its positives and
  y' ~ its negatives. The pooled AUC over all within-query (positive, negative) pairs equals
  sum_q P_q N_q AUC_q / sum_q P_q N_q: the same number when every query has the same P and N (one positive per
  query, no exclusions), otherwise a weighting that favours queries with many positives. (scikit-learn's
  ``roc_auc_score`` on all scores of all queries pooled is a third quantity: it also compares a positive of
  one query with a negative of another.)

Standard errors are sd / sqrt(n_queries) over the per-query values, i.e. they treat the queries as i.i.d. and
the gallery as fixed.

Memory. Queries are processed in chunks of ``chunk_size`` rows; no n_queries x gallery_size matrix is ever
formed. One positive per query needs only comparisons with the positive's score (no sort, about
10 bytes per chunk element); many positives need one sort per row (about 100 bytes per chunk element).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from crl._validate import ArgumentError, Floats, Integer, Integers, check
from crl._vocab import Estimate


@dataclass(frozen=True)
class PerQueryRetrieval:
    """Per-query retrieval values (float64, CPU), for bootstraps or custom summaries.

    Attributes:
        ks: the cut-offs k, ascending.
        hit_at_k: (n_queries, len(ks)), 1.0 where a positive is within the top k (accuracy@k).
        reciprocal_rank: (n_queries,), 1 / R_1.
        ndcg_at_k: (n_queries, len(ks)), nDCG@k with binary relevance.
        average_precision: (n_queries,), AP over all positives of the query.
        auc: (n_queries,), the query's AUC (ties 1/2).
        n_positives: (n_queries,) int64, P per query.
        n_negatives: (n_queries,) int64, N per query.
        recall_at_k: (n_queries, len(ks)), the share of the query's positives within the top k.
    """

    ks: tuple[int, ...]
    hit_at_k: Tensor
    reciprocal_rank: Tensor
    ndcg_at_k: Tensor
    average_precision: Tensor
    auc: Tensor
    n_positives: Tensor
    n_negatives: Tensor
    recall_at_k: Tensor


@dataclass(frozen=True)
class RetrievalReport:
    """Means over queries, each with its standard error; see the module docstring for definitions.

    Attributes:
        n_queries: number of queries.
        gallery_size: number of gallery items (before any self-exclusion).
        ks: the cut-offs k, ascending.
        accuracy_at_k: k -> fraction of queries with a positive in the top k.
        recall_at_k: k -> mean share of a query's positives within its top k.
        mrr: mean reciprocal rank of the first positive.
        ndcg_at_k: k -> mean nDCG@k.
        mean_average_precision: MAP.
        auc: mean per-query AUC, the empirical E(s) of [A].
        mean_positives: mean number of positives per query.
    """

    n_queries: int
    gallery_size: int
    ks: tuple[int, ...]
    accuracy_at_k: Mapping[int, Estimate]
    recall_at_k: Mapping[int, Estimate]
    mrr: Estimate
    ndcg_at_k: Mapping[int, Estimate]
    mean_average_precision: Estimate
    auc: Estimate
    mean_positives: float

    def as_flat_dict(self) -> dict[str, float]:
        """Flat ``{"accuracy@1": ..., "accuracy@1_se": ..., "mrr": ..., ...}`` for logging to metrics.jsonl."""
        out: dict[str, float] = {}
        named: list[tuple[str, Estimate]] = [(f"accuracy@{k}", e) for k, e in self.accuracy_at_k.items()]
        named += [(f"recall@{k}", e) for k, e in self.recall_at_k.items()]
        named += [("mrr", self.mrr)]
        named += [(f"ndcg@{k}", e) for k, e in self.ndcg_at_k.items()]
        named += [("map", self.mean_average_precision), ("auc", self.auc)]
        for name, estimate in named:
            out[name] = estimate.mean
            out[f"{name}_se"] = estimate.se
        return out


def retrieval_metrics(
    queries: Tensor,
    gallery: Tensor,
    *,
    positive_index: Tensor | None = None,
    query_labels: Tensor | None = None,
    gallery_labels: Tensor | None = None,
    query_ids: Tensor | None = None,
    exclude_self: bool = False,
    ks: Sequence[int] = (1, 5, 10),
    chunk_size: int | None = None,
) -> RetrievalReport:
    """Accuracy@k, recall@k, MRR, nDCG@k, MAP and AUC E(s) of ``queries`` against ``gallery``, with standard
    errors.

    Args:
        queries: (n_queries, d) float embeddings, n_queries >= 2 (a standard error needs two).
        gallery: (gallery_size, d) float embeddings, same dtype and device; score s(q, g) = <q, g>.
        positive_index: (n_queries,) integer; gallery index of each query's single positive.
        query_labels: (n_queries,) integer labels; with ``gallery_labels``, positives are equal labels.
        gallery_labels: (gallery_size,) integer labels.
        query_ids: (n_queries,) integer; gallery index of each query's own item, removed from its ranking
            (-1: none).
        exclude_self: shorthand for ``query_ids = arange(n_queries)`` when the queries are the gallery.
        ks: cut-offs for accuracy@k, recall@k and nDCG@k, each in 1..gallery_size (sorted and de-duplicated).
        chunk_size: queries per chunk; default keeps chunk_size * gallery_size near 2M elements.

    Returns:
        A ``RetrievalReport``.

    Raises:
        ValueError / TypeError: on bad shapes, dtypes, non-finite values, bad k, or a query without any
            positive or any negative.

    Examples:
        >>> z = torch.nn.functional.normalize(torch.randn(100, 8), dim=1)
        >>> retrieval_metrics(z, z, positive_index=torch.arange(100)).accuracy_at_k[1].mean
        1.0
    """
    if isinstance(queries, Tensor) and queries.dim() == 2 and queries.shape[0] < 2:
        raise ValueError(
            f"queries: got {queries.shape[0]} query; a standard error needs at least 2. "
            "Use retrieval_per_query for a single query."
        )
    per_query = retrieval_per_query(
        queries,
        gallery,
        positive_index=positive_index,
        query_labels=query_labels,
        gallery_labels=gallery_labels,
        query_ids=query_ids,
        exclude_self=exclude_self,
        ks=ks,
        chunk_size=chunk_size,
    )
    return summarise_retrieval(per_query, gallery_size=gallery.shape[0])


def summarise_retrieval(per_query: PerQueryRetrieval, *, gallery_size: int) -> RetrievalReport:
    """Means over queries with standard errors sd / sqrt(n_queries) (sd with n_queries - 1 in the divisor)."""
    n_queries = per_query.auc.shape[0]
    if n_queries < 2:
        raise ValueError(f"per_query: has {n_queries} query; a standard error needs at least 2 queries.")

    def estimate(values: Tensor) -> Estimate:
        return Estimate(
            float(values.mean()), float(values.std(correction=1)) / math.sqrt(n_queries), n_queries
        )

    return RetrievalReport(
        n_queries=n_queries,
        gallery_size=gallery_size,
        ks=per_query.ks,
        accuracy_at_k={k: estimate(per_query.hit_at_k[:, i]) for i, k in enumerate(per_query.ks)},
        recall_at_k={k: estimate(per_query.recall_at_k[:, i]) for i, k in enumerate(per_query.ks)},
        mrr=estimate(per_query.reciprocal_rank),
        ndcg_at_k={k: estimate(per_query.ndcg_at_k[:, i]) for i, k in enumerate(per_query.ks)},
        mean_average_precision=estimate(per_query.average_precision),
        auc=estimate(per_query.auc),
        mean_positives=float(per_query.n_positives.double().mean()),
    )


def retrieval_per_query(
    queries: Tensor,
    gallery: Tensor,
    *,
    positive_index: Tensor | None = None,
    query_labels: Tensor | None = None,
    gallery_labels: Tensor | None = None,
    query_ids: Tensor | None = None,
    exclude_self: bool = False,
    ks: Sequence[int] = (1, 5, 10),
    chunk_size: int | None = None,
) -> PerQueryRetrieval:
    """Per-query hit@k, reciprocal rank, nDCG@k, AP, AUC and recall@k; arguments as in ``retrieval_metrics``.

    Computed chunk by chunk over the queries: peak memory O(chunk_size * gallery_size), never
    O(n_queries * gallery_size). Inputs are detached; nothing here is differentiable.
    """
    inputs = _validate_inputs(
        queries,
        gallery,
        positive_index,
        query_labels,
        gallery_labels,
        query_ids,
        exclude_self,
        ks,
        chunk_size,
    )
    n_queries, n_ks = inputs.queries.shape[0], len(inputs.ks)
    # Outputs are allocated once, before the loop: small tensors kept alive between the chunks' large
    # temporaries would fragment the CPU heap and let the resident memory grow with the number of chunks.
    columns = [torch.empty(n_queries, n_ks, dtype=torch.float64), torch.empty(n_queries, dtype=torch.float64)]
    columns += [torch.empty(n_queries, n_ks, dtype=torch.float64)]
    columns += [torch.empty(n_queries, dtype=torch.float64) for _ in range(2)]
    columns += [torch.empty(n_queries, dtype=torch.int64) for _ in range(2)]
    columns += [torch.empty(n_queries, n_ks, dtype=torch.float64)]
    with torch.no_grad():
        for start in range(0, n_queries, inputs.chunk_size):
            stop = min(start + inputs.chunk_size, n_queries)
            for column, values in zip(columns, _chunk(inputs, start, stop), strict=True):
                column[start:stop] = values
    return PerQueryRetrieval(inputs.ks, *columns)


def _chunk(inputs: _RetrievalInputs, start: int, stop: int) -> tuple[Tensor, ...]:
    """Scores of queries[start:stop] against the gallery, then their per-query metrics."""
    scores = inputs.queries[start:stop] @ inputs.gallery.T
    rows = torch.arange(stop - start, device=scores.device)
    excluded = None if inputs.query_ids is None else inputs.query_ids[start:stop]
    if inputs.positive_index is not None:
        return _single_positive(scores, inputs.positive_index[start:stop], excluded, rows, inputs.ks)
    assert inputs.query_labels is not None and inputs.gallery_labels is not None
    positive = inputs.query_labels[start:stop, None] == inputs.gallery_labels[None, :]
    negative = ~positive
    if excluded is not None:
        keep = excluded >= 0
        positive[rows[keep], excluded[keep]] = False
        negative[rows[keep], excluded[keep]] = False
    return _many_positives(scores, positive, negative, inputs.ks)


def _single_positive(
    scores: Tensor, positive_index: Tensor, excluded: Tensor | None, rows: Tensor, ks: tuple[int, ...]
) -> tuple[Tensor, ...]:
    """One positive per query: R = 1 + #{neg >= s_pos}, AUC = 1 - (#{neg > s_pos} + #{neg = s_pos}/2) / N."""
    positive_score = scores[rows, positive_index]
    # Count over the whole row, then take out the positive itself (never >, always >=) and the excluded item.
    above = (scores > positive_score[:, None]).sum(1, dtype=torch.int32).long()
    at_or_above = (scores >= positive_score[:, None]).sum(1, dtype=torch.int32).long() - 1
    n_negatives = torch.full_like(above, scores.shape[1] - 1)
    if excluded is not None:
        keep = excluded >= 0
        own_score = scores[rows[keep], excluded[keep]]
        above[keep] -= (own_score > positive_score[keep]).long()
        at_or_above[keep] -= (own_score >= positive_score[keep]).long()
        n_negatives[keep] -= 1
    rank = 1.0 + at_or_above.double()
    k = torch.tensor(ks, dtype=torch.float64, device=scores.device)
    hit = (rank[:, None] <= k).double()
    ndcg = hit / torch.log2(rank[:, None] + 1.0)
    auc = 1.0 - (above + 0.5 * (at_or_above - above)).double() / n_negatives.double()
    n_positives = torch.ones_like(n_negatives)
    return hit, 1.0 / rank, ndcg, 1.0 / rank, auc, n_positives, n_negatives, hit


def _many_positives(
    scores: Tensor, positive: Tensor, negative: Tensor, ks: tuple[int, ...]
) -> tuple[Tensor, ...]:
    """Many positives per query, from one descending sort per row.

    In sorted order, with cum_pos / cum_neg the running counts of positives / negatives, the pessimistic rank
    of a positive is R = cum_pos + (negatives up to the end of its tie group), and the number of negatives
    above it with ties halved is neg_before_group + (neg_in_group) / 2.
    """
    sorted_scores, order = scores.sort(dim=1, descending=True)
    pos = positive.gather(1, order)
    neg = negative.gather(1, order).long()
    del order, positive, negative
    starts = torch.ones_like(pos)
    starts[:, 1:] = sorted_scores[:, 1:] != sorted_scores[:, :-1]
    ends = torch.ones_like(pos)
    ends[:, :-1] = starts[:, 1:]
    del sorted_scores
    cum_neg = neg.cumsum(1)
    zero = torch.zeros((), dtype=cum_neg.dtype, device=cum_neg.device)
    neg_before = torch.where(starts, cum_neg - neg, zero).cummax(1).values
    big = torch.full((), scores.shape[1] + 1, dtype=cum_neg.dtype, device=cum_neg.device)
    neg_through = torch.where(ends, cum_neg, big).flip(1).cummin(1).values.flip(1)
    n_negatives = cum_neg[:, -1].clone()
    del starts, ends, cum_neg, neg
    cum_pos = pos.long().cumsum(1).double()
    rank = torch.where(pos, cum_pos + neg_through.double(), math.inf)
    n_positives = cum_pos[:, -1].long()
    first_rank = rank.amin(1)
    k = torch.tensor(ks, dtype=torch.float64, device=scores.device)
    hit = (first_rank[:, None] <= k).double()
    discount = 1.0 / torch.log2(rank + 1.0)
    ndcg = torch.stack([(discount * (rank <= kk)).sum(1) for kk in ks], dim=1)
    ndcg = ndcg / _ideal_dcg(n_positives, ks)
    recall = torch.stack([(rank <= kk).sum(1) for kk in ks], dim=1).double() / n_positives.double()[:, None]
    average_precision = (cum_pos / rank).sum(1) / n_positives.double()
    half_ties = torch.where(pos, neg_before.double() + 0.5 * (neg_through - neg_before).double(), 0.0)
    negatives_above = half_ties.sum(1)
    auc = 1.0 - negatives_above / (n_positives.double() * n_negatives.double())
    return hit, 1.0 / first_rank, ndcg, average_precision, auc, n_positives, n_negatives, recall


def _ideal_dcg(n_positives: Tensor, ks: tuple[int, ...]) -> Tensor:
    """IDCG@k = sum_{i=1}^{min(P, k)} 1 / log2(i + 1), shape (rows, len(ks))."""
    gains = 1.0 / torch.log2(torch.arange(2, max(ks) + 2, dtype=torch.float64, device=n_positives.device))
    cumulative = torch.cat([gains.new_zeros(1), gains.cumsum(0)])
    k = torch.tensor(ks, device=n_positives.device)
    return cumulative[torch.minimum(n_positives[:, None], k)]


# The checks of the arguments: every input validated at the boundary, with the fix named.

_CHUNK_ELEMENTS = 1 << 21
"""Default chunk_size * gallery_size: about 200 MiB of temporaries in the many-positives path."""


@dataclass(frozen=True)
class _RetrievalInputs:
    """Checked, detached inputs on the embeddings' device; ks sorted and unique."""

    queries: Tensor
    gallery: Tensor
    positive_index: Tensor | None
    query_labels: Tensor | None
    gallery_labels: Tensor | None
    query_ids: Tensor | None
    ks: tuple[int, ...]
    chunk_size: int


def _validate_inputs(
    queries: Tensor,
    gallery: Tensor,
    positive_index: Tensor | None,
    query_labels: Tensor | None,
    gallery_labels: Tensor | None,
    query_ids: Tensor | None,
    exclude_self: bool,
    ks: Sequence[int],
    chunk_size: int | None,
) -> _RetrievalInputs:
    """Check every argument at the boundary; return detached tensors on the embeddings' device."""
    _check_embeddings(queries, gallery)
    n_queries, gallery_size = queries.shape[0], gallery.shape[0]
    device = queries.device
    ks_sorted = _check_ks(ks, gallery_size)
    if chunk_size is None:
        chunk_size = max(1, _CHUNK_ELEMENTS // gallery_size)
    else:
        chunk_size = check("chunk_size", chunk_size, Integer(1, example=" (or None for the default)"))
    if exclude_self:
        if query_ids is not None:
            raise ValueError(
                "exclude_self/query_ids: pass one of them, not both (query_ids already excludes)."
            )
        if n_queries != gallery_size:
            raise ValueError(
                f"exclude_self: queries ({n_queries}) and gallery ({gallery_size}) differ in size, so they "
                "are not the same set; pass query_ids (the gallery index of each query) instead."
            )
        query_ids = torch.arange(n_queries, device=device)
    if query_ids is not None:
        query_ids = _check_index("query_ids", query_ids, n_queries, gallery_size, allow_none=True).to(device)
    by_index = positive_index is not None
    by_labels = query_labels is not None or gallery_labels is not None
    if by_index == by_labels:
        raise ValueError(
            "positive_index/query_labels/gallery_labels: give either positive_index (one positive per query) "
            "or both query_labels and gallery_labels (positives share a label), not both and not neither."
        )
    if positive_index is not None:
        positive_index = _check_index("positive_index", positive_index, n_queries, gallery_size).to(device)
        _check_single_positive_sets(positive_index, query_ids, gallery_size)
    else:
        if query_labels is None or gallery_labels is None:
            raise ValueError("query_labels/gallery_labels: labels need both; pass the missing one.")
        query_labels = _check_labels("query_labels", query_labels, n_queries).to(device)
        gallery_labels = _check_labels("gallery_labels", gallery_labels, gallery_size).to(device)
        _check_label_sets(query_labels, gallery_labels, query_ids)
    return _RetrievalInputs(
        queries.detach(),
        gallery.detach(),
        positive_index,
        query_labels,
        gallery_labels,
        query_ids,
        ks_sorted,
        chunk_size,
    )


def _check_embeddings(queries: Tensor, gallery: Tensor) -> None:
    embeddings = Floats(ndim=2, min_rows=1, finite=True, fix="fix the encoder output before evaluating")
    for name, x in (("queries", queries), ("gallery", gallery)):
        check(name, x, embeddings)
        if x.shape[1] < 1:
            raise ArgumentError(
                f"{name} has shape {tuple(x.shape)}: d = 0 embeddings carry no information (every score is 0); "
                "pass d >= 1."
            )
    if queries.shape[1] != gallery.shape[1]:
        raise ValueError(
            f"queries/gallery: embedding dims differ ({queries.shape[1]} vs {gallery.shape[1]}); "
            "both must come from encoders with the same output dimension."
        )
    if queries.dtype != gallery.dtype or queries.device != gallery.device:
        raise TypeError(
            f"queries/gallery: dtype/device differ ({queries.dtype}, {queries.device} vs {gallery.dtype}, "
            f"{gallery.device}); move both with .to(...)."
        )
    bound = float(queries.double().norm(dim=1).max()) * float(gallery.double().norm(dim=1).max())
    if bound >= 0.5 * torch.finfo(queries.dtype).max:
        raise ValueError(
            f"queries/gallery: scores up to |q| |g| = {bound:.3g} may overflow {queries.dtype}; "
            "normalise the embeddings (e.g. torch.nn.functional.normalize) before evaluating."
        )


def _check_ks(ks: Sequence[int], gallery_size: int) -> tuple[int, ...]:
    if isinstance(ks, int) or len(ks) == 0:
        raise ArgumentError(f"ks={ks!r}; pass a non-empty sequence of cut-offs, e.g. (1, 5, 10).")
    cut_off = Integer(1, gallery_size, example=f" (gallery_size={gallery_size}); drop it")
    return tuple(sorted({check(f"ks[{i}]", k, cut_off) for i, k in enumerate(ks)}))


def _check_index(
    name: str, index: Tensor, length: int, gallery_size: int, allow_none: bool = False
) -> Tensor:
    if not isinstance(index, Tensor) or index.dim() != 1 or index.shape[0] != length:
        shape = tuple(index.shape) if isinstance(index, Tensor) else type(index).__name__
        raise ValueError(f"{name}: expected a 1-D tensor of length {length} (one per query), got {shape}.")
    check(name, index, Integers())
    low = -1 if allow_none else 0
    if length and (int(index.min()) < low or int(index.max()) >= gallery_size):
        raise ValueError(
            f"{name}: values must lie in {low}..{gallery_size - 1} (gallery indices), "
            f"got {int(index.min())}..{int(index.max())}."
        )
    return index.long()


def _check_labels(name: str, labels: Tensor, length: int) -> Tensor:
    if not isinstance(labels, Tensor) or labels.dim() != 1 or labels.shape[0] != length:
        shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(f"{name}: expected a 1-D tensor of length {length}, got {shape}.")
    check(name, labels, Integers(allow_bool=True))
    return labels.long()


def _check_single_positive_sets(positive_index: Tensor, query_ids: Tensor | None, gallery_size: int) -> None:
    n_excluded = torch.zeros_like(positive_index)
    if query_ids is not None:
        clash = torch.nonzero(query_ids == positive_index).flatten()
        if clash.numel():
            raise ValueError(
                f"positive_index/query_ids: query {int(clash[0])} (and {clash.numel() - 1} more) has its "
                "positive excluded as its own item; a query's positive must be a different gallery item."
            )
        n_excluded = (query_ids >= 0).long()
    if bool((gallery_size - 1 - n_excluded < 1).any()):
        raise ValueError("gallery: a query has no negative left (gallery too small); the AUC is undefined.")


def _check_label_sets(query_labels: Tensor, gallery_labels: Tensor, query_ids: Tensor | None) -> None:
    """Every query needs at least one positive and one negative: P >= 1 and N >= 1."""
    values, counts = torch.unique(gallery_labels, return_counts=True)
    slot = torch.searchsorted(values, query_labels).clamp(max=values.numel() - 1)
    n_positives = torch.where(values[slot] == query_labels, counts[slot], 0)
    n_negatives = gallery_labels.shape[0] - n_positives
    if query_ids is not None:
        own = query_ids >= 0
        same = own & (gallery_labels[query_ids.clamp(min=0)] == query_labels)
        n_positives = n_positives - same.long()
        n_negatives = n_negatives - (own & ~same).long()
    for name, count, fix in (
        ("positive", n_positives, "drop those queries or give the gallery an item with their label"),
        ("negative", n_negatives, "the AUC needs a gallery item with another label"),
    ):
        empty = torch.nonzero(count == 0).flatten()
        if empty.numel():
            raise ValueError(
                f"query_labels/gallery_labels: {empty.numel()} queries (first: {int(empty[0])}) have no "
                f"{name} in the gallery; {fix}."
            )
