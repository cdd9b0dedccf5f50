"""Filtered search, upsert and tie order in the faiss backend, against a float64 brute force.

If these fail, a filter would let through items it should drop (or drop ones it should keep), an HNSW search
behind a selective filter would silently return fewer than k, an upsert would leave the old vector or
metadata behind, or tied scores would come in an order that differs between runs and backends.
"""

import numpy as np
import pytest

from crl.search import Index

N, D = 400, 12


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, list[dict[str, object]]]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((N, D)).astype(np.float32)
    ids = rng.permutation(5 * N)[:N].astype(np.int64)
    metadata = [{"label": i % 5, "source": "kjv" if i % 2 else "web", "year": float(i)} for i in range(N)]
    return vectors, ids, metadata


def _brute_force(
    vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int, keep: np.ndarray
) -> np.ndarray:
    unit = vectors.astype(np.float64) / np.linalg.norm(vectors.astype(np.float64), axis=1, keepdims=True)
    q = queries.astype(np.float64) / np.linalg.norm(queries.astype(np.float64), axis=1, keepdims=True)
    scores = q @ unit[keep].T
    return ids[keep][np.argsort(-scores, axis=1, kind="stable")[:, :k]]


@pytest.mark.parametrize(("kind", "params"), [("flat", {}), ("hnsw", {}), ("ivf", {"nlist": 4, "nprobe": 4})])
def test_a_filter_gives_the_brute_force_top_k_of_the_passing_items(
    kind: str, params: dict[str, int], data
) -> None:
    vectors, ids, metadata = data
    index = Index.build(vectors, ids, kind, metadata=metadata, **params)  # type: ignore[arg-type]
    queries = np.random.default_rng(1).standard_normal((8, D)).astype(np.float32)
    labels = np.array([m["label"] for m in metadata])
    years = np.array([m["year"] for m in metadata])
    for spec, keep in (
        ({"label": 3}, labels == 3),
        ({"label": {"in": [0, 4]}, "source": "web"}, np.isin(labels, [0, 4]) & (np.arange(N) % 2 == 0)),
        ({"year": {"range": [10, 45]}}, (years >= 10) & (years <= 45)),
    ):
        result = index.search(queries, 10, filter=spec)
        assert (result.found == 10).all() and result.shortfall is None
        np.testing.assert_array_equal(result.ids, _brute_force(vectors, ids, queries, 10, keep))


def test_fewer_passing_items_than_k_are_reported(data) -> None:
    vectors, ids, metadata = data
    index = Index.build(vectors, ids, "hnsw", metadata=metadata)
    result = index.search(vectors[:3], 20, filter={"year": {"range": [0, 6]}})
    assert (result.found == 7).all() and "only 7 items pass the filter" in (result.shortfall or "")
    assert (result.ids[:, 7:] == -1).all() and np.isneginf(result.scores[:, 7:]).all()
    nothing = index.search(vectors[:1], 5, filter={"source": "none"})
    assert nothing.found.tolist() == [0] and (nothing.ids == -1).all()


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf"])
def test_upsert_replaces_the_vector_and_the_metadata(kind: str, data) -> None:
    vectors, ids, metadata = data
    index = Index.build(vectors, ids, kind, metadata=metadata)  # type: ignore[arg-type]
    moved = -vectors[:2]
    index.upsert(moved, ids[:2], [{"label": 99}, None])
    assert len(index) == N
    assert index.search(moved, 1).ids[:, 0].tolist() == ids[:2].tolist()
    assert index.metadata(ids[:2]) == [{"label": 99}, None]
    assert index.search(moved[:1], 1, filter={"label": 99}).ids[0, 0] == ids[0]
    index.upsert(vectors[:1] * 2, np.array([ids.max() + 1]))
    assert len(index) == N + 1


def test_tied_scores_come_by_ascending_id() -> None:
    """Four copies of one vector under shuffled ids: their order is by id, whatever faiss returned."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal(D).astype(np.float32)
    others = rng.standard_normal((20, D)).astype(np.float32)
    vectors = np.vstack([np.tile(base, (4, 1)), others])
    ids = np.array([41, 7, 19, 3, *range(100, 120)], dtype=np.int64)
    result = Index.build(vectors, ids).search(base[None, :], 4)
    assert result.ids[0].tolist() == [3, 7, 19, 41]
