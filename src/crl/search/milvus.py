"""A Milvus collection behind the calls of crl's faiss :class:`~crl.search.Index` (the optional extra crl[milvus]).

Milvus shards and replicates a collection over a cluster; its Python client talks the same way to a laptop's
standalone server and to a cluster, so :class:`MilvusIndex` serves both, addressed as
``milvus://HOST:PORT/COLLECTION``. A collection crl creates holds an INT64 primary key ``id``, a float vector
``vector`` and each item's metadata as Milvus's dynamic fields, filtered by crl's one filter language
(:mod:`crl.search.filters`).

Scores are those of the faiss backend: the inner product, of the L2-normalised vectors under ``"cosine"``
(normalised on the way in, stored under Milvus's IP metric), so the two backends rank alike. Each query's hits
come best first, ties (scores within 1e-5) by ascending id. Reads use the consistency level given at connection
(``"Strong"`` by default: a search sees every write acknowledged before it).

Every call is bounded by the connection's ``timeout``. A server that does not answer (down, restarting, its
collection not loaded yet) is a :class:`~crl.search.BackendUnavailableError` naming ``milvus backend at HOST:PORT``;
when a health probe (a count of the collection, :data:`PROBE_TIMEOUT_S`) fails too, the next call opens a fresh
connection and reloads the collection first (gRPC's own reconnection backs off for minutes), so a caller recovers
by itself once the server is back; a request the server fails while it answers the probe leaves the connection
alone for every other call. A request the server refuses as malformed (an expression it cannot parse, an invalid
parameter) is a ``ValueError`` instead, and leaves the connection alone.

Ids are the integers 0 .. :data:`MAX_ID` (Milvus keeps 2**63 - 1 for itself: an item under it is counted but never
found). :meth:`MilvusIndex.add` checks and inserts under one lock per collection in the process, so one id is one
row however many threads add it; writers in several processes add disjoint ids or use :meth:`MilvusIndex.upsert`
(an add that finds a second row under one of its ids after its insert, another process's, raises ValueError).
:meth:`MilvusIndex.connect` waits for a collection the server still loads (after its restart), and
:func:`export_index` lets one export at a time fill a collection name.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

from crl.search._checks import as_ids, as_matrix, as_metadata, prepare
from crl.search._types import (
    METRICS,
    BackendUnavailableError,
    EncoderProvenance,
    Kind,
    Metric,
    SearchResult,
    tie_ordered,
)
from crl.search.filters import parse_filter
from crl.search.index import Index
from crl.search.kinds import INDEX_KINDS, check_search_settings

MilvusKind = Literal["flat", "hnsw", "ivf"]
"""The kinds of :data:`crl.search.kinds.INDEX_KINDS` a Milvus collection offers."""

CONSISTENCY = ("Strong", "Bounded", "Session", "Eventually")
"""Milvus's consistency levels of a read: Strong sees every acknowledged write (about 0.2 s per read on Milvus's
default time tick); Bounded (Milvus's own default) may miss the writes of the last few seconds."""

PROBE_TIMEOUT_S = 2
"""Seconds the health probe of a failed call waits for the server (:meth:`MilvusIndex._answers`)."""

REASON_CHARS = 160
"""Most characters of a server's error that :class:`~crl.search.BackendUnavailableError` repeats."""

T = TypeVar("T")


@dataclass(frozen=True)
class MilvusType:
    """How Milvus implements one of crl's index kinds.

    Attributes:
        index_type: Milvus's index type.
        build: its build parameters and their defaults (``MilvusIndex.create(..., params=...)`` overrides them).
        search: (k, ef_search, nprobe) -> Milvus's search parameters of one call.
    """

    index_type: str
    build: Mapping[str, int]
    search: Callable[[int, int | None, int | None], dict[str, int]]


def _no_search_params(k: int, ef_search: int | None, nprobe: int | None) -> dict[str, int]:
    return {}


def _hnsw_search_params(k: int, ef_search: int | None, nprobe: int | None) -> dict[str, int]:
    """ef = efSearch (64 unless given), raised to k, as Milvus requires."""
    return {"ef": max(k, ef_search or 64)}


def _ivf_search_params(k: int, ef_search: int | None, nprobe: int | None) -> dict[str, int]:
    """nprobe cells probed, 16 unless given."""
    return {"nprobe": nprobe or 16}


MILVUS_KINDS: dict[MilvusKind, MilvusType] = {
    "flat": MilvusType("FLAT", {}, _no_search_params),
    "hnsw": MilvusType("HNSW", {"M": 32, "efConstruction": 80}, _hnsw_search_params),
    "ivf": MilvusType("IVF_FLAT", {"nlist": 128}, _ivf_search_params),
}
"""crl's index kinds a Milvus collection offers, and how Milvus implements each."""

_EXPORTED_KIND: dict[Kind, MilvusKind] = {"flat": "flat", "hnsw": "hnsw", "ivf": "ivf", "ivfpq": "ivf"}
"""The Milvus kind a faiss index of each kind is exported as by default."""

MAX_K = 16384
"""The largest k Milvus answers in one search."""

MAX_ID = 2**63 - 2
"""The largest id a collection holds (Milvus keeps 2**63 - 1 as its own sentinel)."""

REFUSED = (
    "cannot parse expression",
    "failed to create query plan",
    "invalid parameter",
    "invalid expression",
)
"""Phrases of a server's error refusing the request itself (the client's fault, not a lost server)."""

_ADDING: dict[str, threading.Lock] = {}
"""One lock per collection address: :meth:`MilvusIndex.add` checks and inserts under it."""
_ADDING_GUARD = threading.Lock()

LOAD_WAIT_S = 120.0
"""How long :meth:`MilvusIndex.connect` waits for a collection the server is still loading: after a restart,
Milvus first waits out the stopped server's session lease (30 s by default), then loads each collection."""

MAX_NAME = 255
"""The longest collection name Milvus takes."""

UNFINISHED = "__crl_unfinished"
"""The suffix of the collection :func:`export_index` fills before renaming it to its own name."""

_URI = re.compile(r"milvus://(?P<host>[^:/]+):(?P<port>\d+)/(?P<collection>[A-Za-z_][A-Za-z0-9_]*)")
_DESCRIPTION = re.compile(
    rf"crl metric=(cosine|ip) kind=({'|'.join(MILVUS_KINDS)})(?: writer=([0-9a-f]{{32}}))?(?: encoder=(\{{.*\}}))?"
)


@dataclass(frozen=True)
class MilvusAddress:
    """Where a collection lives: ``milvus://HOST:PORT/COLLECTION``."""

    host: str
    port: int
    collection: str

    @classmethod
    def parse(cls, uri: str) -> MilvusAddress:
        """The address in ``uri``.

        Raises:
            ValueError: naming the form, when ``uri`` is not ``milvus://HOST:PORT/COLLECTION`` (a collection
                name is letters, digits and _, not starting with a digit).
        """
        match = _URI.fullmatch(uri)
        if match is None:
            raise ValueError(
                f"{uri[:80]!r} is not a Milvus address; pass milvus://HOST:PORT/COLLECTION, e.g. "
                "milvus://127.0.0.1:19530/items"
            )
        if len(match["collection"]) > MAX_NAME:
            raise ValueError(
                f"the collection name of {uri[:80]!r}... has {len(match['collection'])} characters; Milvus takes "
                f"at most {MAX_NAME}, pass a shorter name"
            )
        return cls(match["host"], int(match["port"]), match["collection"])

    def __str__(self) -> str:
        return f"milvus://{self.host}:{self.port}/{self.collection}"

    @property
    def backend(self) -> str:
        """The server, as errors name it: ``milvus backend at HOST:PORT``."""
        return f"milvus backend at {self.host}:{self.port}"


class MilvusIndex:
    """A Milvus collection of vectors with ids and metadata, searched like :class:`~crl.search.Index`.

    Create one with :meth:`create` (a new collection, indexed and loaded) or open an existing one with
    :meth:`connect`. Writes (:meth:`add`, :meth:`upsert`, :meth:`delete`) are acknowledged by the server; with
    the default ``"Strong"`` consistency a later :meth:`search` sees them. Any call raises
    :class:`~crl.search.BackendUnavailableError` when the server does not answer within ``timeout`` seconds; the
    next call reconnects. Calls may come from several threads at once.
    """

    def __init__(
        self,
        collection: Any,
        address: MilvusAddress,
        *,
        metric: Metric,
        kind: MilvusKind,
        dim: int,
        encoder: EncoderProvenance | None = None,
        consistency: str = "Strong",
        timeout: float = 10.0,
    ) -> None:
        """Wrap a loaded pymilvus ``Collection``; use :meth:`create` or :meth:`connect` rather than this."""
        self._collection = collection
        self.address = address
        self.metric: Metric = metric
        self.kind: MilvusKind = kind
        self.dim = dim
        self.encoder = encoder
        self._consistency = consistency
        self._timeout = _call_timeout(timeout)
        self._stale = False
        self._reopening = threading.Lock()

    @classmethod
    def create(
        cls,
        uri: str,
        dim: int,
        *,
        metric: Metric = "cosine",
        kind: MilvusKind = "flat",
        params: Mapping[str, int] | None = None,
        consistency: str = "Strong",
        timeout: float = 10.0,
        encoder: EncoderProvenance | None = None,
        writer: str | None = None,
    ) -> MilvusIndex:
        """A new, empty collection at ``uri`` for vectors of dimension ``dim``, indexed by ``kind``.

        ``params`` are Milvus's build parameters of the kind: ``hnsw``: ``M`` (default 32) and
        ``efConstruction`` (80); ``ivf``: ``nlist`` (128). Search parameters go to :meth:`search`. ``timeout``
        bounds the seconds spent reaching the server, and each later call; ``consistency`` is one of
        :data:`CONSISTENCY`. ``encoder`` records the checkpoint whose embeddings the collection holds (in its
        description), so text queries can be embedded by its string encoder (:mod:`crl.serving.queries`);
        ``writer`` (32 hex digits) the export that fills it (:func:`export_index`).

        Raises:
            ValueError: on a bad address, dimension, metric or kind, or when the collection exists already
                (open it with :meth:`connect`, or drop it first).
        """
        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
        from pymilvus import Collection, CollectionSchema, DataType, FieldSchema, utility

        address = MilvusAddress.parse(uri)
        if not isinstance(dim, int) or isinstance(dim, bool) or not 1 <= dim <= 32768:
            raise ValueError(f"dim = {dim!r}; pass the vectors' dimension, an int in [1, 32768]")
        if metric not in METRICS:
            raise ValueError(f"metric = {metric!r}; pass one of {', '.join(METRICS)}")
        if kind not in MILVUS_KINDS:
            raise ValueError(
                f"kind = {kind!r}; pass one of {', '.join(MILVUS_KINDS)} for a Milvus collection"
            )
        _check_consistency(consistency)
        _call_timeout(timeout)
        alias = _connect(address, timeout)
        if utility.has_collection(address.collection, using=alias):
            raise ValueError(
                f"{address} exists already; open it with MilvusIndex.connect, or drop it "
                "(pymilvus.utility.drop_collection) to start anew"
            )
        fields = [
            FieldSchema("id", DataType.INT64, is_primary=True),
            FieldSchema("vector", DataType.FLOAT_VECTOR, dim=dim),
        ]
        description = _description(metric, kind, encoder, writer)
        schema = CollectionSchema(fields, description=description, enable_dynamic_field=True)
        collection = _server_call(
            address,
            lambda: Collection(address.collection, schema, using=alias, consistency_level=consistency),
        )
        collection.create_index("vector", _index_params(kind, dict(params or {})))
        collection.load()
        return cls(
            collection,
            address,
            metric=metric,
            kind=kind,
            dim=dim,
            encoder=encoder,
            consistency=consistency,
            timeout=timeout,
        )

    @classmethod
    def connect(
        cls,
        uri: str,
        *,
        consistency: str = "Strong",
        timeout: float = 10.0,
        load_wait_s: float = LOAD_WAIT_S,
    ) -> MilvusIndex:
        """The existing collection at ``uri`` (created by :meth:`create`), loaded for search; ``timeout`` bounds
        the seconds spent reaching the server, and each later call; ``consistency`` is one of
        :data:`CONSISTENCY`. A collection the server is still loading (after its restart) is waited for, at
        most ``load_wait_s`` seconds, saying so once on the ``crl`` logger.

        Raises:
            ValueError: on a bad address or consistency, a missing collection, one crl did not create (no
                crl schema), or the unfinished copy of an export (its name ends in :data:`UNFINISHED`).
            BackendUnavailableError: when the collection is still loading after ``load_wait_s`` seconds.
        """
        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
        from pymilvus import Collection, utility

        address = MilvusAddress.parse(uri)
        if address.collection.endswith(UNFINISHED):
            raise ValueError(
                f"{address} is the unfinished copy of an export (crl index export fills it and renames it when "
                f"every item is in); rerun the export to {address.collection.removesuffix(UNFINISHED)}"
            )
        _check_consistency(consistency)
        _call_timeout(timeout)
        alias = _connect(address, timeout)
        if not utility.has_collection(address.collection, using=alias):
            raise ValueError(
                f"{address} does not exist; create it with MilvusIndex.create (or crl index build)"
            )
        collection = Collection(address.collection, using=alias)
        metric, kind, encoder = _described(address, collection.description)
        vector = next((f for f in collection.schema.fields if f.name == "vector"), None)
        if vector is None:
            raise ValueError(f"{address} has no 'vector' field; it was not created by crl")
        _wait_loaded(collection, address, alias, consistency, load_wait_s)
        return cls(
            collection,
            address,
            metric=metric,
            kind=kind,
            dim=int(vector.params["dim"]),
            encoder=encoder,
            consistency=consistency,
            timeout=timeout,
        )

    def __len__(self) -> int:
        """The number of items in the collection (deleted ones excluded)."""
        rows = self._call(lambda c: c.query(expr="", output_fields=["count(*)"], **self._read))
        return int(rows[0]["count(*)"])

    @property
    def params(self) -> dict[str, int]:
        """The collection's index build parameters (``M`` and ``efConstruction`` of HNSW, ``nlist`` of IVF)."""
        described = self._call(lambda c: c.index(timeout=self._timeout).params)
        return {name: int(value) for name, value in described.get("params", {}).items()}

    @property
    def ids(self) -> np.ndarray:
        """The ids of every item in the collection, ascending (read in batches of 10,000)."""

        def read(collection: Any) -> list[int]:
            pages = collection.query_iterator(batch_size=10_000, output_fields=["id"], **self._read)
            found: list[int] = []
            while page := pages.next():
                found.extend(int(row["id"]) for row in page)
            pages.close()
            return found

        return np.array(sorted(self._call(read)), dtype=np.int64)

    def __repr__(self) -> str:
        return (
            f"MilvusIndex({str(self.address)!r}, kind={self.kind!r}, metric={self.metric!r}, dim={self.dim})"
        )

    def add(
        self, vectors: Any, ids: Any, metadata: Sequence[dict[str, Any] | None] | None = None
    ) -> np.ndarray:
        """Insert ``vectors`` (n, d) with ``ids`` (n distinct integers not yet in the collection) and
        ``metadata`` (one dict of scalar fields, or None, per vector); returns the ids.

        Raises:
            ValueError: on bad vectors, ids or metadata, or an id already in the collection (use :meth:`upsert`).
        """
        matrix, new_ids, rows = self._rows(vectors, ids, metadata)
        with _adding_lock(self.address):
            present = self._present(new_ids)
            if present.size:
                raise ValueError(
                    f"ids holds {int(present[0])}, already in {self.address}; pass new ids, or upsert to replace it"
                )
            if new_ids.size:
                self._call(lambda c: c.insert(_records(matrix, new_ids, rows), timeout=self._timeout))
                self._check_one_row_each(new_ids)
        return new_ids

    def _check_one_row_each(self, ids: np.ndarray) -> None:
        """Raise ValueError when the collection holds more rows than ``ids`` under them: another process added
        one of them between this add's check and its insert (Milvus keeps every row of a primary key, counts
        them all and finds one)."""
        expr = f"id in [{', '.join(str(int(i)) for i in ids)}]"
        strong = {**self._read, "consistency_level": "Strong"}
        rows = self._call(lambda c: c.query(expr=expr, output_fields=["count(*)"], **strong))
        held = int(rows[0]["count(*)"])
        if held > ids.size:
            named = f"id {int(ids[0])}" if ids.size == 1 else f"these {ids.size} ids"
            raise ValueError(
                f"another writer added {named} to {self.address} at the same time: it holds {held} rows for "
                f"them (each counted, one found); upsert them to keep one row per id"
            )

    def upsert(
        self, vectors: Any, ids: Any, metadata: Sequence[dict[str, Any] | None] | None = None
    ) -> np.ndarray:
        """Insert the items of ``ids`` or replace those present (vector and metadata); returns the ids."""
        matrix, new_ids, rows = self._rows(vectors, ids, metadata)
        if new_ids.size:
            self._call(lambda c: c.upsert(_records(matrix, new_ids, rows), timeout=self._timeout))
        return new_ids

    def delete(self, ids: Any) -> int:
        """Delete the items of ``ids`` (ids not present are ignored); returns how many were present."""
        drop = as_ids(
            [ids] if isinstance(ids, int | np.integer) else ids, len(np.atleast_1d(np.asarray(ids)))
        )
        present = self._present(drop)
        if present.size:
            expr = f"id in [{', '.join(str(int(i)) for i in present)}]"
            self._call(lambda c: c.delete(expr=expr, timeout=self._timeout))
        return int(present.size)

    def metadata(self, ids: Any) -> list[dict[str, Any] | None]:
        """The metadata dict of each id in ``ids`` (None for -1, an empty slot, or an item without metadata)."""
        flat = np.asarray(ids, dtype=np.int64).ravel()
        wanted = sorted({int(i) for i in flat if i >= 0})
        found: dict[int, dict[str, Any]] = {}
        if wanted:
            expr = f"id in [{', '.join(map(str, wanted))}]"
            for row in self._call(lambda c: c.query(expr=expr, output_fields=["*"], **self._read)):
                found[int(row["id"])] = {k: v for k, v in row.items() if k not in ("id", "vector")}
        missing = [i for i in wanted if i not in found]
        if missing:
            raise ValueError(f"id {missing[0]} is not in {self.address}; pass ids of its items")
        return [found.get(int(i)) or None for i in flat]

    def vectors(self, ids: Any) -> np.ndarray:
        """The stored vectors (q, d) float32 of ``ids`` (repeats allowed), as the collection holds them (unit
        norm under cosine)."""
        wanted = np.asarray(ids.detach().cpu() if hasattr(ids, "detach") else ids)
        if wanted.ndim != 1 or (wanted.size and wanted.dtype.kind not in "iu"):
            raise ValueError(f"ids must be a 1-D array of integers, got {wanted.dtype} {wanted.shape}")
        if wanted.size == 0:
            return np.empty((0, self.dim), dtype=np.float32)
        expr = f"id in [{', '.join(str(int(i)) for i in set(wanted.tolist()))}]"
        found = self._call(lambda c: c.query(expr=expr, output_fields=["vector"], **self._read))
        rows = {int(r["id"]): r["vector"] for r in found}
        missing = [int(i) for i in wanted if int(i) not in rows]
        if missing:
            raise ValueError(f"id {missing[0]} is not in {self.address}; pass ids of its items")
        return np.asarray([rows[int(i)] for i in wanted], dtype=np.float32)

    def search(
        self,
        queries: Any,
        k: int,
        *,
        filter: Mapping[str, Any] | None = None,
        ef_search: int | None = None,
        nprobe: int | None = None,
    ) -> SearchResult:
        """The ``k`` items with the largest score for each query of ``queries`` (q, d) among those passing
        ``filter`` (:mod:`crl.search.filters`), best first, ties by ascending id.

        ``ef_search`` (HNSW; raised to k where smaller, as Milvus requires) and ``nprobe`` (IVF) apply to this
        call. Slots left empty (fewer than k items pass the filter, or an IVF's probed cells hold fewer) hold
        id -1 and score -inf; ``found`` counts each query's items and ``shortfall`` says why.
        """
        matrix = prepare(as_matrix(queries, "queries", self.dim), self.metric, "queries")
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise ValueError(f"k = {k!r}; pass an int in [1, {MAX_K}] (Milvus's largest k)")
        checked = parse_filter(filter)
        expression = checked.milvus_expression() if checked is not None else None
        check_search_settings(self.kind, ef_search, nprobe)
        param = {"metric_type": "IP", "params": MILVUS_KINDS[self.kind].search(k, ef_search, nprobe)}
        scores = np.full((matrix.shape[0], k), -np.inf, dtype=np.float32)
        ids = np.full((matrix.shape[0], k), -1, dtype=np.int64)
        if matrix.shape[0]:
            try:
                hits = self._call(
                    lambda c: c.search(matrix, "vector", param, limit=k, expr=expression, **self._read)
                )
            except ValueError as error:
                raise ValueError(f"filter or search settings: {error}") from None
            for row, hit in enumerate(hits):
                ids[row, : len(hit.ids)], scores[row, : len(hit.ids)] = hit.ids, hit.distances
            scores, ids = tie_ordered(scores, ids)
        found = (ids >= 0).sum(axis=1).astype(np.int64)
        return SearchResult(scores, ids, found, _shortfall(found, k, checked is not None, self.kind))

    def flush(self, timeout: float = 600.0) -> None:
        """Seal the collection's growing segments and wait, at most ``timeout`` seconds, until its index is built
        over them. Milvus searches a growing segment by brute force, so an HNSW or IVF collection searches
        approximately, at its index's speed, only what was flushed (Milvus also seals a segment by itself once
        it is large)."""
        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
        from pymilvus import utility

        wait = max(1, math.ceil(timeout))

        def seal(collection: Any) -> None:
            collection.flush(timeout=wait)
            utility.wait_for_index_building_complete(
                self.address.collection, timeout=wait, using=_alias(self.address)
            )

        self._call(seal)

    def drop(self) -> None:
        """Delete the collection and everything in it from the server."""
        self._call(lambda c: c.drop(timeout=self._timeout))

    @property
    def _read(self) -> dict[str, Any]:
        """The arguments of a read: its timeout and the consistency given at connection."""
        return {"timeout": self._timeout, "consistency_level": self._consistency}

    def _call(self, operation: Callable[[Any], T]) -> T:
        """``operation(collection)``; a server that refuses the request as malformed (:func:`_refused`) is a
        ``ValueError`` naming the backend and its reason; a server that fails it otherwise is a
        ``BackendUnavailableError`` naming the backend. The connection is marked stale, so the next call opens a
        fresh one first, only when a health probe (:meth:`_answers`) fails too: one request the server fails
        leaves every other client's connection alone."""
        # grpc comes with the optional extra crl[milvus] (and is slow to import): loaded where a server is reached
        import grpc

        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server is reached
        from pymilvus import MilvusException

        try:
            if self._stale:
                self._reopen()
            return operation(self._collection)
        except (MilvusException, grpc.RpcError) as error:
            if _refused(error):
                raise ValueError(
                    f"{self.address.backend} refused the request ({_reason(error)}); fix the request"
                ) from None
            self._stale = self._stale or not self._answers()
            raise BackendUnavailableError(self.address.backend, _reason(error)) from None

    def _answers(self) -> bool:
        """The health probe: whether the server counts the collection's items (its proxy, a query node and the
        loaded collection answering) within :data:`PROBE_TIMEOUT_S` seconds."""
        # grpc comes with the optional extra crl[milvus] (and is slow to import): loaded where a server is reached
        import grpc

        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server is reached
        from pymilvus import MilvusException

        try:
            self._collection.query(
                expr="", output_fields=["count(*)"], timeout=PROBE_TIMEOUT_S, consistency_level="Eventually"
            )
        except (MilvusException, grpc.RpcError):
            return False
        return True

    def _reopen(self) -> None:
        """A fresh connection to the server and the collection loaded again (waiting at most ``timeout``
        seconds); while another thread reopens, a ``BackendUnavailableError`` at once instead of a second attempt."""
        # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
        from pymilvus import Collection

        if not self._reopening.acquire(blocking=False):
            raise BackendUnavailableError(self.address.backend, "reconnecting")
        try:
            if self._stale:
                alias = _open(self.address, self._timeout, fresh=True)
                collection = Collection(self.address.collection, using=alias)
                collection.load(timeout=self._timeout)
                self._collection = collection
                self._stale = False
        finally:
            self._reopening.release()

    def _rows(
        self, vectors: Any, ids: Any, metadata: Sequence[dict[str, Any] | None] | None
    ) -> tuple[np.ndarray, np.ndarray, list[dict[str, Any] | None]]:
        matrix = prepare(as_matrix(vectors, "vectors", self.dim), self.metric, "vectors")
        if ids is None:
            raise ValueError(
                f"ids is None; a Milvus collection keys items by the ids you give (n = {len(matrix)})"
            )
        new_ids = as_ids(ids, matrix.shape[0])
        if new_ids.size and int(new_ids.max()) > MAX_ID:
            raise ValueError(
                f"ids holds {int(new_ids.max())}; a Milvus collection holds ids 0 .. {MAX_ID} (2**63 - 1 is "
                "Milvus's own sentinel), pass ids in that range"
            )
        rows = as_metadata(metadata, matrix.shape[0])
        for row in rows:
            reserved = {"id", "vector"} & set(row or {})
            if reserved:
                raise ValueError(f"metadata uses the reserved field {sorted(reserved)[0]!r}; rename it")
        return matrix, new_ids, rows

    def _present(self, ids: np.ndarray) -> np.ndarray:
        if ids.size == 0:
            return ids
        expr = f"id in [{', '.join(str(int(i)) for i in ids)}]"
        strong = {**self._read, "consistency_level": "Strong"}
        rows = self._call(lambda c: c.query(expr=expr, output_fields=["id"], **strong))
        return np.array(sorted(int(row["id"]) for row in rows), dtype=np.int64)


def _refused(error: Exception) -> bool:
    """Whether ``error`` refuses the request itself: pymilvus's own check of its arguments, or a server's answer
    naming one of :data:`REFUSED` (a lost or failing server is anything else)."""
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server answered
    from pymilvus.exceptions import DataNotMatchException, DataTypeNotMatchException, ParamError

    if isinstance(error, ParamError | DataTypeNotMatchException | DataNotMatchException):
        return True
    message = str(getattr(error, "message", "") or "").lower()
    return any(phrase in message for phrase in REFUSED)


def _adding_lock(address: MilvusAddress) -> threading.Lock:
    """The process's one lock over the check-and-insert of :meth:`MilvusIndex.add` into ``address``."""
    with _ADDING_GUARD:
        return _ADDING.setdefault(str(address), threading.Lock())


def _connect(address: MilvusAddress, timeout: float) -> str:
    """A pymilvus connection alias for ``address`` (opened once per process and address).

    Raises:
        ValueError: naming the address when no Milvus server answers there.
    """
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server is reached
    from pymilvus import MilvusException

    try:
        return _open(address, timeout, fresh=False)
    except MilvusException as error:
        raise ValueError(
            f"no Milvus server answers at {address.host}:{address.port} ({error.message}); start one or "
            "pass the address of a running server"
        ) from None


def _open(address: MilvusAddress, timeout: float, *, fresh: bool) -> str:
    """The pymilvus connection alias of ``address``, connected (anew when ``fresh``: the old channel closed)."""
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server is reached
    from pymilvus import connections

    # pymilvus logs every failed call at ERROR on stderr before raising it; crl raises it with its reason
    logging.getLogger("pymilvus.decorators").setLevel(logging.CRITICAL)
    alias = _alias(address)
    if fresh:
        connections.disconnect(alias)
    if not connections.has_connection(alias):
        connections.connect(alias, host=address.host, port=str(address.port), timeout=timeout)
    return alias


def _wait_loaded(
    collection: Any, address: MilvusAddress, alias: str, consistency: str, wait_s: float
) -> None:
    """Load ``collection`` and return once the server answers a query on it at ``consistency``, saying once on
    the ``crl`` logger that it waits; a :class:`~crl.search.BackendUnavailableError` saying it still loads after
    ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    said = False
    while (reason := _not_ready(collection, address, alias, consistency)) is not None:
        if not said:
            logging.getLogger("crl").info(
                f"waiting for the server to load {address.collection} (after a restart it first waits out the "
                f"stopped server's session, about 30 s; at most {wait_s:g} s)"
            )
            said = True
        if time.monotonic() > deadline:
            raise BackendUnavailableError(
                address.backend, f"{address.collection} is still loading after {wait_s:g} s: {reason}"
            )
        time.sleep(0.5)


def _not_ready(collection: Any, address: MilvusAddress, alias: str, consistency: str) -> str | None:
    """Why the server cannot answer a query on ``collection`` at ``consistency`` yet (it reports it loading, or
    a count fails: its query nodes, or under Strong consistency its time tick, are not back after a restart), or
    None when it answers."""
    # grpc comes with the optional extra crl[milvus] (and is slow to import): loaded where a collection is reached
    import grpc

    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus import MilvusException, utility

    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus.client.types import LoadState

    try:
        state = utility.load_state(address.collection, using=alias, timeout=10)
        if state == LoadState.NotLoad:
            collection.load(_async=True, timeout=10)
        if state != LoadState.Loaded:
            return f"its load state is {state.name}"
        collection.query(expr="", output_fields=["count(*)"], timeout=5, consistency_level=consistency)
    except (MilvusException, grpc.RpcError) as error:
        return _reason(error)
    return None


def _alias(address: MilvusAddress) -> str:
    """The name of the process's pymilvus connection to ``address``'s server."""
    return f"crl-{address.host}-{address.port}"


def _call_timeout(timeout: float) -> int:
    """``timeout`` as whole seconds (>= 1): pymilvus bounds its retries of a call only by an int timeout.

    Raises:
        ValueError: unless ``timeout`` is a positive number.
    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
        raise ValueError(f"timeout = {timeout!r}; pass the seconds a call may wait for the server, e.g. 10")
    return max(1, math.ceil(timeout))


def _check_consistency(consistency: str) -> None:
    if consistency not in CONSISTENCY:
        raise ValueError(f"consistency = {consistency!r}; pass one of {', '.join(CONSISTENCY)}")


def _reason(error: Exception) -> str:
    """The first line of a pymilvus or gRPC error, at most :data:`REASON_CHARS` characters."""
    message = getattr(error, "message", None) or getattr(error, "details", lambda: None)() or str(error)
    line = str(message).strip().splitlines()[0] if str(message).strip() else type(error).__name__
    return line if len(line) <= REASON_CHARS else line[:REASON_CHARS] + "..."


def _index_params(kind: MilvusKind, params: dict[str, int]) -> dict[str, Any]:
    milvus = MILVUS_KINDS[kind]
    unknown = set(params) - set(milvus.build)
    if unknown:
        raise ValueError(
            f"params has {sorted(unknown)[0]!r}, not a {kind} parameter; pass {sorted(milvus.build)}"
        )
    return {"index_type": milvus.index_type, "metric_type": "IP", "params": {**milvus.build, **params}}


def _description(
    metric: Metric, kind: MilvusKind, encoder: EncoderProvenance | None, writer: str | None = None
) -> str:
    """The collection's description: ``crl metric=M kind=K``, then `` writer=HEX`` (the export that filled it)
    and `` encoder={json}`` when recorded."""
    described = f"crl metric={metric} kind={kind}" + ("" if writer is None else f" writer={writer}")
    return described if encoder is None else f"{described} encoder={json.dumps(encoder.as_dict())}"


def _writer(description: str) -> str | None:
    """The export token a collection's description records (:func:`_description`), or None."""
    match = _DESCRIPTION.fullmatch(description)
    return None if match is None else match[3]


def _described(
    address: MilvusAddress, description: str
) -> tuple[Metric, MilvusKind, EncoderProvenance | None]:
    """The metric, kind and encoder a collection's description records (:func:`_description`)."""
    match = _DESCRIPTION.fullmatch(description)
    if match is None:
        raise ValueError(f"{address} was not created by crl (its description is {description[:60]!r})")
    encoder = None
    if match[4] is not None:
        try:
            encoder = EncoderProvenance(**json.loads(match[4]))
        except (ValueError, TypeError):
            raise ValueError(f"{address}'s description records a malformed encoder; recreate it") from None
    return match[1], match[2], encoder  # type: ignore[return-value]


def _records(matrix: np.ndarray, ids: np.ndarray, rows: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    return [
        {**(row or {}), "id": int(item), "vector": vector.tolist()}
        for item, vector, row in zip(ids, matrix, rows, strict=True)
    ]


def _shortfall(found: np.ndarray, k: int, filtered: bool, kind: MilvusKind) -> str | None:
    short = int((found < k).sum())
    if not short:
        return None
    why = "fewer than k items pass the filter" if filtered else "the collection holds fewer than k items"
    if INDEX_KINDS[kind].family == "ivf":
        why += " (or the IVF cells probed hold fewer: raise nprobe)"
    return f"{why}: {short} of {found.size} queries found fewer than k = {k}"


def export_index(
    index: Index,
    uri: str,
    *,
    kind: MilvusKind | None = None,
    batch: int = 10_000,
    overwrite: bool = False,
) -> MilvusIndex:
    """A new collection at ``uri`` holding ``index``'s items (its stored vectors, ids and metadata) under the same
    metric and encoder, inserted ``batch`` items at a time, then flushed (sealed, so Milvus's statistics such as
    pymilvus's ``num_entities`` count them). ``kind`` defaults to the index's own, IVF-PQ as IVF (Milvus's
    IVF_FLAT); an IVF-PQ index exports its lossy reconstructions.

    One writer per collection name: the items go into ``COLLECTION`` + :data:`UNFINISHED` first, created with
    this export's token in its description (creating a collection is atomic on the server, so a second export
    finds it there and is refused), renamed to ``COLLECTION`` once every item is in, after checking the token
    is still this export's; a collection under its own name is complete, holds this export's token and count.
    An export that fails or is interrupted drops its copy; one that was killed leaves it, and ``overwrite``
    drops it (as it replaces an existing collection at ``uri``, at the rename, after the copy is full).

    Raises:
        ValueError: when the collection exists already, or another export fills its copy, and ``overwrite`` is
            off; when another export (with ``overwrite``) replaced this one's copy; when its name is too long
            for the suffix.
    """
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus import utility

    address = MilvusAddress.parse(uri)
    unfinished = MilvusAddress(address.host, address.port, address.collection + UNFINISHED)
    if len(unfinished.collection) > MAX_NAME:
        raise ValueError(
            f"the collection name {address.collection[:40]}... has {len(address.collection)} characters; an export "
            f"takes at most {MAX_NAME - len(UNFINISHED)}, pass a shorter name"
        )
    alias = _connect(address, 10.0)
    if not overwrite and _server_call(
        address, lambda: utility.has_collection(address.collection, using=alias)
    ):
        raise ValueError(
            f"{address} exists already; pass overwrite=True (crl index export --overwrite) to replace it"
        )
    if overwrite and _server_call(
        address, lambda: utility.has_collection(unfinished.collection, using=alias)
    ):
        _server_call(address, lambda: utility.drop_collection(unfinished.collection, using=alias))
    writer = uuid.uuid4().hex
    chosen: MilvusKind = kind or _EXPORTED_KIND[index.kind]
    try:
        collection = MilvusIndex.create(
            str(unfinished), index.dim, metric=index.metric, kind=chosen, encoder=index.encoder, writer=writer
        )
    except ValueError:
        raise ValueError(
            f"another export to {address} is filling {unfinished.collection} (or one was killed and left it); "
            "wait for it, or, when none runs, pass overwrite=True (crl index export --overwrite) to export anew"
        ) from None
    try:
        _fill(collection, index, batch)
        _rename_own(unfinished, address, alias, writer)
    except BaseException as error:
        if not _drop_own(unfinished, alias, writer) and isinstance(error, Exception):
            raise _replaced(address) from None
        raise
    return _checked_export(address, writer, len(index))


def _drop_own(unfinished: MilvusAddress, alias: str, writer: str) -> bool:
    """Drop ``unfinished`` when it is ``writer``'s copy; whether it was (True too when the server cannot say:
    the error at hand is then the one to report)."""
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus import utility

    try:
        if _writer_of(unfinished, alias) != writer:
            return False
        _server_call(unfinished, lambda: utility.drop_collection(unfinished.collection, using=alias))
    except (ValueError, BackendUnavailableError):
        pass
    return True


def _fill(collection: MilvusIndex, index: Index, batch: int) -> None:
    """Add ``index``'s items to ``collection``, ``batch`` at a time, then flush it."""
    ids = index.ids
    for start in range(0, ids.size, batch):
        part = ids[start : start + batch]
        collection.add(index.vectors(part), part, index.metadata(part))
    collection.flush()


def _writer_of(address: MilvusAddress, alias: str) -> str | None:
    """The export token of ``address``'s collection, or None when it is gone (or has none)."""
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus import Collection, utility

    if not _server_call(address, lambda: utility.has_collection(address.collection, using=alias)):
        return None
    return _writer(_server_call(address, lambda: Collection(address.collection, using=alias).description))


def _replaced(address: MilvusAddress) -> ValueError:
    """The error of an export whose copy another export replaced."""
    return ValueError(
        f"another export to {address} ran at the same time (with --overwrite) and replaced this one's copy; "
        f"{address} holds that export's items, not these: rerun this export once it is done"
    )


def _rename_own(unfinished: MilvusAddress, address: MilvusAddress, alias: str, writer: str) -> None:
    """Rename ``unfinished`` to ``address`` (dropping a collection there) once its token is still ``writer``.

    Raises:
        ValueError: when another export replaced it (its token is another's, or it is gone).
    """
    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a collection is reached
    from pymilvus import utility

    if _writer_of(unfinished, alias) != writer:
        raise _replaced(address)
    if _server_call(address, lambda: utility.has_collection(address.collection, using=alias)):
        _server_call(address, lambda: utility.drop_collection(address.collection, using=alias))
    _server_call(
        address, lambda: utility.rename_collection(unfinished.collection, address.collection, using=alias)
    )


def _checked_export(address: MilvusAddress, writer: str, expected: int) -> MilvusIndex:
    """The exported collection at ``address``, once it holds ``writer``'s token and ``expected`` items.

    Raises:
        ValueError: when another export renamed its copy there in between (then that partial copy is dropped).
    """
    exported = MilvusIndex.connect(str(address))
    alias = _alias(address)
    if _writer_of(address, alias) == writer and len(exported) == expected:
        return exported
    exported.drop()
    raise ValueError(
        f"another export to {address} ran at the same time and renamed its unfinished copy over this one's; "
        f"{address} was dropped (it was not complete): rerun one export"
    )


def _server_call(address: MilvusAddress, operation: Callable[[], T]) -> T:
    """``operation()`` on ``address``'s server outside a collection's calls: a request the server refuses (an
    existing name included) is a ``ValueError``, a failure a :class:`~crl.search.BackendUnavailableError`, both
    naming the backend and the server's reason."""
    # grpc comes with the optional extra crl[milvus] (and is slow to import): loaded where a server is reached
    import grpc

    # pymilvus is the optional extra crl[milvus] (and slow to import): loaded where a server is reached
    from pymilvus import MilvusException

    try:
        return operation()
    except (MilvusException, grpc.RpcError) as error:
        reason = _reason(error)
        if _refused(error) or re.search(r"exist|duplicate", reason, flags=re.IGNORECASE):
            raise ValueError(
                f"the {address.backend} refused the request ({reason}); fix the request"
            ) from None
        raise BackendUnavailableError(address.backend, reason) from None
