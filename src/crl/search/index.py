"""``Index``: a faiss similarity index with external ids, per-item metadata, and a checked save/load."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from crl.search import _faiss
from crl.search._checks import as_ids, as_matrix, as_metadata, check_k, normalise
from crl.search._files import FORMAT, INDEX_FILE, MANIFEST_FILE, read_data, read_manifest, save_folder
from crl.search._types import KINDS, METRICS, EncoderProvenance, Kind, Metric, SearchResult


class Index:
    """Inner-product (or cosine) top-k search over faiss, with int64 external ids and per-item metadata.

    Build one with :meth:`Index.build` or :meth:`Index.load`. Kinds: ``"flat"`` (exact, ``IndexFlatIP``),
    ``"hnsw"`` (``IndexHNSWFlat``), ``"ivf"`` (``IndexIVFFlat``), ``"ivfpq"`` (``IndexIVFPQ``); every one is
    built with ``faiss.METRIC_INNER_PRODUCT`` passed explicitly. Cosine is the inner product of L2-normalised
    vectors: vectors and queries are normalised on the way in.
    """

    def __init__(
        self,
        faiss_index: faiss.Index,
        *,
        kind: Kind,
        metric: Metric,
        dim: int,
        params: dict[str, int],
        ids: np.ndarray,
        metadata: dict[int, dict[str, Any]],
        encoder: EncoderProvenance | None,
    ) -> None:
        """Wrap a ready faiss index; use :meth:`build` or :meth:`load` rather than calling this."""
        self._faiss: Any = faiss_index
        self.kind: Kind = kind
        self.metric: Metric = metric
        self.dim = dim
        self.params = dict(params)
        self._ids = ids
        self._metadata = metadata
        self.encoder = encoder

    @classmethod
    def build(
        cls,
        vectors: Any,
        ids: Any = None,
        kind: Kind = "flat",
        metric: Metric = "cosine",
        *,
        metadata: Sequence[dict[str, Any] | None] | None = None,
        encoder: EncoderProvenance | None = None,
        **params: int,
    ) -> Index:
        """An index of ``kind`` holding ``vectors`` (N, d), with ``ids`` (default 0..N-1) and ``metadata``.

        IVF kinds are trained (k-means) on these vectors; vectors added later are assigned to those cells.
        Parameters and their defaults by N (:mod:`crl.search._faiss`):

        - ``hnsw``: ``M`` = 32 links per node, ``efConstruction`` = 80, ``efSearch`` = 64 (128 above 2e5 items).
        - ``ivf``: ``nlist`` = round(4 sqrt(N)) capped at N // 39 (>= 1), ``nprobe`` = round(sqrt(nlist))
          clipped to [8, nlist]; the coarse k-means trains on at most 64 points per cell.
        - ``ivfpq``: ``nlist`` and ``nprobe`` as ``ivf``; ``M`` = the largest divisor of d that is <= d / 4
          sub-quantizers; ``nbits`` = min(8, floor(log2 N)) bits per code (PQ k-means: 10 iterations on at
          most 64 points per centroid).

        ``encoder`` records the checkpoint that produced the vectors, written into the saved manifest.
        """
        if kind not in KINDS:
            raise ValueError(f"kind = {kind!r}; pass one of {', '.join(KINDS)}")
        if metric not in METRICS:
            raise ValueError(f"metric = {metric!r}; pass one of {', '.join(METRICS)}")
        matrix = as_matrix(vectors, "vectors")
        n, dim = matrix.shape
        if kind in ("ivf", "ivfpq") and n == 0:
            raise ValueError(f"kind={kind!r} is trained on the vectors given to build; pass at least one")
        resolved = _faiss.resolve_params(kind, n, dim, params)
        index = cls(
            _faiss.new_index(kind, dim, resolved),
            kind=kind,
            metric=metric,
            dim=dim,
            params=resolved,
            ids=np.empty(0, dtype=np.int64),
            metadata={},
            encoder=encoder,
        )
        if kind in ("ivf", "ivfpq"):
            index._faiss.train(index._prepare(matrix, "vectors"))
        index.add(matrix, ids, metadata)
        return index

    def __len__(self) -> int:
        """The number of items in the index."""
        return int(self._ids.shape[0])

    def __repr__(self) -> str:
        """The kind, metric, dimension, item count and parameters."""
        return (
            f"Index(kind={self.kind!r}, metric={self.metric!r}, dim={self.dim}, n={len(self)}, {self.params})"
        )

    @property
    def ids(self) -> np.ndarray:
        """The external ids of the items, in the order they were added (a copy)."""
        return self._ids.copy()

    @property
    def faiss_index(self) -> faiss.Index:
        """The underlying faiss index (for inspection: changing it directly bypasses the id bookkeeping)."""
        return self._faiss

    def metadata(self, ids: Any) -> list[dict[str, Any] | None]:
        """The metadata dict (None if none was given) of each id in ``ids``; -1 (an empty slot) gives None."""
        flat = np.asarray(ids, dtype=np.int64).ravel()
        known = np.isin(flat, self._ids) | (flat == -1)
        if not known.all():
            raise ValueError(f"id {int(flat[~known][0])} is not in the index; pass ids from index.ids")
        return [self._metadata.get(int(item)) for item in flat]

    def vectors(self, ids: Any) -> np.ndarray:
        """The stored vectors (q, d) float32 of ``ids`` (repeats allowed), as the index holds them: unit norm
        under cosine; an IVF-PQ index gives its lossy reconstruction from the PQ codes."""
        wanted = np.asarray(ids.detach().cpu() if hasattr(ids, "detach") else ids)
        if wanted.ndim != 1 or (wanted.size and wanted.dtype.kind not in "iu"):
            raise ValueError(f"ids must be a 1-D array of integers, got {wanted.dtype} {wanted.shape}")
        unknown = ~np.isin(wanted, self._ids)
        if unknown.any():
            raise ValueError(f"id {int(wanted[unknown][0])} is not in the index; pass ids from index.ids")
        if self.kind in ("ivf", "ivfpq"):
            ivf = faiss.extract_index_ivf(self._faiss)
            if ivf.direct_map.type == faiss.DirectMap.NoMap:  # type: ignore[attr-defined]
                ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # type: ignore[attr-defined]
        rows = [self._faiss.reconstruct(int(item)) for item in wanted]
        return np.stack(rows).astype(np.float32) if rows else np.empty((0, self.dim), dtype=np.float32)

    def add(
        self, vectors: Any, ids: Any = None, metadata: Sequence[dict[str, Any] | None] | None = None
    ) -> np.ndarray:
        """Add ``vectors`` (n, d) with ``ids`` (default: the next n integers after the largest id) and
        ``metadata`` (one JSON-able dict or None per vector); returns the ids added."""
        matrix = as_matrix(vectors, "vectors", self.dim)
        n = matrix.shape[0]
        if ids is None:
            start = int(self._ids.max()) + 1 if len(self) else 0
            new_ids = np.arange(start, start + n, dtype=np.int64)
        else:
            new_ids = as_ids(ids, n)
        present = np.isin(new_ids, self._ids)
        if present.any():
            raise ValueError(
                f"ids holds {int(new_ids[present][0])}, already in the index; pass new ids or remove it first"
            )
        rows = as_metadata(metadata, n)
        if n:
            self._faiss.add_with_ids(self._prepare(matrix, "vectors"), new_ids)
        self._ids = np.concatenate([self._ids, new_ids])
        self._metadata.update(
            {int(key): row for key, row in zip(new_ids, rows, strict=True) if row is not None}
        )
        return new_ids

    def search(
        self, queries: Any, k: int, *, ef_search: int | None = None, nprobe: int | None = None
    ) -> SearchResult:
        """The ``k`` items with the largest score for each query of ``queries`` (q, d), best first.

        The score is the inner product (cosine: of the normalised vectors). ``ef_search`` (HNSW) and
        ``nprobe`` (IVF) override the index's own setting for this call only. Slots an IVF could not fill
        (its probed cells held fewer than k items) get id -1 and score -inf.
        """
        matrix = as_matrix(queries, "queries", self.dim)
        k = check_k(k, len(self))
        extra = _faiss.search_parameters(self.kind, self.params, ef_search, nprobe)
        if matrix.shape[0] == 0:
            return SearchResult(np.empty((0, k), dtype=np.float32), np.empty((0, k), dtype=np.int64))
        scores, ids = self._faiss.search(self._prepare(matrix, "queries"), k, params=extra)
        scores = np.where(ids < 0, -np.inf, scores).astype(np.float32)
        return SearchResult(scores=scores, ids=ids.astype(np.int64))

    def remove(self, ids: Any) -> None:
        """Remove the items with these ``ids`` (and their metadata).

        HNSW graphs cannot drop nodes in faiss, so an HNSW index is rebuilt from its stored vectors without
        them (cost: a full build over the remaining items); the other kinds remove in place.
        """
        if isinstance(ids, int | np.integer):
            ids = [ids]
        drop = as_ids(ids, len(np.asarray(ids)))
        unknown = ~np.isin(drop, self._ids)
        if unknown.any():
            raise ValueError(
                f"ids holds {int(drop[unknown][0])}, which is not in the index; pass ids from index.ids"
            )
        if drop.size == 0:
            return
        if self.kind == "hnsw":
            self._rebuild_hnsw_without(drop)
        else:
            self._faiss.remove_ids(drop)
        self._ids = self._ids[~np.isin(self._ids, drop)]
        for item in drop:
            self._metadata.pop(int(item), None)

    def save(self, folder: str | Path) -> Path:
        """Write the index into ``folder`` (created if needed): faiss's index file, ids, metadata and a
        manifest with their SHA-256, each file replaced atomically; returns the folder."""
        path = Path(folder)
        manifest = {
            "format": FORMAT,
            "dimension": self.dim,
            "metric": self.metric,
            "kind": self.kind,
            "params": self.params,
            "count": len(self),
            "encoder": None if self.encoder is None else vars(self.encoder),
            "faiss_version": faiss.__version__,
        }
        save_folder(path, self._faiss, self._ids, self._metadata, manifest)
        return path

    @classmethod
    def load(cls, folder: str | Path) -> Index:
        """The index saved in ``folder``; a missing, corrupted (checksum) or inconsistent file is a
        ``ValueError`` naming it."""
        path = Path(folder)
        if not path.is_dir():
            raise ValueError(f"{path} is not a folder; pass the folder Index.save wrote")
        manifest = read_manifest(path)
        index, ids, metadata = read_data(path)
        _check_loaded(path, manifest, index, ids)
        encoder = manifest["encoder"]
        return cls(
            index,
            kind=manifest["kind"],
            metric=manifest["metric"],
            dim=int(manifest["dimension"]),
            params={key: int(value) for key, value in manifest["params"].items()},
            ids=ids,
            metadata=metadata,
            encoder=None if encoder is None else EncoderProvenance(**encoder),
        )

    def _prepare(self, matrix: np.ndarray, name: str) -> np.ndarray:
        """``matrix`` as faiss takes it: L2-normalised under cosine, as is under inner product."""
        return normalise(matrix, name) if self.metric == "cosine" else matrix

    def _rebuild_hnsw_without(self, drop: np.ndarray) -> None:
        """Replace the HNSW index with one built over its stored vectors minus the ids ``drop``."""
        inner = faiss.downcast_index(self._faiss.index)
        vectors = inner.reconstruct_n(0, inner.ntotal)
        current = faiss.vector_to_array(self._faiss.id_map).astype(np.int64)
        keep = ~np.isin(current, drop)
        fresh = _faiss.new_index("hnsw", self.dim, self.params)
        if keep.any():
            fresh.add_with_ids(np.ascontiguousarray(vectors[keep]), current[keep])
        self._faiss = fresh


def _check_loaded(folder: Path, manifest: dict[str, Any], index: Any, ids: np.ndarray) -> None:
    """Raise a ``ValueError`` naming the file when the loaded parts disagree with the manifest."""
    where = f"{folder / INDEX_FILE} and {folder / MANIFEST_FILE}"
    kind = manifest["kind"]
    if kind not in KINDS or manifest["metric"] not in METRICS:
        raise ValueError(
            f"{folder / MANIFEST_FILE} names kind {kind!r}, metric {manifest['metric']!r}; rebuild"
        )
    if not _is_kind(index, kind):
        raise ValueError(f"{where} disagree: the file is not a {kind!r} index; rebuild the index")
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"{where} disagree: the file's metric is not inner product; rebuild the index")
    if index.d != manifest["dimension"]:
        raise ValueError(
            f"{where} disagree: dimension {index.d} vs {manifest['dimension']}; rebuild the index"
        )
    if not index.ntotal == ids.shape[0] == manifest["count"]:
        raise ValueError(
            f"{where} disagree: {index.ntotal} vectors, {ids.shape[0]} ids, count {manifest['count']};"
            " rebuild the index"
        )


def _is_kind(index: Any, kind: Kind) -> bool:
    """Whether the faiss ``index`` has the classes an index of ``kind`` is built with."""
    outer, inner = _faiss.expected_type(kind)
    wrapped = faiss.downcast_index(index.index) if inner is not None and hasattr(index, "index") else None
    return isinstance(index, outer) and (inner is None or isinstance(wrapped, inner))
