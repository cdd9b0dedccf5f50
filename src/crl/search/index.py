"""``Index``: a faiss similarity index with external ids, per-item metadata, and a checked save/load."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from crl.search._checks import as_ids, as_matrix, as_metadata, check_k, prepare
from crl.search._files import (
    FORMAT,
    IDS_FILE,
    INDEX_FILE,
    MANIFEST_FILE,
    read_data,
    read_manifest,
    save_folder,
)
from crl.search._types import KINDS, METRICS, EncoderProvenance, Kind, Metric, SearchResult, tie_ordered
from crl.search.filters import Filter, parse_filter
from crl.search.kinds import (
    INDEX_KINDS,
    Family,
    file_params,
    is_kind,
    new_index,
    resolve_params,
    search_parameters,
    stored_sample,
)


class Index:
    """Inner-product (or cosine) top-k search over faiss, with int64 external ids and per-item metadata.

    Build one with :meth:`Index.build` or :meth:`Index.load`. Kinds: ``"flat"`` (exact, ``IndexFlatIP``),
    ``"hnsw"`` (``IndexHNSWFlat``), ``"ivf"`` (``IndexIVFFlat``), ``"ivfpq"`` (``IndexIVFPQ``); every one is
    built with ``faiss.METRIC_INNER_PRODUCT`` passed explicitly. Cosine is the inner product of L2-normalised
    vectors: vectors and queries are normalised on the way in. Under ``"ip"`` a vector or query of norm above
    1e18 is refused, as its inner products could overflow float32.
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
        Parameters and their defaults by N (:mod:`crl.search.kinds`):

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
        if INDEX_KINDS[kind].family == "ivf" and n == 0:
            raise ValueError(f"kind={kind!r} is trained on the vectors given to build; pass at least one")
        resolved = resolve_params(kind, n, dim, params)
        index = cls(
            new_index(kind, dim, resolved),
            kind=kind,
            metric=metric,
            dim=dim,
            params=resolved,
            ids=np.empty(0, dtype=np.int64),
            metadata={},
            encoder=encoder,
        )
        if INDEX_KINDS[kind].family == "ivf":
            index._faiss.train(prepare(matrix, metric, "vectors"))
        index.add(matrix, ids, metadata)
        return index

    def __len__(self) -> int:
        """The number of items in the index."""
        return int(self._ids.shape[0])

    @property
    def _family(self) -> Family:
        """How this index searches: its kind's family in the registry (:data:`crl.search.kinds.INDEX_KINDS`)."""
        return INDEX_KINDS[self.kind].family

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
        if self._family == "ivf":
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
            self._faiss.add_with_ids(prepare(matrix, self.metric, "vectors"), new_ids)
        self._ids = np.concatenate([self._ids, new_ids])
        self._metadata.update(
            {int(key): row for key, row in zip(new_ids, rows, strict=True) if row is not None}
        )
        return new_ids

    def search(
        self,
        queries: Any,
        k: int,
        *,
        ef_search: int | None = None,
        nprobe: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> SearchResult:
        """The ``k`` items with the largest score for each query of ``queries`` (q, d) among those whose metadata
        passes ``filter`` (:mod:`crl.search.filters`), best first, ties (scores within 1e-5) by ascending id.

        The score is the inner product (cosine: of the normalised vectors). ``ef_search`` (HNSW) and
        ``nprobe`` (IVF) override the index's own setting for this call only. A filter becomes a faiss id
        selector over the passing items (one pass over the metadata per call). HNSW can return fewer than k
        items when k is large against efSearch, or when a filter lets few items through: the queries it did so
        for are searched again with efSearch doubled, up to the item count, until each has k (the index's own
        efSearch is unchanged). Slots still unfilled (fewer than k items pass the filter, an IVF whose probed
        cells held fewer than k items, an HNSW graph that reaches fewer than k items even then) get id -1 and
        score -inf; the result's ``found`` counts each query's items and its ``shortfall`` says why some query
        has fewer than k.
        """
        matrix = as_matrix(queries, "queries", self.dim)
        k = check_k(k, len(self))
        passing = self._passing(parse_filter(filter))
        selector = None if passing is None else faiss.IDSelectorBatch(passing)
        extra = search_parameters(self.kind, self.params, ef_search, nprobe, selector)
        if matrix.shape[0] == 0:
            return SearchResult(
                np.empty((0, k), dtype=np.float32),
                np.empty((0, k), dtype=np.int64),
                np.empty(0, dtype=np.int64),
            )
        prepared = prepare(matrix, self.metric, "queries")
        reachable = k if passing is None else min(k, int(passing.size))
        scores, ids = self._faiss.search(prepared, k, params=extra)
        if self._family == "graph":
            scores, ids = self._widen_hnsw(prepared, k, scores, ids, ef_search, selector, reachable)
        found = (ids >= 0).sum(axis=1).astype(np.int64)
        scores, ids = tie_ordered(np.where(ids < 0, -np.inf, scores).astype(np.float32), ids.astype(np.int64))
        shortfall = self._shortfall(found, k, nprobe, reachable)
        return SearchResult(scores=scores, ids=ids, found=found, shortfall=shortfall)

    def upsert(
        self, vectors: Any, ids: Any, metadata: Sequence[dict[str, Any] | None] | None = None
    ) -> np.ndarray:
        """Add the items of ``ids``, replacing the vector and metadata of those already present; returns ids.

        A replacement is a :meth:`remove` then an :meth:`add`: in place for the flat and IVF kinds, a rebuild of
        the graph over the remaining items for HNSW (faiss's HNSW cannot drop a node), so batch the updates.
        """
        matrix = as_matrix(vectors, "vectors", self.dim)
        new_ids = as_ids(ids, matrix.shape[0])
        rows = as_metadata(metadata, matrix.shape[0])
        present = new_ids[np.isin(new_ids, self._ids)]
        if present.size:
            self.remove(present)
        return self.add(matrix, new_ids, rows)

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
        if self._family == "graph":
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
        if path.exists() and not path.is_dir():
            raise ValueError(
                f"{path} is a file, not a folder; pass a folder path (Index.save writes four files into it)"
            )
        manifest = {
            "format": FORMAT,
            "dimension": self.dim,
            "metric": self.metric,
            "kind": self.kind,
            "params": self.params,
            "count": len(self),
            "encoder": None if self.encoder is None else self.encoder.as_dict(),
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

    def _passing(self, checked: Filter | None) -> np.ndarray | None:
        """The ids whose metadata passes ``checked`` (None without a filter: every item)."""
        if checked is None:
            return None
        return np.array(
            [i for i in self._ids.tolist() if checked.matches(self._metadata.get(i))], dtype=np.int64
        )

    def _widen_hnsw(
        self,
        prepared: np.ndarray,
        k: int,
        scores: np.ndarray,
        ids: np.ndarray,
        ef_search: int | None,
        selector: faiss.IDSelector | None,
        reachable: int,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``scores``, ``ids`` with the rows HNSW left short of ``reachable`` items (k, or fewer items passing
        the filter's ``selector``) searched again, efSearch doubled each round (and at least k) up to the
        item count."""
        ef = ef_search or self.params["efSearch"]
        short = np.flatnonzero((ids >= 0).sum(axis=1) < reachable)
        while short.size and ef < len(self):
            ef = min(max(2 * ef, k), len(self))
            wider = faiss.SearchParametersHNSW(efSearch=ef, sel=selector)  # type: ignore[attr-defined]
            scores[short], ids[short] = self._faiss.search(prepared[short], k, params=wider)
            short = short[(ids[short] >= 0).sum(axis=1) < reachable]
        return scores, ids

    def _shortfall(self, found: np.ndarray, k: int, nprobe: int | None, reachable: int) -> str | None:
        """Why some query found fewer than ``k`` items (None when none did)."""
        short = int((found < k).sum())
        if not short:
            return None
        if reachable < k:
            return (
                f"only {reachable} items pass the filter, fewer than k = {k}: {short} of {found.size} queries"
                " found fewer than k"
            )
        if self._family == "graph":
            return (
                f"the HNSW graph reached fewer than k = {k} items for {short} of {found.size} queries even at"
                f" efSearch = {len(self)} (the item count); rebuild with a larger M or use kind='flat'"
            )
        probed = min(nprobe or self.params["nprobe"], self.params["nlist"])
        return (
            f"the {probed} IVF cells probed held fewer than k = {k} items for {short} of {found.size} queries;"
            f" raise nprobe (the index has nlist = {self.params['nlist']} cells)"
        )

    def _rebuild_hnsw_without(self, drop: np.ndarray) -> None:
        """Replace the HNSW index with one built over its stored vectors minus the ids ``drop``."""
        inner = faiss.downcast_index(self._faiss.index)
        vectors = inner.reconstruct_n(0, inner.ntotal)
        current = faiss.vector_to_array(self._faiss.id_map).astype(np.int64)
        keep = ~np.isin(current, drop)
        fresh = new_index(self.kind, self.dim, self.params)
        if keep.any():
            fresh.add_with_ids(np.ascontiguousarray(vectors[keep]), current[keep])
        self._faiss = fresh


def _check_loaded(folder: Path, manifest: dict[str, Any], index: Any, ids: np.ndarray) -> None:
    """Raise a ``ValueError`` naming the manifest's field (or the file) where the manifest and the data files
    disagree: an edited manifest or a data file from another index."""
    path = folder / MANIFEST_FILE
    kind = manifest["kind"]
    for name, allowed in (("kind", KINDS), ("metric", METRICS)):
        if manifest[name] not in allowed:
            raise ValueError(
                f"{path}: field {name!r} = {manifest[name]!r} is not one of {', '.join(allowed)};"
                " restore the manifest or rebuild the index"
            )
    if not is_kind(index, kind):
        actual = next((name for name in KINDS if is_kind(index, name)), "not one crl builds")
        raise ValueError(
            f"{path}: field 'kind' = {kind!r} disagrees with {folder / INDEX_FILE} (kind {actual!r});"
            " restore the manifest or rebuild the index"
        )
    if index.metric_type != faiss.METRIC_INNER_PRODUCT:
        raise ValueError(f"{folder / INDEX_FILE}: the index's metric is not inner product; rebuild the index")
    for name, actual_value in (("dimension", index.d), ("count", index.ntotal)):
        _check_field(path, name, manifest[name], actual_value, folder / INDEX_FILE)
    if ids.shape[0] != index.ntotal:
        raise ValueError(
            f"{folder / IDS_FILE} holds {ids.shape[0]} ids for the {index.ntotal} vectors of"
            f" {folder / INDEX_FILE}; rebuild the index"
        )
    _check_params(path, manifest["params"], file_params(index, kind), folder / INDEX_FILE)
    if manifest["metric"] == "cosine":
        _check_unit_norms(path, index, kind, folder / INDEX_FILE)
    _check_encoder(path, manifest["encoder"])


def _check_field(path: Path, name: str, value: Any, actual: int, source: Path) -> None:
    """Raise a ``ValueError`` naming the field ``name`` of the manifest at ``path`` unless it is ``actual``."""
    if isinstance(value, bool) or value != actual:
        raise ValueError(
            f"{path}: field {name!r} = {value!r} disagrees with {source} ({name} {actual});"
            " restore the manifest or rebuild the index"
        )


def _check_params(path: Path, params: Any, actual: dict[str, int], source: Path) -> None:
    """Raise a ``ValueError`` unless the manifest's ``params`` are the parameters the index file holds."""
    if not isinstance(params, dict) or sorted(params) != sorted(actual):
        raise ValueError(
            f"{path}: field 'params' = {params!r}; this index takes {', '.join(actual) or 'none'};"
            " restore the manifest or rebuild the index"
        )
    for name, value in actual.items():
        _check_field(path, f"params.{name}", params[name], value, source)


def _check_unit_norms(path: Path, index: Any, kind: Kind, source: Path) -> None:
    """Raise a ``ValueError`` when a cosine index (by its manifest) stores a vector far from unit norm."""
    norms = np.linalg.norm(stored_sample(index, kind, 16).astype(np.float64), axis=1)
    off = np.abs(norms - 1.0) > INDEX_KINDS[kind].norm_tolerance
    if off.any():
        raise ValueError(
            f"{path}: field 'metric' = 'cosine' disagrees with {source}, which stores a vector of norm"
            f" {norms[off][0]:.4g} (cosine stores unit vectors); restore the manifest or rebuild the index"
        )


def _check_encoder(path: Path, encoder: Any) -> None:
    """Raise a ``ValueError`` unless the manifest's ``encoder`` is null or a checkpoint and a fingerprint (and
    the vectors, when recorded)."""
    fields = {"checkpoint", "fingerprint"}
    if encoder is not None and (
        not isinstance(encoder, dict)
        or set(encoder) not in (fields, fields | {"vectors"})
        or not all(isinstance(value, str) for value in encoder.values())
    ):
        raise ValueError(
            f"{path}: field 'encoder' = {encoder!r}; it is null or {{'checkpoint': str, 'fingerprint': str}}"
            " (with 'vectors': str when recorded); restore the manifest or save the index again"
        )
