"""crl's IR metrics against pytrec_eval (trec_eval's C code, through which BEIR and MTEB publish their figures).

If these fail, a user's nDCG@10 on graded qrels (BEIR's, TREC's) cannot be compared with a leaderboard's, the
binary figures no longer equal trec_eval's where sentence-transformers' and trec_eval's definitions agree, or the
``ties="trec_eval"`` order is not trec_eval's.
"""

import numpy as np
import pytest

from crl.metrics.ir import DEFAULT_KS, DEFINITIONS, evaluate_index, ir_metrics_from_ranking
from crl.search import Index

pytrec_eval = pytest.importorskip("pytrec_eval")

MEASURES = {"success.1,3,5,10", "P.1,3,5,10", "recall.1,3,5,10", "ndcg_cut.10", "map_cut.100", "recip_rank"}
KS = dict(DEFAULT_KS)
TREC_NAME = {
    "accuracy": "success",
    "precision": "P",
    "recall": "recall",
    "ndcg": "ndcg_cut",
    "map": "map_cut",
}


def _case(
    seed: int, grades: tuple[int, ...], n_relevant: int
) -> tuple[np.ndarray, np.ndarray, list[dict[int, int]]]:
    """Corpus (300, 8), queries (25, 8) and per query 1..n_relevant judged items with grades drawn from
    ``grades`` (a grade <= 0 judged, not relevant), at least one relevant."""
    rng = np.random.default_rng(seed)
    corpus = rng.standard_normal((300, 8)).astype(np.float32)
    queries = rng.standard_normal((25, 8)).astype(np.float32)
    qrels = []
    for _ in range(25):
        judged = rng.choice(300, size=int(rng.integers(1, n_relevant + 1)), replace=False)
        entry = {int(i): int(rng.choice(grades)) for i in judged}
        entry[int(judged[0])] = max(grades)
        qrels.append(entry)
    return corpus, queries, qrels


def _trec_eval(scores: np.ndarray, qrels: list[dict[int, int]]) -> dict[str, dict[str, float]]:
    """pytrec_eval's measures of the full ranking, with recip_rank of the run cut at 10 as ``recip_rank_10``."""
    run = {f"q{q}": {f"d{i}": float(s) for i, s in enumerate(row)} for q, row in enumerate(scores)}
    judged = {f"q{q}": {f"d{i}": g for i, g in entry.items()} for q, entry in enumerate(qrels)}
    results = pytrec_eval.RelevanceEvaluator(judged, MEASURES).evaluate(run)
    top = {query: dict(sorted(docs.items(), key=lambda item: -item[1])[:10]) for query, docs in run.items()}
    cut = pytrec_eval.RelevanceEvaluator(judged, {"recip_rank"}).evaluate(top)
    for query in results:
        results[query]["recip_rank_10"] = cut[query]["recip_rank"]
    return results


def _expected(results: dict[str, dict[str, float]], name: str, k: int) -> float:
    key = "recip_rank_10" if name == "mrr" else f"{TREC_NAME[name]}_{k}"
    return float(np.mean([by_measure[key] for by_measure in results.values()]))


def _scores(corpus: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """The float32 inner products the index ranks by, checked free of ties within each query."""
    scores = queries @ corpus.T
    assert all(len(np.unique(row)) == row.size for row in scores), "the case must have no tied scores"
    return scores


@pytest.mark.parametrize(("grades", "graded"), [((1,), False), ((-1, 0, 1, 2, 3), True)])
def test_metrics_equal_pytrec_eval_without_ties(grades: tuple[int, ...], graded: bool) -> None:
    """Binary qrels (R_q <= 100, where ST's MAP@100 and trec_eval's agree) and graded qrels with judged
    non-relevant and negative grades: every metric equals trec_eval's, over the index and over a run."""
    corpus, queries, qrels = _case(0, grades, 60)
    scores = _scores(corpus, queries)
    results = _trec_eval(scores, qrels)
    over_index = evaluate_index(Index.build(corpus, metric="ip"), queries, qrels=qrels, ks=KS, batch_size=7)
    ranking = {f"q{q}": [(f"d{i}", float(s)) for i, s in enumerate(row)] for q, row in enumerate(scores)}
    judged = {f"q{q}": {f"d{i}": g for i, g in entry.items()} for q, entry in enumerate(qrels)}
    over_run = ir_metrics_from_ranking(ranking, judged, ks=KS)
    for report in (over_index, over_run):
        assert report.graded is graded and report.definitions == DEFINITIONS[graded]
        for name, by_k in KS.items():
            for k in by_k:
                assert report.values[name][k] == pytest.approx(_expected(results, name, k), abs=1e-12), (
                    f"{name}@{k}"
                )


def test_binary_map_divides_by_min_k_r_where_trec_eval_divides_by_r() -> None:
    """With R_q > k, sentence-transformers' MAP@k (crl's on binary qrels) is trec_eval's map_cut_k times
    R_q / min(k, R_q); on graded qrels crl follows trec_eval."""
    corpus, queries, qrels = _case(1, (1,), 60)
    scores = _scores(corpus, queries)
    ks = {"map": (10,)}
    index = Index.build(corpus, metric="ip")
    binary = evaluate_index(index, queries, qrels=[set(entry) for entry in qrels], ks=ks)
    run = {f"q{q}": {f"d{i}": float(s) for i, s in enumerate(row)} for q, row in enumerate(scores)}
    judged = {f"q{q}": {f"d{i}": g for i, g in entry.items()} for q, entry in enumerate(qrels)}
    map_10 = pytrec_eval.RelevanceEvaluator(judged, {"map_cut.10"}).evaluate(run)
    scaled = [
        map_10[f"q{q}"]["map_cut_10"] * len(entry) / min(10, len(entry)) for q, entry in enumerate(qrels)
    ]
    assert any(len(entry) > 10 for entry in qrels)
    assert binary.values["map"][10] == pytest.approx(float(np.mean(scaled)), abs=1e-12)
    graded = [{i: 2 for i in entry} for entry in qrels]
    as_graded = evaluate_index(index, queries, qrels=graded, ks=ks)
    expected = np.mean([map_10[f"q{q}"]["map_cut_10"] for q in range(len(qrels))])
    assert as_graded.graded and as_graded.values["map"][10] == pytest.approx(float(expected), abs=1e-12)


@pytest.mark.parametrize("grades", [(1,), (0, 1, 2, 3)])
def test_trec_eval_ties_equal_pytrec_eval_and_pessimistic_ties_bound_them(grades: tuple[int, ...]) -> None:
    """Scores on 4 levels tie many documents: ``ties="trec_eval"`` (descending id among equals) equals
    pytrec_eval; crl's pessimistic rule ranks lower grades first, so each of its figures is at most trec_eval's."""
    rng = np.random.default_rng(2)
    scores = rng.integers(0, 4, size=(20, 60)).astype(np.float64)
    qrels = []
    for _ in range(20):
        judged = rng.choice(60, size=int(rng.integers(1, 15)), replace=False)
        entry = {int(i): int(rng.choice(grades)) for i in judged}
        entry[int(judged[0])] = max(grades)
        qrels.append(entry)
    run = {f"q{q}": {f"d{i:02d}": float(s) for i, s in enumerate(row)} for q, row in enumerate(scores)}
    judged = {f"q{q}": {f"d{i:02d}": g for i, g in entry.items()} for q, entry in enumerate(qrels)}
    measures = {"P.1,3,5,10", "recall.1,3,5,10", "ndcg_cut.10", "map_cut.60", "success.1,3,5,10"}
    results = pytrec_eval.RelevanceEvaluator(judged, measures).evaluate(run)
    ks = {name: ks for name, ks in KS.items() if name != "mrr"} | {"map": (60,)}
    ranking = {query: list(docs.items()) for query, docs in run.items()}
    trec_order = ir_metrics_from_ranking(ranking, judged, ks=ks, ties="trec_eval")
    pessimistic = ir_metrics_from_ranking(ranking, judged, ks=ks)
    for name, by_k in ks.items():
        for k in by_k:
            expected = float(np.mean([r[f"{TREC_NAME[name]}_{k}"] for r in results.values()]))
            assert trec_order.values[name][k] == pytest.approx(expected, abs=1e-12), f"{name}@{k}"
            assert pessimistic.values[name][k] <= trec_order.values[name][k] + 1e-12, f"{name}@{k}"


def test_an_unknown_tie_rule_and_a_fractional_grade_are_named() -> None:
    with pytest.raises(ValueError, match="ties = 'random'"):
        ir_metrics_from_ranking({"q": [("a", 1.0)]}, {"q": {"a"}}, ties="random")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"qrels\['q'\]\['a'\] = 1.5"):
        ir_metrics_from_ranking({"q": [("a", 1.0)]}, {"q": {"a": 1.5}})  # type: ignore[dict-item]
