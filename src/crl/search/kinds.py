"""The registry of index kinds: each kind's faiss factory, its parameters and their defaults by item count N, the
classes of its saved file and its search setting. A new kind is one :class:`IndexKind` in :data:`INDEX_KINDS`
(and its name in :data:`crl.search.Kind`).

Every faiss index here is built with ``faiss.METRIC_INNER_PRODUCT`` passed explicitly: ``IndexHNSWFlat`` and
the IVF indexes default to L2 otherwise, which ranks by distance rather than by inner product.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import faiss
import numpy as np

from crl.search._types import Kind

__all__ = [
    "INDEX_KINDS",
    "Family",
    "IndexKind",
    "file_params",
    "is_kind",
    "new_index",
    "resolve_params",
    "search_parameters",
    "stored_sample",
]

MAX_NBITS = 16
PQ_TRAIN_ITERATIONS = 10
PQ_TRAIN_POINTS_PER_CENTROID = 64
IVF_TRAIN_POINTS_PER_CENTROID = 64
HNSW_WIDE_SEARCH_FROM = 200_000
"""Above this many items HNSW searches with efSearch = 128 (benchmarks/search.py: at 1e6 clustered items
efSearch = 64 gave recall@10 0.962, 128 gave 0.993, at 58x the exact QPS)."""
EXACT_NORM_TOLERANCE = 1e-3
"""How far from 1 the norm of a vector stored exactly may lie under cosine (float32 rounding)."""

Family = Literal["exact", "graph", "ivf"]
"""How a kind searches, which decides what :class:`crl.search.Index` does beyond the registry: ``exact`` scans every
item; ``graph`` (HNSW) widens efSearch for queries left short of k and is rebuilt to remove items; ``ivf`` is
trained (k-means) on the vectors given to build, probes ``nprobe`` of its ``nlist`` cells, and is read through a
direct map."""

SETTINGS: dict[Family, str | None] = {"exact": None, "graph": "ef_search", "ivf": "nprobe"}
"""The per-search setting (``Index.search``'s keyword) each family takes."""


@dataclass(frozen=True)
class IndexKind:
    """One kind of index.

    Attributes:
        family: how it searches (:data:`Family`).
        params: the parameters it takes (``Index.build(..., **params)``, the manifest's ``params``).
        defaults: (N, d) -> its parameters by default over N vectors of dimension d.
        check: raises ``ValueError`` for resolved parameters faiss would refuse over N vectors of dimension d, and
            may lower one to what N allows (IVF: nprobe to nlist).
        new: (d, params) -> an empty inner-product faiss index that takes external ids (IVF: still untrained).
        classes: the faiss class of a saved index of this kind and of the index it wraps (None: it wraps none).
        read_params: the parameters as a faiss index of this kind holds them.
        norm_tolerance: how far from 1 a stored vector's norm may lie under cosine.
    """

    family: Family
    params: tuple[str, ...]
    defaults: Callable[[int, int], dict[str, int]]
    check: Callable[[dict[str, int], int, int], None]
    new: Callable[[int, Mapping[str, int]], faiss.Index]
    classes: tuple[type, type | None]
    read_params: Callable[[Any], dict[str, int]]
    norm_tolerance: float = EXACT_NORM_TOLERANCE

    @property
    def setting(self) -> str | None:
        """The per-search setting it takes: ``ef_search`` (HNSW), ``nprobe`` (IVF) or None."""
        return SETTINGS[self.family]


def default_nlist(n: int) -> int:
    """IVF cells: about 4 sqrt(N), at most N / 39 (faiss's k-means wants >= 39 points per centroid), >= 1."""
    return max(1, min(round(4 * math.sqrt(n)), n // 39))


def default_nprobe(nlist: int) -> int:
    """IVF cells probed per query: about sqrt(nlist), at least 8, at most nlist."""
    return min(nlist, max(8, round(math.sqrt(nlist))))


def default_pq_m(d: int) -> int:
    """PQ sub-quantizers: the largest divisor of d that is at most d / 4 (4+ coordinates, one byte each), >= 1."""
    return max((m for m in range(1, max(1, d // 4) + 1) if d % m == 0), default=1)


def _no_params(n: int, d: int) -> dict[str, int]:
    return {}


def _no_check(params: dict[str, int], n: int, d: int) -> None:
    return None


def _no_file_params(index: Any) -> dict[str, int]:
    return {}


def _flat(d: int, params: Mapping[str, int]) -> faiss.Index:
    return faiss.IndexIDMap2(faiss.IndexFlatIP(d))


def _hnsw_defaults(n: int, d: int) -> dict[str, int]:
    return {"M": 32, "efConstruction": 80, "efSearch": 64 if n <= HNSW_WIDE_SEARCH_FROM else 128}


def _hnsw_check(params: dict[str, int], n: int, d: int) -> None:
    if params["M"] < 2:
        raise ValueError(f"parameter M = {params['M']}; HNSW needs M >= 2 links per node")


def _hnsw(d: int, params: Mapping[str, int]) -> faiss.Index:
    hnsw = faiss.IndexHNSWFlat(d, params["M"], faiss.METRIC_INNER_PRODUCT)
    hnsw.hnsw.efConstruction = params["efConstruction"]
    hnsw.hnsw.efSearch = params["efSearch"]
    return faiss.IndexIDMap2(hnsw)


def _hnsw_params(index: Any) -> dict[str, int]:
    hnsw = faiss.downcast_index(index.index).hnsw  # type: ignore[attr-defined]
    return {"M": hnsw.nb_neighbors(1), "efConstruction": hnsw.efConstruction, "efSearch": hnsw.efSearch}


def _ivf_defaults(n: int, d: int) -> dict[str, int]:
    nlist = default_nlist(n)
    return {"nlist": nlist, "nprobe": default_nprobe(nlist)}


def _ivf_check(params: dict[str, int], n: int, d: int) -> None:
    if params["nlist"] > n:
        raise ValueError(
            f"parameter nlist = {params['nlist']} exceeds the {n} training vectors; pass nlist <= {n}"
        )
    params["nprobe"] = min(params["nprobe"], params["nlist"])


def _ivf_ready(index: Any, params: Mapping[str, int]) -> faiss.Index:
    """``index`` with crl's k-means sample size and ``nprobe`` set."""
    index.cp.max_points_per_centroid = IVF_TRAIN_POINTS_PER_CENTROID
    index.nprobe = params["nprobe"]
    return index


def _ivf(d: int, params: Mapping[str, int]) -> faiss.Index:
    quantizer = faiss.IndexFlatIP(d)
    return _ivf_ready(faiss.IndexIVFFlat(quantizer, d, params["nlist"], faiss.METRIC_INNER_PRODUCT), params)


def _ivf_params(index: Any) -> dict[str, int]:
    return {"nlist": index.nlist, "nprobe": index.nprobe}


def _ivfpq_defaults(n: int, d: int) -> dict[str, int]:
    return _ivf_defaults(n, d) | {"M": default_pq_m(d), "nbits": min(8, max(1, int(math.log2(max(n, 1)))))}


def _ivfpq_check(params: dict[str, int], n: int, d: int) -> None:
    _ivf_check(params, n, d)
    if d % params["M"]:
        raise ValueError(
            f"parameter M = {params['M']} does not divide the dimension {d}; pass a divisor of {d}"
        )
    if params["nbits"] > MAX_NBITS or 2 ** params["nbits"] > n:
        raise ValueError(
            f"parameter nbits = {params['nbits']} needs {2 ** params['nbits']} training vectors (have {n})"
            f" and at most {MAX_NBITS}; pass a smaller nbits"
        )


def _ivfpq(d: int, params: Mapping[str, int]) -> faiss.Index:
    quantizer = faiss.IndexFlatIP(d)
    index = faiss.IndexIVFPQ(
        quantizer, d, params["nlist"], params["M"], params["nbits"], faiss.METRIC_INNER_PRODUCT
    )
    index.pq.cp.niter = PQ_TRAIN_ITERATIONS
    index.pq.cp.max_points_per_centroid = PQ_TRAIN_POINTS_PER_CENTROID
    return _ivf_ready(index, params)


def _ivfpq_params(index: Any) -> dict[str, int]:
    return _ivf_params(index) | {"M": index.pq.M, "nbits": index.pq.nbits}


INDEX_KINDS: dict[Kind, IndexKind] = {
    "flat": IndexKind(
        "exact", (), _no_params, _no_check, _flat, (faiss.IndexIDMap2, faiss.IndexFlat), _no_file_params
    ),
    "hnsw": IndexKind(
        "graph",
        ("M", "efConstruction", "efSearch"),
        _hnsw_defaults,
        _hnsw_check,
        _hnsw,
        (faiss.IndexIDMap2, faiss.IndexHNSWFlat),
        _hnsw_params,
    ),
    "ivf": IndexKind(
        "ivf", ("nlist", "nprobe"), _ivf_defaults, _ivf_check, _ivf, (faiss.IndexIVFFlat, None), _ivf_params
    ),
    "ivfpq": IndexKind(
        "ivf",
        ("nlist", "nprobe", "M", "nbits"),
        _ivfpq_defaults,
        _ivfpq_check,
        _ivfpq,
        (faiss.IndexIVFPQ, None),
        _ivfpq_params,
        norm_tolerance=0.5,
    ),
}
"""Every kind ``Index.build`` makes, by name (IVF-PQ stores a lossy code, hence its wide norm tolerance)."""


def resolve_params(kind: Kind, n: int, d: int, given: Mapping[str, object]) -> dict[str, int]:
    """The defaults for (kind, n, d) overridden by ``given``, each checked against what faiss accepts."""
    spec = INDEX_KINDS[kind]
    unknown = sorted(set(given) - set(spec.params))
    if unknown:
        allowed = ", ".join(spec.params) or "none"
        raise ValueError(f"unknown parameter {unknown[0]!r} for kind={kind!r}; its parameters: {allowed}")
    params = spec.defaults(n, d)
    for name, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"parameter {name} = {value!r}; pass a positive integer")
        params[name] = int(value)
    spec.check(params, n, d)
    return params


def new_index(kind: Kind, d: int, params: Mapping[str, int]) -> faiss.Index:
    """An empty inner-product faiss index of ``kind`` (IVF kinds still untrained) that takes external ids."""
    return INDEX_KINDS[kind].new(d, params)


def is_kind(index: Any, kind: Kind) -> bool:
    """Whether the faiss ``index`` has the classes an index of ``kind`` is built with."""
    outer, inner = INDEX_KINDS[kind].classes
    wrapped = faiss.downcast_index(index.index) if inner is not None and hasattr(index, "index") else None
    return isinstance(index, outer) and (inner is None or isinstance(wrapped, inner))


def file_params(index: Any, kind: Kind) -> dict[str, int]:
    """The parameters of ``kind`` (:attr:`IndexKind.params`) as the faiss ``index`` itself holds them."""
    return INDEX_KINDS[kind].read_params(index)


def stored_sample(index: Any, kind: Kind, count: int) -> np.ndarray:
    """Up to ``count`` of the vectors ``index`` stores (IVF-PQ: their lossy reconstruction), (m, d) float32,
    read without changing the index (an IVF is read cell by cell, with no direct map built)."""
    if INDEX_KINDS[kind].family != "ivf":
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


def _kinds_taking(setting: str) -> str:
    """``kind='hnsw'`` or ``kinds 'ivf' and 'ivfpq'``: the kinds whose family takes ``setting``."""
    names = [name for name, spec in INDEX_KINDS.items() if spec.setting == setting]
    if len(names) == 1:
        return f"kind={names[0]!r}"
    return "kinds " + ", ".join(repr(name) for name in names[:-1]) + f" and {names[-1]!r}"


def check_search_settings(kind: Kind, ef_search: int | None, nprobe: int | None) -> str | None:
    """Check a call's ``ef_search`` and ``nprobe`` against an index kind (every backend, the same rule): each a
    positive integer, and only for the kinds that take it. Returns the kind's setting name (None: it takes none).

    Raises:
        ValueError: naming the argument and what to pass.
    """
    for name, value in (("ef_search", ef_search), ("nprobe", nprobe)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1
        ):
            raise ValueError(f"{name} = {value!r}; pass a positive integer")
    setting = INDEX_KINDS[kind].setting
    if ef_search is not None and setting != "ef_search":
        raise ValueError(f"ef_search applies to {_kinds_taking('ef_search')} only; this index is {kind!r}")
    if nprobe is not None and setting != "nprobe":
        raise ValueError(f"nprobe applies to {_kinds_taking('nprobe')} only; this index is {kind!r}")
    return setting


def search_parameters(
    kind: Kind,
    params: Mapping[str, int],
    ef_search: int | None,
    nprobe: int | None,
    selector: faiss.IDSelector | None = None,
) -> faiss.SearchParameters | None:
    """faiss search parameters for one call: efSearch for HNSW, nprobe for IVF, and ``selector`` (the ids a
    filter lets through) for every kind; None keeps the index's own settings and searches every item."""
    setting = check_search_settings(kind, ef_search, nprobe)
    if setting == "ef_search" and (ef_search is not None or selector is not None):
        ef = int(ef_search or params["efSearch"])
        return faiss.SearchParametersHNSW(efSearch=ef, sel=selector)  # type: ignore[attr-defined]
    if setting == "nprobe" and (nprobe is not None or selector is not None):
        probes = min(int(nprobe or params["nprobe"]), params["nlist"])
        return faiss.SearchParametersIVF(nprobe=probes, sel=selector)  # type: ignore[call-arg]
    return None if selector is None else faiss.SearchParameters(sel=selector)  # type: ignore[call-arg]
