"""Similarity search over faiss: build, query, save and load an index of embeddings.

``from crl.search import Index``; ``Index.build(vectors, ids=None, kind="flat"|"hnsw"|"ivf"|"ivfpq",
metric="cosine"|"ip", **params)``; ``index.add``, ``index.search(queries, k) -> SearchResult(scores, ids)``,
``index.remove``, ``index.save(dir)``, ``Index.load(dir)``. :func:`exact_search` is the chunked exact torch
search the approximate kinds are measured against. :func:`as_matrix` and :func:`normalise` are the checks vectors
pass on the way in (float32 (n, d), finite; unit rows computed in float64); :func:`sha256` is the digest the
index files carry. :class:`SearchBackend` is what every backend (this Index, a Milvus collection) answers, and
:class:`BackendUnavailableError` the error of one whose server does not. docs/search.md describes kinds, defaults and
file layout.
"""

from crl.search._checks import as_matrix, normalise
from crl.search._files import sha256
from crl.search._types import (
    KINDS,
    METRICS,
    TIE,
    BackendUnavailableError,
    EncoderProvenance,
    Kind,
    Metric,
    SearchBackend,
    SearchResult,
)
from crl.search.exact import exact_search
from crl.search.index import Index

__all__ = [
    "KINDS",
    "METRICS",
    "TIE",
    "BackendUnavailableError",
    "EncoderProvenance",
    "Index",
    "Kind",
    "Metric",
    "SearchBackend",
    "SearchResult",
    "as_matrix",
    "exact_search",
    "normalise",
    "sha256",
]
