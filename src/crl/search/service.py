"""An HTTP search service over one :class:`crl.search.Index` (FastAPI; ``crl serve DIR`` runs it with uvicorn).

- ``GET /health``: ``{"status": "ok", "count", "dimension", "kind", "metric", "params", "limits"}``.
- ``POST /search``: ``{"vectors": [[...], ...]}`` or ``{"ids": [...]}`` (items of the index as queries) or
  ``{"texts": [...]}`` (needs a string encoder, :mod:`crl.search.encoded`), with ``k`` (default 10) and the
  optional ``ef_search`` (HNSW) / ``nprobe`` (IVF) for this request; answers
  ``{"results": [{"ids": [...], "scores": [...]}, ...]}``, one entry per query, best first (an IVF slot it
  could not fill is left out).

Every bad request is a 4xx answer whose ``detail`` names the field, in FastAPI's own shape
``[{"loc": ["body", field, ...], "msg": ..., "type": ...}]``: 422 for a malformed or out-of-range field (a wrong
dimension, NaN or infinite numbers, k <= 0, k above ``max_k`` or above the index size, a batch above
``max_batch``, unknown ids, a setting the index kind does not take), 409 for a search of an empty index. No
input reaches faiss unchecked, so no request can crash the process.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, model_validator

from crl.search.encoded import embed_strings
from crl.search.index import Index

__all__ = ["MAX_BATCH", "MAX_K", "SearchRequest", "create_app"]

MAX_BATCH = 256
"""Default limit on the queries of one request."""
MAX_K = 1000
"""Default limit on k."""
MAX_SETTING = 1 << 16
"""Upper limit on ef_search and nprobe (faiss accepts any int; this keeps one request's cost bounded)."""


class SearchRequest(BaseModel):
    """The body of ``POST /search``: exactly one of ``vectors``, ``ids``, ``texts``; k; optional settings."""

    model_config = ConfigDict(extra="forbid")

    vectors: list[list[float]] | None = Field(default=None, min_length=1)
    ids: list[int] | None = Field(default=None, min_length=1)
    texts: list[str] | None = Field(default=None, min_length=1)
    k: int = Field(default=10, ge=1)
    ef_search: int | None = Field(default=None, ge=1, le=MAX_SETTING)
    nprobe: int | None = Field(default=None, ge=1, le=MAX_SETTING)

    @model_validator(mode="after")
    def _one_kind_of_query(self) -> SearchRequest:
        given = [name for name in ("vectors", "ids", "texts") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"pass exactly one of vectors, ids, texts (got {', '.join(given) or 'none'})")
        return self


class RequestError(Exception):
    """A request that passed pydantic but not the index's own checks: the field, a message, the status."""

    def __init__(self, field: str, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


def create_app(index: Index, *, max_batch: int = MAX_BATCH, max_k: int = MAX_K) -> FastAPI:
    """The FastAPI app serving ``index`` with at most ``max_batch`` queries and ``k <= max_k`` per request."""
    for name, value in (("max_batch", max_batch), ("max_k", max_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} = {value!r}; pass a positive integer")
    if len(index):  # an IVF index builds its id -> vector map now, not inside concurrent requests
        index.vectors(index.ids[:1])
    app = FastAPI(title="crl search", description=f"{index!r}")

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, error: RequestError) -> JSONResponse:
        detail = [{"loc": ["body", error.field], "msg": error.message, "type": "value_error"}]
        return JSONResponse(status_code=error.status, content={"detail": detail})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "count": len(index),
            "dimension": index.dim,
            "kind": index.kind,
            "metric": index.metric,
            "params": index.params,
            "limits": {"max_batch": max_batch, "max_k": max_k},
        }

    @app.post("/search")
    def search(request: SearchRequest) -> dict[str, Any]:
        queries = _queries(index, request, max_batch)
        _check_k(request.k, len(index), max_k)
        try:
            found = index.search(queries, request.k, ef_search=request.ef_search, nprobe=request.nprobe)
        except ValueError as error:
            message = str(error)
            field = next((name for name in ("ef_search", "nprobe") if name in message), _query_field(request))
            raise RequestError(field, message) from None
        results = []
        for ids, scores in zip(found.ids.tolist(), found.scores.tolist(), strict=True):
            kept = [(i, s) for i, s in zip(ids, scores, strict=True) if i >= 0]
            results.append({"ids": [i for i, _ in kept], "scores": [s for _, s in kept]})
        return {"results": results}

    return app


def _queries(index: Index, request: SearchRequest, max_batch: int) -> Any:
    """The (q, d) query matrix of a request, every row checked (size, dimension, finite)."""
    import numpy as np

    field = _query_field(request)
    rows: list[Any] = getattr(request, field)
    if len(rows) > max_batch:
        raise RequestError(
            field, f"{len(rows)} queries exceed the limit of {max_batch} per request; split the batch"
        )
    if request.ids is not None:
        try:
            return index.vectors(np.asarray(request.ids, dtype=np.int64))
        except (ValueError, OverflowError) as error:
            raise RequestError("ids", str(error)) from None
    if request.texts is not None:
        try:
            return embed_strings(index, request.texts)
        except ValueError as error:
            raise RequestError("texts", str(error)) from None
    assert request.vectors is not None
    for row, vector in enumerate(request.vectors):
        if len(vector) != index.dim:
            raise RequestError(
                "vectors", f"vectors[{row}] has dimension {len(vector)}; the index has dimension {index.dim}"
            )
        if not all(math.isfinite(value) and abs(value) < 3.4e38 for value in vector):
            raise RequestError("vectors", f"vectors[{row}] holds NaN, infinity or a value beyond float32")
    return np.asarray(request.vectors, dtype=np.float32)


def _query_field(request: SearchRequest) -> str:
    return "vectors" if request.vectors is not None else "ids" if request.ids is not None else "texts"


def _check_k(k: int, count: int, max_k: int) -> None:
    if count == 0:
        raise RequestError("k", "the index is empty: nothing to search", status=409)
    if k > max_k:
        raise RequestError("k", f"k = {k} exceeds the limit max_k = {max_k}")
    if k > count:
        raise RequestError("k", f"k = {k} exceeds the {count} items of the index; pass k <= {count}")
