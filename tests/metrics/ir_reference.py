"""An independent float64 reference of the IR metrics, written out per definition (crl.metrics.ir's docstring)."""

import math
from collections.abc import Sequence

import numpy as np

from crl.metrics.ir import DEFAULT_KS


def brute_force(
    corpus: np.ndarray, queries: np.ndarray, qrels: Sequence[set[int]]
) -> dict[str, dict[int, float]]:
    """Every metric of DEFAULT_KS from the full float64 ranking by inner product, pessimistic ties, written out per
    definition; queries without a relevant item are skipped."""
    totals: dict[str, dict[int, list[float]]] = {name: {k: [] for k in ks} for name, ks in DEFAULT_KS.items()}
    for query, relevant in zip(queries.astype(np.float64), qrels, strict=True):
        if not relevant:
            continue
        scores = corpus.astype(np.float64) @ query
        ranked = sorted(range(len(corpus)), key=lambda i: (-scores[i], i in relevant))
        rel = [1 if i in relevant else 0 for i in ranked]
        for k in DEFAULT_KS["accuracy"]:
            totals["accuracy"][k].append(float(any(rel[:k])))
        for k in DEFAULT_KS["precision"]:
            totals["precision"][k].append(sum(rel[:k]) / k)
            totals["recall"][k].append(sum(rel[:k]) / len(relevant))
        for k in DEFAULT_KS["mrr"]:
            first = next((r + 1 for r, flag in enumerate(rel[:k]) if flag), None)
            totals["mrr"][k].append(0.0 if first is None else 1.0 / first)
        for k in DEFAULT_KS["ndcg"]:
            dcg = sum(flag / math.log2(r + 2) for r, flag in enumerate(rel[:k]))
            idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(relevant))))
            totals["ndcg"][k].append(dcg / idcg)
        for k in DEFAULT_KS["map"]:
            found, precision_sum = 0, 0.0
            for r, flag in enumerate(rel[:k]):
                if flag:
                    found += 1
                    precision_sum += found / (r + 1)
            totals["map"][k].append(precision_sum / min(k, len(relevant)))
    return {name: {k: float(np.mean(v)) for k, v in by_k.items()} for name, by_k in totals.items()}
