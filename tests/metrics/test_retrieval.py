"""crl.metrics.retrieval against a float64 brute force with an explicit full sort, and against scikit-learn."""

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, ndcg_score, roc_auc_score

from crl.metrics.retrieval import retrieval_metrics, retrieval_per_query, summarise_retrieval

KS = (1, 2, 5)


def _brute_force(
    scores: np.ndarray, positive: np.ndarray, valid: np.ndarray, ks: tuple[int, ...]
) -> dict[str, np.ndarray]:
    """Per-query metrics from a full sort by (score descending, negatives before positives at ties)."""
    out: dict[str, list] = {"hit": [], "rr": [], "ndcg": [], "ap": [], "auc": [], "recall": []}
    for q in range(scores.shape[0]):
        items = [j for j in range(scores.shape[1]) if valid[q, j]]
        order = sorted(items, key=lambda j, q=q: (-scores[q, j], bool(positive[q, j])))
        relevant = [bool(positive[q, j]) for j in order]
        ranks = [i + 1 for i, r in enumerate(relevant) if r]
        out["hit"].append([float(ranks[0] <= k) for k in ks])
        out["recall"].append([sum(r <= k for r in ranks) / len(ranks) for k in ks])
        out["rr"].append(1.0 / ranks[0])
        ideal = [sum(1.0 / math.log2(i + 1) for i in range(1, min(len(ranks), k) + 1)) for k in ks]
        dcg = [sum(1.0 / math.log2(r + 1) for r in ranks if r <= k) for k in ks]
        out["ndcg"].append([d / i for d, i in zip(dcg, ideal, strict=True)])
        out["ap"].append(np.mean([(i + 1) / r for i, r in enumerate(ranks)]))
        pos = [scores[q, j] for j in items if positive[q, j]]
        neg = [scores[q, j] for j in items if not positive[q, j]]
        wins = sum(float(p > n) + 0.5 * float(p == n) for p in pos for n in neg)
        out["auc"].append(wins / (len(pos) * len(neg)))
    return {key: np.asarray(value, dtype=np.float64) for key, value in out.items()}


def _assert_matches(per_query, reference: dict[str, np.ndarray]) -> None:
    np.testing.assert_allclose(per_query.hit_at_k.numpy(), reference["hit"], atol=1e-12)
    np.testing.assert_allclose(per_query.reciprocal_rank.numpy(), reference["rr"], atol=1e-12)
    np.testing.assert_allclose(per_query.ndcg_at_k.numpy(), reference["ndcg"], atol=1e-12)
    np.testing.assert_allclose(per_query.average_precision.numpy(), reference["ap"], atol=1e-12)
    np.testing.assert_allclose(per_query.auc.numpy(), reference["auc"], atol=1e-12)
    np.testing.assert_allclose(per_query.recall_at_k.numpy(), reference["recall"], atol=1e-12)


def _integer_embeddings(rng: np.random.Generator, n: int, d: int, levels: int) -> torch.Tensor:
    """Small-integer float64 embeddings: exact dot products, many ties."""
    return torch.from_numpy(rng.integers(-levels, levels + 1, size=(n, d)).astype(np.float64))


@pytest.mark.parametrize("levels", [1, 3, 50])
@pytest.mark.parametrize("chunk_size", [1, 7, None])
def test_labels_mode_matches_brute_force_with_ties(levels: int, chunk_size: int | None) -> None:
    """Many positives per query with ties: a wrong tie rule, group boundary or chunk edge would differ."""
    rng = np.random.default_rng(levels)
    q, g = _integer_embeddings(rng, 23, 3, levels), _integer_embeddings(rng, 31, 3, levels)
    ql = torch.from_numpy(rng.integers(0, 4, size=23))
    gl = torch.from_numpy(np.concatenate([np.arange(4), rng.integers(0, 4, size=27)]))
    per_query = retrieval_per_query(q, g, query_labels=ql, gallery_labels=gl, ks=KS, chunk_size=chunk_size)
    scores = (q @ g.T).numpy()
    positive = (ql[:, None] == gl[None, :]).numpy()
    _assert_matches(per_query, _brute_force(scores, positive, np.ones_like(positive), KS))
    assert per_query.n_positives.tolist() == positive.sum(1).tolist()


@pytest.mark.parametrize("levels", [1, 50])
def test_index_mode_matches_brute_force_with_exclusion(levels: int) -> None:
    """One positive per query plus an excluded own item: the fast path must equal the full sort."""
    rng = np.random.default_rng(10 + levels)
    n = 29
    z = _integer_embeddings(rng, n, 4, levels)
    positive_index = torch.from_numpy((np.arange(n) + rng.integers(1, n, size=n)) % n)
    per_query = retrieval_per_query(
        z, z, positive_index=positive_index, exclude_self=True, ks=KS, chunk_size=5
    )
    scores = (z @ z.T).numpy()
    positive = np.zeros((n, n), dtype=bool)
    positive[np.arange(n), positive_index.numpy()] = True
    valid = ~np.eye(n, dtype=bool)
    _assert_matches(per_query, _brute_force(scores, positive, valid, KS))
    assert per_query.n_negatives.tolist() == [n - 2] * n


def test_labels_mode_with_query_ids_matches_brute_force() -> None:
    """Queries drawn from the gallery (query_ids): the own item leaves both the positive and negative sets."""
    rng = np.random.default_rng(3)
    g = _integer_embeddings(rng, 40, 3, 2)
    gl = torch.from_numpy(rng.integers(0, 3, size=40))
    ids = torch.tensor([0, 5, 9, 17, 33, -1])
    q = g[ids.clamp(min=0)]
    q[-1] = _integer_embeddings(rng, 1, 3, 2)[0]
    ql = gl[ids.clamp(min=0)]
    per_query = retrieval_per_query(q, g, query_labels=ql, gallery_labels=gl, query_ids=ids, ks=KS)
    valid = np.ones((6, 40), dtype=bool)
    valid[np.arange(5), ids[:5].numpy()] = False
    positive = (ql[:, None] == gl[None, :]).numpy() & valid
    _assert_matches(per_query, _brute_force((q @ g.T).numpy(), positive, valid, KS))


def test_index_mode_equals_labels_mode_with_unique_labels() -> None:
    """The sort-free single-positive path and the sort path are two implementations of one definition."""
    rng = np.random.default_rng(4)
    q, g = _integer_embeddings(rng, 50, 2, 2), _integer_embeddings(rng, 50, 2, 2)
    perm = torch.from_numpy(rng.permutation(50))
    by_index = retrieval_per_query(q, g, positive_index=perm, ks=(1, 3, 50))
    by_label = retrieval_per_query(
        q, g, query_labels=torch.arange(50), gallery_labels=torch.argsort(perm), ks=(1, 3, 50)
    )
    names = (
        "hit_at_k",
        "reciprocal_rank",
        "ndcg_at_k",
        "average_precision",
        "auc",
        "n_negatives",
        "recall_at_k",
    )
    for name in names:
        torch.testing.assert_close(getattr(by_index, name), getattr(by_label, name), rtol=0, atol=1e-12)


def test_per_query_auc_equals_sklearn_roc_auc_with_ties() -> None:
    """AUC counts ties 1/2 like roc_auc_score; a pessimistic or optimistic tie rule would fail here."""
    rng = np.random.default_rng(5)
    q, g = _integer_embeddings(rng, 30, 2, 1), _integer_embeddings(rng, 60, 2, 1)
    ql, gl = torch.from_numpy(rng.integers(0, 3, 30)), torch.from_numpy(np.arange(60) % 3)
    per_query = retrieval_per_query(q, g, query_labels=ql, gallery_labels=gl, ks=(1,))
    scores, positive = (q @ g.T).numpy(), (ql[:, None] == gl[None, :]).numpy()
    expected = [roc_auc_score(positive[i], scores[i]) for i in range(30)]
    np.testing.assert_allclose(per_query.auc.numpy(), expected, atol=1e-12)


def test_ap_and_ndcg_equal_sklearn_without_ties() -> None:
    """Continuous scores (no ties): AP and nDCG@k must equal average_precision_score and ndcg_score."""
    gen = torch.Generator().manual_seed(6)
    q, g = (
        torch.randn(25, 5, generator=gen, dtype=torch.float64),
        torch.randn(80, 5, generator=gen, dtype=torch.float64),
    )
    ql, gl = torch.randint(0, 4, (25,), generator=gen), torch.arange(80) % 4
    ks = (1, 10, 80)
    per_query = retrieval_per_query(q, g, query_labels=ql, gallery_labels=gl, ks=ks)
    scores, positive = (q @ g.T).numpy(), (ql[:, None] == gl[None, :]).numpy()
    ap = [average_precision_score(positive[i], scores[i]) for i in range(25)]
    np.testing.assert_allclose(per_query.average_precision.numpy(), ap, atol=1e-12)
    for column, k in enumerate(ks):
        ndcg = [ndcg_score(positive[i : i + 1].astype(float), scores[i : i + 1], k=k) for i in range(25)]
        np.testing.assert_allclose(per_query.ndcg_at_k[:, column].numpy(), ndcg, atol=1e-12)


def test_report_means_and_standard_errors() -> None:
    """The report's mean and se must be the mean and sd/sqrt(n) of the per-query values."""
    gen = torch.Generator().manual_seed(7)
    q, g = torch.randn(40, 4, generator=gen), torch.randn(40, 4, generator=gen)
    report = retrieval_metrics(q, g, positive_index=torch.arange(40), ks=(1, 5))
    per_query = retrieval_per_query(q, g, positive_index=torch.arange(40), ks=(5, 1))
    auc = per_query.auc.numpy()
    assert report.auc.mean == pytest.approx(auc.mean(), abs=1e-12)
    assert report.auc.se == pytest.approx(auc.std(ddof=1) / math.sqrt(40), abs=1e-12)
    hits5 = per_query.hit_at_k[:, 1].numpy()
    assert report.accuracy_at_k[5].mean == pytest.approx(hits5.mean(), abs=1e-12)
    assert report.ks == (1, 5) and report.n_queries == 40 and report.mean_positives == 1.0
    flat = report.as_flat_dict()
    assert flat["map"] == report.mean_average_precision.mean and flat["ndcg@5_se"] == report.ndcg_at_k[5].se
    assert summarise_retrieval(per_query, gallery_size=40) == report


@st.composite
def _problems(draw: st.DrawFn) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    n_queries = draw(st.integers(2, 12))
    gallery_size = draw(st.integers(3, 15))
    n_labels = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    q = _integer_embeddings(rng, n_queries, 2, draw(st.integers(1, 4)))
    g = _integer_embeddings(rng, gallery_size, 2, 4)
    gl = np.concatenate([np.arange(n_labels), rng.integers(0, n_labels, size=gallery_size)])[:gallery_size]
    gl[-1] = (gl[0] + 1) % n_labels
    ql = rng.choice(np.unique(gl), size=n_queries)
    return q, g, torch.from_numpy(ql), torch.from_numpy(gl)


@settings(max_examples=40, deadline=None)
@given(problem=_problems(), data=st.data())
def test_property_gallery_permutation_and_chunking_change_nothing(problem, data) -> None:
    """Permuting the gallery with its labels, or changing chunk_size, must not change any metric."""
    q, g, ql, gl = problem
    perm = torch.from_numpy(np.asarray(data.draw(st.permutations(range(g.shape[0])))))
    chunk = data.draw(st.integers(1, q.shape[0]))
    base = retrieval_per_query(q, g, query_labels=ql, gallery_labels=gl, ks=(1, 3))
    moved = retrieval_per_query(
        q, g[perm], query_labels=ql, gallery_labels=gl[perm], ks=(1, 3), chunk_size=chunk
    )
    for name in ("hit_at_k", "reciprocal_rank", "ndcg_at_k", "average_precision", "auc"):
        torch.testing.assert_close(getattr(base, name), getattr(moved, name), rtol=0, atol=1e-12)
    reference = _brute_force(
        (q @ g.T).numpy(), (ql[:, None] == gl[None, :]).numpy(), np.ones((len(q), len(g)), bool), (1, 3)
    )
    _assert_matches(base, reference)


@settings(max_examples=30, deadline=None)
@given(n_labels=st.integers(2, 6), per_label=st.integers(1, 5), k=st.integers(1, 30), data=st.data())
def test_property_perfect_embedding_scores_one_everywhere(
    n_labels: int, per_label: int, k: int, data
) -> None:
    """One-hot class embeddings put every positive above every negative: all metrics must be exactly 1."""
    labels = torch.arange(n_labels).repeat_interleave(per_label)
    perm = torch.from_numpy(np.asarray(data.draw(st.permutations(range(len(labels))))))
    labels = labels[perm]
    z = torch.nn.functional.one_hot(labels, n_labels).float()
    k = min(k, len(labels))
    report = retrieval_metrics(z, z, query_labels=labels, gallery_labels=labels, ks=(1, k))
    values = [report.mrr.mean, report.mean_average_precision.mean, report.auc.mean]
    values += [e.mean for e in report.accuracy_at_k.values()] + [e.mean for e in report.ndcg_at_k.values()]
    assert values == [1.0] * len(values)


def test_constant_embedding_is_not_rewarded_by_ties() -> None:
    """All scores equal: pessimistic ranks put the positive last, and the AUC is exactly 1/2."""
    z = torch.ones(10, 3)
    report = retrieval_metrics(z, z, positive_index=torch.arange(10), ks=(1, 9))
    assert report.accuracy_at_k[1].mean == 0.0 and report.accuracy_at_k[9].mean == 0.0
    assert report.mrr.mean == pytest.approx(0.1) and report.auc.mean == 0.5


def test_large_gallery_runs_in_chunks_without_an_n_by_n_matrix() -> None:
    """n = 20000 queries x 20000 gallery, d = 32: the peak RSS rise must stay far below one n x n float32."""
    script = textwrap.dedent(
        """
        import resource, time, torch
        torch.set_num_threads(1)  # one thread: robust to a busy machine; the memory bound is what is tested
        from crl.metrics.retrieval import retrieval_metrics
        n = 20000
        gen = torch.Generator().manual_seed(0)
        z = torch.nn.functional.normalize(torch.randn(n, 32, generator=gen), dim=1)
        y = torch.nn.functional.normalize(z + 0.3 * torch.randn(n, 32, generator=gen), dim=1)
        labels = torch.randint(0, 10, (n,), generator=gen)
        retrieval_metrics(z[:100], y[:1000], query_labels=labels[:100], gallery_labels=labels[:1000])
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        t = time.perf_counter()
        report = retrieval_metrics(z, y, positive_index=torch.arange(n), chunk_size=256)
        m = 2000
        many = retrieval_metrics(z[:m], y[:m], query_labels=labels[:m], gallery_labels=labels[:m], chunk_size=64)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print(peak - before, time.perf_counter() - t, report.accuracy_at_k[1].mean, many.auc.mean)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    rise, _seconds, recall1, _ = (float(v) for v in result.stdout.split())
    n_by_n_bytes = 20000 * 20000 * 4
    assert rise < n_by_n_bytes / 4, f"peak RSS rose by {rise / 2**20:.0f} MiB"
    assert 0.0 < recall1 < 1.0


def _valid_args() -> dict:
    return {
        "queries": torch.randn(4, 3),
        "gallery": torch.randn(6, 3),
        "positive_index": torch.tensor([0, 1, 2, 3]),
        "ks": (1, 6),
    }


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"queries": torch.randn(4)}, ValueError, r"queries has shape \(4,\) \(1 dims\); expected 2 dims"),
        ({"gallery": torch.randn(6, 2)}, ValueError, "embedding dims differ"),
        (
            {"queries": torch.full((4, 3), float("nan"))},
            ValueError,
            "queries contains 12 NaN/Inf entries; fix the encoder output",
        ),
        (
            {"gallery": torch.randint(0, 3, (6, 3))},
            TypeError,
            r"gallery has dtype torch\.int64; pass a floating tensor",
        ),
        ({"gallery": torch.randn(6, 3, dtype=torch.float64)}, TypeError, "dtype/device differ"),
        ({"ks": (0,)}, ValueError, r"ks\[0\]=0 must be an integer in \[1, 6\]"),
        ({"ks": (7,)}, ValueError, r"ks\[0\]=7 must be an integer in \[1, 6\]"),
        ({"ks": ()}, ValueError, r"ks=\(\); pass a non-empty sequence"),
        ({"chunk_size": 0}, ValueError, "chunk_size=0 must be an integer >= 1"),
        ({"positive_index": torch.tensor([0, 1, 2])}, ValueError, "positive_index: expected a 1-D"),
        ({"positive_index": torch.tensor([0, 1, 2, 6])}, ValueError, "positive_index: values must lie"),
        (
            {"positive_index": torch.tensor([0.0, 1, 2, 3])},
            TypeError,
            r"positive_index has dtype torch\.float32; pass an integer",
        ),
        ({"query_labels": torch.zeros(4, dtype=torch.long)}, ValueError, "give either positive_index"),
        ({"query_ids": torch.tensor([0, 1, 2, 3])}, ValueError, "has its positive excluded"),
        ({"exclude_self": True}, ValueError, "exclude_self: queries"),
        ({"queries": torch.randn(1, 3), "positive_index": torch.tensor([0])}, ValueError, "at least 2"),
    ],
)
def test_bad_inputs_raise_naming_the_argument(change: dict, error: type, match: str) -> None:
    """Each bad input must raise the right error type with a message that names the argument."""
    args = _valid_args() | change
    with pytest.raises(error, match=match):
        retrieval_metrics(**args)


@pytest.mark.parametrize(
    ("query_labels", "gallery_labels", "match"),
    [
        (torch.tensor([0, 1, 5, 1]), torch.tensor([0, 1, 1, 0, 0, 1]), "have no positive"),
        (torch.tensor([0, 0, 0, 0]), torch.tensor([0, 0, 0, 0, 0, 0]), "have no negative"),
        (
            torch.tensor([0.0, 1, 1, 0]),
            torch.tensor([0, 1, 1, 0, 0, 1]),
            r"query_labels has dtype torch\.float32; pass an integer tensor",
        ),
    ],
)
def test_bad_label_sets_raise(query_labels: torch.Tensor, gallery_labels: torch.Tensor, match: str) -> None:
    """A query without a positive (or a negative) has undefined metrics and must be refused, not NaN."""
    with pytest.raises((ValueError, TypeError), match=match):
        retrieval_metrics(
            torch.randn(4, 3),
            torch.randn(6, 3),
            query_labels=query_labels,
            gallery_labels=gallery_labels,
            ks=(1,),
        )


def test_self_exclusion_that_empties_the_positive_set_raises() -> None:
    """Unique labels with exclude_self leave each query only itself as positive: must raise, not NaN."""
    z, labels = torch.randn(5, 2), torch.arange(5)
    with pytest.raises(ValueError, match=r"5 queries \(first: 0\) have no positive"):
        retrieval_metrics(z, z, query_labels=labels, gallery_labels=labels, exclude_self=True, ks=(1,))
