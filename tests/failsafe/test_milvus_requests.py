"""A Milvus collection's requests: filters at the limits every backend shares, one request the server fails, and
the texts of a result read in one query.

The first tests stand a pymilvus collection in for the server (no server needed); the rest run against the
session's real Milvus server on 127.0.0.1 (tests/milvus_server.py; outside CI they skip where it cannot start).

If these fail, one request the server failed would mark the connection stale and turn every other client's
request into a 503 while it reconnects, a 422 would say "the the backend", a filter at the limits would crash the
query node or be answered otherwise than by faiss, and ``return_text`` would cost one Milvus query per result row.
"""

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from pymilvus import MilvusException
from typer.testing import CliRunner

from crl.commands import app
from crl.search import BackendUnavailableError, Index
from crl.search.filters import MAX_CONDITIONS, MAX_IN_VALUES
from crl.search.milvus import MilvusAddress, MilvusIndex
from crl.serving.service import create_app
from tests.milvus_server import uri

N, D = 60, 8
ADDRESS = MilvusAddress("127.0.0.1", 19530, "stand_in")


class StandInCollection:
    """A pymilvus ``Collection`` whose searches fail with ``failure`` and whose count answers (the health probe)
    unless ``down``."""

    def __init__(self, failure: str, *, down: bool = False) -> None:
        self.failure, self.down = failure, down

    def query(self, expr: str, output_fields: list[str], **kwargs: Any) -> list[dict[str, int]]:
        if self.down:
            raise MilvusException(code=2, message="server unavailable")
        return [{"count(*)": N}]

    def search(self, *args: Any, **kwargs: Any) -> None:
        raise MilvusException(code=65535, message=self.failure)


def _stand_in(failure: str, *, down: bool = False) -> MilvusIndex:
    return MilvusIndex(StandInCollection(failure, down=down), ADDRESS, metric="cosine", kind="flat", dim=D)


QUERY_NODE_FAILED = (
    "fail to Search, QueryNode ID=1, reason=worker(1) query failed: unsupported expr proto node"
)


def test_one_request_the_server_fails_leaves_the_connection_alone_while_the_probe_answers() -> None:
    """A query node's failure of one request marked the connection stale: every other client's next request
    reconnected (a 503 while it did); now only a failed health probe marks it."""
    collection = _stand_in(QUERY_NODE_FAILED)
    with pytest.raises(BackendUnavailableError, match="unsupported expr proto node"):
        collection.search(np.ones((1, D), np.float32), 3)
    assert not collection._stale
    lost = _stand_in(QUERY_NODE_FAILED, down=True)
    with pytest.raises(BackendUnavailableError):
        lost.search(np.ones((1, D), np.float32), 3)
    assert lost._stale


def test_a_request_the_server_refuses_is_a_422_that_says_the_backend_once() -> None:
    """The 422 read "filter or search settings: the the backend refused the request"."""
    collection = _stand_in("failed to create query plan: cannot parse expression: x")
    with TestClient(create_app(collection)) as http:
        answer = http.post("/search", json={"vectors": [[1.0] * D], "k": 3})
    assert answer.status_code == 422, answer.text
    message = answer.json()["detail"][0]["msg"]
    assert "the backend refused the request" in message and "the the" not in message


@pytest.fixture
def metadata_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """A list that grows by the number of ids of each call of ``Index.metadata``."""
    calls: list[int] = []
    metadata = Index.metadata

    def counted(self: Index, ids: Any) -> list[dict[str, Any] | None]:
        calls.append(len(ids))
        return metadata(self, ids)

    monkeypatch.setattr(Index, "metadata", counted)
    yield calls


def _text_index() -> Index:
    vectors = np.random.default_rng(1).standard_normal((N, D)).astype(np.float32)
    return Index.build(vectors, metadata=[{"text": f"item {i}"} for i in range(N)])


def test_return_text_reads_the_texts_of_a_request_in_one_metadata_call(metadata_calls: list[int]) -> None:
    """Each result row read its texts with its own metadata call: one Milvus query per row (10.0 s against
    1.5 s for 256 queries of k = 300); now one call for the request, each item once."""
    index = _text_index()
    with TestClient(create_app(index)) as http:
        answer = http.post("/search", json={"ids": list(range(8)), "k": 10, "return_text": True})
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"]
    assert [result["texts"] for result in results] == [
        [f"item {i}" for i in result["ids"]] for result in results
    ]
    assert metadata_calls == [len({i for result in results for i in result["ids"]})]


def test_crl_search_reads_the_metadata_of_all_its_queries_in_one_call(
    tmp_path: Any, metadata_calls: list[int]
) -> None:
    """crl search read each query's metadata apart (one Milvus query per query)."""
    folder = _text_index().save(tmp_path / "ix")
    result = CliRunner().invoke(app, ["search", str(folder), "1", "2", "3", "-k", "4", "--json"])
    assert result.exit_code == 0, result.output
    assert len(metadata_calls) == 1


ESCAPED = 'tab\there "quoted" back\\slash \x01\x7f\u2028 é 中 \U0001f600'
"""A string whose expression literal holds JSON's escapes and characters beyond ASCII and the BMP."""


@pytest.fixture(scope="module")
def items() -> tuple[np.ndarray, np.ndarray, list[dict[str, Any] | None]]:
    """N vectors, ids 0..N-1, and metadata with fields f0 .. f32 (all 1), a big integer and a string with an
    emoji in a third of them."""
    vectors = np.random.default_rng(5).standard_normal((N, D)).astype(np.float32)
    metadata: list[dict[str, Any] | None] = [
        {
            **{f"f{j}": 1 for j in range(MAX_CONDITIONS + 1)},
            "big": 2**53 + i % 2,
            "s": "a😀b" if i % 3 == 0 else "ab",
            "escaped": ESCAPED if i % 5 == 0 else "plain",
        }
        for i in range(N)
    ]
    return vectors, np.arange(N), metadata


@pytest.fixture(scope="module")
def collection(milvus_server: Any, items: tuple[np.ndarray, np.ndarray, list[Any]]) -> MilvusIndex:
    created = MilvusIndex.create(uri(milvus_server, "failsafe_limits"), D)
    created.add(*items)
    return created


AT_THE_LIMITS = {
    "32 values": {f"f{j}": 1 for j in range(MAX_CONDITIONS)},
    "32 ranges": {f"f{j}": {"range": [0, 2]} for j in range(MAX_CONDITIONS)},
    "32 in lists of 1024": {
        f"f{j}": {"in": list(range(1, MAX_IN_VALUES + 1))} for j in range(MAX_CONDITIONS)
    },
    "2**53": {"big": 2**53},
    "2**53 + 1 in": {"big": {"in": [2**53 + 1]}},
    "emoji": {"s": "a😀b"},
    "escapes": {"escaped": {"in": [ESCAPED, "other"]}},
    "2**53 + 1 range": {"big": {"range": [2**53 + 1, 2**53 + 1]}},
    "float 2**53": {"big": float(2**53)},
    "float 2**53 range": {"big": {"range": [2.0**53, 2.0**53]}},
    "float 2**53 in": {"big": {"in": [2.0**53, 0.5]}},
}


@pytest.mark.parametrize("spec", list(AT_THE_LIMITS.values()), ids=list(AT_THE_LIMITS))
def test_a_filter_at_the_limits_is_answered_by_milvus_as_by_faiss(
    collection: MilvusIndex,
    items: tuple[np.ndarray, np.ndarray, list[Any]],
    reconnects: list[int],
    spec: dict[str, Any],
) -> None:
    """50 values or 49 ranges crashed the query node (503 for every client); an emoji was a parse error; the
    integer 2**53 found 2**53 + 1 on faiss only (and the float 2**53 did not on faiss, as Milvus does). At the
    limits both backends now answer alike."""
    vectors, ids, metadata = items
    expected = Index.build(vectors, ids, metadata=metadata).search(vectors[:3], 10, filter=spec)
    found = collection.search(vectors[:3], 10, filter=spec)
    assert found.ids.tolist() == expected.ids.tolist()
    assert reconnects == []


def test_a_filter_beyond_a_limit_never_reaches_the_server(
    collection: MilvusIndex, reconnects: list[int]
) -> None:
    """The 33rd condition is a ValueError naming the limit, before the server sees it."""
    with pytest.raises(ValueError, match=f"beyond the limit of {MAX_CONDITIONS}"):
        collection.search(
            np.ones((1, D), np.float32), 3, filter={f"f{j}": 1 for j in range(MAX_CONDITIONS + 1)}
        )
    assert reconnects == []


def test_a_request_the_query_node_fails_keeps_the_connection(
    collection: MilvusIndex, reconnects: list[int]
) -> None:
    """The expression of 50 values, which the query node fails, sent past crl's checks: a 503 for this request,
    and the next request uses the same connection."""
    expression = " and ".join(f'($meta["f{j}"] == 1)' for j in range(50))
    param = {"metric_type": "IP", "params": {}}
    with pytest.raises(BackendUnavailableError):
        collection._call(
            lambda c: c.search(
                np.ones((1, D), np.float32), "vector", param, limit=3, expr=expression, timeout=10
            )
        )
    assert not collection._stale
    assert collection.search(np.ones((1, D), np.float32), 3).found.tolist() == [3]
    assert reconnects == []
