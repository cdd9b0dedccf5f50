"""crl.serving.queries: how queries are read (id or text) and the query item left out of its own results."""

import numpy as np
import pytest

from crl.search import Index, SearchResult
from crl.serving.queries import query_items, query_vectors, search_others, without_query_items


@pytest.mark.parametrize(
    ("reading", "expected"),
    [("auto", [17, None, 1984]), ("text", [None, None, None])],
)
def test_query_items_reads_integers_as_ids_unless_told_otherwise(reading: str, expected: list) -> None:
    assert query_items(["17", "a title", "1984"], reading) == expected  # type: ignore[arg-type]


def test_reading_id_refuses_a_query_that_is_not_an_integer() -> None:
    assert query_items(["17", 5], "id") == [17, 5]
    with pytest.raises(ValueError, match="'1984a' is read as an item id"):
        query_items(["17", "1984a"], "id")
    with pytest.raises(ValueError, match="reading = 'ids'"):
        query_items(["17"], "ids")  # type: ignore[arg-type]


def test_query_vectors_of_ids_are_the_stored_vectors() -> None:
    vectors = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    index = Index.build(vectors, np.arange(100, 120), "flat", "ip")
    np.testing.assert_array_equal(query_vectors(index, ["103", 117]), vectors[[3, 17]])


def _result(ids: list[list[int]]) -> SearchResult:
    rows = np.asarray(ids, dtype=np.int64)
    scores = np.where(rows >= 0, -np.arange(rows.shape[1], dtype=np.float32), -np.inf).astype(np.float32)
    return SearchResult(scores=scores, ids=rows, found=(rows >= 0).sum(axis=1))


def test_the_query_item_is_dropped_wherever_it_ranks_and_k_others_remain() -> None:
    """Row 0 holds its item first, row 1 in the middle, row 2 not at all (it loses its last slot), row 3 is a
    text query (no item: cut to k)."""
    result = _result([[7, 1, 2, 3], [4, 5, 8, 6], [1, 2, 3, 4], [9, 8, 7, 6]])
    left = without_query_items(result, [7, 8, 5, None], k=3)
    assert left.ids.tolist() == [[1, 2, 3], [4, 5, 6], [1, 2, 3], [9, 8, 7]]
    assert left.scores.tolist() == [[-1, -2, -3], [0, -1, -3], [0, -1, -2], [0, -1, -2]]
    assert left.found.tolist() == [3, 3, 3, 3] and left.shortfall is None


def test_a_row_left_short_keeps_empty_slots_and_says_why() -> None:
    left = without_query_items(_result([[2, 0, 1]]), [2], k=3)
    assert left.ids.tolist() == [[0, 1, -1]] and left.found.tolist() == [2]
    assert left.scores[0, 2] == -np.inf and "left out" in str(left.shortfall)
    kept = SearchResult(_result([[2, -1]]).scores, np.array([[2, -1]]), np.array([1]), "the filter passes 1")
    assert without_query_items(kept, [2], k=1).shortfall == "the filter passes 1"


@pytest.mark.parametrize("k", [1, 3, 7, 8])
def test_search_others_leaves_each_id_querys_item_out_and_returns_k_others(k: int) -> None:
    """If this fails, crl search and the HTTP service (which both call search_others) do not return, for an id
    query, its k best other items by a float64 brute force over the stored vectors, or a string query loses an
    item, or k at the index's size asks the index for more than it holds."""
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((8, 5)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = Index.build(vectors, np.arange(8), kind="flat", metric="cosine")
    queries = np.stack([vectors[2], rng.standard_normal(5).astype(np.float32)])
    found = search_others(index, queries, k, own_items=[2, None], size=len(index))
    scores = queries.astype(np.float64) @ vectors.astype(np.float64).T
    others = [i for i in np.argsort(-scores[0]) if i != 2][:k]
    assert found.ids[0][: len(others)].tolist() == others
    assert found.ids[1].tolist() == np.argsort(-scores[1])[:k].tolist()
    kept = search_others(index, queries[:1], k, own_items=None, size=len(index))
    assert kept.ids[0].tolist() == np.argsort(-scores[0])[:k].tolist()
