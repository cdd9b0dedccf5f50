"""Filters that were too large, compared integers as floats, or meant one thing to faiss and another to Milvus.

If these fail, one request's filter of 50 conditions would crash a Milvus query node (and every other client's
request would be a 503), a 300,000-value ``in`` list would cost a minute of CPU on a 300-item faiss index, the
faiss backend would find 2**53 + 1 for the integer 2**53 (Milvus finds none), or -2**63 and characters beyond the
BMP would be answered by one backend and refused by the other. The Milvus side of each runs in
tests/failsafe/test_milvus.py against a real server.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from crl.search import Index
from crl.search.filters import MAX_CONDITIONS, MAX_DEPTH, MAX_IN_VALUES, parse_filter
from crl.serving.service import create_app
from tests.failsafe.test_commands import _one_line_error

N, D = 40, 8


def _index() -> Index:
    """N items whose metadata holds a field ``f0`` .. ``f39`` each (all 1), a label, a text and a big integer."""
    vectors = np.random.default_rng(3).standard_normal((N, D)).astype(np.float32)
    metadata: list[dict[str, Any] | None] = [
        {
            **{f"f{j}": 1 for j in range(40)},
            "label": i % 4,
            "text": f"item {i}",
            "big": 2**53 + (i % 2),
            "emoji": "a😀b" if i % 3 == 0 else "ab",
        }
        for i in range(N)
    ]
    return Index.build(vectors, metadata=metadata)


@pytest.fixture(scope="module")
def index() -> Index:
    return _index()


def _equalities(count: int) -> dict[str, Any]:
    return {f"f{j}": 1 for j in range(count)}


def _ranges(count: int) -> dict[str, Any]:
    return {f"f{j}": {"range": [0, 2]} for j in range(count)}


def _in_lists(count: int) -> dict[str, Any]:
    return {f"f{j}": {"in": list(range(1, MAX_IN_VALUES + 1))} for j in range(count)}


@pytest.mark.parametrize("build", [_equalities, _ranges, _in_lists], ids=["values", "ranges", "in lists"])
def test_a_filter_at_the_limits_is_answered_and_one_beyond_is_refused_naming_the_limit(
    index: Index, build: Any
) -> None:
    """A filter had no bound: 50 equalities (or 49 ranges) crashed a Milvus query node; now 32 conditions (each
    an ``in`` list of 1,024 values at most) pass on every backend, and the 33rd is a ValueError naming the
    limit before any backend sees it."""
    found = index.search(index.vectors([0]), 5, filter=build(MAX_CONDITIONS))
    assert found.found.tolist() == [5]
    with pytest.raises(ValueError, match=f"33 conditions, beyond the limit of {MAX_CONDITIONS}"):
        index.search(index.vectors([0]), 5, filter=build(MAX_CONDITIONS + 1))


def test_an_in_list_beyond_its_limit_is_refused_and_one_at_it_answered(index: Index) -> None:
    """{"text": {"in": [300k strings]}} cost items x list comparisons (56 s of CPU on 300 items); now a list
    above 1,024 values is refused naming the limit, and one at it is answered by a set lookup."""
    wanted = [f"other {i}" for i in range(MAX_IN_VALUES - 1)] + ["item 7"]
    assert index.search(index.vectors([0]), 3, filter={"text": {"in": wanted}}).ids[0, 0] == 7
    hostile = [f"other {i}" for i in range(300_000)]
    with pytest.raises(ValueError, match=f"lists 300000 values, beyond the limit of {MAX_IN_VALUES}"):
        index.search(index.vectors([0]), 3, filter={"text": {"in": hostile}})


def test_a_value_nested_beyond_the_language_names_its_depth_and_never_prints_it() -> None:
    """A deeply nested value was printed whole in the error (str() of it recursed); now its type and the depth."""
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    with pytest.raises(ValueError, match=f"nests at most {MAX_DEPTH} levels") as raised:
        parse_filter({"label": {"in": [deep]}})
    assert len(str(raised.value)) < 300


def test_integers_compare_exactly(index: Index) -> None:
    """{"big": 2**53} matched 2**53 + 1 too (both became the float 2**53); Milvus finds only 2**53."""
    for wanted, parity in ((2**53, 0), (2**53 + 1, 1)):
        for spec in ({"big": wanted}, {"big": {"in": [wanted]}}, {"big": {"range": [wanted, wanted]}}):
            found = index.search(index.vectors([0]), N, filter=spec)
            kept = found.ids[0][: found.found[0]]
            assert sorted(kept.tolist()) == [i for i in range(N) if i % 2 == parity], spec


def test_a_float_compares_as_a_float_as_milvus_compares_it(index: Index) -> None:
    """Milvus converts an item's integer to a float against a float value (2**53 + 1 is then 2**53): the float
    2**53 finds both parities there, and now on faiss too; a float range likewise."""
    for spec in (
        {"big": float(2**53)},
        {"big": {"in": [float(2**53), 0.5]}},
        {"big": {"range": [2.0**53, 2.0**53]}},
    ):
        found = index.search(index.vectors([0]), N, filter=spec)
        assert found.found.tolist() == [N], spec


def test_an_in_list_mixing_floats_with_an_integer_beyond_2_53_is_refused() -> None:
    """Milvus takes such a list as floats, which would round 2**53 + 1 to 2**53; faiss compared exactly."""
    with pytest.raises(ValueError, match="beyond 2\\*\\*53"):
        parse_filter({"big": {"in": [2**53 + 1, 0.5]}})
    assert parse_filter({"big": {"in": [2**53, 0.5]}}) is not None


def test_minus_2_63_is_refused_by_every_backend(index: Index) -> None:
    """faiss answered {"label": -2**63}; Milvus reads -N as minus N and failed to parse 2**63."""
    with pytest.raises(ValueError, match="-9223372036854775807"):
        index.search(index.vectors([0]), 3, filter={"label": -(2**63)})
    assert parse_filter({"label": -(2**63) + 1}) is not None


def test_a_character_beyond_the_bmp_is_written_as_itself_for_milvus(index: Index) -> None:
    """The expression held the surrogate-pair escape "\\ud83d\\ude00", which Milvus cannot parse, while faiss
    answered; now both answer (the Milvus side: tests/failsafe/test_milvus.py)."""
    checked = parse_filter({"emoji": "a😀b"})
    assert checked is not None and checked.milvus_expression() == '($meta["emoji"] == "a😀b")'
    found = index.search(index.vectors([0]), N, filter={"emoji": "a😀b"})
    assert sorted(found.ids[0][: found.found[0]].tolist()) == list(range(0, N, 3))


def test_the_service_answers_a_filter_beyond_a_limit_with_a_422_naming_it(index: Index) -> None:
    """The service passed any filter to the backend; now a 422 on ``filter`` naming the limit."""
    vector = index.vectors([0]).tolist()
    with TestClient(create_app(index)) as http:
        for spec, named in (
            (_equalities(MAX_CONDITIONS + 1), f"limit of {MAX_CONDITIONS}"),
            ({"text": {"in": ["a"] * (MAX_IN_VALUES + 1)}}, f"limit of {MAX_IN_VALUES}"),
        ):
            answer = http.post("/search", json={"vectors": vector, "k": 3, "filter": spec})
            assert answer.status_code == 422, answer.text
            detail = answer.json()["detail"][0]
            assert detail["loc"] == ["body", "filter"] and named in detail["msg"]
        assert http.post(
            "/search", json={"vectors": vector, "k": 3, "filter": _ranges(MAX_CONDITIONS)}
        ).is_success


def test_crl_search_refuses_a_filter_beyond_a_limit_in_one_line(tmp_path: Path, index: Index) -> None:
    """crl search took any filter; now one line naming --filter and the limit, and a JSON nested too deep for
    Python's reader is that line too (it was a RecursionError traceback)."""
    folder = str(index.save(tmp_path / "ix"))
    line = _one_line_error(["search", folder, "0", "--filter", json.dumps(_equalities(MAX_CONDITIONS + 1))])
    assert "--filter: filter has 33 conditions" in line and f"limit of {MAX_CONDITIONS}" in line
    line = _one_line_error(["search", folder, "0", "--filter", "[" * 100_000])
    assert f"a filter nests at most {MAX_DEPTH} levels" in line
