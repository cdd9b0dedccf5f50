"""Held-out text retrieval: embed a :class:`RetrievalTask`, rank its corpus, score with qrels, compare models.

:func:`evaluate_retrieval` embeds the queries with the anchor tower f and the corpus with the positive tower g,
ranks the corpus by cosine in an exact :class:`crl.search.Index`, and reports sentence-transformers' metrics
(:mod:`crl.metrics.ir`: nDCG@10, MRR@10, recall@k, accuracy@k) with their per-query values.

:func:`paired_bootstrap` gives the interval of a difference between two models on the same queries:
delta = (1/Q) sum_q (b_q - a_q), resampling queries with replacement (B draws, percentile interval), so the
correlation of the two models over queries is kept (a paired design).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from crl.data.text.pairs import RetrievalTask
from crl.metrics.ir import IRReport, evaluate_index
from crl.search import Index

__all__ = ["TEXT_KS", "Difference", "evaluate_retrieval", "paired_bootstrap"]

TEXT_KS: dict[str, tuple[int, ...]] = {"ndcg": (10,), "mrr": (10,), "recall": (1, 10, 100), "accuracy": (1,)}
"""The cut-offs reported for text retrieval."""

EmbedTexts = Callable[[Sequence[str]], Tensor]


def evaluate_retrieval(
    task: RetrievalTask,
    embed_queries: EmbedTexts,
    embed_corpus: EmbedTexts,
    *,
    ks: Mapping[str, Sequence[int]] | None = None,
) -> IRReport:
    """IR metrics of ``task`` with queries embedded by ``embed_queries`` and documents by ``embed_corpus``.

    Raises:
        ValueError: if the corpus is smaller than the largest cut-off.
    """
    chosen = dict(TEXT_KS if ks is None else ks)
    corpus = embed_corpus(task.corpus).numpy()
    index = Index.build(corpus, kind="flat", metric="cosine")
    queries = embed_queries(task.queries).numpy()
    return evaluate_index(index, queries, qrels=[sorted(r) for r in task.relevant], ks=chosen)


@dataclass(frozen=True)
class Difference:
    """delta = mean(b - a) over Q paired queries and its bootstrap interval [low, high] at ``level``."""

    delta: float
    low: float
    high: float
    level: float
    n_queries: int


def paired_bootstrap(
    a: np.ndarray, b: np.ndarray, *, draws: int = 10000, level: float = 0.95, seed: int = 0
) -> Difference:
    """Percentile bootstrap of mean(b - a) over queries resampled with replacement (paired).

    Raises:
        ValueError: for arrays of different shapes, fewer than 2 queries, or a level outside (0, 1).
    """
    first, second = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if first.shape != second.shape or first.ndim != 1 or first.size < 2:
        raise ValueError(
            f"a and b must be per-query values of one shape (Q >= 2), got {first.shape}, {second.shape}"
        )
    if not 0 < level < 1:
        raise ValueError(f"level = {level}; pass a confidence level in (0, 1), e.g. 0.95")
    difference = second - first
    rng = np.random.default_rng(seed)
    means = np.empty(draws)
    for start in range(0, draws, 1000):
        rows = rng.integers(0, difference.size, size=(min(1000, draws - start), difference.size))
        means[start : start + rows.shape[0]] = difference[rows].mean(axis=1)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return Difference(float(difference.mean()), float(low), float(high), level, int(difference.size))
