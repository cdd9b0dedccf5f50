"""Text retrieval scored: the metrics of a task against a float64 brute force, its TREC run, the paired bootstrap.

If these fail, crl eval's text figures are not sentence-transformers' definitions, its TREC run does not give
back the figures it reports, or the interval of a fine-tuned model's gain over zero-shot is wrong.
"""

from pathlib import Path

import numpy as np
import pytest
import torch

from crl.data.text import RetrievalTask
from crl.metrics.ir import DEFAULT_KS, ir_metrics_from_ranking
from crl.metrics.text_retrieval import (
    EmbedTexts,
    compare_reports,
    evaluate_retrieval,
    paired_bootstrap,
    trec_run,
)
from crl.metrics.trec import read_run, write_run
from tests.metrics.ir_reference import brute_force


def _task(n_queries: int, n_documents: int, seed: int) -> tuple[RetrievalTask, dict[str, np.ndarray]]:
    """A task of random unit vectors in 12 dimensions, 1-6 relevant documents per query, and its vectors."""
    rng = np.random.default_rng(seed)
    queries = tuple(f"query {q}" for q in range(n_queries))
    corpus = tuple(f"doc {d}" for d in range(n_documents))
    relevant = tuple(
        frozenset(rng.choice(n_documents, size=int(rng.integers(1, 7)), replace=False).tolist())
        for _ in queries
    )
    vectors = rng.standard_normal((n_queries + n_documents, 12))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    by_text = dict(zip(queries + corpus, vectors.astype(np.float32), strict=True))
    ids = (tuple(f"Q{q}" for q in range(n_queries)), tuple(f"D{d}" for d in range(n_documents)))
    return RetrievalTask(queries, corpus, relevant, *ids), by_text


def _embedder(vectors: dict[str, np.ndarray]) -> EmbedTexts:
    return lambda texts: torch.from_numpy(np.stack([vectors[text] for text in texts]))


def test_text_metrics_equal_a_float64_brute_force() -> None:
    task, vectors = _task(30, 150, seed=0)
    result = evaluate_retrieval(task, _embedder(vectors), _embedder(vectors), ks=DEFAULT_KS)
    corpus = np.stack([vectors[text] for text in task.corpus])
    queries = np.stack([vectors[text] for text in task.queries])
    reference = brute_force(corpus, queries, [set(r) for r in task.relevant])
    assert result.report.n_queries == 30
    for name, by_k in reference.items():
        for k, value in by_k.items():
            assert result.report.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"


def test_cut_offs_above_the_corpus_are_lowered_to_it() -> None:
    task, vectors = _task(5, 20, seed=1)
    result = evaluate_retrieval(task, _embedder(vectors), _embedder(vectors), ks=DEFAULT_KS)
    assert set(result.report.values["map"]) == {20} and set(result.report.values["recall"]) == {1, 3, 5, 10}
    assert result.ids.shape == (5, 20) and sorted(result.ids[0].tolist()) == list(range(20))


def test_the_trec_run_gives_back_the_reported_metrics(tmp_path: Path) -> None:
    task, vectors = _task(25, 120, seed=2)
    result = evaluate_retrieval(task, _embedder(vectors), _embedder(vectors), ks=DEFAULT_KS)
    write_run(tmp_path / "run.trec", trec_run(task, result), tag="test")
    run = read_run(tmp_path / "run.trec")
    assert list(run) == list(task.query_ids) and all(len(hits) == 100 for hits in run.values())
    qrels = {q: {task.doc_ids[d] for d in r} for q, r in zip(task.query_ids, task.relevant, strict=True)}
    again = ir_metrics_from_ranking(run, qrels, ks=DEFAULT_KS)
    for name, by_k in result.report.values.items():
        for k, value in by_k.items():
            assert again.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"


def test_equal_models_differ_by_exactly_zero() -> None:
    task, vectors = _task(12, 40, seed=3)
    report = evaluate_retrieval(task, _embedder(vectors), _embedder(vectors)).report
    differences = compare_reports(report, report, draws=2000)
    assert {"ndcg@10", "recall@10", "mrr@10", "accuracy@1"} <= set(differences)
    for difference in differences.values():
        assert (difference.delta, difference.low, difference.high) == (0.0, 0.0, 0.0)
        assert difference.n_queries == 12


def test_paired_interval_matches_the_normal_interval_of_a_mean() -> None:
    """For Q = 400 independent differences the percentile interval is about delta +- 1.96 sd / sqrt(Q)."""
    rng = np.random.default_rng(4)
    a = rng.random(400)
    b = a + 0.1 + rng.standard_normal(400)
    found = paired_bootstrap(a, b, draws=4000, seed=5)
    differences = b - a
    half = 1.96 * differences.std(ddof=1) / np.sqrt(400)
    assert found.delta == pytest.approx(differences.mean(), abs=1e-12)
    assert found.low < found.delta < found.high
    assert (found.high - found.low) / 2 == pytest.approx(half, rel=0.1)
    shifted = paired_bootstrap(a, a + 0.25, draws=500)
    assert (shifted.delta, shifted.low, shifted.high) == pytest.approx((0.25, 0.25, 0.25), abs=1e-12)


def test_reports_of_different_tasks_are_not_compared() -> None:
    small, vectors = _task(4, 30, seed=6)
    large, more = _task(6, 30, seed=7)
    with pytest.raises(ValueError, match="scored 4 and 6 queries"):
        compare_reports(
            evaluate_retrieval(small, _embedder(vectors), _embedder(vectors)).report,
            evaluate_retrieval(large, _embedder(more), _embedder(more)).report,
        )


def test_a_graded_task_scores_as_pytrec_eval() -> None:
    """BEIR-style grades 1-3: nDCG@10 with the linear gain and MAP@100 over R_q, as pytrec_eval gives BEIR and
    MTEB; the task's grades survive subset and limit_corpus."""
    pytrec_eval = pytest.importorskip("pytrec_eval")
    binary, vectors = _task(30, 150, seed=5)
    rng = np.random.default_rng(5)
    grades = tuple({d: int(rng.integers(1, 4)) for d in r} for r in binary.relevant)
    task = RetrievalTask(
        binary.queries, binary.corpus, binary.relevant, binary.query_ids, binary.doc_ids, grades
    )
    task = task.limit_corpus(120).subset(25)
    assert task.graded and len(task.grades) == 25
    result = evaluate_retrieval(
        task, _embedder(vectors), _embedder(vectors), ks={"ndcg": (10,), "map": (100,)}
    )
    corpus = np.stack([vectors[text] for text in task.corpus]).astype(np.float64)
    scores = np.stack([vectors[text] for text in task.queries]).astype(np.float64) @ corpus.T
    run = {
        q: {d: float(s) for d, s in zip(task.doc_ids, row, strict=True)}
        for q, row in zip(task.query_ids, scores, strict=True)
    }
    qrels = {
        q: {task.doc_ids[d]: g for d, g in entry.items()}
        for q, entry in zip(task.query_ids, task.grades, strict=True)
    }
    expected = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "map_cut.100"}).evaluate(run)
    for name, key in (("ndcg", "ndcg_cut_10"), ("map", "map_cut_100")):
        k = int(key.rsplit("_", 1)[1])
        value = float(np.mean([by_measure[key] for by_measure in expected.values()]))
        assert result.report.values[name][k] == pytest.approx(value, abs=1e-6), name
    assert result.report.graded and "ndcg_cut" in result.report.definitions["ndcg"]
