"""``crl serve`` in front of a Milvus collection, against the session's real Milvus server on 127.0.0.1.

If these fail, the service would answer differently from the collection it fronts, embed text queries with
another encoder, answer a bad request with something other than a 4xx naming the field, or answer a Milvus
server that is down with a traceback instead of a 503 naming it, or stay down once the server is back.
"""

import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from crl.commands.serve import serving_app
from crl.search import EncoderProvenance
from crl.search.milvus import MilvusIndex
from crl.serving.queries import StringEncoder, register_string_encoder
from crl.serving.service import create_app
from tests.milvus_server import kill, uri
from tests.serving.test_service import LoopbackServer, field_of

N, D = 500, 16
TIMEOUT_S = 1
"""The served collection's call timeout: a request to a dead server answers 503 after about this long."""
RECOVERY_S = 90
"""Longest wait for 200s after the server's restart (its start, then the collection loaded again)."""
ENCODER = EncoderProvenance(checkpoint="tests/hash-encoder", fingerprint="0")


def hash_encoder(texts: list[str]) -> np.ndarray:
    """A deterministic text encoder: a normal vector seeded by the text's CRC-32."""
    return np.stack([np.random.default_rng(zlib.crc32(t.encode())).standard_normal(D) for t in texts]).astype(
        np.float32
    )


def hash_encoder_of(provenance: EncoderProvenance) -> StringEncoder | None:
    """:func:`hash_encoder` for the collection recording :data:`ENCODER`, None for any other."""
    return hash_encoder if provenance == ENCODER else None


@pytest.fixture(scope="module")
def collection(milvus_server: Any) -> MilvusIndex:
    """A FLAT collection of N items with metadata that records :data:`ENCODER`, read with Strong consistency."""
    rng = np.random.default_rng(3)
    created = MilvusIndex.create(uri(milvus_server, "served"), D, encoder=ENCODER)
    metadata: list[dict[str, Any] | None] = [{"label": i % 4} for i in range(N)]
    created.add(rng.standard_normal((N, D)).astype(np.float32), np.arange(N) * 3, metadata)
    return MilvusIndex.connect(str(created.address), timeout=TIMEOUT_S)


@pytest.fixture(scope="module")
def served(collection: MilvusIndex) -> Iterator[str]:
    register_string_encoder(hash_encoder_of)
    with LoopbackServer(create_app(collection, max_batch=16, max_k=50)) as server:
        yield server.url


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=60) as client:
        yield client


def hits(response: httpx.Response) -> list[list[int]]:
    """The ids of each query's results in a 200 answer."""
    assert response.status_code == 200, response.text
    return [result["ids"] for result in response.json()["results"]]


def test_the_service_answers_as_the_collection_does(served: str, http: httpx.Client, collection) -> None:  # type: ignore[no-untyped-def]
    health = http.get(f"{served}/health").json()
    assert (health["count"], health["dimension"], health["kind"]) == (N, D, "flat")
    queries = np.random.default_rng(4).standard_normal((3, D)).astype(np.float32)
    answer = http.post(f"{served}/search", json={"vectors": queries.tolist(), "k": 7})
    expected = collection.search(queries, 7)
    assert hits(answer) == expected.ids.tolist()
    scores = [result["scores"] for result in answer.json()["results"]]
    np.testing.assert_allclose(scores, expected.scores, atol=1e-6)
    chosen = {"label": {"in": [1, 2]}}
    filtered = http.post(f"{served}/search", json={"vectors": queries.tolist(), "k": 5, "filter": chosen})
    assert hits(filtered) == collection.search(queries, 5, filter=chosen).ids.tolist()
    by_id = http.post(f"{served}/search", json={"ids": [6, 9], "k": 4, "exclude_self": True})
    nearest = collection.search(collection.vectors([6, 9]), 5).ids
    assert hits(by_id) == [[i for i in row if i != own][:4] for row, own in zip(nearest, [6, 9], strict=True)]
    texts = ["in the beginning", "water"]
    by_text = http.post(f"{served}/search", json={"texts": texts, "k": 3})
    assert hits(by_text) == collection.search(hash_encoder(texts), 3).ids.tolist()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"vectors": [[0.5] * (D - 1)]}, "vectors"),
        ({"ids": [1]}, "ids"),
        ({"vectors": [[0.5] * D], "filter": {"label": {"range": [3, 1]}}}, "filter"),
        ({"vectors": [[0.5] * D], "k": N + 1}, "k"),
    ],
)
def test_bad_requests_are_a_422_naming_the_field(
    served: str, http: httpx.Client, body: dict, field: str
) -> None:
    response = http.post(f"{served}/search", json=body)
    assert response.status_code == 422 and field in field_of(response), response.text


def test_texts_of_a_collection_without_an_encoder_are_a_422_naming_texts(collection: MilvusIndex) -> None:
    plain = MilvusIndex.connect(str(collection.address))
    plain.encoder = None
    with LoopbackServer(create_app(plain)) as server, httpx.Client(timeout=30) as client:
        response = client.post(f"{server.url}/search", json={"texts": ["water"]})
        assert response.status_code == 422 and field_of(response) == ["texts"]
        assert "records no encoder" in response.text
        assert hits(client.post(f"{server.url}/search", json={"ids": [3], "k": 1})) == [[3]]


def test_crl_serve_opens_a_collection_for_bounded_reads(collection: MilvusIndex) -> None:
    app = serving_app(str(collection.address), max_batch=16, max_k=50, timeout=TIMEOUT_S)
    with LoopbackServer(app) as server, httpx.Client(timeout=30) as client:
        assert client.get(f"{server.url}/health").json()["kind"] == "flat"
        found = hits(client.post(f"{server.url}/search", json={"vectors": [[1.0] * D], "k": 3}))
        assert len(found[0]) == 3


def test_a_killed_server_is_a_503_naming_it_and_the_service_recovers_after_its_restart(  # type: ignore[no-untyped-def]
    milvus_server: Any, served: str, http: httpx.Client
) -> None:
    body = {"ids": [0, 3], "k": 5}
    before = hits(http.post(f"{served}/search", json=body))
    kill(milvus_server)
    for answer in (http.post(f"{served}/search", json=body), http.get(f"{served}/health")):
        assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
        (error,) = answer.json()["detail"]
        assert error["loc"] == ["backend"]
        assert error["msg"].startswith(f"milvus backend at 127.0.0.1:{milvus_server.listen_port} unavailable")
        assert "Traceback" not in answer.text and "/tmp" not in answer.text
    milvus_server.start()
    deadline = time.monotonic() + RECOVERY_S
    while (answer := http.post(f"{served}/search", json=body)).status_code == 503:
        assert time.monotonic() < deadline, f"no 200 within {RECOVERY_S} s of the restart"
        time.sleep(0.5)
    assert hits(answer) == before
