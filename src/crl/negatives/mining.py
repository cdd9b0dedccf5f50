"""Hard negatives mined from a similarity index, and a training sampler that uses them (SCRL).

For an anchor a with positive p (id ``i_p``, score s_p = <a, p>), the mined negatives are the items whose rank
in the index's ranking of a lies in a window ``lo..hi`` (1-based, inclusive) and that pass three filters:

- score <= s_p - margin (well below the positive: a near-tie with it is likely a false negative);
- id != i_p (the positive itself);
- label != label(i_p) when labels are given (items of the positive's class are false negatives).

Skipping the first ``lo - 1`` ranks leaves out the near-duplicates at the top of the ranking. Under
``metric="cosine"`` anchors and positives are normalised before s_p is taken, as the index normalises its items.

:class:`Mined` turns this into a ``[loss] negatives = "mined"`` sampler: it keeps a memory bank of the positive
embeddings g(y_i) seen in training, rebuilds an exact index over it every ``refresh_every`` steps, and gives each
anchor m negatives drawn uniformly from its mined candidates (pool indices, embedded afresh by the positive
tower, so gradients flow through them). An anchor with no candidate gets uniform pool draws (the SCRL default).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from crl._gather import all_gather
from crl._validate import Interval, check
from crl._vocab import Regime
from crl.negatives import Draw, EmbeddedBatch, Sampler
from crl.search import as_matrix, normalise
from crl.search.index import Index

__all__ = ["Mined", "MinedNegatives", "check_window", "mine_hard_negatives"]


@dataclass(frozen=True)
class MinedNegatives:
    """Mined candidates per anchor, in rank order (best first); a slot that failed a filter holds id -1.

    Attributes:
        ids: (n, hi - lo + 1) int64 item ids of ranks lo..hi, -1 where filtered out (or beyond the index).
        scores: (n, hi - lo + 1) float32 their scores, -inf where filtered out.
        positive_scores: (n,) float32 s_p = <a, p> of each anchor with its positive.
    """

    ids: np.ndarray
    scores: np.ndarray
    positive_scores: np.ndarray

    @property
    def counts(self) -> np.ndarray:
        """(n,) the number of mined negatives kept for each anchor."""
        return (self.ids >= 0).sum(axis=1)


def check_window(window: Any) -> tuple[int, int]:
    """``window`` as a pair of 1-based ranks (lo, hi) with 1 <= lo <= hi."""
    if (
        not isinstance(window, tuple | list)
        or len(window) != 2
        or not all(isinstance(r, int | np.integer) and not isinstance(r, bool) for r in window)
    ):
        raise ValueError(f"window = {window!r}; pass two ranks (lo, hi), e.g. (10, 100)")
    lo, hi = int(window[0]), int(window[1])
    if not 1 <= lo <= hi:
        raise ValueError(f"window = ({lo}, {hi}); pass 1 <= lo <= hi (1-based ranks, inclusive)")
    return lo, hi


MARGIN = Interval(example=" (0 keeps scores up to the positive's)")
"""The margin below the positive's score: any finite number."""


def mine_hard_negatives(
    index: Index,
    anchors: Any,
    positives: Any,
    positive_ids: Any,
    *,
    window: tuple[int, int] = (10, 100),
    margin: float = 0.0,
    labels: Any = None,
    ef_search: int | None = None,
    nprobe: int | None = None,
) -> MinedNegatives:
    """Hard negatives of each anchor from ``index``: ranks ``window`` with score <= s_p - margin, not the
    positive's id and (with ``labels``) not its label.

    Args:
        index: a :class:`crl.search.Index` of candidate items (g(y) embeddings).
        anchors: (n, d) anchor embeddings f(x).
        positives: (n, d) embeddings of each anchor's positive, giving s_p = <a, p>.
        positive_ids: (n,) the index id of each positive (excluded from its anchor's negatives).
        window: 1-based ranks (lo, hi), inclusive; hi is capped at the index size.
        margin: keep candidates with score <= s_p - margin (may be negative to allow near-ties).
        labels: optional 1-D integer array with ``labels[id]`` the label of item ``id``; candidates sharing
            the positive's label are dropped.
        ef_search, nprobe: per-call search settings of an HNSW / IVF index.
    """
    lo, hi = check_window(window)
    margin = check("margin", margin, MARGIN)
    query = as_matrix(anchors, "anchors", index.dim)
    pos = as_matrix(positives, "positives", index.dim)
    n = query.shape[0]
    if pos.shape[0] != n:
        raise ValueError(f"positives has {pos.shape[0]} rows for {n} anchors; pass one positive per anchor")
    pos_ids = _as_id_vector(positive_ids, n)
    if index.metric == "cosine" and n:
        query, pos = normalise(query, "anchors"), normalise(pos, "positives")
    positive_scores = np.einsum("ij,ij->i", query, pos).astype(np.float32)
    if len(index) == 0:
        raise ValueError("the index is empty; build it over candidate items before mining")
    if lo > len(index):
        raise ValueError(f"window starts at rank {lo}, beyond the {len(index)} items of the index")
    top = min(hi, len(index))
    found = index.search(query, top, ef_search=ef_search, nprobe=nprobe)
    ids, scores = found.ids[:, lo - 1 :].copy(), found.scores[:, lo - 1 :].copy()
    drop = (ids < 0) | (ids == pos_ids[:, None]) | (scores > positive_scores[:, None] - margin)
    if labels is not None:
        table = _as_labels(labels, index)
        drop |= (ids >= 0) & (table[np.maximum(ids, 0)] == table[pos_ids][:, None])
    ids[drop] = -1
    scores[drop] = -np.inf
    return MinedNegatives(ids=ids, scores=scores, positive_scores=positive_scores)


def _as_id_vector(ids: Any, n: int) -> np.ndarray:
    if isinstance(ids, Tensor):
        ids = ids.detach().cpu().numpy()
    arr = np.asarray(ids)
    if arr.shape != (n,) or (arr.size and arr.dtype.kind not in "iu"):
        raise ValueError(f"positive_ids must be {n} integers (one per anchor), got {arr.dtype} {arr.shape}")
    return arr.astype(np.int64)


def _as_labels(labels: Any, index: Index) -> np.ndarray:
    if isinstance(labels, Tensor):
        labels = labels.detach().cpu().numpy()
    table = np.asarray(labels)
    if table.ndim != 1 or (table.size and table.dtype.kind not in "iu"):
        raise ValueError(f"labels must be a 1-D integer array (labels[id]), got {table.dtype} {table.shape}")
    largest = int(index.ids.max())
    if table.shape[0] <= largest:
        raise ValueError(
            f"labels has {table.shape[0]} entries but the index holds id {largest}; pass labels[id]"
        )
    return table


class Mined(Sampler):
    """SCRL negatives mined from an exact index over a memory bank of positive embeddings.

    Args:
        pool_size: n, the number of training pairs (the pool the negatives index).
        dim: embedding dimension d.
        n_negatives: m per anchor.
        window: 1-based ranks (lo, hi) of the candidates.
        margin: candidates keep score <= s_p - margin.
        refresh_every: rebuild the index from the memory bank every this many steps.
        labels: optional (pool_size,) integer labels of the pool items; same-label candidates are dropped.

    The sampler needs each batch's pool indices (``EmbeddedBatch.indices``); until the first refresh, or for
    an anchor without candidates, it draws uniform pool indices.
    """

    regime: Regime = "independent"

    def __init__(
        self,
        pool_size: int,
        dim: int,
        n_negatives: int,
        *,
        window: tuple[int, int] = (10, 100),
        margin: float = 0.0,
        refresh_every: int = 100,
        labels: Tensor | None = None,
    ) -> None:
        for name, value in (("pool_size", pool_size), ("dim", dim), ("n_negatives", n_negatives)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} = {value!r}; pass a positive integer")
        if isinstance(refresh_every, bool) or not isinstance(refresh_every, int) or refresh_every < 1:
            raise ValueError(f"refresh_every = {refresh_every!r}; pass a positive integer (steps)")
        self.window = check_window(window)
        self.margin = check("margin", margin, MARGIN)
        if labels is not None and tuple(labels.shape) != (pool_size,):
            raise ValueError(f"labels has shape {tuple(labels.shape)}; pass one label per pool item")
        self.pool_size, self.dim, self.n_negatives = pool_size, dim, n_negatives
        self.refresh_every = refresh_every
        self.labels = None if labels is None else labels.detach().cpu().long().numpy()
        self.memory = torch.zeros(pool_size, dim)
        self.filled = torch.zeros(pool_size, dtype=torch.bool)
        self.snapshot = torch.zeros(0, dim)
        self.snapshot_ids = torch.zeros(0, dtype=torch.int64)
        self.steps = 0
        self._index: Index | None = None

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """(n, m) pool indices: m uniform picks among each anchor's mined candidates, else uniform draws."""
        n, m = batch.n_anchors, self.n_negatives
        uniform = torch.randint(self.pool_size, (n, m), generator=rng, device=rng.device)
        index = self._current_index()
        if index is None or batch.indices is None:
            return Draw("independent", "indices", y=uniform)
        mined = mine_hard_negatives(
            index,
            batch.anchors.detach().float().cpu().numpy(),
            batch.positives.detach().float().cpu().numpy(),
            batch.indices.cpu().numpy(),
            window=(self.window[0], max(self.window[0], min(self.window[1], len(index)))),
            margin=self.margin,
            labels=self.labels,
        )
        return Draw("independent", "indices", y=_pick(mined.ids, uniform, rng))

    def update(self, batch: EmbeddedBatch) -> None:
        """Write the batch's positive embeddings into the memory bank (those of every rank, all-gathered, so all
        ranks keep the same bank and index); count the step toward a refresh."""
        if batch.indices is not None:
            positives = all_gather(batch.positives.detach())
            rows = all_gather(batch.indices.to(positives.device)).cpu()
            self.memory[rows] = positives.float().cpu()
            self.filled[rows] = True
        self.steps += 1
        if self.steps % self.refresh_every == 0 and bool(self.filled.any()):
            self.snapshot_ids = torch.nonzero(self.filled).flatten()
            self.snapshot = self.memory[self.snapshot_ids].clone()
            self._index = None

    def _current_index(self) -> Index | None:
        """The exact inner-product index over the last snapshot (built lazily; None before the first)."""
        if self._index is None and self.snapshot_ids.numel() > self.window[0]:
            self._index = Index.build(self.snapshot.numpy(), ids=self.snapshot_ids.numpy(), metric="ip")
        return self._index

    def state_dict(self) -> dict[str, Tensor]:
        """Memory bank, its fill mask, the snapshot the index is built from, and the step count."""
        return {
            "memory": self.memory.clone(),
            "filled": self.filled.clone(),
            "snapshot": self.snapshot.clone(),
            "snapshot_ids": self.snapshot_ids.clone(),
            "steps": torch.tensor(self.steps, dtype=torch.int64),
        }

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        """Restore what :meth:`state_dict` returned (shapes must match pool_size and dim)."""
        expected = {"memory", "filled", "snapshot", "snapshot_ids", "steps"}
        if set(state) != expected:
            raise ValueError(f"mined-negatives state must have keys {sorted(expected)}, got {sorted(state)}")
        if tuple(state["memory"].shape) != (self.pool_size, self.dim):
            raise ValueError(
                f"mined-negatives memory has shape {tuple(state['memory'].shape)}, this sampler has "
                f"(pool_size, dim) = {(self.pool_size, self.dim)}"
            )
        self.memory, self.filled = state["memory"].clone(), state["filled"].clone()
        self.snapshot, self.snapshot_ids = state["snapshot"].clone(), state["snapshot_ids"].clone()
        self.steps = int(state["steps"])
        self._index = None


def _pick(candidates: np.ndarray, fallback: Tensor, rng: torch.Generator) -> Tensor:
    """For each row, m uniform picks (with replacement) among its candidates >= 0; rows without any keep
    ``fallback``."""
    ids = torch.from_numpy(candidates).to(fallback.device)
    valid = ids >= 0
    counts = valid.sum(1)
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)
    packed = ids.gather(1, order)
    draws = torch.rand(fallback.shape, generator=rng, device=rng.device).to(fallback.device)
    slots = (draws * counts.clamp(min=1)[:, None]).long().clamp(max=max(ids.shape[1] - 1, 0))
    picked = packed.gather(1, slots) if ids.shape[1] else fallback
    return torch.where((counts > 0)[:, None], picked, fallback)
