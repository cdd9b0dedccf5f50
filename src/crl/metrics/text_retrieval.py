"""Held-out text retrieval: embed a :class:`RetrievalTask`, rank its corpus, score with qrels, compare models.

:func:`evaluate_retrieval` embeds the queries with the anchor tower f and the corpus with the positive tower g,
ranks the whole corpus for every query by cosine in an exact :class:`crl.search.Index`, and reports
sentence-transformers' metrics on binary qrels, trec_eval's on graded ones (:mod:`crl.metrics.ir`, whose
docstring gives each formula: accuracy@k, precision@k, recall@k, MRR@k, nDCG@k, MAP@k) with their per-query
values, and the top of each ranking
(:func:`trec_run` turns it into a TREC run). Cut-offs above the corpus size are lowered to it
(:func:`crl.metrics.ir.capped_ks`).

:func:`paired_bootstrap` gives the interval of a difference between two models on the same queries:
delta = (1/Q) sum_q (b_q - a_q), resampling queries with replacement (B draws, percentile interval), so the
correlation of the two models over queries is kept (a paired design). :func:`compare_reports` does it for every
metric two reports of one task share.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from torch import Tensor

from crl.data.text.pairs import RetrievalTask
from crl.metrics.ir import IRReport, capped_ks, evaluate_index
from crl.search import Index

__all__ = [
    "TEXT_KS",
    "Difference",
    "EmbedTexts",
    "TextRetrieval",
    "compare_reports",
    "evaluate_retrieval",
    "paired_bootstrap",
    "trec_run",
]

TEXT_KS: dict[str, tuple[int, ...]] = {"ndcg": (10,), "mrr": (10,), "recall": (1, 10, 100), "accuracy": (1,)}
"""The cut-offs reported for text retrieval by default (crl eval reports sentence-transformers' DEFAULT_KS)."""

EmbedTexts = Callable[[Sequence[str]], Tensor]
"""texts -> their embeddings (n, d), float32 on the CPU."""


@dataclass(frozen=True)
class TextRetrieval:
    """The metrics of one model on a task, and the top of its ranking.

    Attributes:
        report: the IR metrics (means and per-query values).
        ids: (Q, K) corpus indices of each query's top K documents by decreasing cosine (K the largest cut-off).
        scores: (Q, K) their cosines.
    """

    report: IRReport
    ids: np.ndarray
    scores: np.ndarray


def evaluate_retrieval(
    task: RetrievalTask,
    embed_queries: EmbedTexts,
    embed_corpus: EmbedTexts,
    *,
    ks: Mapping[str, Sequence[int]] | None = None,
) -> TextRetrieval:
    """IR metrics of ``task`` with queries embedded by ``embed_queries`` and documents by ``embed_corpus``
    (cosine scores), every query against the whole corpus; cut-offs (default :data:`TEXT_KS`) above the corpus
    size are lowered to it."""
    chosen = capped_ks(TEXT_KS if ks is None else ks, len(task.corpus))
    corpus = embed_corpus(task.corpus).numpy()
    index = Index.build(corpus, kind="flat", metric="cosine")
    queries = embed_queries(task.queries).numpy()
    report = evaluate_index(index, queries, qrels=task.qrels(), ks=chosen)
    found = index.search(queries, max(max(values) for values in chosen.values() if values))
    return TextRetrieval(report, found.ids, found.scores)


def trec_run(task: RetrievalTask, result: TextRetrieval) -> dict[str, list[tuple[str, float]]]:
    """``{query_id: [(doc_id, cosine), ...]}`` of a result's rankings, best first, for
    :func:`crl.metrics.trec.write_run`."""
    return {
        query: [(task.doc_ids[int(d)], float(s)) for d, s in zip(ids, scores, strict=True) if d >= 0]
        for query, ids, scores in zip(task.query_ids, result.ids, result.scores, strict=True)
    }


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

    delta = (1/Q) sum_q (b_q - a_q); each of the ``draws`` resamples takes Q query indices uniformly with
    replacement and averages b - a over them; [low, high] are the (1 - level)/2 and (1 + level)/2 quantiles of
    those means. Equal a and b give delta = 0 and [0, 0] exactly.

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


def compare_reports(
    a: IRReport, b: IRReport, *, draws: int = 10000, level: float = 0.95, seed: int = 0
) -> dict[str, Difference]:
    """``{"ndcg@10": paired_bootstrap(a's, b's), ...}``: b - a for every metric both reports hold, each from the
    same ``seed`` (so every metric's interval resamples the same query sets).

    Raises:
        ValueError: if the reports scored different numbers of queries (they must come from one task).
    """
    if a.n_queries != b.n_queries:
        raise ValueError(
            f"the reports scored {a.n_queries} and {b.n_queries} queries; compare two models on one task"
        )
    return {
        f"{name}@{k}": paired_bootstrap(values, b.per_query[name][k], draws=draws, level=level, seed=seed)
        for name, by_k in a.per_query.items()
        for k, values in by_k.items()
        if k in b.per_query.get(name, {})
    }
