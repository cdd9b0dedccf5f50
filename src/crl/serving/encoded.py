"""An index built from a trained checkpoint and a data set, and queries embedded with the same encoder.

:func:`build_from_checkpoint` embeds a data set with a checkpoint's tower (:func:`crl.serving.evaluate.embed_array`)
and indexes it, recording the checkpoint's path and SHA-256 fingerprint in the index (and so in its saved
manifest). :func:`choose_kind` is the rule ``crl index build`` uses when no kind is given.

Queries (:func:`query_vectors`) are item ids of the index (their stored vectors) or strings. Strings need a
string encoder for the index's checkpoint: :func:`register_string_encoder` adds a factory that, given the
index's :class:`~crl.search.EncoderProvenance`, returns a function ``list[str] -> (n, d) array`` or ``None``
when it does not handle that checkpoint. crl registers none itself; a text encoder registers one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crl.search import EncoderProvenance, Index, Kind, Metric, sha256
from crl.serving.evaluate import embed_array
from crl.train.checkpoint import resolve_checkpoint

__all__ = [
    "EXACT_UP_TO",
    "StringEncoder",
    "build_from_checkpoint",
    "checkpoint_provenance",
    "choose_kind",
    "embed_strings",
    "query_vectors",
    "register_string_encoder",
    "string_encoder",
]

EXACT_UP_TO = 50_000
"""Up to this many items ``crl index build`` chooses an exact flat index, HNSW beyond (docs/search.md)."""

QUERY_SHOWN = 40
"""Most characters of a query an error message shows."""

StringEncoder = Callable[[list[str]], np.ndarray]
StringEncoderFactory = Callable[[EncoderProvenance], StringEncoder | None]
_STRING_ENCODERS: list[StringEncoderFactory] = []


def choose_kind(n: int) -> Kind:
    """The kind ``crl index build`` uses for N = ``n`` items: ``flat`` up to :data:`EXACT_UP_TO`, else ``hnsw``.

    The rule follows benchmarks/search.py (docs/search.md): below about 5e4 items an exact batched search
    answers a query in well under a millisecond, and HNSW with its defaults reaches recall@10 >= 0.95 at many
    times the exact QPS at 1e5 and 1e6 items.
    """
    return "flat" if n <= EXACT_UP_TO else "hnsw"


def checkpoint_provenance(checkpoint: str | Path) -> EncoderProvenance:
    """The resolved checkpoint file (a run folder gives its newest) and its SHA-256."""
    path = resolve_checkpoint(checkpoint)
    return EncoderProvenance(checkpoint=str(path.resolve()), fingerprint=sha256(path))


def build_from_checkpoint(
    checkpoint: str | Path,
    inputs: Any,
    *,
    kind: Kind | None = None,
    metric: Metric = "cosine",
    ids: Any = None,
    metadata: Sequence[dict[str, Any] | None] | None = None,
    tower: str = "anchor",
    device: str = "auto",
    batch_size: int | None = None,
    **params: int,
) -> Index:
    """An index of ``inputs`` (N, *input_shape) embedded by the checkpoint's ``tower``; ``kind`` None chooses
    by N (:func:`choose_kind`). The index records the checkpoint's provenance."""
    provenance = checkpoint_provenance(checkpoint)
    tensor = inputs if isinstance(inputs, torch.Tensor) else torch.from_numpy(np.asarray(inputs))
    if tensor.ndim < 2 or tensor.shape[0] == 0:
        raise ValueError(f"inputs has shape {tuple(tensor.shape)}; pass (N, ...) inputs with N >= 1")
    vectors = embed_array(
        provenance.checkpoint,
        tensor,
        tower=tower,  # type: ignore[arg-type]
        device=device,
        batch_size=batch_size,
    )
    chosen = kind if kind is not None else choose_kind(int(vectors.shape[0]))
    return Index.build(vectors.numpy(), ids, chosen, metric, metadata=metadata, encoder=provenance, **params)


def register_string_encoder(factory: StringEncoderFactory) -> None:
    """Add ``factory``: given an index's encoder provenance, a ``list[str] -> (n, d)`` function or None."""
    if not callable(factory):
        raise ValueError("register_string_encoder takes a callable factory(provenance) -> encoder or None")
    _STRING_ENCODERS.append(factory)


def string_encoder(index: Index) -> StringEncoder | None:
    """The string encoder of the index's checkpoint from the latest registered factory that handles it, or
    None (no factory does, or the index records no encoder)."""
    provenance = index.encoder
    if provenance is None:
        return None
    for factory in reversed(_STRING_ENCODERS):
        encode = factory(provenance)
        if encode is not None:
            return encode
    return None


def embed_strings(index: Index, strings: list[str]) -> np.ndarray:
    """``strings`` embedded by the string encoder of the index's checkpoint (:func:`string_encoder`)."""
    encode = string_encoder(index)
    if encode is not None:
        return np.asarray(encode(strings), dtype=np.float32)
    provenance = index.encoder
    made_by = "no recorded encoder" if provenance is None else f"the encoder {provenance.checkpoint}"
    query = strings[0] if len(strings[0]) <= QUERY_SHOWN else strings[0][:QUERY_SHOWN] + "..."
    raise ValueError(
        f"query {query!r} is not an item id, and this index ({made_by}) has no string encoder; "
        "query by item id (an integer), or index text with a text encoder"
    )


def query_vectors(index: Index, queries: Sequence[str | int]) -> np.ndarray:
    """(q, d) vectors of ``queries``: an int (or a string of digits) is an item id, anything else a string."""
    if not queries:
        raise ValueError("no query given; pass item ids or strings")
    rows: list[np.ndarray | None] = [None] * len(queries)
    ids: list[tuple[int, int]] = []
    texts: list[tuple[int, str | int]] = []
    for position, query in enumerate(queries):
        item = _as_item_id(query)
        if item is not None:
            ids.append((position, item))
        else:
            texts.append((position, query))
    if ids:
        found = index.vectors([item for _, item in ids])
        for (position, _), vector in zip(ids, found, strict=True):
            rows[position] = vector
    if texts:
        embedded = embed_strings(index, [str(text) for _, text in texts])
        for (position, _), vector in zip(texts, embedded, strict=True):
            rows[position] = vector
    return np.stack([row for row in rows if row is not None])


def _as_item_id(query: str | int) -> int | None:
    if isinstance(query, bool):
        return None
    if isinstance(query, int | np.integer):
        return int(query)
    text = str(query).strip()
    return int(text) if text.isdigit() else None
