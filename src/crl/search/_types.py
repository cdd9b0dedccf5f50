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


TIE = 1e-5
"""Scores closer than this count as tied; every backend orders tied hits by ascending id."""


def tie_ordered(scores: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row of ``scores`` (q, k) and ``ids`` best first, a run of scores each within :data:`TIE` of the one
    before ordered by ascending id; empty slots (id -1, score -inf) stay last."""
    order = np.lexsort((ids, -scores), axis=-1)
    scores, ids = np.take_along_axis(scores, order, -1), np.take_along_axis(ids, order, -1)
    with np.errstate(invalid="ignore"):
        steps = np.diff(scores, axis=-1) < -TIE
    runs = np.concatenate(
        [np.zeros((scores.shape[0], 1), dtype=np.int64), np.cumsum(steps, axis=-1)], axis=-1
    )
    regrouped = np.lexsort((np.where(ids < 0, np.iinfo(np.int64).max, ids), runs), axis=-1)
    return np.take_along_axis(scores, regrouped, -1), np.take_along_axis(ids, regrouped, -1)
