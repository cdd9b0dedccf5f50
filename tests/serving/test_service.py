"""The HTTP search service on a loopback port: good answers, a named 4xx for every bad request, a bounded load."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pytest
import uvicorn
from typer.testing import CliRunner

from crl.commands import app
from crl.commands.serve import serving_app
from crl.search import Index
from crl.serving.service import create_app
from tests.serving.helpers import CORPUS, build_text_index

DIM = 8


class LoopbackServer:
    """uvicorn serving an app on 127.0.0.1 at a free port, in a thread."""

    def __init__(self, app) -> None:  # type: ignore[no-untyped-def]
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> "LoopbackServer":
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
        self.sock.close()


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((400, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def served(vectors: np.ndarray) -> Iterator[tuple[str, Index]]:
    index = Index.build(vectors, kind="hnsw")
    with LoopbackServer(create_app(index, max_batch=16, max_k=50)) as server:
        yield server.url, index


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """One client for the module (a client per request would build an SSL context each time)."""
    with httpx.Client(timeout=30) as client:
        yield client


def field_of(response: httpx.Response) -> list:
    """The request field each error names (``loc`` is ``["body", field, index...]``, or ``["body"]``)."""
    return [
        entry["loc"][1] if len(entry["loc"]) > 1 else entry["loc"][0] for entry in response.json()["detail"]
    ]


def test_health_and_good_searches_match_the_index(served, http, vectors: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    url, index = served
    health = http.get(f"{url}/health").json()
    assert health["status"] == "ok" and health["count"] == 400 and health["dimension"] == DIM
    assert health["limits"] == {"max_batch": 16, "max_k": 50, "max_body_bytes": 16 * DIM * 32 + 65_536}
    answer = http.post(f"{url}/search", json={"vectors": vectors[:3].tolist(), "k": 5, "ef_search": 128})
    assert answer.status_code == 200
    expected = index.search(vectors[:3], 5, ef_search=128)
    assert [r["ids"] for r in answer.json()["results"]] == expected.ids.tolist()
    assert [r["found"] for r in answer.json()["results"]] == [5, 5, 5] and answer.json()["shortfall"] is None
    np.testing.assert_allclose([r["scores"] for r in answer.json()["results"]], expected.scores, atol=1e-6)
    by_id = http.post(f"{url}/search", json={"ids": [7, 42], "k": 3}).json()["results"]
    assert [r["ids"][0] for r in by_id] == [7, 42]
    others = http.post(f"{url}/search", json={"ids": [7, 42], "k": 2, "exclude_self": True}).json()["results"]
    assert [r["ids"] for r in others] == [r["ids"][1:] for r in by_id] and [r["found"] for r in others] == [
        2,
        2,
    ]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        ({"vectors": [[0.0] * (DIM - 1)]}, 422, "vectors"),
        ({"vectors": [[float("nan")] * DIM]}, 422, "vectors"),
        ({"vectors": [[float("inf")] * DIM]}, 422, "vectors"),
        ({"vectors": [[1e39] * DIM]}, 422, "vectors"),
        ({"vectors": [[0.0] * DIM]}, 422, "vectors"),  # zero vector: its cosine is undefined
        ({"vectors": [[1.0] * DIM] * 17}, 422, "vectors"),
        ({"vectors": []}, 422, "vectors"),
        ({"ids": [1], "k": 0}, 422, "k"),
        ({"ids": [1], "k": -3}, 422, "k"),
        ({"ids": [1], "k": 51}, 422, "k"),
        ({"ids": [1], "k": "ten"}, 422, "k"),
        ({"ids": [1], "k": "5"}, 422, "k"),
        ({"ids": [1], "k": True}, 422, "k"),
        ({"ids": [2**63]}, 422, "ids"),
        ({"ids": [400]}, 422, "ids"),
        ({"ids": [-1]}, 422, "ids"),
        ({"ids": [2**70]}, 422, "ids"),
        ({"ids": [1], "nprobe": 4}, 422, "nprobe"),
        ({"ids": [1], "ef_search": 0}, 422, "ef_search"),
        ({"texts": ["a shirt"]}, 422, "texts"),
        ({"ids": [1], "vectors": [[1.0] * DIM]}, 422, "body"),
        ({}, 422, "body"),
        ({"ids": [1], "colour": "red"}, 422, "colour"),
        ({"ids": [1], "exclude_self": "yes"}, 422, "exclude_self"),
        ({"vectors": [[1.0] * DIM], "exclude_self": True}, 422, "exclude_self"),
    ],
)
def test_bad_requests_are_a_named_4xx(served, http, body: dict, status: int, field: str) -> None:  # type: ignore[no-untyped-def]
    url, _ = served
    response = http.post(
        f"{url}/search", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == status
    fields = field_of(response)
    assert field in fields or (field == "body" and fields)
    assert http.get(f"{url}/health").status_code == 200


def test_malformed_json_and_k_beyond_n_and_an_empty_index(http) -> None:  # type: ignore[no-untyped-def]
    small = Index.build(np.eye(DIM, dtype=np.float32))
    empty = Index.build(np.empty((0, DIM), dtype=np.float32))
    with LoopbackServer(create_app(small)) as server:
        broken = http.post(
            f"{server.url}/search", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert broken.status_code == 422
        too_many = http.post(f"{server.url}/search", json={"ids": [0], "k": DIM + 1})
        assert too_many.status_code == 422 and "exceeds the 8 items" in too_many.json()["detail"][0]["msg"]
    with LoopbackServer(create_app(empty)) as server:
        answer = http.post(f"{server.url}/search", json={"vectors": [[1.0] * DIM]})
        assert answer.status_code == 409 and field_of(answer) == ["k"]
    with pytest.raises(ValueError, match="max_batch"):
        create_app(small, max_batch=0)


def test_nprobe_per_request_on_an_ivf_index(http, vectors: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    """The request's nprobe is the one searched with, for this request only."""
    ivf = Index.build(vectors, kind="ivf", nlist=8, nprobe=1)
    with LoopbackServer(create_app(ivf)) as server:
        answers = []
        for nprobe in (1, 8):
            body = {"vectors": vectors[:20].tolist(), "nprobe": nprobe}
            answers.append([r["ids"] for r in http.post(f"{server.url}/search", json=body).json()["results"]])
            expected = ivf.search(vectors[:20], 10, nprobe=nprobe).ids
            assert answers[-1] == [[i for i in row if i >= 0] for row in expected.tolist()]
        assert answers[0] != answers[1] and ivf.params["nprobe"] == 1


def test_a_bounded_concurrent_load_is_served_without_errors(served, vectors: np.ndarray) -> None:  # type: ignore[no-untyped-def]
    """8 clients, 160 requests of 4 vectors: every answer 200, latencies finite (figures: benchmarks/service.py)."""
    url, _ = served
    bodies = [{"vectors": vectors[i % 100 : i % 100 + 4].tolist(), "k": 10} for i in range(160)]

    def send(client: httpx.Client, body: dict) -> tuple[int, float]:
        start = time.perf_counter()
        status = client.post(f"{url}/search", json=body).status_code
        return status, time.perf_counter() - start

    with httpx.Client(limits=httpx.Limits(max_connections=8)) as client, ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda body: send(client, body), bodies))
    assert [status for status, _ in results] == [200] * len(bodies)
    latencies = np.array([seconds for _, seconds in results])
    assert np.isfinite(np.percentile(latencies, 99)) and latencies.min() > 0


def test_bodies_over_the_limit_are_413_over_http(served, http) -> None:  # type: ignore[no-untyped-def]
    """A declared and a chunked body above max_body_bytes get 413 from uvicorn; the server answers on."""
    url, _ = served
    limit = http.get(f"{url}/health").json()["limits"]["max_body_bytes"]
    body = json.dumps({"vectors": [[0.5] * DIM] * (limit // (DIM * 4))}).encode()
    assert len(body) > limit
    headers = {"content-type": "application/json"}
    declared = http.post(f"{url}/search", content=body, headers=headers)
    chunks = (body[start : start + 8192] for start in range(0, len(body), 8192))
    chunked = http.post(f"{url}/search", content=chunks, headers=headers)
    assert [declared.status_code, chunked.status_code] == [413, 413]
    assert field_of(chunked) == ["body"] and f"exceeds {limit} bytes" in chunked.json()["detail"][0]["msg"]
    assert http.post(f"{url}/search", json={"vectors": [[0.5] * DIM] * 16}).status_code == 200


@pytest.mark.slow
def test_crl_serve_answers_text_queries_of_a_text_index(tmp_path: Path, http) -> None:  # type: ignore[no-untyped-def]
    """An index built as the README builds one (crl index build minilm --text-file) answers {"texts": [...]}
    through the app crl serve runs: each line finds itself first with score 1 (one MiniLM load to build,
    one to serve)."""
    with LoopbackServer(serving_app(build_text_index(tmp_path), max_batch=16, max_k=50)) as server:
        itself = http.post(f"{server.url}/search", json={"texts": CORPUS, "k": 1}).json()["results"]
        water = http.post(f"{server.url}/search", json={"texts": ["water"], "k": 4})
        empty = http.post(f"{server.url}/search", json={"texts": ["water", " "]})
    assert [result["ids"] for result in itself] == [[0], [1], [2], [3]]
    np.testing.assert_allclose([result["scores"][0] for result in itself], 1.0, atol=1e-5)
    assert water.status_code == 200 and water.json()["results"][0]["found"] == 4
    assert empty.status_code == 422 and field_of(empty) == ["texts"] and "text 1 is empty" in empty.text
    assert str(tmp_path) not in empty.text


def test_serve_refuses_a_non_positive_limit_in_one_line(tmp_path: Path) -> None:
    Index.build(np.eye(DIM, dtype=np.float32)).save(tmp_path / "ix")
    result = CliRunner().invoke(app, ["serve", str(tmp_path / "ix"), "--max-body-bytes", "0"])
    assert result.exit_code == 2 and "--max-body-bytes 0; pass a positive integer" in result.output


def test_an_hnsw_search_for_many_items_reports_all_k_found(http) -> None:  # type: ignore[no-untyped-def]
    """k close to N on a sparse HNSW graph: every query answers k items and no shortfall."""
    corpus = np.random.default_rng(1).standard_normal((1_200, DIM)).astype(np.float32)
    hnsw = Index.build(corpus, kind="hnsw", M=4, efSearch=16)
    with LoopbackServer(create_app(hnsw)) as server:
        answer = http.post(f"{server.url}/search", json={"ids": [0, 1, 2], "k": 1_000}).json()
    assert [result["found"] for result in answer["results"]] == [1_000] * 3
    assert [len(set(result["ids"])) for result in answer["results"]] == [1_000] * 3
    assert answer["shortfall"] is None


def test_return_text_lists_each_results_texts(http) -> None:  # type: ignore[no-untyped-def]
    """With "return_text": true each result carries its items' texts, in the order of its ids, as the index's
    metadata holds them (the reference: the texts the index was built with); without it the answer has no texts;
    an index whose items have no text answers 422 naming return_text. If this fails, a client of a text index
    cannot see what it found, or sees another item's text."""
    texts = [f"line {i}: {word}" for i, word in enumerate(["sea", "ocean", "dog", "run", "rain", "cloud"])]
    vectors = np.random.default_rng(3).standard_normal((len(texts), DIM)).astype(np.float32)
    with_text = Index.build(vectors, metadata=[{"text": text} for text in texts])
    with LoopbackServer(create_app(with_text)) as server:
        asked = {"ids": [0, 4], "k": 3, "return_text": True}
        answer = http.post(f"{server.url}/search", json=asked).json()["results"]
        plain = http.post(f"{server.url}/search", json={"ids": [0, 4], "k": 3}).json()["results"]
    for result, bare in zip(answer, plain, strict=True):
        assert result["texts"] == [texts[i] for i in result["ids"]] and len(result["texts"]) == 3
        assert "texts" not in bare and bare["ids"] == result["ids"]
    with LoopbackServer(create_app(Index.build(vectors))) as server:
        refused = http.post(f"{server.url}/search", json={"ids": [0], "k": 2, "return_text": True})
    assert refused.status_code == 422 and field_of(refused) == ["return_text"]
    assert "has no text" in refused.json()["detail"][0]["msg"]
