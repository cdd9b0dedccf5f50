"""The search service on the requests that leaked a path, echoed megabytes, parsed unbounded bodies, answered
fewer than k or null scores without saying so, or took a string or a bool for a number (in-process client)."""

from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from crl.search import EncoderProvenance, Index, SearchResult
from crl.serving.service import create_app

DIM = 8
SECRET = "/srv/models/private/checkpoint.pt"


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((400, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def client(vectors: np.ndarray) -> Iterator[TestClient]:
    """A flat index recording a checkpoint that has no string encoder, with a 20,000-byte body limit."""
    index = Index.build(vectors, encoder=EncoderProvenance(checkpoint=SECRET, fingerprint="0" * 64))
    with TestClient(create_app(index, max_batch=16, max_k=50, max_body_bytes=20_000)) as http:
        yield http


def test_a_text_error_shows_neither_the_encoder_path_nor_the_whole_query(client: TestClient) -> None:
    """The 422 named the server's checkpoint path and echoed the query whole (2 MB in, 2 MB out)."""
    answer = client.post("/search", json={"texts": ["water " * 2_000]})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "texts"]
    assert "no string encoder" in answer.json()["detail"][0]["msg"]
    assert SECRET not in answer.text and "private" not in answer.text
    assert len(answer.content) < 1_000


def test_many_bad_items_give_a_short_capped_error_list(client: TestClient) -> None:
    """16 non-string texts of 16 numbers each listed 16 errors with every input in full."""
    answer = client.post("/search", json={"texts": [[123456789] * 16] * 16})
    detail = answer.json()["detail"]
    assert answer.status_code == 422
    assert [entry["loc"] for entry in detail[:10]] == [["body", "texts", row] for row in range(10)]
    assert detail[10] == {
        "loc": ["body"],
        "msg": "6 more errors not listed; fix the ones above and send again",
        "type": "too_many_errors",
    }
    assert all(len(str(entry.get("input", ""))) <= 60 for entry in detail)
    assert len(answer.content) < 2_000


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_before_parsing(client: TestClient, declared: bool) -> None:
    """A million vectors were parsed (10 s, 1 GB) before the batch limit answered; now 413 at the byte limit."""
    row = b"[" + b", ".join([b"0.125"] * DIM) + b"]"
    body = b'{"vectors": [' + b", ".join([row] * 1_000) + b"]}"
    content = body if declared else iter([body[start : start + 4096] for start in range(0, len(body), 4096)])
    answer = client.post("/search", content=content, headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["detail"] == [
        {
            "loc": ["body"],
            "msg": "the request body exceeds 20000 bytes; send fewer or shorter queries per request "
            "(crl serve --max-body-bytes sets the limit)",
            "type": "body_too_large",
        }
    ]
    assert client.post("/search", json={"vectors": [[0.125] * DIM] * 16}).status_code == 200


def test_fewer_than_k_found_says_so(vectors: np.ndarray) -> None:
    """An IVF probing one of 8 cells answered 200 with fewer than k results and no word of it."""
    ivf = Index.build(vectors, kind="ivf", nlist=8, nprobe=1)
    with TestClient(create_app(ivf)) as http:
        answer = http.post("/search", json={"ids": [0, 1], "k": 200}).json()
    expected = ivf.search(ivf.vectors([0, 1]), 200)
    assert [result["found"] for result in answer["results"]] == expected.found.tolist()
    assert all(result["found"] == len(result["ids"]) < 200 for result in answer["results"])
    assert "raise nprobe" in answer["shortfall"]


def test_huge_query_vectors_are_a_named_422_and_scores_are_never_null(vectors: np.ndarray) -> None:
    """An ip index answered null scores for 1e20-scale queries; non-finite scores could reach the JSON."""
    ip = Index.build(vectors, metric="ip")
    with TestClient(create_app(ip)) as http:
        huge = http.post("/search", json={"vectors": [[1e20] * DIM]})
        assert huge.status_code == 422 and huge.json()["detail"][0]["loc"] == ["body", "vectors"]
        assert "scale the vectors down" in huge.json()["detail"][0]["msg"]
    cosine = Index.build(np.eye(3, dtype=np.float32))
    with TestClient(create_app(cosine)) as http:
        edge = http.post("/search", json={"vectors": [[3e38, 3e38, 0.0]], "k": 2}).json()["results"][0]
    np.testing.assert_allclose(edge["scores"], [2**-0.5, 2**-0.5], rtol=1e-6)


def test_a_non_finite_score_is_an_error_not_null(
    vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever the index answers, an infinite score becomes a 422 naming the query field."""
    index = Index.build(vectors, metric="ip")
    overflowed = SearchResult(
        scores=np.array([[np.inf, 1.0]], dtype=np.float32),
        ids=np.array([[3, 4]], dtype=np.int64),
        found=np.array([2], dtype=np.int64),
    )
    monkeypatch.setattr(index, "search", lambda *_, **__: overflowed)
    with TestClient(create_app(index)) as http:
        answer = http.post("/search", json={"ids": [0], "k": 2})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["body", "ids"]
    assert "scores of ids[0] are not finite" in answer.json()["detail"][0]["msg"]


@pytest.mark.parametrize(
    ("body", "loc", "msg"),
    [
        ({"ids": [2**63]}, ["body", "ids", 0], "less than or equal to 9223372036854775807"),
        ({"ids": [0], "k": "5"}, ["body", "k"], "valid integer"),
        ({"ids": [0], "k": True}, ["body", "k"], "valid integer"),
        ({"ids": [0], "nprobe": "2"}, ["body", "nprobe"], "valid integer"),
        ({"vectors": [[True] * DIM]}, ["body", "vectors", 0, 0], "valid number"),
    ],
)
def test_out_of_range_ids_and_numbers_as_strings_or_bools_are_422(
    client: TestClient, body: dict, loc: list, msg: str
) -> None:
    """ids >= 2**63, "k": "5" and "k": true were accepted."""
    answer = client.post("/search", json=body)
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == loc and msg in answer.json()["detail"][0]["msg"]


def test_the_cdn_pages_are_off_unless_asked_for(vectors: np.ndarray) -> None:
    """/docs and /redoc loaded scripts from a CDN by default; the schema stays."""
    index = Index.build(vectors[:10])
    with TestClient(create_app(index)) as http:
        assert [http.get(page).status_code for page in ("/docs", "/redoc", "/openapi.json")] == [
            404,
            404,
            200,
        ]
    with TestClient(create_app(index, docs=True)) as http:
        assert [http.get(page).status_code for page in ("/docs", "/redoc")] == [200, 200]
