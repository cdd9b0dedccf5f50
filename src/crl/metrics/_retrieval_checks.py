"""Argument checks of ``crl.metrics.retrieval``: every input validated at the boundary, with the fix named."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

CHUNK_ELEMENTS = 1 << 21
"""Default chunk_size * gallery_size: about 200 MiB of temporaries in the many-positives path."""


@dataclass(frozen=True)
class RetrievalInputs:
    """Checked, detached inputs on the embeddings' device; ks sorted and unique."""

    queries: Tensor
    gallery: Tensor
    positive_index: Tensor | None
    query_labels: Tensor | None
    gallery_labels: Tensor | None
    query_ids: Tensor | None
    ks: tuple[int, ...]
    chunk_size: int


def validate_retrieval_inputs(
    queries: Tensor,
    gallery: Tensor,
    positive_index: Tensor | None,
    query_labels: Tensor | None,
    gallery_labels: Tensor | None,
    query_ids: Tensor | None,
    exclude_self: bool,
    ks: Sequence[int],
    chunk_size: int | None,
) -> RetrievalInputs:
    """Check every argument at the boundary; return detached tensors on the embeddings' device."""
    _check_embeddings(queries, gallery)
    n_queries, gallery_size = queries.shape[0], gallery.shape[0]
    device = queries.device
    ks_sorted = _check_ks(ks, gallery_size)
    if chunk_size is None:
        chunk_size = max(1, CHUNK_ELEMENTS // gallery_size)
    elif isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size: got {chunk_size!r}; pass a positive int or None for the default.")
    if exclude_self:
        if query_ids is not None:
            raise ValueError(
                "exclude_self/query_ids: pass one of them, not both (query_ids already excludes)."
            )
        if n_queries != gallery_size:
            raise ValueError(
                f"exclude_self: queries ({n_queries}) and gallery ({gallery_size}) differ in size, so they "
                "are not the same set; pass query_ids (the gallery index of each query) instead."
            )
        query_ids = torch.arange(n_queries, device=device)
    if query_ids is not None:
        query_ids = _check_index("query_ids", query_ids, n_queries, gallery_size, allow_none=True).to(device)
    by_index = positive_index is not None
    by_labels = query_labels is not None or gallery_labels is not None
    if by_index == by_labels:
        raise ValueError(
            "positive_index/query_labels/gallery_labels: give either positive_index (one positive per query) "
            "or both query_labels and gallery_labels (positives share a label), not both and not neither."
        )
    if positive_index is not None:
        positive_index = _check_index("positive_index", positive_index, n_queries, gallery_size).to(device)
        _check_single_positive_sets(positive_index, query_ids, gallery_size)
    else:
        if query_labels is None or gallery_labels is None:
            raise ValueError("query_labels/gallery_labels: labels need both; pass the missing one.")
        query_labels = _check_labels("query_labels", query_labels, n_queries).to(device)
        gallery_labels = _check_labels("gallery_labels", gallery_labels, gallery_size).to(device)
        _check_label_sets(query_labels, gallery_labels, query_ids)
    return RetrievalInputs(
        queries.detach(),
        gallery.detach(),
        positive_index,
        query_labels,
        gallery_labels,
        query_ids,
        ks_sorted,
        chunk_size,
    )


def _check_embeddings(queries: Tensor, gallery: Tensor) -> None:
    for name, x in (("queries", queries), ("gallery", gallery)):
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}.")
        if x.dim() != 2 or x.shape[0] < 1 or x.shape[1] < 1:
            raise ValueError(
                f"{name}: expected shape (n, d) with n >= 1 and d >= 1, got {tuple(x.shape)}; d = 0 embeddings "
                "carry no information (every score is 0)."
            )
        if not x.is_floating_point():
            raise TypeError(f"{name}: expected a float tensor, got {x.dtype}; convert with .float().")
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: contains NaN or inf; fix the encoder output before evaluating.")
    if queries.shape[1] != gallery.shape[1]:
        raise ValueError(
            f"queries/gallery: embedding dims differ ({queries.shape[1]} vs {gallery.shape[1]}); "
            "both must come from encoders with the same output dimension."
        )
    if queries.dtype != gallery.dtype or queries.device != gallery.device:
        raise TypeError(
            f"queries/gallery: dtype/device differ ({queries.dtype}, {queries.device} vs {gallery.dtype}, "
            f"{gallery.device}); move both with .to(...)."
        )
    bound = float(queries.double().norm(dim=1).max()) * float(gallery.double().norm(dim=1).max())
    if bound >= 0.5 * torch.finfo(queries.dtype).max:
        raise ValueError(
            f"queries/gallery: scores up to |q| |g| = {bound:.3g} may overflow {queries.dtype}; "
            "normalise the embeddings (e.g. torch.nn.functional.normalize) before evaluating."
        )


def _check_ks(ks: Sequence[int], gallery_size: int) -> tuple[int, ...]:
    if isinstance(ks, int) or len(ks) == 0:
        raise ValueError(f"ks: got {ks!r}; pass a non-empty sequence of cut-offs, e.g. (1, 5, 10).")
    for k in ks:
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= gallery_size:
            raise ValueError(f"ks: cut-off {k!r} is not an int in 1..gallery_size={gallery_size}; drop it.")
    return tuple(sorted(set(ks)))


def _check_index(
    name: str, index: Tensor, length: int, gallery_size: int, allow_none: bool = False
) -> Tensor:
    if not isinstance(index, Tensor) or index.dim() != 1 or index.shape[0] != length:
        shape = tuple(index.shape) if isinstance(index, Tensor) else type(index).__name__
        raise ValueError(f"{name}: expected a 1-D tensor of length {length} (one per query), got {shape}.")
    if index.is_floating_point() or index.is_complex() or index.dtype == torch.bool:
        raise TypeError(f"{name}: expected an integer tensor, got {index.dtype}; convert with .long().")
    low = -1 if allow_none else 0
    if length and (int(index.min()) < low or int(index.max()) >= gallery_size):
        raise ValueError(
            f"{name}: values must lie in {low}..{gallery_size - 1} (gallery indices), "
            f"got {int(index.min())}..{int(index.max())}."
        )
    return index.long()


def _check_labels(name: str, labels: Tensor, length: int) -> Tensor:
    if not isinstance(labels, Tensor) or labels.dim() != 1 or labels.shape[0] != length:
        shape = tuple(labels.shape) if isinstance(labels, Tensor) else type(labels).__name__
        raise ValueError(f"{name}: expected a 1-D tensor of length {length}, got {shape}.")
    if labels.is_floating_point() or labels.is_complex():
        raise TypeError(f"{name}: expected integer labels, got {labels.dtype}; convert with .long().")
    return labels.long()


def _check_single_positive_sets(positive_index: Tensor, query_ids: Tensor | None, gallery_size: int) -> None:
    n_excluded = torch.zeros_like(positive_index)
    if query_ids is not None:
        clash = torch.nonzero(query_ids == positive_index).flatten()
        if clash.numel():
            raise ValueError(
                f"positive_index/query_ids: query {int(clash[0])} (and {clash.numel() - 1} more) has its "
                "positive excluded as its own item; a query's positive must be a different gallery item."
            )
        n_excluded = (query_ids >= 0).long()
    if bool((gallery_size - 1 - n_excluded < 1).any()):
        raise ValueError("gallery: a query has no negative left (gallery too small); the AUC is undefined.")


def _check_label_sets(query_labels: Tensor, gallery_labels: Tensor, query_ids: Tensor | None) -> None:
    """Every query needs at least one positive and one negative: P >= 1 and N >= 1."""
    values, counts = torch.unique(gallery_labels, return_counts=True)
    slot = torch.searchsorted(values, query_labels).clamp(max=values.numel() - 1)
    n_positives = torch.where(values[slot] == query_labels, counts[slot], 0)
    n_negatives = gallery_labels.shape[0] - n_positives
    if query_ids is not None:
        own = query_ids >= 0
        same = own & (gallery_labels[query_ids.clamp(min=0)] == query_labels)
        n_positives = n_positives - same.long()
        n_negatives = n_negatives - (own & ~same).long()
    for name, count, fix in (
        ("positive", n_positives, "drop those queries or give the gallery an item with their label"),
        ("negative", n_negatives, "the AUC needs a gallery item with another label"),
    ):
        empty = torch.nonzero(count == 0).flatten()
        if empty.numel():
            raise ValueError(
                f"query_labels/gallery_labels: {empty.numel()} queries (first: {int(empty[0])}) have no "
                f"{name} in the gallery; {fix}."
            )
