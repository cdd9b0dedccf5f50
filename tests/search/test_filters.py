"""The one filter language: metadata tests and Milvus expressions from the same checked filter.

If these fail, the faiss and Milvus backends would filter differently, or a bad filter would reach a backend
(a field name that breaks out of an expression, a range the wrong way round) instead of a clear error.
"""

import pytest

from crl.search.filters import parse_filter

ITEMS = [
    {"label": 1, "source": "kjv", "year": 1611.0, "new": False},
    {"label": 2, "source": "web", "year": 2000, "new": True},
    {"label": 1.0, "source": "web"},
    None,
]


@pytest.mark.parametrize(
    ("spec", "passing", "expression"),
    [
        ({"label": 1}, [0, 2], '($meta["label"] == 1)'),
        ({"source": {"in": ["web"]}}, [1, 2], '($meta["source"] in ["web"])'),
        ({"year": {"range": [1600, 1700]}}, [0], '($meta["year"] >= 1600 and $meta["year"] <= 1700)'),
        ({"label": 1, "source": "web"}, [2], '($meta["label"] == 1) and ($meta["source"] == "web")'),
        ({"new": False}, [0], '($meta["new"] == false)'),
        ({"source": 'a"b'}, [], '($meta["source"] == "a\\"b")'),
        ({"label": {"in": [1, 2.5]}}, [0, 2], '($meta["label"] in [1.0, 2.5])'),
    ],
)
def test_a_filter_tests_metadata_and_writes_the_same_milvus_expression(
    spec: dict[str, object], passing: list[int], expression: str
) -> None:
    checked = parse_filter(spec)
    assert checked is not None
    assert [i for i, item in enumerate(ITEMS) if checked.matches(item)] == passing
    assert checked.milvus_expression() == expression


def test_no_filter_is_none() -> None:
    assert parse_filter(None) is None and parse_filter({}) is None


def test_a_bool_is_not_the_number_one() -> None:
    checked = parse_filter({"label": True})
    assert checked is not None and not checked.matches({"label": 1})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"la bel": 1}, "not a metadata name"),
        ({"id": 3}, "not a metadata name"),
        ({"x) or (1": 1}, "not a metadata name"),
        ({"label": {"gt": 1}}, "not a condition"),
        ({"label": {"in": []}}, "at least one value"),
        ({"label": {"in": [1, "a"]}}, "mixes"),
        ({"label": {"range": [2, 1]}}, "lo <= hi"),
        ({"label": {"range": ["a", "b"]}}, "two numbers"),
        ({"label": {"in": 1}}, "takes a list"),
        ({"label": float("nan")}, "finite"),
        ({"label": [1, 2]}, "not a str, int, float or bool"),
    ],
)
def test_a_bad_filter_names_the_field_and_the_fix(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_filter(spec)
