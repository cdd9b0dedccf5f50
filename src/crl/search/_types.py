"""The value types of :mod:`crl.search`: kinds, metrics, a search result, an encoder's provenance, the calls of
every backend and the error of one that does not answer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

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
    """The encoder whose embeddings an index holds: its checkpoint path, that checkpoint's fingerprint, and which
    of its vectors the index holds (``"h"``, the backbone features, or ``"z"``, the embedding; ``""`` when not
    recorded: a text model, or an index saved before vectors were recorded)."""

    checkpoint: str
    fingerprint: str
    vectors: str = ""

    def as_dict(self) -> dict[str, str]:
        """The JSON object of a saved manifest or a Milvus description (``vectors`` only when recorded)."""
        recorded = {"checkpoint": self.checkpoint, "fingerprint": self.fingerprint}
        return recorded | ({"vectors": self.vectors} if self.vectors else {})


class BackendUnavailableError(ConnectionError):
    """A search backend's server did not answer (down, restarting, its collection not loaded yet).

    ``backend`` names it without a path, e.g. ``"milvus backend at 127.0.0.1:19530"``; the message adds the
    server's reason. The backend's next call tries again (a fresh connection), so a caller may retry.
    """

    def __init__(self, backend: str, reason: str) -> None:
        super().__init__(f"{backend} unavailable ({reason}); retry once it answers")
        self.backend = backend


class SearchBackend(Protocol):
    """The calls every search backend answers alike: crl's faiss :class:`~crl.search.Index` and a Milvus
    collection (:class:`crl.search.milvus.MilvusIndex`).

    A backend whose server cannot be reached raises :class:`BackendUnavailableError` from any call.
    """

    @property
    def kind(self) -> str:
        """The index kind (a name of :data:`crl.search.kinds.INDEX_KINDS`)."""
        ...

    @property
    def metric(self) -> Metric:
        """The score: ``"cosine"`` or ``"ip"``."""
        ...

    @property
    def dim(self) -> int:
        """The vectors' dimension."""
        ...

    @property
    def params(self) -> dict[str, int]:
        """The kind's build parameters."""
        ...

    @property
    def encoder(self) -> EncoderProvenance | None:
        """The checkpoint whose embeddings the backend holds, when recorded."""
        ...

    @property
    def ids(self) -> np.ndarray:
        """The ids of the items held."""
        ...

    def __len__(self) -> int:
        """The number of items held."""
        ...

    def vectors(self, ids: Any) -> np.ndarray:
        """The stored vectors of ``ids``."""
        ...

    def metadata(self, ids: Any) -> list[dict[str, Any] | None]:
        """The metadata of ``ids``."""
        ...

    def search(
        self,
        queries: Any,
        k: int,
        *,
        filter: Mapping[str, Any] | None = None,
        ef_search: int | None = None,
        nprobe: int | None = None,
    ) -> SearchResult:
        """The k best items of each query that pass ``filter``, best first, ties by ascending id."""
        ...


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
