"""crl.search: faiss indexes against the exact torch reference, ids and metadata, save/load, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import faiss
import numpy as np
import pytest
import torch

from crl.search import TIE, EncoderProvenance, Index, SearchResult, exact_search

N, D, Q, K = 20000, 32, 300, 10
RECALL_AT_10 = {"hnsw": 0.97, "ivf": 0.95, "ivfpq": 0.55}


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    """Gaussian blobs: 200 centres N(0, I_32), points = centre + N(0, I_32); a corpus and held-out queries."""
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((200, D))
    points = centres[rng.integers(0, 200, N + Q)] + rng.standard_normal((N + Q, D))
    return points[:N].astype(np.float32), points[N:].astype(np.float32)


@pytest.fixture(scope="module")
def reference(blobs: tuple[np.ndarray, np.ndarray]) -> SearchResult:
    corpus, queries = blobs
    return exact_search(corpus, queries, K)


@pytest.fixture(scope="module")
def built(blobs: tuple[np.ndarray, np.ndarray]) -> dict[str, Index]:
    corpus, _ = blobs
    return {kind: Index.build(corpus, kind=kind) for kind in ("flat", "hnsw", "ivf", "ivfpq")}


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(a) & set(b)) / truth.shape[1] for a, b in zip(found, truth, strict=True)]))


def small(n: int = 50, d: int = 8, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def test_flat_equals_exact_search(built: dict[str, Index], blobs, reference: SearchResult) -> None:
    corpus, queries = blobs
    result = built["flat"].search(queries, K)
    assert result.scores.dtype == np.float32 and result.ids.dtype == np.int64
    assert result.scores.shape == result.ids.shape == (Q, K)
    np.testing.assert_allclose(result.scores, reference.scores, atol=1e-5)
    unit = corpus / np.linalg.norm(corpus, axis=1, keepdims=True)
    differ = result.ids != reference.ids
    # where the ids differ, the two items tie in score (float64)
    for row, col in zip(*np.nonzero(differ), strict=True):
        query = queries[row] / np.linalg.norm(queries[row])
        gap = unit[result.ids[row, col]] @ query - unit[reference.ids[row, col]] @ query
        assert abs(gap) < 1e-5
    assert (np.diff(result.scores, axis=1) <= TIE).all()  # best first; scores within TIE are ordered by id


@pytest.mark.parametrize("kind", ["hnsw", "ivf", "ivfpq"])
def test_recall_at_10_with_default_parameters(built: dict[str, Index], blobs, reference, kind: str) -> None:
    result = built[kind].search(blobs[1], K)
    assert recall(result.ids, reference.ids) >= RECALL_AT_10[kind]


def test_per_call_ef_search_and_nprobe(built: dict[str, Index], blobs, reference: SearchResult) -> None:
    queries = blobs[1]
    ivf = built["ivf"]
    full = ivf.search(queries, K, nprobe=ivf.params["nlist"])
    assert recall(full.ids, reference.ids) >= 0.999
    assert recall(ivf.search(queries, K, nprobe=1).ids, reference.ids) < recall(full.ids, reference.ids)
    hnsw = built["hnsw"]
    assert recall(hnsw.search(queries, K, ef_search=256).ids, reference.ids) >= 0.99
    assert (
        hnsw.faiss_index.index is not None
        and faiss.downcast_index(hnsw.faiss_index.index).hnsw.efSearch == 64
    )
    with pytest.raises(ValueError, match="ef_search applies to kind='hnsw' only"):
        ivf.search(queries, K, ef_search=10)
    with pytest.raises(ValueError, match="nprobe applies"):
        hnsw.search(queries, K, nprobe=10)


def test_hnsw_ranks_by_inner_product_not_l2() -> None:
    # items of very different norms: the largest inner product is not the nearest in L2
    rng = np.random.default_rng(2)
    vectors = (rng.standard_normal((500, 8)) * rng.uniform(0.1, 10.0, (500, 1))).astype(np.float32)
    queries = rng.standard_normal((40, 8)).astype(np.float32)
    index = Index.build(vectors, kind="hnsw", metric="ip")
    assert faiss.downcast_index(index.faiss_index.index).metric_type == faiss.METRIC_INNER_PRODUCT
    truth = exact_search(vectors, queries, 5, metric="ip")
    l2_top = np.argmin(((queries[:, None, :] - vectors[None]) ** 2).sum(-1), axis=1)
    assert (l2_top != truth.ids[:, 0]).mean() > 0.5
    result = index.search(queries, 5, ef_search=500)
    np.testing.assert_array_equal(result.ids, truth.ids)
    np.testing.assert_allclose(result.scores, truth.scores, rtol=1e-5)


def test_exact_search_chunks_agree_and_accept_torch() -> None:
    corpus, queries = small(300), small(37, seed=3)
    whole = exact_search(corpus, queries, 7, chunk_size=4096)
    chunked = exact_search(torch.from_numpy(corpus), torch.from_numpy(queries), 7, chunk_size=16)
    np.testing.assert_allclose(chunked.scores, whole.scores, atol=1e-6)
    np.testing.assert_array_equal(chunked.ids, whole.ids)
    named = exact_search(corpus, queries, 7, ids=np.arange(300) + 1000)
    np.testing.assert_array_equal(named.ids, whole.ids + 1000)


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf", "ivfpq"])
def test_external_ids_batches_metadata_and_remove(kind: str) -> None:
    vectors = small(600, 16)
    ids = np.random.default_rng(4).permutation(10**6)[:600].astype(np.int64)
    meta = [{"row": i} for i in range(600)]
    params = {"nlist": 4, "nbits": 4} if kind == "ivfpq" else {"nlist": 4} if kind == "ivf" else {}
    index = Index.build(vectors[:400], ids[:400], kind=kind, metadata=meta[:400], **params)
    added = index.add(vectors[400:], ids=ids[400:], metadata=meta[400:])
    np.testing.assert_array_equal(added, ids[400:])
    assert len(index) == 600
    np.testing.assert_array_equal(index.ids, ids)
    result = index.search(vectors[:5], 3, **({"nprobe": 4} if kind.startswith("ivf") else {}))
    if kind != "ivfpq":
        np.testing.assert_array_equal(result.ids[:, 0], ids[:5])
    assert index.metadata(result.ids[:, 0]) == [
        meta[int(np.flatnonzero(ids == i)[0])] for i in result.ids[:, 0]
    ]
    index.remove(ids[:100])
    assert len(index) == 500
    after = index.search(vectors[:50], 10, **({"nprobe": 4} if kind.startswith("ivf") else {}))
    assert not np.isin(after.ids, ids[:100]).any()
    auto = index.add(small(2, 16, seed=9))
    np.testing.assert_array_equal(auto, [ids.max() + 1, ids.max() + 2])
    assert index.metadata(auto) == [None, None]


@pytest.mark.parametrize("kind", ["flat", "hnsw", "ivf", "ivfpq"])
def test_save_load_round_trip(tmp_path: Path, kind: str) -> None:
    vectors = small(400, 16)
    params = {"nlist": 4, "nbits": 4} if kind == "ivfpq" else {"nlist": 4} if kind == "ivf" else {}
    encoder = EncoderProvenance(checkpoint="runs/a/last.safetensors", fingerprint="abc123")
    index = Index.build(
        vectors, kind=kind, metadata=[{"i": i} for i in range(400)], encoder=encoder, **params
    )
    index.remove([3, 5])
    index.save(tmp_path / "ix")
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    assert manifest["dimension"] == 16 and manifest["count"] == 398 and manifest["kind"] == kind
    assert manifest["metric"] == "cosine" and manifest["params"] == index.params
    assert set(manifest["sha256"]) == {"index.faiss", "ids.npy", "metadata.json"}
    assert manifest["encoder"] == {"checkpoint": "runs/a/last.safetensors", "fingerprint": "abc123"}
    loaded = Index.load(tmp_path / "ix")
    assert (loaded.kind, loaded.metric, loaded.dim, loaded.params) == (kind, "cosine", 16, index.params)
    assert loaded.encoder == encoder and len(loaded) == 398
    before, after = index.search(vectors[:20], 5), loaded.search(vectors[:20], 5)
    np.testing.assert_array_equal(after.ids, before.ids)
    np.testing.assert_array_equal(after.scores, before.scores)
    assert loaded.metadata([7]) == [{"i": 7}]
    assert not list((tmp_path / "ix").glob(".*tmp"))


def saved(tmp_path: Path) -> Path:
    return Index.build(small(100, 8)).save(tmp_path / "ix")


def test_load_truncated_index_file(tmp_path: Path) -> None:
    folder = saved(tmp_path)
    data = (folder / "index.faiss").read_bytes()
    (folder / "index.faiss").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"index\.faiss is corrupted"):
        Index.load(folder)


def test_load_corrupted_ids_and_missing_manifest(tmp_path: Path) -> None:
    folder = saved(tmp_path)
    raw = bytearray((folder / "ids.npy").read_bytes())
    raw[-1] ^= 1
    (folder / "ids.npy").write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"ids\.npy is corrupted"):
        Index.load(folder)
    (folder / "manifest.json").unlink()
    with pytest.raises(ValueError, match=r"manifest\.json is missing"):
        Index.load(folder)
    with pytest.raises(ValueError, match="is not a folder"):
        Index.load(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        (
            "dimension",
            9,
            r"manifest\.json: field 'dimension' = 9 disagrees with .*index\.faiss \(dimension 8\)",
        ),
        ("count", 7, r"manifest\.json: field 'count' = 7 disagrees with .*index\.faiss \(count 100\)"),
    ],
)
def test_load_mismatched_manifest(tmp_path: Path, field: str, value: int, message: str) -> None:
    folder = saved(tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest[field] = value
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=message):
        Index.load(folder)


def test_bad_vectors() -> None:
    index = Index.build(small(20, 8))
    with pytest.raises(ValueError, match="queries has dimension 7, the index has 8"):
        index.search(small(2, 7), 3)
    with pytest.raises(ValueError, match="vectors has dimension 9"):
        index.add(small(2, 9))
    nan = small(3, 8)
    nan[1, 2] = np.nan
    with pytest.raises(ValueError, match="queries row 1 holds NaN"):
        index.search(nan, 3)
    with pytest.raises(ValueError, match="vectors row 1 holds NaN"):
        Index.build(nan)
    with pytest.raises(ValueError, match=r"reshape\(1, -1\)"):
        index.search(np.ones(8), 3)
    with pytest.raises(ValueError, match="zero vector"):
        index.add(np.zeros((1, 8)))
    with pytest.raises(ValueError, match="beyond float32"):
        index.search(np.full((1, 8), 1e300), 3)


def test_bad_k_and_empty_index() -> None:
    index = Index.build(small(20, 8))
    for k in (0, -1):
        with pytest.raises(ValueError, match=f"k={k} must be an integer >= 1"):
            index.search(small(1, 8), k)
    with pytest.raises(ValueError, match="k = 21 exceeds the 20 items"):
        index.search(small(1, 8), 21)
    with pytest.raises(ValueError, match=r"k=2\.5 must be an integer >= 1"):
        index.search(small(1, 8), 2.5)  # type: ignore[arg-type]
    index.remove(index.ids)
    with pytest.raises(ValueError, match="the index is empty"):
        index.search(small(1, 8), 1)
    empty = Index.build(np.empty((0, 8)), kind="hnsw")
    assert len(empty) == 0
    with pytest.raises(ValueError, match="the index is empty"):
        empty.search(small(1, 8), 1)
    with pytest.raises(ValueError, match="trained on the vectors"):
        Index.build(np.empty((0, 8)), kind="ivf")


def test_bad_ids() -> None:
    with pytest.raises(ValueError, match="ids has 3 entries for 4 vectors"):
        Index.build(small(4, 8), ids=[1, 2, 3])
    with pytest.raises(ValueError, match="ids holds 2 more than once"):
        Index.build(small(4, 8), ids=[1, 2, 2, 3])
    with pytest.raises(ValueError, match="ids must be >= 0"):
        Index.build(small(2, 8), ids=[-1, 0])
    with pytest.raises(ValueError, match="ids must be integers"):
        Index.build(small(2, 8), ids=[0.5, 1.0])
    index = Index.build(small(4, 8), ids=[10, 11, 12, 13])
    with pytest.raises(ValueError, match="ids holds 11, already in the index"):
        index.add(small(1, 8), ids=[11])
    with pytest.raises(ValueError, match="ids holds 99, which is not in the index"):
        index.remove([10, 99])
    assert len(index) == 4
    hnsw = Index.build(small(10, 8), kind="hnsw")
    with pytest.raises(ValueError, match="not in the index"):
        hnsw.remove(42)


def test_bad_kind_metric_params_and_metadata() -> None:
    with pytest.raises(ValueError, match="kind = 'lsh'"):
        Index.build(small(), kind="lsh")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="metric = 'l2'"):
        Index.build(small(), metric="l2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown parameter 'nprobe' for kind='hnsw'"):
        Index.build(small(), kind="hnsw", nprobe=3)
    with pytest.raises(ValueError, match="nlist = 80 exceeds the 50 training vectors"):
        Index.build(small(), kind="ivf", nlist=80)
    with pytest.raises(ValueError, match="M = 3 does not divide the dimension 8"):
        Index.build(small(), kind="ivfpq", M=3)
    with pytest.raises(ValueError, match="nbits = 8 needs 256 training vectors"):
        Index.build(small(), kind="ivfpq", nbits=8)
    with pytest.raises(ValueError, match="parameter M = 0"):
        Index.build(small(), kind="hnsw", M=0)
    with pytest.raises(ValueError, match=r"metadata\[1\] is not JSON-able"):
        Index.build(small(2, 8), metadata=[{"a": 1}, {"b": object()}])
    with pytest.raises(ValueError, match="metadata has 1 entries for 2 vectors"):
        Index.build(small(2, 8), metadata=[{"a": 1}])
