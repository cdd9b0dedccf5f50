"""Fixed negative sets, chosen once by a keyed hash: [A]'s SSCRL pool and SCRL sets S_i, for the exact L_hat.

[A]'s empirical risk is taken over a *fixed* sample: SSCRL has one pool of m negatives shared by every anchor,
SCRL gives anchor i its own set S_i of m. Both are drawn here from a list of C candidates (the n training items,
or a pool disjoint from them) by the keyed hash h(seed, i, j) of :func:`keyed_hash`, a deterministic function of
the seed, the anchor's item index i and the candidate's item index j:

- SSCRL (:class:`FixedPool`): the pool P = the m candidates j of smallest h(seed, POOL, j) (a row index no item
  has), shared by all anchors;
- SCRL (:class:`FixedSets`): S_i = the m eligible candidates j of smallest h(seed, i, j), computed for the rows
  of each batch on the fly (b x C hashes, never an n x m table), so S_i depends on (seed, i) only, not on the
  batch, the step or the other anchors; when fewer than m are eligible, S_i is all of them. Being a function of
  the row alone, a row's mask is kept once computed, within a memory bound (:data:`SET_CACHE_BYTES`), so later
  epochs read it instead of hashing again.

Ties of h are broken by j, so the order is total; both choices are nested in m (the sets at m are the first m of
the same order). Exclusions, in both regimes, by a key per item (``keys``, indexed by item index): a candidate is
eligible for anchor i when its key differs from the anchor's, which leaves out the anchor's own item and every
item with the same key (text sources give pairs linked by an identical query or positive text one key). For SSCRL
the anchor keeps P minus the candidates sharing its key, m_i = |P| - (those).

A draw is the candidates the batch's sets use and a membership mask (:class:`crl.negatives.Draw` with ``mask``):
the loss scores the b anchors against those candidates densely and masks to S_i
(:func:`crl.objectives.masked_contrastive_loss`), so every one of the m negatives of every anchor enters every
step. At m = C, S_i is every eligible candidate, which is SSCRL's pool with its exclusions: the two regimes
coincide. The sets of two anchors overlap in about m/C of their members (:func:`set_overlap` reports it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from crl._validate import check_count
from crl._vocab import Regime
from crl.negatives import Draw, EmbeddedBatch, Sampler

__all__ = [
    "POOL_ROW",
    "FixedPool",
    "FixedSets",
    "SetOverlap",
    "keyed_hash",
    "own_sets",
    "pool_of",
    "set_overlap",
]

POOL_ROW = 0xFFFFFFFF
"""The row of SSCRL's pool in h(seed, row, j): no item index reaches it (indices stay below 2^31)."""

_INDEX_LIMIT = 1 << 31
_NO_MEMBER = torch.iinfo(torch.int64).max
_MIX1, _MIX2 = np.uint32(0x85EBCA6B), np.uint32(0xC2B2AE35)
_GOLDEN = np.uint32(0x9E3779B9)
_CHUNK_ELEMENTS = 1 << 22

SET_CACHE_BYTES = 1 << 29
"""Memory (512 MiB) a :class:`FixedSets` may keep for the masks of rows it has met, one byte per candidate; rows
beyond it are computed again at each visit."""

_BLOCK_ROWS = 1024


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finaliser, in place on a uint32 array (arithmetic mod 2^32, a bijection)."""
    h ^= h >> np.uint32(16)
    h *= _MIX1
    h ^= h >> np.uint32(13)
    h *= _MIX2
    h ^= h >> np.uint32(16)
    return h


def _seed_key(seed: int) -> np.ndarray:
    """A 32-bit key of a seed of any size >= 0 (its low and high words mixed)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 1 << 64:
        raise ValueError(f"seed = {seed!r}; pass an integer in [0, 2^64)")
    words = np.array([seed & 0xFFFFFFFF, seed >> 32], dtype=np.uint32)
    mixed = _fmix32(words ^ _GOLDEN)
    return _fmix32(mixed[:1] ^ (mixed[1:] * np.uint32(3)))


def _indices(name: str, values: Tensor, limit: int) -> np.ndarray:
    if values.dtype != torch.int64 or values.dim() != 1:
        raise ValueError(
            f"{name} must be a 1-d int64 tensor of item indices, got {values.dtype} {tuple(values.shape)}"
        )
    array = values.detach().cpu().numpy()
    if array.size and (array.min() < 0 or array.max() >= limit):
        raise ValueError(f"{name} holds indices outside [0, {limit}); item indices must be below 2^31")
    return array.astype(np.uint32)


def _mix(values: np.ndarray, salt: np.ndarray) -> np.ndarray:
    """F(F(v ^ salt) + salt) of uint32 values (two rounds of the finaliser, keyed by ``salt``)."""
    mixed = _fmix32(values ^ salt)
    mixed += salt
    return _fmix32(mixed)


def keyed_hash(seed: int, rows: Tensor, columns: Tensor) -> Tensor:
    """h(seed, i, j) in [0, 2^32) for every anchor index i of ``rows`` and candidate index j of ``columns``.

    h = F(r_i ^ c_j), with F MurmurHash3's 32-bit finaliser, r_i = F(F(s ^ i) + s) and c_j = F(F(j ^ 5s) + s)
    keyed by the seed's key s (arithmetic mod 2^32): a deterministic function of (seed, i, j) alone, whose
    smallest-m sets behave like uniform draws (pairwise overlaps and per-item frequencies match those of random
    sets: tests/negatives/test_fixed.py). ``rows`` may hold :data:`POOL_ROW`.

    Returns:
        (len(rows), len(columns)) int64.
    """
    return torch.from_numpy(_hash(seed, rows, columns).astype(np.int64))


def _hash(seed: int, rows: Tensor, columns: Tensor) -> np.ndarray:
    """:func:`keyed_hash` as a uint32 array."""
    row_values = _indices("rows", rows, POOL_ROW + 1)
    column_values = _indices("columns", columns, _INDEX_LIMIT)
    s = _seed_key(seed)
    h = _mix(row_values, s)[:, None] ^ _mix(column_values, s * np.uint32(5))[None, :]
    return _fmix32(h)


def _order_keys(seed: int, rows: Tensor, candidates: Tensor) -> Tensor:
    """(h << 31) | j: h(seed, i, j) with ties broken by the candidate index j, a total order (int64)."""
    order = _hash(seed, rows, candidates).astype(np.int64)
    order <<= 31
    order |= candidates.numpy()[None, :]
    return torch.from_numpy(order)


def own_sets(seed: int, rows: Tensor, candidates: Tensor, keys: Tensor, m: int) -> Tensor:
    """SCRL's sets S_i of the anchors at item indices ``rows`` as a (len(rows), C) boolean mask over ``candidates``.

    S_i = the m candidates j with keys[j] != keys[i] of smallest h(seed, i, j) (ties by j); all eligible ones when
    fewer than m are. Computed in chunks of rows (about 2^22 hashes each).

    Args:
        seed: the hash's seed.
        rows: (b,) int64 item indices of the anchors.
        candidates: (C,) int64 item indices of the candidates.
        keys: int64 key of every item (indexed by item index), for the exclusions.
        m: the set size, >= 1.
    """
    check_count("m", m, 1)
    eligible = keys[candidates][None, :] != keys[rows][:, None]
    if m >= candidates.shape[0]:
        return eligible
    chunk = max(1, _CHUNK_ELEMENTS // max(1, candidates.shape[0]))
    parts = []
    for start in range(0, rows.shape[0], chunk):
        stop = start + chunk
        order = _order_keys(seed, rows[start:stop], candidates).masked_fill_(
            ~eligible[start:stop], _NO_MEMBER
        )
        smallest, columns = torch.topk(order, m, dim=1, largest=False, sorted=False)
        member = torch.zeros_like(eligible[start:stop])
        parts.append(member.scatter_(1, columns, smallest != _NO_MEMBER))
    return torch.cat(parts) if parts else eligible


def pool_of(seed: int, candidates: Tensor, m: int) -> Tensor:
    """SSCRL's pool: the m candidates of smallest h(seed, POOL_ROW, j) (ties by j), as sorted item indices (m,).

    Raises:
        ValueError: if m exceeds the C candidates.
    """
    check_count("m", m, 1)
    if m > candidates.shape[0]:
        raise ValueError(
            f"a shared pool of m = {m} needs at least m candidates, there are {candidates.shape[0]}; lower m"
        )
    order = _order_keys(seed, torch.tensor([POOL_ROW], dtype=torch.int64), candidates)[0]
    return candidates[torch.topk(order, m, largest=False).indices].sort().values


def _candidates(candidates: Tensor, keys: Tensor) -> tuple[Tensor, Tensor]:
    """Checked (C,) int64 candidate item indices and int64 keys that cover them."""
    if candidates.dtype != torch.int64 or candidates.dim() != 1 or candidates.numel() == 0:
        raise ValueError("candidates must be a non-empty 1-d int64 tensor of item indices")
    if keys.dtype != torch.int64 or keys.dim() != 1:
        raise ValueError("keys must be a 1-d int64 tensor, one key per item index")
    if int(candidates.max()) >= keys.shape[0] or int(candidates.min()) < 0:
        raise ValueError(f"candidates hold item indices outside the {keys.shape[0]} keys")
    return candidates, keys


class _Fixed(Sampler):
    """What both fixed kinds share: m, the candidates, the items' keys, the seed; draws need the batch's indices."""

    def __init__(self, n_negatives: int, candidates: Tensor, keys: Tensor, seed: int) -> None:
        check_count("n_negatives", n_negatives, 1)
        if n_negatives > candidates.shape[0]:
            raise ValueError(
                f"[loss] n_negatives = m = {n_negatives} exceeds the {candidates.shape[0]} candidates the fixed "
                f"sets are drawn from; use m <= {candidates.shape[0]}"
            )
        _seed_key(seed)
        self.n_negatives = n_negatives
        self.candidates, self.keys = _candidates(candidates, keys)
        self.seed = seed

    def _rows(self, batch: EmbeddedBatch) -> Tensor:
        if batch.indices is None:
            raise ValueError(
                f"{type(self).__name__} needs the item indices of the batch's anchors (EmbeddedBatch.indices)"
            )
        rows = batch.indices.to(torch.int64).cpu()
        if int(rows.max()) >= self.keys.shape[0] or int(rows.min()) < 0:
            raise ValueError(f"the batch holds item indices outside the {self.keys.shape[0]} keys")
        return rows

    def _draw(self, columns: Tensor, member: Tensor, device: torch.device) -> Draw:
        return Draw(self.regime, "indices", y=columns, mask=member.to(device))

    def sets(self, rows: Tensor) -> Tensor:
        """The (b, C) membership mask of the anchors at item indices ``rows`` over all candidates."""
        raise NotImplementedError


class FixedPool(_Fixed):
    """SSCRL: one fixed pool of m candidates (:func:`pool_of`) shared by every anchor, minus the candidates that
    share the anchor's key.

    Args:
        n_negatives: m, the pool size (at most C).
        candidates: (C,) int64 item indices the pool is drawn from.
        keys: int64 key of every item index, for the exclusions.
        seed: the hash's seed.

    Examples:
        >>> sampler = FixedPool(3, torch.arange(10), torch.arange(10), seed=0)
        >>> batch = EmbeddedBatch(torch.zeros(2, 4), torch.zeros(2, 4), indices=torch.tensor([0, 1]))
        >>> draw = sampler.draw(batch, torch.Generator())
        >>> draw.y.shape, draw.mask.shape
        (torch.Size([3]), torch.Size([2, 3]))
    """

    regime: Regime = "shared"

    def __init__(self, n_negatives: int, candidates: Tensor, keys: Tensor, seed: int) -> None:
        super().__init__(n_negatives, candidates, keys, seed)
        self.pool = pool_of(seed, self.candidates, n_negatives)

    def sets(self, rows: Tensor) -> Tensor:
        """(b, C) mask: the pool minus the candidates sharing each anchor's key."""
        in_pool = torch.isin(self.candidates, self.pool)
        return in_pool[None, :] & (self.keys[self.candidates][None, :] != self.keys[rows][:, None])

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """The pool (m,) and the (b, m) mask of its members each anchor keeps (``rng`` is not used)."""
        rows = self._rows(batch)
        member = self.keys[self.pool][None, :] != self.keys[rows][:, None]
        return self._draw(self.pool, member, batch.anchors.device)


class FixedSets(_Fixed):
    """SCRL: anchor i's own fixed set S_i of m candidates (:func:`own_sets`), computed for a batch's rows the first
    time they come and kept (while ``cache_bytes`` allow) for the later epochs.

    Args:
        n_negatives: m, the size of each S_i (at most C; all eligible candidates when fewer are).
        candidates: (C,) int64 item indices the sets are drawn from.
        keys: int64 key of every item index, for the exclusions.
        seed: the hash's seed.
        cache_bytes: memory for the kept masks, C bytes a row (0: compute every batch's sets afresh).

    Examples:
        >>> sampler = FixedSets(3, torch.arange(10), torch.arange(10), seed=0)
        >>> batch = EmbeddedBatch(torch.zeros(2, 4), torch.zeros(2, 4), indices=torch.tensor([0, 1]))
        >>> draw = sampler.draw(batch, torch.Generator())
        >>> draw.mask.sum(dim=1).tolist()
        [3, 3]
    """

    regime: Regime = "independent"

    def __init__(
        self,
        n_negatives: int,
        candidates: Tensor,
        keys: Tensor,
        seed: int,
        cache_bytes: int = SET_CACHE_BYTES,
    ) -> None:
        super().__init__(n_negatives, candidates, keys, seed)
        check_count("cache_bytes", cache_bytes, 0)
        self._cache_rows = cache_bytes // self.candidates.shape[0]
        self._slots: dict[int, int] = {}
        self._blocks: list[Tensor] = []

    @property
    def kept_rows(self) -> int:
        """How many rows' masks the cache holds."""
        return len(self._slots)

    def sets(self, rows: Tensor) -> Tensor:
        """(b, C) mask of S_i over all candidates, for the anchors at item indices ``rows``: the masks of rows met
        before are read from the cache, the others computed by :func:`own_sets` (and kept while the cache has
        room)."""
        wanted = rows.tolist()
        new = list(dict.fromkeys(row for row in wanted if row not in self._slots))
        fresh: dict[int, Tensor] = {}
        if new:
            computed = own_sets(
                self.seed, torch.tensor(new, dtype=torch.int64), self.candidates, self.keys, self.n_negatives
            )
            fresh = dict(zip(new, computed.unbind(0), strict=True))
            for row in new[: max(0, self._cache_rows - len(self._slots))]:
                self._keep(row, fresh[row])
        return torch.stack([self._kept(row) if row in self._slots else fresh[row] for row in wanted])

    def _keep(self, row: int, mask: Tensor) -> None:
        """Copy ``mask`` into the next free slot, in blocks of :data:`_BLOCK_ROWS` rows allocated as needed."""
        slot = len(self._slots)
        if slot % _BLOCK_ROWS == 0:
            rows = min(_BLOCK_ROWS, self._cache_rows - slot)
            self._blocks.append(torch.empty((rows, self.candidates.shape[0]), dtype=torch.bool))
        self._blocks[slot // _BLOCK_ROWS][slot % _BLOCK_ROWS] = mask
        self._slots[row] = slot

    def _kept(self, row: int) -> Tensor:
        slot = self._slots[row]
        return self._blocks[slot // _BLOCK_ROWS][slot % _BLOCK_ROWS]

    def draw(self, batch: EmbeddedBatch, rng: torch.Generator) -> Draw:
        """The candidates in some S_i of the batch (M,) and the (b, M) mask of each anchor's set (``rng`` unused)."""
        rows = self._rows(batch)
        member = self.sets(rows)
        used = member.any(dim=0).nonzero().squeeze(1)
        return self._draw(self.candidates[used], member[:, used], batch.anchors.device)


@dataclass(frozen=True)
class SetOverlap:
    """Pairwise overlap |S_i & S_k| / m_ik of SCRL's sets over pairs of anchors, m_ik = sqrt(|S_i| |S_k|).

    Attributes:
        mean, low, high: the mean, least and largest overlap over the pairs.
        expected: the overlap of two independent uniform m-subsets of the eligible candidates, m / C_eligible
            (averaged over the pairs; about m / C).
        rows: anchors compared (rows * (rows - 1) / 2 pairs).
        m: the set size asked for.
    """

    mean: float
    low: float
    high: float
    expected: float
    rows: int
    m: int


def set_overlap(sampler: FixedSets | FixedPool, rows: Tensor) -> SetOverlap:
    """The pairwise overlap of the sets of the anchors at item indices ``rows`` (at least 2).

    For SCRL it is about m / C (independent-looking sets); at m = C, and for SSCRL's pool at any m, it is about 1.
    """
    if rows.dim() != 1 or rows.shape[0] < 2:
        raise ValueError("rows must list at least two anchor item indices to compare their sets")
    member = sampler.sets(rows.to(torch.int64)).double()
    sizes = member.sum(dim=1)
    both = member @ member.T
    upper = torch.triu_indices(rows.shape[0], rows.shape[0], offset=1)
    scale = (sizes[:, None] * sizes[None, :]).sqrt()
    overlap = (both / scale)[upper[0], upper[1]]
    eligible = (sampler.keys[sampler.candidates][None, :] != sampler.keys[rows][:, None]).double().sum(dim=1)
    expected = (scale / (eligible[:, None] * eligible[None, :]).sqrt())[upper[0], upper[1]]
    return SetOverlap(
        float(overlap.mean()),
        float(overlap.min()),
        float(overlap.max()),
        float(expected.mean()),
        int(rows.shape[0]),
        sampler.n_negatives,
    )
