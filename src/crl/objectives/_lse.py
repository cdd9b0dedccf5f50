"""Log-sum-exps of the shared regime, dense or tiled, and the negatives each anchor keeps.

The contrastive forms need, per anchor, the log-sum-exp of its negatives' logits; :func:`row_lse` and
:func:`row_and_column_lse` compute it densely (small n x m) or with :mod:`crl.objectives.tiled` (O(block) memory),
leaving out the anchor's own positive and, with item ids, its false negatives (:mod:`crl.objectives._mask`).
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from crl._vocab import Form
from crl.objectives._checks import Tiling
from crl.objectives._mask import LeaveOut
from crl.objectives.tiled import (
    GradientForecast,
    Temperature,
    dense_logsumexp,
    dense_logsumexp_both,
    tiled_logsumexp,
    tiled_logsumexp_both,
)

TILED_ABOVE_ELEMENTS = 1 << 22
"""``tiling="auto"`` switches from the dense n x m matrix to the tiled kernel above this many scores (CUDA)."""
CPU_TILED_ABOVE_ELEMENTS = 1 << 17
"""The same switch on the CPU, where the tiled kernel is the faster from about 512 x 512 scores on (symmetric loss,
forward + backward, d = 128, one thread: 5.7 against 8.7 ms at n = m = 512, 66 against 126 ms at 2048; dense 2.1
against 2.4 ms at 256; ``benchmarks/objectives.py --crossover``)."""


def use_tiled(tiling: Tiling, n: int, m: int, device: torch.device) -> bool:
    """Whether ``tiling`` ("auto": by the number of scores n m, and the device) picks the tiled kernel."""
    limit = CPU_TILED_ABOVE_ELEMENTS if device.type == "cpu" else TILED_ABOVE_ELEMENTS
    return tiling == "tiled" or (tiling == "auto" and n * m > limit)


@dataclass(frozen=True)
class Kernel:
    """How the shared regime computes its log-sum-exps.

    Attributes:
        tiling: "dense", "tiled", or "auto" (tiled above 2^17 scores on the CPU, 2^22 on CUDA).
        block_size: rows and columns per block of the tiled kernel (None: its default).
        forecast: let the tiled kernel precompute the gradients of a mean over anchors (one-sided directions).
    """

    tiling: Tiling
    block_size: int | None
    forecast: bool


def row_lse(
    q: Tensor,
    c: Tensor,
    *,
    tau: Temperature,
    leave: LeaveOut,
    kernel: Kernel,
    forecast: GradientForecast | None,
) -> Tensor:
    """lse_i = log sum_j exp(<q_i, c_j> / tau_i) over the j not left out (own positive, false negatives), dense or
    tiled."""
    offset, row_ids, col_ids = leave.offset, leave.row_ids, leave.col_ids
    if not use_tiled(kernel.tiling, q.shape[0], c.shape[0], q.device):
        return dense_logsumexp(q, c, tau=tau, exclude_offset=offset, row_ids=row_ids, col_ids=col_ids)
    return tiled_logsumexp(
        q,
        c,
        tau=tau,
        exclude_offset=offset,
        row_ids=row_ids,
        col_ids=col_ids,
        block_size=kernel.block_size,
        forecast=forecast,
    )


def row_and_column_lse(
    q: Tensor, c: Tensor, *, tau: Temperature, leave: LeaveOut, kernel: Kernel
) -> tuple[Tensor, Tensor]:
    """Row and column log-sum-exps of one n x n logit matrix <q_i, c_j> / tau (in-batch symmetric loss), dense or
    tiled."""
    offset, row_ids, col_ids = leave.offset, leave.row_ids, leave.col_ids
    if not use_tiled(kernel.tiling, q.shape[0], c.shape[0], q.device):
        return dense_logsumexp_both(q, c, tau=tau, exclude_offset=offset, row_ids=row_ids, col_ids=col_ids)
    return tiled_logsumexp_both(
        q,
        c,
        tau=tau,
        exclude_offset=offset,
        row_ids=row_ids,
        col_ids=col_ids,
        block_size=kernel.block_size,
    )


def negatives_kept(leave: LeaveOut, candidates: int, m: int, form: Form) -> int | Tensor:
    """m, or with ids the (n,) count m_i of negatives each anchor keeps (see :func:`check_kept`)."""
    kept = leave.kept(candidates)
    return m if kept is None else check_kept(kept, form)


def check_kept(kept: Tensor, form: Form) -> Tensor:
    """The (n,) counts m_i of negatives kept; on the CPU, refuse an anchor left with none (its log-sum-exp is -inf:
    dcl/gcl are -inf and the gradients NaN). On CUDA (no host synchronisation) that shows as a NaN loss."""
    if kept.device.type == "cpu" and bool((kept == 0).any()):
        anchor = int((kept == 0).nonzero()[0, 0])
        raise ValueError(
            f"anchor {anchor} has every negative left out by positive_ids/negative_ids (all share its id); "
            f"form={form!r} needs at least one negative per anchor; give duplicates distinct ids or drop them."
        )
    return kept
