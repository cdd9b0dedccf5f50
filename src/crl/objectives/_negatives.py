"""The ``negatives`` argument of the embedding losses, resolved once into a :class:`NegativeSet`.

``negatives`` means one of four things, told apart by its type, its shape and the ``regime``:

- ``None``: in batch (shared regime): anchor i's negatives are the other positives y_j, j != i, so m = n - 1.
- an (M, d) tensor: shared negatives (SSCRL), one set for all n anchors; m = M, or M - 1 with ``positive_offset``
  (rows offset..offset+n-1 then hold this batch's own positives, and row offset + i is left out for anchor i).
- a pair ``(negatives_y (M, d), negatives_x (M', d))``: shared negatives for both directions of the symmetric loss.
- an (n, m, d) tensor with ``regime="independent"``: m negatives of its own per anchor (SCRL).

:func:`resolve_negatives` checks the argument against the anchors' n and d and every rule above, and raises a
``ValueError`` that names the fix; the losses then read the record and check nothing more.
"""

from dataclasses import dataclass, replace
from typing import Literal

from torch import Tensor

from crl._validate import check_count
from crl._vocab import Regime
from crl.objectives._checks import check_embeddings, upcast

NegativeSetKind = Literal["in_batch", "shared", "pair", "independent"]


@dataclass(frozen=True)
class NegativeSet:
    """The negatives of one loss evaluation, checked.

    Attributes:
        kind: "in_batch" (``None``), "shared" ((M, d)), "pair" ((M, d), (M', d)) or "independent" ((n, m, d)).
        y: the explicit negatives y' scored against the anchors, (M, d) or (n, m, d); None in batch.
        x: the negatives x' scored against the positives in the y -> x direction of a pair; None otherwise.
        m: negatives per anchor in the x -> y direction (n - 1 in batch; M - 1 with an offset, else M; m).
        m_x: negatives per positive in the y -> x direction of the symmetric loss; None for a one-sided loss.
        offset: row of anchor 0's own positive among the candidates, left out of its negatives (0 in batch,
            ``positive_offset`` for explicit shared negatives); None when every candidate is a negative.
    """

    kind: NegativeSetKind
    y: Tensor | None
    x: Tensor | None
    m: int
    m_x: int | None
    offset: int | None

    def named(self) -> dict[str, Tensor]:
        """The explicit tensors by the name an error message gives them."""
        if self.kind == "pair" and self.y is not None and self.x is not None:
            return {"negatives[0]": self.y, "negatives[1]": self.x}
        return {} if self.y is None else {"negatives": self.y}

    def scored_pairs(self, anchors: Tensor, positives: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
        """The (queries, candidates) whose inner products are the loss's scores, by the names an error gives them."""
        pairs = {"anchors/positives": (anchors, positives)}
        named = self.named()
        if self.y is not None:
            pairs[f"anchors/{next(iter(named))}"] = (anchors, self.y)
        if self.x is not None:
            pairs["positives/negatives[1]"] = (positives, self.x)
        return pairs

    def upcast(self) -> "NegativeSet":
        """The same set with fp16/bf16 tensors in float32."""
        return replace(
            self,
            y=None if self.y is None else upcast(self.y),
            x=None if self.x is None else upcast(self.x),
        )

    def sizes(self) -> tuple[int, int | None]:
        """Rows (M, M') of the explicit negatives (m per anchor when independent); (0, None) in batch."""
        if self.y is None:
            return 0, None
        size = self.y.shape[1] if self.kind == "independent" else self.y.shape[0]
        return size, None if self.x is None else self.x.shape[0]

    def candidates(self, positives: Tensor) -> Tensor:
        """The y' scored against anchor i: the explicit negatives, or in batch the positives (row i its own)."""
        return positives if self.y is None else self.y

    def reverse_candidates(self, anchors: Tensor) -> Tensor:
        """The x' scored against positive i (symmetric loss): negatives_x, or in batch the anchors."""
        return anchors if self.x is None else self.x


def resolve_negatives(
    negatives: object,
    *,
    n: int,
    dim: int,
    regime: Regime,
    symmetric: bool = False,
    positive_offset: int | None = None,
) -> NegativeSet:
    """Check ``negatives`` for n anchors of dimension d = ``dim`` and say what it means.

    Raises:
        TypeError: if ``negatives`` is not None, a tensor or a tuple.
        ValueError: on a tuple that is not a pair, a shape that does not fit the regime, n or d, m = 0, n < 2 in
            batch, ``symmetric`` or ``positive_offset`` where they do not apply, or an offset outside [0, M - n];
            the message names the fix. Devices, dtypes and finiteness are checked later, with all inputs.
    """
    if not (negatives is None or isinstance(negatives, Tensor | tuple)):
        raise TypeError(
            f"negatives must be None, a tensor or a pair of tensors, got {type(negatives).__name__}."
        )
    if isinstance(negatives, tuple) and len(negatives) != 2:
        raise ValueError(
            f"negatives is a tuple of {len(negatives)}; symmetric=True takes a pair (negatives_y, negatives_x)."
        )
    if positive_offset is not None:
        check_count("positive_offset", positive_offset, 0)
    if regime == "independent":
        return _independent(negatives, n, dim, symmetric=symmetric, positive_offset=positive_offset)
    if negatives is None:
        return _in_batch(n, symmetric=symmetric, positive_offset=positive_offset)
    if isinstance(negatives, tuple):
        return _pair(negatives, n, dim, symmetric=symmetric, positive_offset=positive_offset)
    return _shared(negatives, n, dim, symmetric=symmetric, positive_offset=positive_offset)


def _independent(
    negatives: object, n: int, dim: int, *, symmetric: bool, positive_offset: int | None
) -> NegativeSet:
    """SCRL: an (n, m, d) tensor, m >= 1 negatives of its own per anchor."""
    if symmetric or positive_offset is not None:
        raise ValueError(
            "symmetric=True and positive_offset need regime='shared' (they describe one batch's negatives)."
        )
    if not isinstance(negatives, Tensor):
        raise ValueError(
            "regime='independent' needs negatives of shape (n, m, d), one set of m per anchor; "
            f"got {type(negatives).__name__}. Use regime='shared' for in-batch or shared negatives."
        )
    if negatives.ndim == 2:
        raise ValueError(
            f"negatives has shape (m, d) = {tuple(negatives.shape)}, one set shared by all anchors, but "
            f"regime='independent' needs (n, m, d) = ({n}, m, {dim}): for shared (SSCRL) negatives pass "
            "regime='shared'; for per-anchor (SCRL) negatives pass an (n, m, d) tensor."
        )
    neg = check_embeddings("negatives", negatives, 3)
    if neg.shape[0] != n or neg.shape[2] != dim:
        raise ValueError(
            f"negatives has shape {tuple(neg.shape)}; regime='independent' needs (n, m, d) = ({n}, m, {dim})."
        )
    if neg.shape[1] == 0:
        raise ValueError("negatives has m = 0 per anchor; contrastive losses need at least one negative.")
    return NegativeSet("independent", y=neg, x=None, m=neg.shape[1], m_x=None, offset=None)


def _in_batch(n: int, *, symmetric: bool, positive_offset: int | None) -> NegativeSet:
    """``None``: the other positives of the batch, m = n - 1 in each direction."""
    if positive_offset is not None:
        raise ValueError(
            "positive_offset needs explicit negatives that contain the batch's positives; pass them."
        )
    if n < 2:
        raise ValueError("negatives=None uses the other positives of the batch, so it needs n >= 2 anchors.")
    return NegativeSet("in_batch", y=None, x=None, m=n - 1, m_x=n - 1 if symmetric else None, offset=0)


def _shared(
    negatives: Tensor, n: int, dim: int, *, symmetric: bool, positive_offset: int | None
) -> NegativeSet:
    """SSCRL: one (M, d) set for all anchors, one-sided."""
    if negatives.ndim == 3:
        raise ValueError(
            f"negatives has shape (n, m, d) = {tuple(negatives.shape)}: for per-anchor (SCRL) negatives pass "
            "regime='independent'; for shared negatives pass an (m, d) tensor."
        )
    neg = _shared_tensor("negatives", negatives, dim)
    if symmetric:
        raise ValueError(
            "symmetric=True with explicit shared negatives needs a pair (negatives_y (m, d), negatives_x (m', d)) "
            "so that the y->x direction has negatives of its own; or pass negatives=None for in-batch negatives."
        )
    m = _shared_count("negatives", neg, n, positive_offset)
    return NegativeSet("shared", y=neg, x=None, m=m, m_x=None, offset=positive_offset)


def _pair(
    negatives: tuple[Tensor, Tensor], n: int, dim: int, *, symmetric: bool, positive_offset: int | None
) -> NegativeSet:
    """Symmetric loss: negatives_y (M, d) against the anchors, negatives_x (M', d) against the positives."""
    if not symmetric:
        raise ValueError(
            "a pair of negatives (negatives_y, negatives_x) is for symmetric=True only; pass one (m, d) tensor."
        )
    neg_y = _shared_tensor("negatives[0]", negatives[0], dim)
    neg_x = _shared_tensor("negatives[1]", negatives[1], dim)
    m = _shared_count("negatives[0]", neg_y, n, positive_offset)
    m_x = _shared_count("negatives[1]", neg_x, n, positive_offset)
    return NegativeSet("pair", y=neg_y, x=neg_x, m=m, m_x=m_x, offset=positive_offset)


def _shared_tensor(name: str, negatives: object, dim: int) -> Tensor:
    """An (M, d) floating tensor with M >= 1 rows of the anchors' dimension d."""
    neg = check_embeddings(name, negatives, 2)
    if neg.shape[1] != dim:
        raise ValueError(
            f"{name} has dimension {neg.shape[1]} but the anchors have d = {dim}; embed both alike."
        )
    return neg


def _shared_count(name: str, negatives: Tensor, n: int, positive_offset: int | None) -> int:
    """m of M shared rows: M, or M - 1 when rows offset..offset+n-1 are this batch's positives (needs M >= 2)."""
    size = negatives.shape[0]
    if positive_offset is None:
        return size
    if positive_offset + n > size or size < 2:
        raise ValueError(
            f"positive_offset={positive_offset!r} must satisfy offset + n <= M and M >= 2, with n = {n} anchors and "
            f"M = {size} rows of {name} (rows offset..offset+n-1 are this batch's positives)."
        )
    return size - 1
