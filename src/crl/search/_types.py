"""The value types of :mod:`crl.search`: kinds, metrics, a search result, an encoder's provenance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np

Kind = Literal["flat", "hnsw", "ivf", "ivfpq"]
"""The kinds of index, one :class:`crl.search.kinds.IndexKind` each in :data:`crl.search.kinds.INDEX_KINDS`."""
Metric = Literal["cosine", "ip"]
KINDS: tuple[Kind, ...] = get_args(Kind)
METRICS: tuple[Metric, ...] = ("cosine", "ip")


@dataclass(frozen=True)
class SearchResult:
    """The k best items per query, best first.

    ``scores`` (q, k) float32: the inner product (cosine: of the L2-normalised vectors) of query and item;
    ``ids`` (q, k) int64: the items' external ids; ``found`` (q,) int64: how many of each query's k slots hold
    an item. A slot the index could not fill holds id -1 and score -inf, after the found items; ``shortfall``
    says why some query found fewer than k (None when every query found k).
    """

    scores: np.ndarray
    ids: np.ndarray
    found: np.ndarray
    shortfall: str | None = None


@dataclass(frozen=True)
class EncoderProvenance:
    """The encoder whose embeddings an index holds: its checkpoint path and that checkpoint's fingerprint."""

    checkpoint: str
    fingerprint: str
