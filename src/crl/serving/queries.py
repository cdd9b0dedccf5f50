"""Queries of a saved index: item ids or strings, the registry of string encoders, and the query item left out.

A query is read as an item id of the index (its stored vector is the query vector) or as a string, embedded by
a string encoder. :data:`Reading` says how: ``"auto"`` reads an integer (a string of ASCII digits 0-9: ``'٣'`` is
text) as an id and
anything else as a string; ``"id"`` and ``"text"`` force one reading (``crl search --id`` / ``--text``: the text
"1984" is then a string).

String encoders are registered, not imported: :func:`register_string_encoder` adds a factory that, given the
index's :class:`~crl.search.EncoderProvenance`, returns a function ``list[str] -> (n, d) array`` or ``None``
when it does not handle that checkpoint (:mod:`crl.serving.text` registers MiniLM's), and optionally a function
giving the SHA-256 the checkpoint has now (its weights; a text model's tokenizer, config, length and pooling
too). An index whose recorded SHA-256 differs (the model's weights, tokenizer or length were changed after the
index was built) is refused with :class:`OtherEncoderError`, since its text queries would be embedded by another
model than its items; ``allow_other_encoder=True`` (``--allow-other-encoder``) embeds
them anyway, with a warning. This module needs only
numpy and :mod:`crl.search`, so a query by id of a saved index never loads torch.

:func:`without_query_items` takes a search made with k + 1 results per query and drops each id query's own
item, so "the items nearest item 17" does not start with item 17 itself (score 1 under cosine).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal, Protocol

import numpy as np

from crl.search import EncoderProvenance, SearchBackend, SearchResult

__all__ = [
    "READINGS",
    "OtherEncoderError",
    "Reading",
    "StringEncoder",
    "embed_strings",
    "query_items",
    "query_vectors",
    "register_string_encoder",
    "search_others",
    "string_encoder",
    "without_query_items",
]

Reading = Literal["auto", "id", "text"]
READINGS: tuple[Reading, ...] = ("auto", "id", "text")

QUERY_SHOWN = 40
"""Most characters of a query an error message shows."""

StringEncoder = Callable[[list[str]], np.ndarray]
StringEncoderFactory = Callable[[EncoderProvenance], StringEncoder | None]
WeightsFingerprint = Callable[[EncoderProvenance], str | None]
"""The SHA-256 a checkpoint has now (its weights; a text model's tokenizer and config too), or None when the
function does not handle that checkpoint."""
_STRING_ENCODERS: list[tuple[StringEncoderFactory, WeightsFingerprint | None]] = []


class OtherEncoderError(ValueError):
    """The checkpoint an index records now computes otherwise than when its items were embedded (other weights; a
    text model's other tokenizer, config, length or pooling)."""


class Searchable(Protocol):
    """What the queries need of an index (a :class:`crl.search.Index` or a Milvus collection)."""

    @property
    def encoder(self) -> EncoderProvenance | None: ...

    def vectors(self, ids: Sequence[int]) -> np.ndarray: ...


def register_string_encoder(
    factory: StringEncoderFactory, fingerprint: WeightsFingerprint | None = None
) -> None:
    """Add ``factory``: given an index's encoder provenance, a ``list[str] -> (n, d)`` function or None;
    ``fingerprint`` (given the same provenance) is the SHA-256 its checkpoint has now, checked
    against the one the index records before the encoder is used."""
    if not callable(factory) or (fingerprint is not None and not callable(fingerprint)):
        raise ValueError("register_string_encoder takes a callable factory(provenance) -> encoder or None")
    _STRING_ENCODERS.append((factory, fingerprint))


def string_encoder(index: Searchable, *, allow_other_encoder: bool = False) -> StringEncoder | None:
    """The string encoder of the index's checkpoint from the latest registered factory that handles it, or
    None (no factory does, or the index records no encoder).

    Raises:
        OtherEncoderError: when the checkpoint no longer has the SHA-256 the index records (a
            warning instead with ``allow_other_encoder``).
    """
    provenance = index.encoder
    if provenance is None:
        return None
    for factory, fingerprint in reversed(_STRING_ENCODERS):
        current = fingerprint(provenance) if fingerprint is not None else None
        if current is not None:
            check_same_encoder(provenance, current, allow_other_encoder=allow_other_encoder)
        encode = factory(provenance)
        if encode is not None:
            return encode
    return None


def check_same_encoder(provenance: EncoderProvenance, current: str, *, allow_other_encoder: bool) -> None:
    """Refuse (or, with ``allow_other_encoder``, warn about) a checkpoint whose SHA-256 ``current`` is
    not the one ``provenance`` records."""
    if current == provenance.fingerprint:
        return
    message = (
        f"the index records the encoder {provenance.checkpoint} with the SHA-256 "
        f"{provenance.fingerprint[:16] or '(none)'}... of its weights (and a text model's tokenizer, config, length "
        f"and pooling), but they now have SHA-256 {current[:16]}...: text queries would be embedded by another model "
        "than the items"
    )
    if not allow_other_encoder:
        raise OtherEncoderError(
            f"{message}; rebuild the index with this model, restore its files, or pass --allow-other-encoder "
            "to embed the queries anyway"
        )
    warnings.warn(f"{message} (--allow-other-encoder: embedding them anyway)", stacklevel=2)


def embed_strings(index: Searchable, strings: list[str], *, allow_other_encoder: bool = False) -> np.ndarray:
    """``strings`` embedded by the string encoder of the index's checkpoint (:func:`string_encoder`)."""
    encode = string_encoder(index, allow_other_encoder=allow_other_encoder)
    if encode is not None:
        return np.asarray(encode(strings), dtype=np.float32)
    provenance = index.encoder
    made_by = "no recorded encoder" if provenance is None else f"the encoder {provenance.checkpoint}"
    raise ValueError(
        f"query {_shown(strings[0])} is read as text, and this index ({made_by}) has no string encoder; "
        "query by item id (an integer), or index text with a text encoder"
    )


def query_items(queries: Sequence[str | int], reading: Reading = "auto") -> list[int | None]:
    """Each query's item id, or None for a query read as a string.

    ``reading="auto"``: an int, or a string of digits, is an id, anything else a string; ``"id"``: every query
    is an id (a non-integer is an error); ``"text"``: every query is a string.

    Raises:
        ValueError: if ``reading`` is unknown, or ``"id"`` meets a query that is not an integer.
    """
    if reading not in READINGS:
        raise ValueError(f"reading = {reading!r}; pass one of {', '.join(READINGS)}")
    if reading == "text":
        return [None] * len(queries)
    items = [_as_item_id(query) for query in queries]
    if reading == "id":
        for query, item in zip(queries, items, strict=True):
            if item is None:
                raise ValueError(
                    f"query {_shown(str(query))} is read as an item id but is not a non-negative integer; "
                    "pass item ids, or read the queries as text"
                )
    return items


def query_vectors(
    index: Searchable,
    queries: Sequence[str | int],
    reading: Reading = "auto",
    *,
    allow_other_encoder: bool = False,
) -> np.ndarray:
    """(q, d) vectors of ``queries``, each an item id (its stored vector) or a string (embedded, refused when the
    encoder changed unless ``allow_other_encoder``: :func:`string_encoder`), as :func:`query_items`
    reads them."""
    if not queries:
        raise ValueError("no query given; pass item ids or strings")
    items = query_items(queries, reading)
    rows: list[np.ndarray | None] = [None] * len(queries)
    ids = [(position, item) for position, item in enumerate(items) if item is not None]
    texts = [(position, str(queries[position])) for position, item in enumerate(items) if item is None]
    if ids:
        found = index.vectors([item for _, item in ids])
        for (position, _), vector in zip(ids, found, strict=True):
            rows[position] = vector
    if texts:
        embedded = embed_strings(index, [text for _, text in texts], allow_other_encoder=allow_other_encoder)
        for (position, _), vector in zip(texts, embedded, strict=True):
            rows[position] = vector
    return np.stack([row for row in rows if row is not None])


def without_query_items(result: SearchResult, items: Sequence[int | None], k: int) -> SearchResult:
    """``result`` (searched with up to k + 1 slots per query) with each query's own item (``items[q]``, None
    for a string query) removed from its row, and every row cut to its best ``k``.

    A row whose item is not among its results loses its last slot instead, so every row keeps its k best
    other items. When some row then holds fewer than k items, ``shortfall`` keeps the search's reason, or says
    that the query item was left out of an index too small for k others.

    Raises:
        ValueError: if ``items`` does not hold one entry per query, or ``k`` < 1.
    """
    n_queries, slots = result.ids.shape
    if len(items) != n_queries:
        raise ValueError(f"items has {len(items)} entries for {n_queries} queries; pass one per query")
    if k < 1:
        raise ValueError(f"k = {k}; pass k >= 1")
    ids = np.full((n_queries, k), -1, dtype=np.int64)
    scores = np.full((n_queries, k), -np.inf, dtype=np.float32)
    for row, item in enumerate(items):
        keep = np.ones(slots, dtype=bool)
        if item is not None:
            keep &= result.ids[row] != item
        kept_ids, kept_scores = result.ids[row][keep][:k], result.scores[row][keep][:k]
        ids[row, : len(kept_ids)], scores[row, : len(kept_scores)] = kept_ids, kept_scores
    found = (ids >= 0).sum(axis=1).astype(np.int64)
    shortfall = None
    if (found < k).any():
        shortfall = result.shortfall or (
            "the query item itself is left out, and the index holds fewer than k other items"
        )
    return replace(result, scores=scores, ids=ids, found=found, shortfall=shortfall)


def _as_item_id(query: str | int) -> int | None:
    if isinstance(query, bool):
        return None
    if isinstance(query, int | np.integer):
        return int(query)
    text = str(query).strip()
    return int(text) if text.isascii() and text.isdigit() else None


def _shown(query: str) -> str:
    return repr(query if len(query) <= QUERY_SHOWN else query[:QUERY_SHOWN] + "...")


def search_others(
    index: SearchBackend,
    vectors: np.ndarray,
    k: int,
    *,
    own_items: Sequence[int | None] | None,
    size: int,
    ef_search: int | None = None,
    nprobe: int | None = None,
    filter: Mapping[str, Any] | None = None,
) -> SearchResult:
    """The k best items of each query; with ``own_items`` (each query's item id, None for a string query) each id
    query's own item is left out and k others are returned: the search asks for k + 1 (when the index holds more
    than k items and some query is an item) and :func:`without_query_items` drops the query's item and cuts each
    row to k. ``size`` is the index's item count, which the caller has read already (a Milvus count is a request).
    The one way ``crl search`` and the HTTP service leave a query's item out of its results."""
    leave_out = own_items is not None and any(item is not None for item in own_items) and 1 <= k < size
    found = index.search(
        vectors, k + 1 if leave_out else k, ef_search=ef_search, nprobe=nprobe, filter=filter
    )
    return found if own_items is None else without_query_items(found, own_items, k)
