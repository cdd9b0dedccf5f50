"""An index built from a trained checkpoint and a data set, recording the checkpoint it was embedded with.

:func:`build_from_checkpoint` embeds a data set with a checkpoint's tower (:func:`crl.serving.evaluate.embed_array`:
the backbone features h or the embedding z, by default the run's choice) and indexes it, recording the
checkpoint's path, SHA-256 fingerprint and the vectors in the index (and so in its saved manifest).
:func:`choose_kind` is the rule ``crl index build`` uses when no kind is given.

Queries of such an index, by item id or by string, and the registry of string encoders live in
:mod:`crl.serving.queries`, which loads no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from crl.search import EncoderProvenance, Index, Kind, Metric, sha256
from crl.serving.evaluate import embed_array
from crl.train.checkpoint import resolve_checkpoint

__all__ = ["EXACT_UP_TO", "build_from_checkpoint", "checkpoint_provenance", "choose_kind"]

EXACT_UP_TO = 50_000
"""Up to this many items ``crl index build`` chooses an exact flat index, HNSW beyond (docs/search.md)."""


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
    vectors: str | None = None,
    **params: int,
) -> Index:
    """An index of ``inputs`` (N, *input_shape) embedded by the checkpoint's ``tower`` as ``vectors`` ('h', 'z',
    or None for the run's choice); ``kind`` None chooses by N (:func:`choose_kind`). The index records the
    checkpoint's provenance and the vectors (``index.encoder.vectors``)."""
    provenance = checkpoint_provenance(checkpoint)
    tensor = inputs if isinstance(inputs, torch.Tensor) else torch.from_numpy(np.asarray(inputs))
    if tensor.ndim < 2 or tensor.shape[0] == 0:
        raise ValueError(f"inputs has shape {tuple(tensor.shape)}; pass (N, ...) inputs with N >= 1")
    embedded = embed_array(
        provenance.checkpoint,
        tensor,
        tower=tower,  # type: ignore[arg-type]
        device=device,
        batch_size=batch_size,
        vectors=vectors,
    )
    encoder = replace(provenance, vectors=embedded.used.vectors)
    chosen = kind if kind is not None else choose_kind(int(embedded.vectors.shape[0]))
    return Index.build(
        embedded.vectors.numpy(), ids, chosen, metric, metadata=metadata, encoder=encoder, **params
    )
