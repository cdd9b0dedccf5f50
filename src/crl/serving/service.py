"""An HTTP search service over one search backend (FastAPI; ``crl serve DIR`` runs it with uvicorn).

The backend is crl's faiss :class:`crl.search.Index` or a Milvus collection (:class:`crl.search.milvus.MilvusIndex`),
queried through the calls both answer (:class:`crl.search.SearchBackend`).

- ``GET /health``: ``{"status": "ok", "count", "dimension", "kind", "metric", "params", "limits"}``.
- ``POST /search``: ``{"vectors": [[...], ...]}`` or ``{"ids": [...]}`` (items of the index as queries) or
  ``{"texts": [...]}`` (needs a string encoder, :mod:`crl.serving.queries`), with ``k`` (default 10) and the
  optional ``ef_search`` (HNSW) / ``nprobe`` (IVF) for this request, and for ``ids`` the optional
  ``exclude_self`` (true: each item left out of its own results, k others returned; default false, the item
  itself first), the optional ``filter`` in crl's filter language (:mod:`crl.search.filters`), and the optional
  ``return_text`` (true: each result also lists its items' texts, for an index built from texts); answers
  ``{"results": [{"ids": [...], "scores": [...], "found": n}, ...], "shortfall": null}`` (with ``"texts":
  [...]`` beside ``ids`` when ``return_text``), one entry per query, best first. ``found`` counts the items of
  a query (fewer than k only when the index could not fill its slots, e.g. an IVF whose probed cells held fewer
  items; those slots are left out), and ``shortfall`` then says why and what to raise.

Every bad request is a 4xx answer whose ``detail`` names the field, in FastAPI's own shape
``[{"loc": ["body", field, ...], "msg": ..., "type": ...}]``: 422 for a malformed or out-of-range field (a wrong
dimension, NaN or infinite numbers, a number sent as a string or a bool, k <= 0, k above ``max_k`` or above the
index size, a batch above ``max_batch``, ids outside 0..2**63 - 1 or unknown, a setting the index kind does not
take, a malformed filter, a text query of an index without a string encoder), 409 for a search of an empty
index, 413 for a body above ``max_body_bytes`` (checked on Content-Length and counted as it arrives, before
anything is parsed). A backend whose server does not answer (a Milvus server down or restarting) gives 503 with
``loc`` ``["backend"]`` naming it (``milvus backend at HOST:PORT unavailable``) and a ``Retry-After`` header; the
backend reconnects on a later request, so the service recovers by itself once the server is back. An answer lists
at most :data:`MAX_ERRORS` errors and shows at most :data:`PREVIEW_CHARS` characters of any value sent, and never
a path of the server or a traceback. No input reaches the backend unchecked, so no request can crash the process,
and no score in an answer is NaN or infinite.

The interactive pages ``/docs`` and ``/redoc`` load their scripts from a CDN, so they are off unless
``create_app(..., docs=True)``; the schema ``/openapi.json`` is served either way (plain JSON, no scripts).
"""

from __future__ import annotations

import math
import reprlib
from collections.abc import Callable
from typing import Annotated, Any

import numpy as np
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crl.search import BackendUnavailableError, Index, SearchBackend
from crl.search.filters import parse_filter
from crl.serving.queries import search_others, string_encoder

__all__ = ["MAX_BATCH", "MAX_K", "SearchRequest", "create_app", "default_max_body_bytes"]

MAX_BATCH = 256
"""Default limit on the queries of one request."""
MAX_K = 1000
"""Default limit on k."""
MAX_SETTING = 1 << 16
"""Upper limit on ef_search and nprobe (faiss accepts any int; this keeps one request's cost bounded)."""
MAX_ID = 2**63 - 1
"""The largest item id (ids are int64)."""
BYTES_PER_NUMBER = 32
"""Room for one JSON number of a query vector and its separator (``-1.2345678901234567e-308, `` is 26)."""
BODY_SLACK = 65_536
"""Bytes allowed beyond the query numbers: the field names, k, the settings, whitespace."""
MAX_ERRORS = 10
"""Most errors one answer lists; a count of the rest follows them."""
PREVIEW_CHARS = 40
"""Most characters of a value sent that an error shows."""
RETRY_AFTER_S = 1
"""The Retry-After of a 503: a client may try again after this many seconds."""

TextEmbedder = Callable[[list[str]], np.ndarray]


class SearchRequest(BaseModel):
    """The body of ``POST /search``: exactly one of ``vectors``, ``ids``, ``texts``; k; optional settings.

    Numbers are strict: ``"k": "5"`` or ``"k": true`` is an error, not 5 or 1.
    """

    model_config = ConfigDict(extra="forbid")

    vectors: list[list[StrictFloat]] | None = Field(default=None, min_length=1)
    ids: list[Annotated[StrictInt, Field(ge=0, le=MAX_ID)]] | None = Field(default=None, min_length=1)
    texts: list[StrictStr] | None = Field(default=None, min_length=1)
    k: StrictInt = Field(default=10, ge=1)
    ef_search: StrictInt | None = Field(default=None, ge=1, le=MAX_SETTING)
    nprobe: StrictInt | None = Field(default=None, ge=1, le=MAX_SETTING)
    exclude_self: StrictBool = False
    filter: dict[str, Any] | None = None
    return_text: StrictBool = False

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


class BodyLimit:
    """ASGI middleware: an HTTP request whose body exceeds ``max_bytes`` gets a 413 before the app sees it.

    A Content-Length above the limit is refused without reading the body; otherwise the body is read chunk by
    chunk (chunked transfer included), counted as it arrives and refused as soon as the count passes the limit,
    then handed to the app whole.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _content_length(scope) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = (
            f"the request body exceeds {self.max_bytes} bytes; send fewer or shorter queries per request "
            "(crl serve --max-body-bytes sets the limit)"
        )
        content = {"detail": [{"loc": ["body"], "msg": message, "type": "body_too_large"}]}
        await JSONResponse(status_code=413, content=content)(scope, receive, send)


def _content_length(scope: Scope) -> int:
    """The request's Content-Length header, or 0 when absent or not a number (the body is counted instead)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive channel that gives ``body`` as one message, then passes on to ``receive`` (disconnects)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def default_max_body_bytes(max_batch: int, dim: int) -> int:
    """The body limit for ``max_batch`` query vectors of dimension ``dim``: ``max_batch * dim *``
    :data:`BYTES_PER_NUMBER` ``+`` :data:`BODY_SLACK` (3.2 MB for 256 queries of dimension 384)."""
    return max_batch * dim * BYTES_PER_NUMBER + BODY_SLACK


def create_app(
    index: SearchBackend,
    *,
    max_batch: int = MAX_BATCH,
    max_k: int = MAX_K,
    max_body_bytes: int | None = None,
    docs: bool = False,
    allow_other_encoder: bool = False,
) -> FastAPI:
    """The FastAPI app serving ``index`` with at most ``max_batch`` queries and ``k <= max_k`` per request.

    ``max_body_bytes`` (None: :func:`default_max_body_bytes`) bounds a request body; ``docs`` serves the
    ``/docs`` and ``/redoc`` pages, which fetch their scripts from a CDN. Text queries use the string encoder
    registered for the index's checkpoint when the app is created (:mod:`crl.serving.queries`), refused when that
    checkpoint's weights no longer have the SHA-256 the index records, unless ``allow_other_encoder``.

    Raises:
        BackendUnavailableError: when the backend's server does not answer now.
        OtherEncoderError: when the index's encoder now holds other weights (and ``allow_other_encoder`` is off).
    """
    limits = {"max_batch": max_batch, "max_k": max_k, "max_body_bytes": max_body_bytes}
    for name, value in limits.items():
        if (value is not None or name != "max_body_bytes") and not _is_positive_int(value):
            raise ValueError(f"{name} = {value!r}; pass a positive integer")
    body_limit = max_body_bytes or default_max_body_bytes(max_batch, index.dim)
    if isinstance(index, Index) and len(
        index
    ):  # an IVF index builds its id -> vector map now, not in requests
        index.vectors(index.ids[:1])
    embed = _text_embedder(index, allow_other_encoder)
    hidden = _backend_names(index)
    app = FastAPI(
        title="crl search",
        description=f"a {index.kind} index of dimension {index.dim} ({index.metric})",
        docs_url="/docs" if docs else None,
        redoc_url="/redoc" if docs else None,
    )
    app.add_middleware(BodyLimit, max_bytes=body_limit)

    @app.exception_handler(RequestError)
    async def _request_error(_: Request, error: RequestError) -> JSONResponse:
        message = error.message
        for name, shown in hidden:
            message = message.replace(name, shown)
        detail = [{"loc": ["body", error.field], "msg": message, "type": "value_error"}]
        return JSONResponse(status_code=error.status, content={"detail": detail})

    @app.exception_handler(BackendUnavailableError)
    async def _backend_unavailable(_: Request, error: BackendUnavailableError) -> JSONResponse:
        message = f"{error.backend} unavailable; retry in a few seconds, once its server is back"
        detail = [{"loc": ["backend"], "msg": message, "type": "backend_unavailable"}]
        headers = {"Retry-After": str(RETRY_AFTER_S)}
        return JSONResponse(status_code=503, content={"detail": detail}, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _brief_errors(error.errors())})

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "count": len(index),
            "dimension": index.dim,
            "kind": index.kind,
            "metric": index.metric,
            "params": index.params,
            "limits": {"max_batch": max_batch, "max_k": max_k, "max_body_bytes": body_limit},
        }

    @app.post("/search")
    def search(request: SearchRequest) -> dict[str, Any]:
        queries = _queries(index, request, max_batch, embed)
        held = len(index)
        _check_k(request.k, held, max_k)
        field = _query_field(request)
        if request.exclude_self and request.ids is None:
            raise RequestError("exclude_self", "exclude_self applies to ids queries; drop it or query by ids")
        try:
            parse_filter(request.filter)
        except ValueError as error:
            raise RequestError("filter", _preview(str(error), 200)) from None
        try:
            found = search_others(
                index,
                queries,
                request.k,
                own_items=request.ids if request.exclude_self else None,
                size=held,
                ef_search=request.ef_search,
                nprobe=request.nprobe,
                filter=request.filter,
            )
        except ValueError as error:
            message = str(error)
            raise RequestError(
                next((name for name in ("ef_search", "nprobe", "filter") if name in message), field), message
            ) from None
        _check_scores(found.ids, found.scores, field)
        results = []
        for ids, scores, count in zip(
            found.ids.tolist(), found.scores.tolist(), found.found.tolist(), strict=True
        ):
            kept = [(i, s) for i, s in zip(ids, scores, strict=True) if i >= 0]
            results.append({"ids": [i for i, _ in kept], "scores": [s for _, s in kept], "found": count})
        if request.return_text:
            texts = _texts(index, [result["ids"] for result in results])
            for result in results:
                result["texts"] = [texts[item] for item in result["ids"]]
        return {"results": results, "shortfall": found.shortfall}

    return app


def _texts(index: SearchBackend, rows: list[list[int]]) -> dict[int, str]:
    """The text of every item of ``rows`` (its metadata's ``"text"``, as a text index stores it), read in one
    metadata call for the whole request (one Milvus query, not one per result row); a ``RequestError`` naming
    ``return_text`` when an item has none."""
    wanted = sorted({item for row in rows for item in row})
    texts = {}
    for item, metadata in zip(wanted, index.metadata(wanted), strict=True):
        text = metadata.get("text") if isinstance(metadata, dict) else None
        if not isinstance(text, str):
            raise RequestError(
                "return_text",
                f"item {item} has no text (this index was not built from texts); drop return_text",
            )
        texts[item] = text
    return texts


def _backend_names(index: SearchBackend) -> list[tuple[str, str]]:
    """(name, shown instead) for each way a 4xx message could name the backend's server: a Milvus collection's
    address and its server's ``HOST:PORT`` (only a 503 names the server, so its operator finds it)."""
    address = getattr(index, "address", None)
    if address is None:
        return []
    server = f"{address.host}:{address.port}"
    return [(str(address), "the collection"), (address.backend, "the backend"), (server, "the backend")]


def _is_positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _queries(index: SearchBackend, request: SearchRequest, max_batch: int, embed: TextEmbedder) -> np.ndarray:
    """The (q, d) query matrix of a request, every row checked (size, dimension, finite)."""
    field = _query_field(request)
    rows: list[Any] = getattr(request, field)
    if len(rows) > max_batch:
        raise RequestError(
            field, f"{len(rows)} queries exceed the limit of {max_batch} per request; split the batch"
        )
    if request.ids is not None:
        try:
            return index.vectors(np.asarray(request.ids, dtype=np.int64))
        except ValueError as error:
            raise RequestError("ids", str(error)) from None
    if request.texts is not None:
        return embed(request.texts)
    assert request.vectors is not None
    for row, vector in enumerate(request.vectors):
        if len(vector) != index.dim:
            raise RequestError(
                "vectors", f"vectors[{row}] has dimension {len(vector)}; the index has dimension {index.dim}"
            )
    matrix = np.asarray(request.vectors, dtype=np.float64)
    beyond = ~(np.abs(matrix) <= np.finfo(np.float32).max).all(axis=1)
    if beyond.any():
        row = int(np.flatnonzero(beyond)[0])
        raise RequestError("vectors", f"vectors[{row}] holds NaN, infinity or a value beyond float32")
    return matrix.astype(np.float32)


def _text_embedder(index: SearchBackend, allow_other_encoder: bool) -> TextEmbedder:
    """The function embedding a request's texts with the string encoder registered for the index's checkpoint
    (looked up and checked now, once); its errors are ``RequestError`` on ``texts`` that show no path of the
    server."""
    encode = string_encoder(index, allow_other_encoder=allow_other_encoder)
    folder = index.encoder.checkpoint if index.encoder is not None else None
    missing = (
        "this index records no encoder, so texts cannot be embedded (an index or collection built from text, "
        "e.g. by crl index build minilm --text-file, records one); query by vectors or ids"
        if folder is None
        else "no string encoder is registered for this index's encoder (text queries need an index built "
        "from text, e.g. by crl index build minilm --text-file, served by crl serve); query by vectors or ids"
    )

    def embed(texts: list[str]) -> np.ndarray:
        if encode is None:
            raise RequestError("texts", missing)
        for row, text in enumerate(texts):
            if not _is_unicode(text):
                raise RequestError(
                    "texts",
                    f"texts[{row}] holds a lone surrogate, which encodes no character; send valid Unicode",
                )
        try:
            return np.asarray(encode(texts), dtype=np.float32)
        except ValueError as error:
            message = str(error) if folder is None else str(error).replace(folder, "the encoder's folder")
            raise RequestError("texts", _preview(message, 200)) from None

    return embed


def _is_unicode(text: str) -> bool:
    """Whether ``text`` is characters only (a lone surrogate such as ``"\ud800"`` encodes none)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _query_field(request: SearchRequest) -> str:
    return "vectors" if request.vectors is not None else "ids" if request.ids is not None else "texts"


def _check_k(k: int, count: int, max_k: int) -> None:
    if count == 0:
        raise RequestError("k", "the index is empty: nothing to search", status=409)
    if k > max_k:
        raise RequestError("k", f"k = {_preview(str(k))} exceeds the limit max_k = {max_k}")
    if k > count:
        raise RequestError("k", f"k = {k} exceeds the {count} items of the index; pass k <= {count}")


def _check_scores(ids: np.ndarray, scores: np.ndarray, field: str) -> None:
    """A ``RequestError`` when a found item's score is NaN or infinite (JSON has no such number)."""
    broken = ((ids >= 0) & ~np.isfinite(scores)).any(axis=1)
    if broken.any():
        row = int(np.flatnonzero(broken)[0])
        raise RequestError(
            field,
            f"the scores of {field}[{row}] are not finite: the query or the index's vectors are too large for "
            "float32 inner products; scale the query down or rebuild the index from normalised vectors",
        )


_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = PREVIEW_CHARS
_SHORT.maxlist = _SHORT.maxdict = 4
_SHORT.maxlevel = 2


def _brief_errors(errors: Any) -> list[dict[str, Any]]:
    """pydantic's errors, at most :data:`MAX_ERRORS` of them, each value sent shown in a short preview."""
    detail = []
    for error in list(errors)[:MAX_ERRORS]:
        entry = {
            "loc": [part if isinstance(part, int) else _preview(str(part)) for part in error["loc"]],
            "msg": _preview(str(error["msg"]), 200),
            "type": error["type"],
        }
        if "input" in error:
            entry["input"] = _shown(error["input"])
        detail.append(entry)
    if len(errors) > MAX_ERRORS:
        detail.append(
            {
                "loc": ["body"],
                "msg": f"{len(errors) - MAX_ERRORS} more errors not listed; fix the ones above and send again",
                "type": "too_many_errors",
            }
        )
    return detail


def _shown(value: Any) -> Any:
    """``value`` itself when it is a short scalar JSON can write, else a preview string of at most about 40
    characters (NaN and the infinities, which JSON has no number for, as ``'nan'``, ``'inf'``, ``'-inf'``)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, int) and abs(value) < 10**PREVIEW_CHARS:
        return value
    if isinstance(value, str):
        return _preview(value)
    return _SHORT.repr(value)


def _preview(text: str, limit: int = PREVIEW_CHARS) -> str:
    """``text`` cut to its first ``limit`` characters, marked with ``...`` when cut."""
    return text if len(text) <= limit else text[:limit] + "..."
