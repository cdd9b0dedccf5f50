"""Information-retrieval metrics as the field reports them: queries, a corpus and relevance judgements (qrels).

A query q has judged grades g(i) (integers; g(i) > 0 makes item i relevant, 0 or below does not), R_q >= 1
relevant items, and its ranking r = 1, 2, ... by decreasing score; rel(r) = 1 if the item at rank r is relevant
and g(r) its grade. Binary qrels (every grade 1, as sentence-transformers' ``InformationRetrievalEvaluator``
takes them) are scored by that evaluator's definitions:

- accuracy@k = 1[some rel(r) = 1 with r <= k] (a hit rate, sentence-transformers' accuracy@k);
- precision@k = (1/k) sum_{r <= k} rel(r);
- recall@k = (1/R_q) sum_{r <= k} rel(r);
- MRR@k = 1 / (first r <= k with rel(r) = 1), 0 if none;
- nDCG@k = sum_{r <= k} rel(r) / log2(r + 1), divided by sum_{i <= min(R_q, k)} 1 / log2(i + 1);
- MAP@k: AP@k = (1 / min(k, R_q)) sum_{r <= k, rel(r) = 1} precision@r.

Graded qrels (some grade above 1, as BEIR's and TREC's) are scored as trec_eval scores them (through
pytrec_eval, as BEIR and MTEB publish their figures): nDCG@k with the linear gain g (trec_eval's ``ndcg_cut``:
DCG@k = sum_{r <= k} max(g(r), 0) / log2(r + 1), divided by the DCG@k of the judged grades sorted in
decreasing order), MAP@k divided by R_q (trec_eval's ``map_cut``: AP@k = (1/R_q) sum_{r <= k, rel(r) = 1}
precision@r), and the others on rel, as above: they equal trec_eval's ``success_k``, ``P_k``, ``recall_k`` and
``recip_rank`` of the run cut at k. On binary qrels the two families differ only in MAP@k when R_q > k.
:attr:`IRReport.definitions` names the one each report follows.

Each is averaged over the queries that have at least one relevant item (queries without one are skipped, as
sentence-transformers does, and counted in ``n_skipped``; trec_eval scores them 0).

Tie rule (crl's one rule for every ranking metric, also :mod:`crl.metrics.retrieval`): pessimistic, among equal
scores the lower grades rank first (the non-relevant items before the relevant ones). sentence-transformers
breaks ties by ascending corpus id, trec_eval by descending document id (as strings);
:func:`ir_metrics_from_ranking` takes ``ties="trec_eval"`` for the latter. The rules agree whenever no two
items of different grades tie.

:func:`evaluate_index` computes the metrics over any search backend (a :class:`crl.search.Index`, or a Milvus
collection, :class:`crl.search.milvus.MilvusIndex`) in batches of queries, so the corpus never has to fit in one
score matrix. An exact flat :class:`crl.search.Index` is ranked from dense blocks of scores s = <q, v> against
its stored vectors v: per query the K-th largest score t (``K = max k``) is found by partition, the items above t
are sorted, and the tie block at t is filled from its counts (non-relevant first), so a degenerate embedding whose
scores all tie costs no more than any other. Any other backend is asked for its top K items, the request widened
while the K-th score ties with the next one so that ties at the cut-off are seen whole (an approximate index ranks
what it finds). TREC qrels and run files: :mod:`crl.metrics.trec`.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from crl.search import Index, SearchBackend, as_matrix, normalise

__all__ = [
    "DEFAULT_KS",
    "DEFINITIONS",
    "IRReport",
    "Ties",
    "capped_ks",
    "class_retrieval",
    "evaluate_index",
    "gallery_class_retrieval",
    "ir_metrics_from_ranking",
    "label_relevance",
]

DEFAULT_KS: dict[str, tuple[int, ...]] = {
    "accuracy": (1, 3, 5, 10),
    "precision": (1, 3, 5, 10),
    "recall": (1, 3, 5, 10),
    "mrr": (10,),
    "ndcg": (10,),
    "map": (100,),
}
"""The cut-offs of each metric: sentence-transformers' defaults."""

Ties = Literal["pessimistic", "trec_eval"]
"""How equal scores are ordered: lower grades first (crl's rule), or by descending document id (trec_eval's)."""

_BINARY = "sentence-transformers' InformationRetrievalEvaluator (binary relevance)"
DEFINITIONS: dict[bool, dict[str, str]] = {
    False: dict.fromkeys(DEFAULT_KS, _BINARY),
    True: {
        "accuracy": "trec_eval's success_k (relevant: grade > 0)",
        "precision": "trec_eval's P_k (relevant: grade > 0)",
        "recall": "trec_eval's recall_k (relevant: grade > 0)",
        "mrr": "trec_eval's recip_rank of the top k (relevant: grade > 0)",
        "ndcg": "trec_eval's ndcg_cut_k: linear gain = grade, as pytrec_eval gives BEIR and MTEB",
        "map": "trec_eval's map_cut_k: AP@k divided by R_q",
    },
}
"""Whose definition each metric follows, for binary (``False``) and graded (``True``) qrels."""


@dataclass(frozen=True)
class IRReport:
    """Mean of each metric over the evaluated queries: ``values["ndcg"][10]`` is nDCG@10.

    Attributes:
        values: metric name -> k -> mean over the queries with a relevant item.
        n_queries: queries evaluated (those with at least one relevant item).
        n_skipped: queries skipped for having no relevant item.
        per_query: metric name -> k -> (n_queries,) float64 values, for bootstraps or custom summaries.
        search_recall: K -> the mean share of an exact search's top K that the index's own top K holds, over
            every query (K the largest cut-off), when :func:`evaluate_index` was given an ``exact`` backend;
            else empty. 1.0 for an exact index; below it, what an approximate one (HNSW, IVF) loses.
        graded: whether the qrels held a grade above 1, so nDCG and MAP follow trec_eval (module docstring).
    """

    values: dict[str, dict[int, float]]
    n_queries: int
    n_skipped: int
    per_query: dict[str, dict[int, np.ndarray]] = field(repr=False)
    search_recall: dict[int, float] = field(default_factory=dict)
    graded: bool = False

    @property
    def definitions(self) -> dict[str, str]:
        """Metric name -> whose definition it follows (:data:`DEFINITIONS`), for the metrics reported."""
        return {name: DEFINITIONS[self.graded][name] for name in self.values}

    def definitions_note(self) -> str:
        """One line for a report's reader: whose definitions its metrics follow, and the tie rule."""
        if self.graded:
            return (
                "graded qrels: trec_eval's definitions (pytrec_eval, as BEIR and MTEB publish): nDCG@k with gain ="
                " grade (ndcg_cut), MAP@k over R_q (map_cut), the others on grade > 0; ties: lower grades first"
                " (trec_eval orders them by descending document id)"
            )
        return (
            "binary qrels: sentence-transformers' InformationRetrievalEvaluator definitions (equal to trec_eval's"
            " but MAP@k when a query has more than k relevant documents); ties: relevant documents last"
        )

    def as_flat_dict(self) -> dict[str, float]:
        """``{"accuracy@1": ..., "ndcg@10": ..., "map@100": ..., "search_recall@100": ...}``."""
        flat = {f"{name}@{k}": value for name, by_k in self.values.items() for k, value in by_k.items()}
        return flat | {f"search_recall@{k}": value for k, value in self.search_recall.items()}


def capped_ks(ks: Mapping[str, Sequence[int]], top: int) -> dict[str, tuple[int, ...]]:
    """``ks`` with every cut-off above ``top`` (the items a query can rank) lowered to ``top``, repeats merged:
    ``capped_ks({"map": (100,)}, 30) == {"map": (30,)}``."""
    return {name: tuple(sorted({min(k, top) for k in values})) for name, values in ks.items()}


def _check_ks(ks: Mapping[str, Sequence[int]] | None) -> dict[str, tuple[int, ...]]:
    chosen = dict(DEFAULT_KS) if ks is None else {name: tuple(values) for name, values in ks.items()}
    unknown = sorted(set(chosen) - set(DEFAULT_KS))
    if unknown:
        raise ValueError(f"ks names {unknown[0]!r}; the metrics are {', '.join(DEFAULT_KS)}")
    for name, values in chosen.items():
        for k in values:
            if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
                raise ValueError(f"ks[{name!r}] holds {k!r}; cut-offs are integers >= 1")
    if not any(chosen.values()):
        raise ValueError("ks holds no cut-off; pass at least one, e.g. {'ndcg': (10,)}")
    return chosen


def _per_query(
    grades: np.ndarray,
    n_relevant: np.ndarray,
    ks: dict[str, tuple[int, ...]],
    ideal: np.ndarray | None = None,
) -> dict:
    """Per-query metrics of ranked grades ``grades`` (q, K) (0: not relevant) with R_q = ``n_relevant`` (q,).

    ``ideal`` (q, K), each query's judged grades in decreasing order, selects the graded definitions (linear gain
    nDCG, MAP over R_q); ``None`` the binary ones (module docstring).
    """
    rel = (grades > 0).astype(np.float64)
    depth = rel.shape[1]
    ranks = np.arange(1, depth + 1, dtype=np.float64)
    hits = np.cumsum(rel, axis=1)
    discount = 1.0 / np.log2(ranks + 1.0)
    first = np.where(rel.any(axis=1), np.argmax(rel, axis=1) + 1.0, np.inf)
    r_q = n_relevant.astype(np.float64)
    if ideal is None:
        gains = rel
        ideal_dcg = np.concatenate([[0.0], np.cumsum(discount)])[
            np.minimum(n_relevant[:, None], np.arange(1, depth + 1))
        ]
    else:
        gains = np.maximum(grades, 0).astype(np.float64)
        ideal_dcg = np.cumsum(ideal.astype(np.float64) * discount, axis=1)
    dcg = np.cumsum(gains * discount, axis=1)

    def at(values: np.ndarray, k: int) -> np.ndarray:
        return values[:, min(k, depth) - 1]

    out: dict[str, dict[int, np.ndarray]] = {}
    out["accuracy"] = {k: (first <= k).astype(np.float64) for k in ks.get("accuracy", ())}
    out["precision"] = {k: at(hits, k) / k for k in ks.get("precision", ())}
    out["recall"] = {k: at(hits, k) / r_q for k in ks.get("recall", ())}
    out["mrr"] = {k: np.where(first <= k, 1.0 / first, 0.0) for k in ks.get("mrr", ())}
    out["ndcg"] = {k: at(dcg, k) / at(ideal_dcg, k) for k in ks.get("ndcg", ())}
    precision_at_r = hits / ranks
    out["map"] = {
        k: (precision_at_r[:, :k] * rel[:, :k]).sum(axis=1) / (np.minimum(r_q, k) if ideal is None else r_q)
        for k in ks.get("map", ())
    }
    return {name: by_k for name, by_k in out.items() if by_k}


def _report(
    parts: list[dict], n_skipped: int, search_recall: dict[int, float] | None = None, graded: bool = False
) -> IRReport:
    if not parts:
        raise ValueError("no query has a relevant item; check the qrels (or labels) against the corpus ids")
    per_query = {
        name: {k: np.concatenate([part[name][k] for part in parts]) for k in by_k}
        for name, by_k in parts[0].items()
    }
    values = {name: {k: float(v.mean()) for k, v in by_k.items()} for name, by_k in per_query.items()}
    n = len(next(iter(next(iter(per_query.values())).values())))
    return IRReport(
        values=values,
        n_queries=n,
        n_skipped=n_skipped,
        per_query=per_query,
        search_recall=search_recall or {},
        graded=graded,
    )


def _pessimistic_order(scores: np.ndarray, relevant: np.ndarray) -> np.ndarray:
    """Column order per row: decreasing score, lower grades (``relevant``: flags or grades) first among equal
    scores."""
    return np.lexsort((relevant, -scores.astype(np.float64)), axis=1)


def ir_metrics_from_ranking(
    ranking: Mapping[Hashable, Sequence[tuple[Hashable, float]]],
    qrels: Mapping[Hashable, Collection[Hashable] | Mapping[Hashable, int]],
    *,
    ks: Mapping[str, Sequence[int]] | None = None,
    ties: Ties = "pessimistic",
) -> IRReport:
    """The metrics of a ranking given as ``{query: [(item, score), ...]}`` (e.g. a TREC run) against
    ``qrels``: ``{query: relevant items}`` (binary) or ``{query: {item: grade}}`` (graded when a grade
    exceeds 1; a grade <= 0 is judged not relevant), the definitions of the module docstring.

    Each query's items are ordered by decreasing score, equal scores by ``ties``: ``"pessimistic"`` (crl's rule,
    lower grades first) or ``"trec_eval"`` (descending item id as a string, as trec_eval and pytrec_eval order
    them, so the figures equal theirs on runs with ties too).

    A query absent from ``ranking`` counts as retrieving nothing; one absent from ``qrels`` (or with no
    relevant item) is skipped. An item ranked twice for one query is a ``ValueError`` naming both (it would
    count as two hits and lift recall and nDCG above 1); :func:`crl.metrics.trec.read_run` keeps each item's
    best line.
    """
    chosen = _check_ks(ks)
    if ties not in ("pessimistic", "trec_eval"):
        raise ValueError(f"ties = {ties!r}; pass 'pessimistic' (crl's rule) or 'trec_eval'")
    depth = max(max(values) for values in chosen.values() if values)
    judged = {query: _grades(query, items) for query, items in qrels.items()}
    graded = any(grade > 1 for grades in judged.values() for grade in grades.values())
    parts, skipped = [], 0
    for query, grades in judged.items():
        if not grades:
            skipped += 1
            continue
        hits = list(ranking.get(query, ()))
        _check_distinct(query, [item for item, _ in hits])
        scores = np.array([float(score) for _, score in hits], dtype=np.float64)
        ranked_grades = np.array([grades.get(item, 0) for item, _ in hits], dtype=np.int64)
        if not np.isfinite(scores).all():
            raise ValueError(f"ranking[{query!r}] holds a NaN or infinite score; fix the run")
        if not hits:
            order = np.empty(0, dtype=np.int64)
        elif ties == "trec_eval":
            order = np.array(
                sorted(range(len(hits)), key=lambda i: (-scores[i], _Descending(str(hits[i][0]))))
            )
        else:
            order = _pessimistic_order(scores[None, :], ranked_grades[None, :])[0]
        ranked = np.zeros((1, depth), dtype=np.int64)
        ranked[0, : min(depth, len(hits))] = ranked_grades[order][:depth]
        ideal = _ideal(list(grades.values()), depth) if graded else None
        parts.append(_per_query(ranked, np.array([len(grades)]), chosen, ideal))
    skipped += sum(1 for query in ranking if query not in qrels)
    return _report(parts, skipped, graded=graded)


class _Descending:
    """A string key that sorts in decreasing order (trec_eval's tie order of document ids)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __lt__(self, other: _Descending) -> bool:
        return self.text > other.text


def _grades(query: Hashable, items: Collection[Hashable] | Mapping[Hashable, int]) -> dict[Hashable, int]:
    """``{item: grade > 0}`` of one query's judgements: a collection's items at grade 1, a mapping's positive
    grades (the others are not relevant)."""
    if not isinstance(items, Mapping):
        return dict.fromkeys(items, 1)
    for item, grade in items.items():
        if isinstance(grade, bool) or not isinstance(grade, int | np.integer):
            raise ValueError(f"qrels[{query!r}][{item!r}] = {grade!r}; a grade is an integer")
    return {item: int(grade) for item, grade in items.items() if grade > 0}


def _ideal(grades: Sequence[int], depth: int) -> np.ndarray:
    """(1, depth) the grades in decreasing order, cut or padded with 0 to ``depth``: the ideal ranking's gains."""
    ideal = np.zeros((1, depth), dtype=np.int64)
    best = sorted(grades, reverse=True)[:depth]
    ideal[0, : len(best)] = best
    return ideal


def _check_distinct(query: Hashable, items: Sequence[Hashable]) -> None:
    """Raise a ``ValueError`` naming ``query`` and the item when ``items`` holds an item twice."""
    seen: set[Hashable] = set()
    for item in items:
        if item in seen:
            raise ValueError(
                f"ranking[{query!r}] holds the item {item!r} more than once; rank each item once per query"
                " (keep its best score)"
            )
        seen.add(item)


def label_relevance(query_labels: Any, corpus_labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """Class relevance (an item is relevant to a query iff they share a label), checked: (query_labels,
    corpus_labels) as int64 arrays, for :func:`evaluate_index`'s ``labels``."""
    arrays = []
    for name, labels in (("query_labels", query_labels), ("corpus_labels", corpus_labels)):
        arr = np.asarray(labels.cpu() if hasattr(labels, "cpu") else labels)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise ValueError(f"{name} must be a 1-D integer array, got {arr.dtype} {arr.shape}")
        arrays.append(arr.astype(np.int64))
    return arrays[0], arrays[1]


def evaluate_index(
    index: SearchBackend,
    queries: Any,
    *,
    qrels: Sequence[Collection[int] | Mapping[int, int]] | None = None,
    labels: tuple[Any, Any] | None = None,
    self_ids: Any = None,
    ks: Mapping[str, Sequence[int]] | None = None,
    batch_size: int = 1024,
    ef_search: int | None = None,
    nprobe: int | None = None,
    exact: SearchBackend | None = None,
) -> IRReport:
    """IR metrics of ``queries`` (q, d) searched in ``index`` (any :class:`crl.search.SearchBackend`: crl's
    faiss index or a Milvus collection), in batches of ``batch_size`` queries.

    Relevance: either ``qrels``, one entry per query, a collection of relevant index ids (binary) or a mapping
    ``{id: grade}`` (graded when a grade exceeds 1: the module docstring's trec_eval definitions), or ``labels`` =
    (query labels (q,), corpus labels indexed by id) for class relevance (same label = relevant). ``self_ids``
    (q,) names each query's own item in the index (-1: none), removed from its ranking and from its
    relevant set (queries drawn from the corpus). ``exact``, an exact backend over the same items (a flat
    :class:`crl.search.Index` or a Milvus FLAT collection), is searched alike and the report's
    ``search_recall`` says how much of its top K (the largest cut-off) the index found.
    """
    chosen = _check_ks(ks)
    if (qrels is None) == (labels is None):
        raise ValueError("pass exactly one of qrels (relevant ids per query) and labels (class relevance)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size = {batch_size!r}; pass a positive integer")
    matrix = _query_matrix(queries)
    n_queries = matrix.shape[0]
    own = _self_ids(self_ids, n_queries)
    depth = max(max(values) for values in chosen.values() if values)
    limit = len(index) - (1 if own is not None else 0)
    if depth > limit:
        raise ValueError(f"the largest cut-off k = {depth} exceeds the {limit} rankable items; lower ks")
    relevance = _Relevance(index, qrels, labels, n_queries)
    dense = _DenseCorpus(index) if isinstance(index, Index) and index.kind == "flat" else None
    step = batch_size if dense is None else dense.rows_per_block(batch_size)
    parts, skipped, overlaps = [], 0, []
    for start in range(0, n_queries, step):
        rows = np.arange(start, min(start + step, n_queries))
        mine = None if own is None else own[rows]
        if exact is not None:
            ids, _ = _search_with_ties(index, matrix[rows], depth, mine, ef_search, nprobe)
            reference, _ = _search_with_ties(exact, matrix[rows], depth, mine, None, None)
            overlaps.append(_overlap(ids[:, :depth], reference[:, :depth]))
        if dense is not None:
            scores = dense.scores(matrix[rows], mine)
            grades, n_relevant = relevance.of_all(rows, dense.ids, mine)
            ranked = _tie_complete_ranking(scores, grades, depth)
        else:
            ids, scores = _search_with_ties(index, matrix[rows], depth, mine, ef_search, nprobe)
            grades, n_relevant = relevance.of(rows, ids, mine)
            ranked = np.take_along_axis(grades, _pessimistic_order(scores, grades), axis=1)[:, :depth]
        keep = n_relevant > 0
        skipped += int((~keep).sum())
        if keep.any():
            ideal = relevance.ideal(rows, mine, depth)
            parts.append(
                _per_query(ranked[keep], n_relevant[keep], chosen, None if ideal is None else ideal[keep])
            )
    recall = {depth: float(np.concatenate(overlaps).mean())} if overlaps else {}
    return _report(parts, skipped, recall, relevance.graded)


_DENSE_SCORES = 1 << 24
"""The most scores one block of the dense exact evaluation holds (64 MiB of float32)."""


class _DenseCorpus:
    """The stored vectors of an exact flat index, scored against blocks of queries as the index scores them:
    s(q, v) = <q, v>, the query L2-normalised under ``"cosine"`` (the stored vectors already are).

    Items with identical stored vectors share one column of the product, so their scores tie exactly: a BLAS
    product can round equal columns differently by their position in the matrix, which would order a collapsed
    embedding's copies by chance instead of by the tie rule."""

    def __init__(self, index: Index) -> None:
        self.ids = index.ids
        self.metric = index.metric
        vectors = index.vectors(self.ids)
        distinct, copy_of = np.unique(vectors, axis=0, return_inverse=True)
        shared = len(distinct) < len(vectors)
        self.distinct: np.ndarray = distinct if shared else vectors
        self.copy_of: np.ndarray | None = copy_of.ravel() if shared else None
        self._by_id = np.argsort(self.ids)

    def rows_per_block(self, batch_size: int) -> int:
        """Queries per block: ``batch_size``, fewer where a block's scores would exceed :data:`_DENSE_SCORES`."""
        return max(1, min(batch_size, _DENSE_SCORES // max(len(self.ids), 1)))

    def scores(self, queries: np.ndarray, own: np.ndarray | None) -> np.ndarray:
        """Scores (b, N) float32, column j for the item ``ids[j]``; each query's own item (if present) -inf.

        Raises:
            ValueError: if ``queries`` are not finite, or their inner products overflow float32 (metric "ip").
        """
        checked = as_matrix(queries, "queries", self.distinct.shape[1])
        if self.metric == "cosine":
            checked = normalise(checked, "queries")
        scores = checked @ self.distinct.T
        if self.copy_of is not None:
            scores = scores[:, self.copy_of]
        if not np.isfinite(scores).all():
            raise ValueError(
                "queries overflow float32 inner products with the index's vectors; scale them down"
            )
        if own is not None:
            slot = np.minimum(np.searchsorted(self.ids, own, sorter=self._by_id), len(self.ids) - 1)
            column = self._by_id[slot]
            present = self.ids[column] == own
            scores[np.flatnonzero(present), column[present]] = -np.inf
        return scores


def _tie_complete_ranking(scores: np.ndarray, grades: np.ndarray, depth: int) -> np.ndarray:
    """Grades (b, depth) of each row's top ``depth`` items under the pessimistic tie rule, from dense scores
    (b, N) and grades (b, N) (relevance flags, or integer grades >= 0, 0 for not relevant), without sorting the N
    items.

    With t the depth-th largest score of a row (found by partition): the items with s > t (fewer than depth) are
    sorted by decreasing score, lower grades first among equals; the remaining positions hold the tie block
    {s = t} in increasing grade, so there position p (counted from the block's start) holds the smallest grade
    g with #{s = t, grade <= g} > p. Equal to sorting every item by (-s, grade) and cutting at depth. Scores of
    -inf (a query's own item) never reach the top when depth is below the finite count.
    """
    top = np.argpartition(scores, scores.shape[1] - depth, axis=1)[:, : -depth - 1 : -1]
    top_scores = np.take_along_axis(scores, top, axis=1)
    top_grades = np.take_along_axis(grades, top, axis=1)
    boundary = top_scores[:, depth - 1 : depth]
    above = top_scores > boundary
    key = np.where(above, -top_scores.astype(np.float64), np.inf)
    ranked = np.take_along_axis(top_grades, np.lexsort((top_grades, key), axis=1), axis=1)
    tied = scores == boundary
    if grades.dtype == bool:
        levels = np.array([False, True])
    else:
        levels = np.concatenate([[0], np.unique(grades[grades > 0])]).astype(grades.dtype)
    at_or_below = np.stack([(tied & (grades <= level)).sum(axis=1) for level in levels], axis=1)
    position = np.arange(depth)[None, :] - above.sum(axis=1, keepdims=True)
    block = levels[(at_or_below[:, None, :] <= position[:, :, None]).sum(axis=2)]
    return np.where(position >= 0, block, ranked)


def _overlap(found: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per row, the share of ``reference``'s items (ids >= 0) that ``found`` holds (1.0 for a row without any)."""
    shares = []
    for got, wanted in zip(found, reference, strict=True):
        wanted = wanted[wanted >= 0]
        shares.append(np.isin(wanted, got).mean() if wanted.size else 1.0)
    return np.asarray(shares, dtype=np.float64)


def _query_matrix(queries: Any) -> np.ndarray:
    """``queries`` (an array or a tensor of any floating type) as a 2-D numpy array (q, d)."""
    if hasattr(queries, "detach"):
        queries = queries.detach().cpu()
        queries = queries.float() if queries.is_floating_point() and queries.dtype.itemsize < 4 else queries
    matrix = np.asarray(queries)
    if matrix.ndim != 2:
        raise ValueError(
            f"queries must be a 2-D array (q, d), got shape {matrix.shape}; pass one query as"
            " queries.reshape(1, -1)"
        )
    return matrix


def _self_ids(self_ids: Any, n_queries: int) -> np.ndarray | None:
    if self_ids is None:
        return None
    arr = np.asarray(self_ids.cpu() if hasattr(self_ids, "cpu") else self_ids)
    if arr.shape != (n_queries,) or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(
            f"self_ids must hold {n_queries} integers (one per query), got {arr.dtype} {arr.shape}"
        )
    return arr.astype(np.int64)


def _search_with_ties(
    index: SearchBackend,
    queries: np.ndarray,
    depth: int,
    own: np.ndarray | None,
    ef_search: int | None,
    nprobe: int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top items beyond ``depth`` (own items dropped) until the depth-th score is strictly above the last."""
    want = depth + 1
    while True:
        take = min(want + (1 if own is not None else 0), len(index))
        found = index.search(queries, take, ef_search=ef_search, nprobe=nprobe)
        ids, scores = found.ids, found.scores
        if own is not None:
            ids, scores = _drop_own(ids, scores, own)
        boundary = scores[:, depth - 1]
        tied = np.isfinite(boundary) & (scores[:, -1] >= boundary)
        complete = take == len(index) or not tied.any()
        if complete:
            return ids, scores
        want *= 2


def _drop_own(ids: np.ndarray, scores: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row without its own id (or without its last column when the own id is absent)."""
    mask = ids == own[:, None]
    mask[~mask.any(axis=1), -1] = True
    width = ids.shape[1] - 1
    return ids[~mask].reshape(-1, width), scores[~mask].reshape(-1, width)


class _Relevance:
    """Grades of retrieved ids (0: not relevant; 1 for every relevant item of binary qrels and of labels) and R_q
    per query, from qrels or from labels."""

    def __init__(self, index: SearchBackend, qrels: Any, labels: Any, n_queries: int) -> None:
        self.qrels: list[tuple[np.ndarray, np.ndarray]] | None = None
        self.labels: tuple[np.ndarray, np.ndarray] | None = None
        self.graded = False
        if qrels is not None:
            if len(qrels) != n_queries:
                raise ValueError(
                    f"qrels has {len(qrels)} entries for {n_queries} queries; pass one per query"
                )
            self.qrels = [_judged_ids(query, items) for query, items in enumerate(qrels)]
            self.graded = any(bool((grades > 1).any()) for _, grades in self.qrels)
        else:
            query_labels, corpus_labels = label_relevance(*labels)
            if query_labels.shape[0] != n_queries:
                raise ValueError(f"labels[0] has {query_labels.shape[0]} entries for {n_queries} queries")
            present = index.ids
            if corpus_labels.shape[0] <= int(present.max(initial=-1)):
                raise ValueError(f"labels[1] has {corpus_labels.shape[0]} entries; pass corpus_labels[id]")
            self.labels = (query_labels, corpus_labels)
            self.counts = np.bincount(corpus_labels[present], minlength=int(query_labels.max(initial=0)) + 1)

    def _sets(self, rows: np.ndarray, own: np.ndarray | None) -> list[tuple[np.ndarray, np.ndarray]]:
        """(relevant ids, their grades) of the queries ``rows``, each without its own item."""
        assert self.qrels is not None
        sets = [self.qrels[row] for row in rows]
        if own is None:
            return sets
        return [(ids[ids != o], grades[ids != o]) for (ids, grades), o in zip(sets, own, strict=True)]

    def _label_counts(self, query_labels: np.ndarray, own: np.ndarray | None) -> np.ndarray:
        """R_q of class relevance: the items of the query's label, less its own item."""
        assert self.labels is not None
        corpus_labels = self.labels[1]
        known = (query_labels >= 0) & (query_labels < self.counts.shape[0])
        counts = np.where(known, self.counts[np.clip(query_labels, 0, self.counts.shape[0] - 1)], 0)
        if own is not None:
            counts = counts - ((own >= 0) & (corpus_labels[np.maximum(own, 0)] == query_labels))
        return counts

    def of(self, rows: np.ndarray, ids: np.ndarray, own: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """(grades (b, K) of ``ids``, R_q (b,)) for the queries ``rows``."""
        if self.qrels is not None:
            sets = self._sets(rows, own)
            grades = np.stack([_grades_of(line, *judged) for line, judged in zip(ids, sets, strict=True)])
            return np.where(ids >= 0, grades, 0), np.array([judged.size for judged, _ in sets])
        assert self.labels is not None
        query_labels, corpus_labels = self.labels[0][rows], self.labels[1]
        flags = (ids >= 0) & (corpus_labels[np.maximum(ids, 0)] == query_labels[:, None])
        return flags, self._label_counts(query_labels, own)

    def of_all(
        self, rows: np.ndarray, ids: np.ndarray, own: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(grades (b, N) of every item, ``ids`` (N,) the index's ids in column order, R_q (b,)): :meth:`of` for a
        dense block, by broadcasting labels or scattering each query's judged ids, without a (b, N) id table;
        relevance flags (one byte an item) unless the qrels are graded."""
        if self.qrels is not None:
            sets = self._sets(rows, own)
            order = np.argsort(ids)
            grades = np.zeros((len(rows), ids.size), dtype=np.int32 if self.graded else bool)
            for line, (relevant, judged) in zip(grades, sets, strict=True):
                slot = np.minimum(np.searchsorted(ids, relevant, sorter=order), ids.size - 1)
                found = ids[order[slot]] == relevant
                line[order[slot[found]]] = judged[found]
            return grades, np.array([relevant.size for relevant, _ in sets])
        assert self.labels is not None
        query_labels, corpus_labels = self.labels[0][rows], self.labels[1]
        return corpus_labels[ids][None, :] == query_labels[:, None], self._label_counts(query_labels, own)

    def ideal(self, rows: np.ndarray, own: np.ndarray | None, depth: int) -> np.ndarray | None:
        """(b, depth) each query's judged grades in decreasing order (0-padded) for graded qrels; else ``None``."""
        if not self.graded:
            return None
        return np.concatenate([_ideal(grades.tolist(), depth) for _, grades in self._sets(rows, own)])


def _judged_ids(query: int, items: Collection[int] | Mapping[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, grades) of one query's qrels entry, ids distinct and every grade > 0 (:func:`_grades`)."""
    grades = _grades(query, items)
    ids = np.asarray(list(grades), dtype=np.int64).reshape(-1)
    return ids, np.fromiter(grades.values(), dtype=np.int64, count=len(grades))


def _grades_of(line: np.ndarray, ids: np.ndarray, grades: np.ndarray) -> np.ndarray:
    """The grade of each id of ``line`` among the judged ``ids`` (with ``grades``), 0 for an unjudged id."""
    if not ids.size:
        return np.zeros(line.shape, dtype=np.int64)
    order = np.argsort(ids)
    slot = np.minimum(np.searchsorted(ids, line, sorter=order), ids.size - 1)
    match = ids[order[slot]] == line
    return np.where(match, grades[order[slot]], 0)


def class_retrieval(
    embeddings: Any, labels: Any, *, ks: Mapping[str, Sequence[int]] | None = None, batch_size: int = 1024
) -> IRReport:
    """Class-relevance retrieval within one labelled set: each item queries all the others by inner product
    (an exact flat index, its own item removed); the items sharing its label are relevant."""
    matrix = np.asarray(embeddings.detach().cpu() if hasattr(embeddings, "detach") else embeddings)
    query_labels, corpus_labels = label_relevance(labels, labels)
    if matrix.ndim != 2 or matrix.shape[0] != query_labels.shape[0]:
        raise ValueError(f"embeddings {matrix.shape} and labels {query_labels.shape} need one row per item")
    index = Index.build(matrix, metric="ip")
    own = np.arange(matrix.shape[0])
    return evaluate_index(
        index, matrix, labels=(query_labels, corpus_labels), self_ids=own, ks=ks, batch_size=batch_size
    )


def _cosine_rows(matrix: np.ndarray) -> np.ndarray:
    """Each row over max(||row||_2, 1e-12), in float32 (a 55,000 x 3,136 gallery has no float64 copy): inner products
    of the result are cosines (a zero row scores 0 against everything, as in :mod:`crl.metrics.classification`)."""
    rows = matrix.astype(np.float32, copy=False)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), np.float32(1e-12))


def gallery_class_retrieval(
    queries: Any,
    query_labels: Any,
    gallery: Any,
    gallery_labels: Any,
    *,
    ks: Mapping[str, Sequence[int]] | None = None,
    batch_size: int = 1024,
) -> IRReport:
    """Class-relevance retrieval of labelled queries in a separate labelled gallery: each query ranks every
    gallery item by cosine, cos(q, g) = <q, g> / (||q|| ||g||) (an exact flat index), and the gallery items of its
    label are relevant (e.g. the test images searching the training images).

    Raises:
        ValueError: if a matrix is not 2-D, the two widths differ, or the labels are not one per row.
    """
    matrices = []
    for name, values, labels in (("queries", queries, query_labels), ("gallery", gallery, gallery_labels)):
        matrix = np.asarray(values.detach().cpu() if hasattr(values, "detach") else values)
        if matrix.ndim != 2 or matrix.shape[0] != len(labels):
            raise ValueError(f"{name} {matrix.shape} and its {len(labels)} labels need one row per item")
        matrices.append(_cosine_rows(matrix))
    if matrices[0].shape[1] != matrices[1].shape[1]:
        raise ValueError(
            f"queries have {matrices[0].shape[1]} dimensions, the gallery {matrices[1].shape[1]}; embed both alike"
        )
    index = Index.build(matrices[1], metric="ip")
    relevance = label_relevance(query_labels, gallery_labels)
    return evaluate_index(index, matrices[0], labels=relevance, ks=ks, batch_size=batch_size)
