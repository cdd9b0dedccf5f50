"""IR metrics over an index: float64 brute force, sentence-transformers' evaluator, ties, TREC files, bad input."""

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crl.metrics.ir import (
    DEFAULT_KS,
    _tie_complete_ranking,
    class_retrieval,
    evaluate_index,
    ir_metrics_from_ranking,
)
from crl.metrics.trec import read_qrels, read_run, relevant_sets, write_qrels, write_run
from crl.search import Index
from tests.metrics.ir_reference import brute_force


@pytest.fixture(scope="module")
def case() -> tuple[np.ndarray, np.ndarray, list[set[int]]]:
    rng = np.random.default_rng(0)
    corpus = rng.standard_normal((600, 12)).astype(np.float32)
    queries = rng.standard_normal((40, 12)).astype(np.float32)
    qrels = [set(rng.choice(600, size=int(rng.integers(1, 40)), replace=False).tolist()) for _ in range(40)]
    qrels[3] = set()  # skipped, as sentence-transformers skips queries without relevant items
    return corpus, queries, qrels


def test_index_metrics_equal_a_float64_brute_force(case) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = case
    report = evaluate_index(Index.build(corpus, metric="ip"), queries, qrels=qrels, batch_size=7)
    reference = brute_force(corpus, queries, qrels)
    assert report.n_queries == 39 and report.n_skipped == 1
    for name, by_k in reference.items():
        for k, value in by_k.items():
            assert report.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"


@pytest.mark.slow  # importing sentence-transformers takes about 15 s
def test_index_metrics_equal_sentence_transformers_evaluator(case) -> None:  # type: ignore[no-untyped-def]
    information_retrieval = pytest.importorskip(
        "sentence_transformers.sentence_transformer.evaluation.information_retrieval"
    )
    corpus, queries, qrels = case
    evaluator = information_retrieval.InformationRetrievalEvaluator(
        queries={str(q): f"query {q}" for q in range(len(queries))},
        corpus={str(i): f"doc {i}" for i in range(len(corpus))},
        relevant_docs={str(q): {str(i) for i in rel} for q, rel in enumerate(qrels)},
    )
    scores = queries.astype(np.float64) @ corpus.astype(np.float64).T
    results = [
        [{"corpus_id": str(i), "score": float(scores[int(q), i])} for i in range(len(corpus))]
        for q in evaluator.queries_ids
    ]
    expected = evaluator.compute_metrics(results)
    report = evaluate_index(Index.build(corpus, metric="ip"), queries, qrels=qrels)
    for name in DEFAULT_KS:
        for k, value in expected[f"{name}@k"].items():
            assert report.values[name][k] == pytest.approx(float(value), abs=1e-12), f"{name}@{k}"


def test_ties_are_pessimistic_at_the_cut_off() -> None:
    """Integer vectors tie many scores; relevant items must rank after equal-scoring non-relevant ones."""
    rng = np.random.default_rng(1)
    corpus = rng.integers(0, 2, size=(300, 3)).astype(np.float32)
    queries = rng.integers(0, 2, size=(20, 3)).astype(np.float32) + np.float32(1)
    qrels = [set(rng.choice(300, size=25, replace=False).tolist()) for _ in range(20)]
    report = evaluate_index(Index.build(corpus, metric="ip"), queries, qrels=qrels, batch_size=6)
    reference = brute_force(corpus, queries, qrels)
    for name, by_k in reference.items():
        for k, value in by_k.items():
            assert report.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"


def test_labels_and_self_exclusion_agree_with_explicit_qrels(case) -> None:  # type: ignore[no-untyped-def]
    corpus, _, _ = case
    labels = np.arange(600) % 7
    index = Index.build(corpus, metric="ip")
    queries, own = corpus[:50], np.arange(50)
    by_labels = evaluate_index(index, queries, labels=(labels[:50], labels), self_ids=own)
    qrels = [set(np.flatnonzero(labels == labels[q]).tolist()) - {q} for q in range(50)]
    others = [i for i in range(600)]
    reference_rows = []
    for q in range(50):
        keep = [i for i in others if i != q]
        reference_rows.append(
            brute_force(corpus[keep], corpus[q : q + 1], [{keep.index(i) for i in qrels[q]}])
        )
    for name, by_k in by_labels.values.items():
        for k, value in by_k.items():
            expected = np.mean([row[name][k] for row in reference_rows])
            assert value == pytest.approx(expected, abs=1e-12), f"{name}@{k}"


def test_trec_files_round_trip_and_give_the_same_metrics(tmp_path: Path, case) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = case
    index = Index.build(corpus, metric="ip")
    found = index.search(queries, 100)
    run = {
        f"q{q}": [(f"d{i}", float(s)) for i, s in zip(found.ids[q], found.scores[q], strict=True)]
        for q in range(40)
    }
    judged = {f"q{q}": {f"d{i}": 1 for i in rel} for q, rel in enumerate(qrels) if rel}
    write_run(tmp_path / "run.txt", run)
    write_qrels(tmp_path / "qrels.txt", judged)
    assert read_qrels(tmp_path / "qrels.txt") == judged
    back = read_run(tmp_path / "run.txt")
    assert back == run
    from_files = ir_metrics_from_ranking(back, relevant_sets(read_qrels(tmp_path / "qrels.txt")))
    direct = evaluate_index(index, queries, qrels=qrels)
    assert from_files.as_flat_dict() == pytest.approx(direct.as_flat_dict(), abs=1e-12)


@pytest.mark.parametrize(
    ("text", "reader", "match"),
    [
        ("q1 0 d1\n", read_qrels, "expected 4 fields"),
        ("q1 0 d1 yes\n", read_qrels, "not an integer"),
        ("q1 Q0 d1 1 high crl\n", read_run, "not a number"),
        ("q1 Q0 d1 1 nan crl\n", read_run, "not finite"),
    ],
)
def test_malformed_trec_lines_are_named(tmp_path: Path, text: str, reader, match: str) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "file.txt"
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        reader(path)
    with pytest.raises(ValueError, match=r"file.txt:1"):
        reader(path)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"ks": {"map": (700,)}}, "exceeds"),
        ({"ks": {"hits": (1,)}}, "hits"),
        ({"ks": {"ndcg": (0,)}}, "integers >= 1"),
        ({"qrels": None}, "exactly one"),
        ({"labels": (np.zeros(40, dtype=np.int64), np.zeros(600, dtype=np.int64))}, "exactly one"),
        ({"qrels": [set()] * 3}, "3 entries"),
        ({"qrels": [set()] * 40}, "no query has a relevant item"),
        ({"batch_size": 0}, "batch_size"),
        ({"self_ids": np.arange(3)}, "self_ids"),
    ],
)
def test_bad_ir_input_is_named(case, kwargs: dict, match: str) -> None:  # type: ignore[no-untyped-def]
    corpus, queries, qrels = case
    args = {"qrels": qrels} | kwargs
    if args["qrels"] is None:
        args.pop("qrels")
    with pytest.raises(ValueError, match=match):
        evaluate_index(Index.build(corpus, metric="ip"), queries, **args)
    with pytest.raises(ValueError, match="row 0 holds NaN"):
        evaluate_index(Index.build(corpus, metric="ip"), np.full((2, 12), np.nan), qrels=qrels[:2])


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(1, 5),
    width=st.integers(1, 40),
    levels=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_tie_complete_ranking_equals_a_full_sort(rows: int, width: int, levels: int, seed: int, data) -> None:  # type: ignore[no-untyped-def]
    """Few score levels force ties at and above the cut-off; the partition-and-count ranking must equal sorting
    every item by (-score, grade), own items (-inf) included, for relevance flags and for graded qrels."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, levels, size=(rows, width)).astype(np.float32)
    flags = rng.random((rows, width)) < 0.4
    if data.draw(st.booleans()):
        flags = flags * rng.integers(1, 4, size=(rows, width))
    scores[rng.random((rows, width)) < 0.1] = -np.inf
    finite = int(np.isfinite(scores).sum(axis=1).min())
    if finite == 0:
        return
    depth = data.draw(st.integers(1, finite))
    order = np.lexsort((flags, -scores.astype(np.float64)), axis=1)
    expected = np.take_along_axis(flags, order, axis=1)[:, :depth]
    np.testing.assert_array_equal(_tie_complete_ranking(scores, flags, depth), expected)


class _Delegate:
    """A backend that is not a crl Index (so evaluate_index searches it, widening at ties), over a flat one."""

    def __init__(self, index: Index) -> None:
        self.inner = index

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self.inner, name)

    def __len__(self) -> int:
        return len(self.inner)


@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_dense_ranking_of_a_flat_index_equals_the_widening_search(metric: str) -> None:
    """Two implementations on a corpus of 6 repeated vectors (every score ties with ~66 others, as in a head
    collapsed onto few points), own items removed: dense blocks against a flat index versus the top-K search
    widened while the K-th score ties."""
    rng = np.random.default_rng(2)
    corpus = rng.standard_normal((6, 4)).astype(np.float32)[rng.integers(0, 6, size=400)]
    labels = rng.integers(0, 5, size=400)
    index = Index.build(corpus, metric=metric)
    kwargs = {"labels": (labels[:90], labels), "self_ids": np.arange(90), "batch_size": 16}
    dense = evaluate_index(index, corpus[:90], **kwargs)
    searched = evaluate_index(_Delegate(index), corpus[:90], **kwargs)  # type: ignore[arg-type]
    for name, by_k in searched.values.items():
        for k, value in by_k.items():
            assert dense.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"


def test_collapsed_embeddings_rank_every_relevant_item_last() -> None:
    """All 3,000 embeddings equal (a collapsed head): every score ties, so under the pessimistic rule each query's
    top 10 holds only items of other classes (closed form: accuracy@10 = nDCG@10 = 0, no query skipped)."""
    embeddings = np.ones((3000, 8), dtype=np.float32)
    report = class_retrieval(embeddings, np.arange(3000) % 10)
    assert (
        report.n_queries == 3000 and report.values["accuracy"][10] == 0.0 and report.values["ndcg"][10] == 0.0
    )


def test_dense_ranking_reads_qrels_through_the_index_ids() -> None:
    """Ids that are not 0..N-1 (shuffled, with gaps), qrels naming ids absent from the index: the dense block
    scatters each query's relevant ids to their columns exactly as the search path flags them."""
    rng = np.random.default_rng(4)
    corpus = rng.standard_normal((6, 5)).astype(np.float32)[rng.integers(0, 6, size=300)]
    ids = rng.permutation(1000)[:300] * 3 + 7
    index = Index.build(corpus, ids=ids, metric="ip")
    queries = rng.standard_normal((25, 5)).astype(np.float32)
    qrels = [set(rng.choice(ids, size=20, replace=False).tolist()) | {5, 10**6} for _ in range(25)]
    dense = evaluate_index(index, queries, qrels=qrels, batch_size=8)
    searched = evaluate_index(_Delegate(index), queries, qrels=qrels, batch_size=8)  # type: ignore[arg-type]
    for name, by_k in searched.values.items():
        for k, value in by_k.items():
            assert dense.values[name][k] == pytest.approx(value, abs=1e-12), f"{name}@{k}"
