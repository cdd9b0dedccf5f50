"""Index and crl search on the inputs that gave fewer than k results, overflowed or reached faiss unchecked."""

import json
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import pytest
import torch

from crl.commands.search import search_command
from crl.search import Index, exact_search


def _vectors(n: int, d: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d)).astype(np.float32)


def _refuse_constant(name: str) -> Any:
    raise AssertionError(f"the output holds {name}, which is not JSON")


def test_hnsw_search_widens_ef_search_until_it_finds_k() -> None:
    """k = N at efSearch 64 gave about 320 of 400 items (id -1 pads); now every query finds all 400."""
    vectors = _vectors(400)
    index = Index.build(vectors, kind="hnsw")
    found = index.search(vectors[:5], 400)
    assert found.found.tolist() == [400] * 5 and found.shortfall is None
    assert all(len(set(row)) == 400 for row in found.ids.tolist())
    assert np.isfinite(found.scores).all()
    assert index.params["efSearch"] == 64
    assert faiss.downcast_index(index.faiss_index.index).hnsw.efSearch == 64  # type: ignore[attr-defined]


def test_ivf_shortfall_reports_found_and_reason() -> None:
    """An IVF whose probed cells hold fewer than k items padded silently; now found and the reason say so."""
    vectors = _vectors(400)
    index = Index.build(vectors, kind="ivf", nlist=10, nprobe=2)
    found = index.search(vectors[:3], 300)
    assert (found.found < 300).all()
    assert found.shortfall is not None and "raise nprobe" in found.shortfall
    for row, count in zip(found.ids, found.found, strict=True):
        assert (row[:count] >= 0).all() and (row[count:] == -1).all()


def test_crl_search_reports_found_and_never_prints_infinity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`crl search -k` beyond what the index finds printed fewer rows with rc 0 and no word; --json now carries
    k, found and the shortfall, strict JSON (no Infinity), and the table says "found N of k"."""
    folder = Index.build(_vectors(400), kind="ivf", nlist=10, nprobe=2).save(tmp_path / "ix")
    assert search_command(folder, ["0"], k=300, as_json=True) == 0
    answer = json.loads(capsys.readouterr().out, parse_constant=_refuse_constant)
    assert answer["k"] == 300 and answer["found"] == len(answer["results"]) < 300
    assert "raise nprobe" in answer["shortfall"]
    assert search_command(folder, ["0"], k=300) == 0
    assert f"found {answer['found']} of 300: the 2 IVF cells probed" in capsys.readouterr().out


def test_cosine_normalises_coordinates_near_float32_max() -> None:
    """[3e38, 3e38, 0] was stored as zeros (the float32 norm overflowed); now as [0.7071, 0.7071, 0]."""
    index = Index.build(np.array([[3e38, 3e38, 0.0], [1.0, 0.0, 0.0]], dtype=np.float32))
    np.testing.assert_allclose(index.vectors([0]), [[2**-0.5, 2**-0.5, 0.0]], rtol=1e-6)
    found = index.search(np.array([[1.0, 1.0, 0.0]]), 1)
    assert found.ids.tolist() == [[0]] and found.scores[0, 0] == pytest.approx(1.0)


def test_inner_product_refuses_norms_whose_products_overflow() -> None:
    """An ip index of 1e20-scale vectors answered inf scores; now build, add, search and exact_search refuse
    norms above 1e18, naming the argument and the fix."""
    huge = np.array([[1e20, 1e20, 0.0]], dtype=np.float32)
    fix = r"norm 1\.41e\+20, above 1e\+18: .*normalise them\) or use metric='cosine'"
    with pytest.raises(ValueError, match=f"vectors row 0 has {fix}"):
        Index.build(huge, metric="ip")
    index = Index.build(np.eye(3, dtype=np.float32), metric="ip")
    with pytest.raises(ValueError, match=f"vectors row 0 has {fix}"):
        index.add(huge)
    with pytest.raises(ValueError, match=f"queries row 0 has {fix}"):
        index.search(huge, 1)
    with pytest.raises(ValueError, match=f"corpus row 0 has {fix}"):
        exact_search(huge, np.eye(3)[:1], 1, metric="ip")


def test_search_takes_bfloat16_tensor_queries() -> None:
    """A torch.bfloat16 query raised torch's 'Got unsupported ScalarType BFloat16'; now it is converted."""
    vectors = _vectors(50)
    index = Index.build(vectors)
    query = torch.from_numpy(vectors[:4]).to(torch.bfloat16)
    assert index.search(query, 3).ids.tolist() == index.search(query.float().numpy(), 3).ids.tolist()


def test_save_onto_a_file_is_a_clear_error(tmp_path: Path) -> None:
    """Index.save onto a file raised FileExistsError from mkdir; now a ValueError naming the path."""
    target = tmp_path / "index.bin"
    target.write_text("not a folder")
    with pytest.raises(ValueError, match=r"index\.bin is a file, not a folder; pass a folder path"):
        Index.build(_vectors(5)).save(target)


@pytest.mark.parametrize(
    ("kind", "field", "value", "message"),
    [
        ("flat", "kind", "hnsw", r"field 'kind' = 'hnsw' disagrees with .*index\.faiss \(kind 'flat'\)"),
        (
            "flat",
            "metric",
            "cosine",
            r"field 'metric' = 'cosine' disagrees with .*index\.faiss, which stores a",
        ),
        ("flat", "dimension", 4, r"field 'dimension' = 4 disagrees with .*\(dimension 8\)"),
        ("flat", "count", "12", r"field 'count' = '12' disagrees with .*\(count 12\)"),
        ("hnsw", "params", {"M": 16, "efConstruction": 80, "efSearch": 64}, r"field 'params\.M' = 16"),
        ("flat", "encoder", {"checkpoint": 1}, r"field 'encoder' = \{'checkpoint': 1\}; it is null or"),
    ],
)
def test_edited_manifest_names_the_field(
    tmp_path: Path, kind: str, field: str, value: Any, message: str
) -> None:
    """An edited metric loaded silently, an edited encoder raised TypeError; each edit now names the field."""
    folder = Index.build(3 * _vectors(12), kind=kind, metric="ip").save(tmp_path / "ix")
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest[field] = value
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match=r"manifest\.json: " + message):
        Index.load(folder)
