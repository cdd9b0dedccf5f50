"""What one step of the exact L_hat on locked features costs: rows through the heads, scores, hashes, memory.

With fixed negatives (``[loss] negatives = "fixed_pool"`` or ``"fixed_sets"``) every step scores each of the b
anchors of the batch against all m of its negatives, so the step's work grows with m (SSCRL) or with the union of
the batch's sets (SCRL), not with a cap. Per step, with C candidates, heads of widths D_x -> [h] -> d and
D_y -> [h] -> d:

- rows through the heads: b anchors (f), b positives and R negatives (g), R = m for SSCRL; for SCRL the
  candidates in at least one of the b sets, R = C (1 - (1 - m/C)^b) on average (b independent m-subsets), C
  when m >= C;
- scores: b (R + 1), each a d-vector product;
- keyed hashes (SCRL only, m < C): b C, the sets of the batch's rows recomputed on the fly;
- multiply-adds: the heads' rows times their weights, the scores times d, each three times (forward, and the
  backward pass's two products);
- memory: the R rows of features (D_y) and their embeddings (d), the b x R scores, the b x C hash keys (8 bytes;
  computed in chunks of at most 2^22), float32.

:meth:`StepCost.pairs_per_second` turns a measured time per step into the training pairs (anchors) per second;
``benchmarks/locked_exact.py`` measures ms/step and peak memory at a few m.
"""

from __future__ import annotations

from dataclasses import dataclass

from crl._validate import check_count
from crl._vocab import Regime

__all__ = ["StepCost", "exact_step_cost"]


@dataclass(frozen=True)
class StepCost:
    """The work of one exact step (see the module docstring).

    Attributes:
        batch: b, the anchors per step.
        negatives: R, the distinct negatives embedded per step (an average for SCRL).
        head_rows: 2 b + R rows through the heads.
        scores: b (R + 1) scores.
        hashes: b C keyed hashes (SCRL with m < C), else 0.
        flops: 2 x multiply-adds of the heads and the scores, forward and backward (x 3).
        bytes: float32 buffers of the negatives' features, embeddings and scores, and the hash keys of a chunk.
    """

    batch: int
    negatives: float
    head_rows: float
    scores: float
    hashes: int
    flops: float
    bytes: float

    def pairs_per_second(self, seconds_per_step: float) -> float:
        """Training pairs per second at a measured ``seconds_per_step``: b / seconds."""
        if not seconds_per_step > 0:
            raise ValueError(f"seconds_per_step = {seconds_per_step!r}; pass a measured time > 0")
        return self.batch / seconds_per_step

    def describe(self) -> str:
        """One line: ``R = ..., head rows ..., scores ..., hashes ..., GFLOP ..., MiB ...``."""
        return (
            f"R = {self.negatives:.0f} negatives embedded, {self.head_rows:.0f} head rows, {self.scores:.3g} scores, "
            f"{self.hashes:.3g} hashes, {self.flops / 1e9:.3g} GFLOP, {self.bytes / 2**20:.0f} MiB per step"
        )


def _head_multiply_adds(d_in: int, hidden: int, d_out: int) -> int:
    return d_in * hidden + hidden * d_out if hidden else d_in * d_out


def exact_step_cost(
    regime: Regime,
    *,
    batch: int,
    m: int,
    candidates: int,
    d_x: int,
    d_y: int,
    d_out: int,
    hidden: int = 0,
) -> StepCost:
    """The cost of one step of the exact L_hat with fixed negatives (module docstring).

    Args:
        regime: "shared" (fixed_pool, SSCRL) or "independent" (fixed_sets, SCRL).
        batch: b, anchors per step.
        m: negatives per anchor (at most ``candidates``).
        candidates: C, the items the negatives are drawn from.
        d_x, d_y: feature widths of the anchors and the positives.
        d_out: d, the embedding width.
        hidden: the heads' hidden width (0: linear heads).

    Examples:
        >>> cost = exact_step_cost("shared", batch=64, m=4096, candidates=100_000, d_x=384, d_y=384, d_out=64)
        >>> cost.negatives, cost.head_rows, cost.pairs_per_second(0.5)
        (4096, 4224, 128.0)
    """
    for name, value in (("batch", batch), ("m", m), ("candidates", candidates), ("d_x", d_x), ("d_y", d_y)):
        check_count(name, value, 1)
    check_count("d_out", d_out, 1)
    check_count("hidden", hidden, 0)
    if m > candidates:
        raise ValueError(f"m = {m} exceeds the {candidates} candidates; use m <= candidates")
    hashes = 0
    negatives: float = m
    if regime == "independent":
        negatives = candidates if m >= candidates else candidates * (1 - (1 - m / candidates) ** batch)
        hashes = 0 if m >= candidates else batch * candidates
    elif regime != "shared":
        raise ValueError(f"regime = {regime!r}; use 'shared' or 'independent'")
    head_rows = 2 * batch + negatives
    scores = batch * (negatives + 1)
    multiply_adds = (
        batch * _head_multiply_adds(d_x, hidden, d_out)
        + (batch + negatives) * _head_multiply_adds(d_y, hidden, d_out)
        + scores * d_out
    )
    memory = 4 * (negatives * (d_y + d_out) + batch * negatives) + 8 * min(hashes, 1 << 22)
    return StepCost(batch, negatives, head_rows, scores, hashes, 2 * 3 * multiply_adds, memory)
