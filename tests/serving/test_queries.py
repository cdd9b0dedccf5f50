"""crl.serving.queries: how queries are read (id or text) and the query item left out of its own results."""

import numpy as np
import pytest

from crl.search import Index, SearchResult
from crl.serving.queries import query_items, query_vectors, without_query_items


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
