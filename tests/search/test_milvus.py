"""The Milvus backend against a real Milvus standalone server on 127.0.0.1 (the `milvus` package's binary).

If these fail, a Milvus collection would rank, filter, update or keep items differently from crl's faiss index
and a brute force over the same vectors, or lose acknowledged writes when its server is killed. The server
starts once per test session in a temporary folder (tests/milvus_server.py); outside CI the tests skip, with the
reason, where the extra crl[milvus] is missing or the server cannot start.
"""

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crl.commands.index import index_export_command
from crl.commands.search import search_command
from crl.metrics.ir import evaluate_index
from crl.search import TIE, EncoderProvenance, Index
from crl.search.milvus import MilvusIndex
from tests.milvus_server import free_port, kill, uri

N, D = 600, 16


@pytest.fixture
def server(milvus_server: object) -> object:
    """The session's Milvus server (tests/conftest.py)."""
    return milvus_server


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, list[dict[str, object]]]:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((N, D)).astype(np.float32)
    ids = rng.permutation(10 * N)[:N].astype(np.int64)
    metadata = [
        {"label": int(i % 3), "source": "kjv" if i % 2 else "web", "year": float(i)} for i in range(N)
    ]
    return vectors, ids, metadata


def _brute_force(
    vectors: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int, keep: np.ndarray
) -> np.ndarray:
    """The ids of the k largest cosines among the kept items, in float64, best first."""
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    scores = (queries / np.linalg.norm(queries, axis=1, keepdims=True)) @ unit[keep].T
    return ids[keep][np.argsort(-scores, axis=1, kind="stable")[:, :k]]


def test_a_flat_collection_returns_the_filtered_brute_force_top_k_as_faiss_does(server: object, data) -> None:
    vectors, ids, metadata = data
    collection = MilvusIndex.create(uri(server, "flat"), D)
    collection.add(vectors, ids, metadata)
    queries = np.random.default_rng(1).standard_normal((5, D)).astype(np.float32)
    faiss_flat = Index.build(vectors, ids, metadata=metadata)
    labels = np.array([m["label"] for m in metadata])
    years = np.array([m["year"] for m in metadata])
    spec: dict[str, object] | None
    for spec, keep in (
        (None, np.ones(N, dtype=bool)),
        ({"label": {"in": [0, 2]}}, labels != 1),
        (
            {"source": "kjv", "year": {"range": [100, 400]}},
            (np.arange(N) % 2 == 1) & (years >= 100) & (years <= 400),
        ),
    ):
        result = collection.search(queries, 10, filter=spec)
        np.testing.assert_array_equal(result.ids, _brute_force(vectors, ids, queries, 10, keep))
        assert (result.found == 10).all() and result.shortfall is None
        assert np.all(np.diff(result.scores, axis=1) <= TIE)
        expected = faiss_flat.search(queries, 10, filter=spec)
        np.testing.assert_array_equal(result.ids, expected.ids)
        np.testing.assert_allclose(result.scores, expected.scores, atol=1e-5)
    assert len(collection) == N
    for setting in ({"ef_search": 32}, {"nprobe": 4}, {"ef_search": 0}):
        name = next(iter(setting))
        with pytest.raises(ValueError, match=name) as refused:
            collection.search(queries, 10, **setting)
        with pytest.raises(ValueError) as faiss_refused:
            faiss_flat.search(queries, 10, **setting)
        assert str(refused.value) == str(faiss_refused.value)


def test_upsert_replaces_delete_removes_and_a_filter_reports_its_shortfall(server: object, data) -> None:
    vectors, ids, metadata = data
    collection = MilvusIndex.create(uri(server, "updates"), D, metric="ip")
    collection.add(vectors[:50], ids[:50], metadata[:50])
    target = vectors[7] * 3.0
    collection.upsert(target[None, :], ids[:1], [{"label": 9, "source": "new", "year": 0.0}])
    hit = collection.search(target[None, :], 1)
    assert hit.ids[0, 0] == ids[0] and hit.scores[0, 0] == pytest.approx(float(target @ target), rel=1e-5)
    assert collection.metadata(ids[:1]) == [{"label": 9, "source": "new", "year": 0.0}]
    assert collection.delete(ids[:5]) == 5 and collection.delete(ids[:5]) == 0
    assert len(collection) == 45
    assert not np.isin(ids[:5], collection.search(vectors[:5], 45).ids).any()
    short = collection.search(vectors[:2], 20, filter={"label": 0})
    assert (short.found == 15).all() and "filter" in (short.shortfall or "")
    assert (short.ids[:, 15:] == -1).all() and np.isneginf(short.scores[:, 15:]).all()
    with pytest.raises(ValueError, match="already in"):
        collection.add(vectors[10:11], ids[10:11])


def test_hnsw_recall_against_exact_search(server: object, data) -> None:
    vectors, ids, metadata = data
    collection = MilvusIndex.create(uri(server, "hnsw"), D, kind="hnsw", params={"M": 16})
    collection.add(vectors, ids, metadata)
    collection.flush()
    queries = np.random.default_rng(2).standard_normal((50, D)).astype(np.float32)
    exact = _brute_force(vectors, ids, queries, 10, np.ones(N, dtype=bool))
    got = collection.search(queries, 10, ef_search=64).ids
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(got, exact, strict=True)])
    assert recall >= 0.95


def test_ir_evaluation_of_a_flat_collection_equals_faiss_flat_and_reports_hnsw_recall(
    server: object, data
) -> None:
    vectors, ids, metadata = data
    labels = np.full(int(ids.max()) + 1, -1)
    labels[ids] = [m["label"] for m in metadata]
    flat = MilvusIndex.create(uri(server, "eval_flat"), D)
    hnsw = MilvusIndex.create(uri(server, "eval_hnsw"), D, kind="hnsw", params={"M": 4, "efConstruction": 8})
    for collection in (flat, hnsw):
        collection.add(vectors, ids, metadata)
    faiss_flat = Index.build(vectors, ids)
    queries, own = vectors[:40], ids[:40]

    def evaluated(index, exact=None, ef_search=None):  # type: ignore[no-untyped-def]
        relevance = (labels[own], labels)
        return evaluate_index(
            index, queries, labels=relevance, self_ids=own, exact=exact, ef_search=ef_search
        )

    expected, got = evaluated(faiss_flat), evaluated(flat, faiss_flat)
    assert got.values == expected.values and got.search_recall == {100: 1.0}
    for name, by_k in expected.per_query.items():
        for k, values in by_k.items():
            np.testing.assert_array_equal(got.per_query[name][k], values)
    approximate = evaluated(hnsw, flat, ef_search=100)
    recall = approximate.search_recall[100]
    assert 0.5 < recall <= 1.0  # Milvus searches a small collection's unsealed segment exactly
    assert approximate.as_flat_dict()["search_recall@100"] == recall


def test_writes_acknowledged_before_a_kill_are_there_after_a_restart(server: object, data) -> None:
    vectors, ids, metadata = data
    collection = MilvusIndex.create(uri(server, "durable"), D)
    collection.add(vectors[:100], ids[:100], metadata[:100])
    kill(server)
    server.start()  # type: ignore[attr-defined]
    reopened = MilvusIndex.connect(uri(server, "durable"))
    assert len(reopened) == 100
    np.testing.assert_array_equal(reopened.search(vectors[:3], 1).ids[:, 0], ids[:3])


def test_addresses_and_collections_are_checked(server: object) -> None:
    with pytest.raises(ValueError, match="not a Milvus address"):
        MilvusIndex.create("milvus://127.0.0.1/x", D)
    MilvusIndex.create(uri(server, "twice"), D)
    with pytest.raises(ValueError, match="exists already"):
        MilvusIndex.create(uri(server, "twice"), D)
    with pytest.raises(ValueError, match="does not exist"):
        MilvusIndex.connect(uri(server, "missing"))
    with pytest.raises(ValueError, match="no Milvus server answers"):
        MilvusIndex.connect(f"milvus://127.0.0.1:{free_port()}/x", timeout=1.0)


def _num_entities(server: Any, name: str) -> int:
    """pymilvus's own count of collection ``name`` (its sealed rows), through a connection of its own."""
    from pymilvus import Collection, connections

    connections.connect(alias="count", host="127.0.0.1", port=str(server.listen_port))
    try:
        return int(Collection(name, using="count").num_entities)
    finally:
        connections.disconnect("count")


def test_an_exported_index_searches_alike_from_the_library_and_the_command_line(
    server: object, data, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vectors, ids, metadata = data
    provenance = EncoderProvenance(checkpoint="runs/text-model", fingerprint="ab12")
    Index.build(vectors, ids, "hnsw", metadata=metadata, encoder=provenance).save(tmp_path / "ix")
    address = uri(server, "exported")
    assert index_export_command(tmp_path / "ix", address, "flat") == 0
    assert "exported 600 items" in capsys.readouterr().out
    assert _num_entities(server, "exported") == N
    collection = MilvusIndex.connect(address)
    assert (collection.kind, collection.metric, len(collection)) == ("flat", "cosine", N)
    assert collection.encoder == provenance and collection.params == {}
    np.testing.assert_array_equal(collection.ids, np.sort(ids))
    np.testing.assert_allclose(
        collection.vectors(ids[:3]), Index.load(tmp_path / "ix").vectors(ids[:3]), atol=1e-6
    )
    query = str(int(ids[4]))
    chosen = '{"source": "kjv"}'
    assert search_command(address, [query], k=5, as_json=True, filter_json=chosen, exclude_self=False) == 0
    hits = json.loads(capsys.readouterr().out)["results"]
    keep = np.array([m["source"] == "kjv" for m in metadata])
    expected = _brute_force(vectors, ids, vectors[4:5], 5, keep)[0].tolist()
    assert [hit["id"] for hit in hits] == expected
    assert all(hit["metadata"]["source"] == "kjv" for hit in hits)
    assert search_command(address, ["water"]) == 2
    assert "no string encoder" in capsys.readouterr().err
    assert index_export_command(tmp_path / "ix", address) == 2
    assert "exists already" in capsys.readouterr().err


def test_a_text_query_of_an_exported_text_index_uses_the_recorded_encoder(
    server: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """If this fails, `crl search milvus://... "water"` does not embed the text with the encoder the collection
    records, or does not rank as the same search of the faiss folder it came from."""
    from tests.serving.helpers import build_text_index

    folder = build_text_index(tmp_path)
    address = uri(server, "texts")
    assert index_export_command(folder, address, "flat") == 0
    capsys.readouterr()
    assert search_command(folder, ["water"], k=2, as_json=True) == 0
    local = json.loads(capsys.readouterr().out)["results"]
    assert search_command(address, ["water"], k=2, as_json=True) == 0
    remote = json.loads(capsys.readouterr().out)["results"]
    assert [hit["id"] for hit in remote] == [hit["id"] for hit in local]
    np.testing.assert_allclose([h["score"] for h in remote], [h["score"] for h in local], atol=1e-5)


def test_index_build_to_milvus_saves_the_folder_and_a_collection_alike(
    server: object, tmp_path: Path
) -> None:
    """If this fails, `crl index build ... --to milvus://...` does not leave the folder and a collection holding
    the same items, vectors and encoder."""
    from typer.testing import CliRunner

    from crl.commands import app
    from tests.serving.helpers import CORPUS

    (tmp_path / "corpus.txt").write_text("\n".join(CORPUS) + "\n", encoding="utf-8")
    address = uri(server, "built")
    command = [
        "index",
        "build",
        "minilm",
        "--text-file",
        str(tmp_path / "corpus.txt"),
        "--out",
        str(tmp_path / "ix"),
    ]
    built = CliRunner().invoke(app, [*command, "--to", address])
    assert built.exit_code == 0, built.output
    folder, collection = Index.load(tmp_path / "ix"), MilvusIndex.connect(address)
    assert len(collection) == len(folder) == len(CORPUS) and collection.encoder == folder.encoder
    np.testing.assert_allclose(collection.vectors([0, 3]), folder.vectors([0, 3]), atol=1e-6)
    again = CliRunner().invoke(app, [*command, "--to", address])
    assert again.exit_code == 2 and "holds an index" in again.output and "--overwrite" in again.output
    elsewhere = CliRunner().invoke(app, [*command[:-1], str(tmp_path / "ix2"), "--to", address])
    assert elsewhere.exit_code == 2 and "exists already" in elsewhere.output
