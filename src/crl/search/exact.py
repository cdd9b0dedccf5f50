"""Exact top-k search in torch, chunked to bound memory: the reference for the approximate indexes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from crl.search._checks import as_ids, as_matrix, check_ip_norms, check_k, normalise
from crl.search._types import METRICS, Metric, SearchResult

if TYPE_CHECKING:
    import torch


def exact_search(
    corpus: Any,
    queries: Any,
    k: int,
    metric: Metric = "cosine",
    *,
    ids: Any = None,
    chunk_size: int = 4096,
) -> SearchResult:
    """The k items of ``corpus`` (n, d) with the largest inner product with each query (q, d), best first.

    ``metric="cosine"`` scores the L2-normalised rows, ``"ip"`` the raw ones (each of norm at most 1e18, so that
    the products fit float32). Scores are float32 products,
    computed for ``chunk_size`` queries against ``chunk_size`` corpus rows at a time, each chunk's top k merged
    into a running top k, so memory is O(chunk_size^2 + q k). ``ids`` (n,) names the corpus rows (default
    0..n-1). Ties are broken by torch.topk, in no stated order.
    """
    if metric not in METRICS:
        raise ValueError(f"metric = {metric!r}; pass one of {', '.join(METRICS)}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size = {chunk_size!r}; pass a positive integer")
    base = as_matrix(corpus, "corpus")
    query = as_matrix(queries, "queries", base.shape[1])
    k = check_k(k, base.shape[0])
    names = np.arange(base.shape[0], dtype=np.int64) if ids is None else as_ids(ids, base.shape[0])
    if metric == "cosine":
        base, query = normalise(base, "corpus"), normalise(query, "queries")
    else:
        base, query = check_ip_norms(base, "corpus"), check_ip_norms(query, "queries")
    # Deferred: torch takes seconds to import, and a search of a saved faiss index (crl search) does not need it.
    import torch

    corpus_t, query_t = torch.from_numpy(base), torch.from_numpy(query)
    scores = torch.empty(query.shape[0], k)
    rows = torch.empty(query.shape[0], k, dtype=torch.int64)
    for start in range(0, query.shape[0], chunk_size):
        block = query_t[start : start + chunk_size]
        scores[start : start + len(block)], rows[start : start + len(block)] = _top_k(
            block, corpus_t, k, chunk_size
        )
    found = np.full(query.shape[0], k, dtype=np.int64)
    return SearchResult(scores=scores.numpy(), ids=names[rows.numpy()], found=found)


def _top_k(
    query: torch.Tensor, corpus: torch.Tensor, k: int, chunk_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The top k (scores, corpus rows) of ``query`` over ``corpus``, merged chunk by chunk of the corpus."""
    # Deferred: torch takes seconds to import, and a search of a saved faiss index (crl search) does not need it.
    import torch

    best = torch.full((len(query), 0), -torch.inf)
    best_rows = torch.empty((len(query), 0), dtype=torch.int64)
    for start in range(0, len(corpus), chunk_size):
        part = query @ corpus[start : start + chunk_size].T
        top = part.topk(min(k, part.shape[1]), dim=1)
        merged = torch.cat([best, top.values], dim=1)
        merged_rows = torch.cat([best_rows, top.indices + start], dim=1)
        keep = merged.topk(min(k, merged.shape[1]), dim=1)
        best, best_rows = keep.values, merged_rows.gather(1, keep.indices)
    return best, best_rows
