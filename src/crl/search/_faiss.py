"""faiss index construction: the parameters of each kind, their defaults by item count N, search parameters.

Every faiss index here is built with ``faiss.METRIC_INNER_PRODUCT`` passed explicitly: ``IndexHNSWFlat`` and
the IVF indexes default to L2 otherwise, which ranks by distance rather than by inner product.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import faiss
import numpy as np

from crl.search._types import Kind

PARAMS: dict[Kind, tuple[str, ...]] = {
    "flat": (),
    "hnsw": ("M", "efConstruction", "efSearch"),
    "ivf": ("nlist", "nprobe"),
    "ivfpq": ("nlist", "nprobe", "M", "nbits"),
}
MAX_NBITS = 16
PQ_TRAIN_ITERATIONS = 10
PQ_TRAIN_POINTS_PER_CENTROID = 64
IVF_TRAIN_POINTS_PER_CENTROID = 64
HNSW_WIDE_SEARCH_FROM = 200_000
"""Above this many items HNSW searches with efSearch = 128 (benchmarks/search.py: at 1e6 clustered items
efSearch = 64 gave recall@10 0.962, 128 gave 0.993, at 58x the exact QPS)."""


def default_nlist(n: int) -> int:
    """IVF cells: about 4 sqrt(N), at most N / 39 (faiss's k-means wants >= 39 points per centroid), >= 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def default_nprobe(nlist: int) -> int:
    """IVF cells probed per query: about sqrt(nlist), at least 8, at most nlist."""
    return min(nlist, max(8, round(math.sqrt(nlist))))


def default_pq_m(d: int) -> int:
    """PQ sub-quantizers: the largest divisor of d that is at most d / 4 (4+ coordinates, one byte each), >= 1."""
    return max((m for m in range(1, max(1, d // 4) + 1) if d % m == 0), default=1)


def default_params(kind: Kind, n: int, d: int) -> dict[str, int]:
    """The parameters ``Index.build`` uses for ``kind`` over N = ``n`` vectors of dimension ``d``."""
    if kind == "hnsw":
        return {"M": 32, "efConstruction": 80, "efSearch": 64 if n <= HNSW_WIDE_SEARCH_FROM else 128}
    if kind in ("ivf", "ivfpq"):
        nlist = default_nlist(n)
        params = {"nlist": nlist, "nprobe": default_nprobe(nlist)}
        if kind == "ivfpq":
            params |= {"M": default_pq_m(d), "nbits": min(8, max(1, int(math.log2(max(n, 1)))))}
        return params
    return {}


def resolve_params(kind: Kind, n: int, d: int, given: Mapping[str, object]) -> dict[str, int]:
    """The defaults for (kind, n, d) overridden by ``given``, each checked against what faiss accepts."""
    unknown = sorted(set(given) - set(PARAMS[kind]))
    if unknown:
        allowed = ", ".join(PARAMS[kind]) or "none"
        raise ValueError(f"unknown parameter {unknown[0]!r} for kind={kind!r}; its parameters: {allowed}")
    params = default_params(kind, n, d)
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"parameter {name} = {value!r}; pass a positive integer")
        params[name] = int(value)
    if kind == "hnsw" and params["M"] < 2:
        raise ValueError(f"parameter M = {params['M']}; HNSW needs M >= 2 links per node")
    if kind in ("ivf", "ivfpq"):
        if params["nlist"] > n:
            raise ValueError(
                f"parameter nlist = {params['nlist']} exceeds the {n} training vectors; pass nlist <= {n}"
            )
        params["nprobe"] = min(params["nprobe"], params["nlist"])
    if kind == "ivfpq":
        if d % params["M"]:
            raise ValueError(
                f"parameter M = {params['M']} does not divide the dimension {d}; pass a divisor of {d}"
            )
        if params["nbits"] > MAX_NBITS or 2 ** params["nbits"] > n:
            raise ValueError(
                f"parameter nbits = {params['nbits']} needs {2 ** params['nbits']} training vectors (have {n})"
                f" and at most {MAX_NBITS}; pass a smaller nbits"
            )
    return params


def new_index(kind: Kind, d: int, params: Mapping[str, int]) -> faiss.Index:
    """An empty inner-product faiss index of ``kind`` (IVF kinds still untrained) that takes external ids."""
    ip = faiss.METRIC_INNER_PRODUCT
    if kind == "flat":
        return faiss.IndexIDMap2(faiss.IndexFlatIP(d))
    if kind == "hnsw":
        hnsw = faiss.IndexHNSWFlat(d, params["M"], ip)
        hnsw.hnsw.efConstruction = params["efConstruction"]
        hnsw.hnsw.efSearch = params["efSearch"]
        return faiss.IndexIDMap2(hnsw)
    quantizer = faiss.IndexFlatIP(d)
    index: Any
    if kind == "ivf":
        index = faiss.IndexIVFFlat(quantizer, d, params["nlist"], ip)
    else:
        index = faiss.IndexIVFPQ(quantizer, d, params["nlist"], params["M"], params["nbits"], ip)
        index.pq.cp.niter = PQ_TRAIN_ITERATIONS
        index.pq.cp.max_points_per_centroid = PQ_TRAIN_POINTS_PER_CENTROID
    index.cp.max_points_per_centroid = IVF_TRAIN_POINTS_PER_CENTROID
    index.nprobe = params["nprobe"]
    return index


def expected_type(kind: Kind) -> tuple[type, type | None]:
    """The faiss class of a saved index of ``kind`` and, for the id-mapped kinds, of the index it wraps."""
    return {
        "flat": (faiss.IndexIDMap2, faiss.IndexFlat),
        "hnsw": (faiss.IndexIDMap2, faiss.IndexHNSWFlat),
        "ivf": (faiss.IndexIVFFlat, None),
        "ivfpq": (faiss.IndexIVFPQ, None),
    }[kind]


def file_params(index: Any, kind: Kind) -> dict[str, int]:
    """The parameters of ``kind`` (:data:`PARAMS`) as the faiss ``index`` itself holds them."""
    if kind == "hnsw":
        hnsw = faiss.downcast_index(index.index).hnsw  # type: ignore[attr-defined]
        return {"M": hnsw.nb_neighbors(1), "efConstruction": hnsw.efConstruction, "efSearch": hnsw.efSearch}
    if kind in ("ivf", "ivfpq"):
        params = {"nlist": index.nlist, "nprobe": index.nprobe}
        if kind == "ivfpq":
            params |= {"M": index.pq.M, "nbits": index.pq.nbits}
        return params
    return {}


def stored_sample(index: Any, kind: Kind, count: int) -> np.ndarray:
    """Up to ``count`` of the vectors ``index`` stores (IVF-PQ: their lossy reconstruction), (m, d) float32,
    read without changing the index (an IVF is read cell by cell, with no direct map built)."""
    if kind in ("flat", "hnsw"):
        inner = faiss.downcast_index(index.index)
        return inner.reconstruct_n(0, min(count, inner.ntotal))
    rows: list[np.ndarray] = []
    for cell in range(index.nlist):
        for offset in range(min(index.invlists.list_size(cell), count - len(rows))):
            row = np.empty(index.d, dtype=np.float32)
            index.reconstruct_from_offset(cell, offset, faiss.swig_ptr(row))
            rows.append(row)
        if len(rows) == count:
            break
    return np.stack(rows) if rows else np.empty((0, index.d), dtype=np.float32)


def search_parameters(
    kind: Kind, params: Mapping[str, int], ef_search: int | None, nprobe: int | None
) -> faiss.SearchParameters | None:
    """faiss search parameters for one call: efSearch for HNSW, nprobe for IVF; None keeps the index's own."""
    for name, value in (("ef_search", ef_search), ("nprobe", nprobe)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1
        ):
            raise ValueError(f"{name} = {value!r}; pass a positive integer")
    if ef_search is not None and kind != "hnsw":
        raise ValueError(f"ef_search applies to kind='hnsw' only; this index is {kind!r}")
    if nprobe is not None and kind not in ("ivf", "ivfpq"):
        raise ValueError(f"nprobe applies to kinds 'ivf' and 'ivfpq' only; this index is {kind!r}")
    if ef_search is not None:
        return faiss.SearchParametersHNSW(efSearch=int(ef_search))  # type: ignore[attr-defined]
    if nprobe is not None:
        return faiss.SearchParametersIVF(nprobe=min(int(nprobe), params["nlist"]))  # type: ignore[call-arg]
    return None
