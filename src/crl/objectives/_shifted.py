"""The tiled kernel's CPU fast path: each block's row shift computed inside its GEMM.

Every block of :mod:`crl.objectives.tiled` is exponentiated after a per-row shift: the row maximum in the forward
pass (so that exp2 never overflows), the row log-sum-exp (less log2 g_i) in the backward pass. Appending the column
``-shift_i`` to the queries and a column of ones to the candidates makes the block GEMM write the shifted logits

    [q_i, -shift_i] . [c_j, 1] = S_ij - shift_i

directly: one GEMM of depth d + 1 (about 1/d more FLOPs) replaces a max pass and a subtraction pass over the block,
which on a CPU are memory-bound. The kernel works in base 2 (:mod:`crl.objectives.tiled`: its queries carry the
factor log2 e), so the block is exponentiated by exp2 alone: torch's exp2 takes about 0.55 ms per 2^20 float32 on
this CPU, its exp 1.0 ms, and the exponential is the costliest pass per block.

The forward pass cannot know the row maxima before the GEMM, so it shifts by the Cauchy-Schwarz bound
b_i = |q_i| max_j |c_j| >= max_j S_ij: 2^(S_ij - b_i) <= 1 never overflows. A row whose block sum falls below
e^-60 (its maximum far below the bound, where float32 terms could underflow) is not trusted: the caller redoes that
block with the exact row maxima. Float32 and float64 on the CPU only: under autocast the appended shift would be
rounded to bf16/fp16, and on CUDA the underflow test would synchronise with the host per block.

In float32 the passes after each GEMM are the fused ones of :mod:`crl.objectives._native` where they are built
(exp2 and its row sums, the symmetric weights, the forward pass's row and column sums, each in one pass), else
torch's operators.
"""

import math

import torch
from torch import Tensor

from crl.objectives._blocks import outer_into
from crl.objectives._mask import LeaveOut
from crl.objectives._native import fused_passes

NEGLIGIBLE_TOTAL = math.exp(-60.0)
"""A block row (or column) sum below this, relative to its shift, is recomputed from the exact maxima."""


class ShiftedOperands:
    """Block products S_ij - shift_i, each from a GEMM of ``[q_i, -shift_i]`` (rows) and ``[c_j, 1]`` (columns).

    The augmented columns are written once, a copy of c with one more column (O(m d), 32 MiB for m = 65536 and
    d = 128; copying them per block instead cost about 2% of the symmetric loss's time); the augmented rows are
    written per row block into one (block rows x (d + 1)) buffer.

    Attributes:
        shift: (n,) the shift of each row.
    """

    def __init__(self, q: Tensor, c: Tensor, shift: Tensor, block_rows: int) -> None:
        depth = q.shape[1] + 1
        self._q, self.shift = q, shift
        self._rows = q.new_empty(min(block_rows, q.shape[0]), depth)
        self._cols = c.new_ones(c.shape[0], depth)
        self._cols[:, :-1] = c
        self._rows_span = (-1, -1)
        self._fused = fused_passes() if q.dtype == torch.float32 else None

    def _augmented_rows(self, r0: int, r1: int) -> Tensor:
        """[q_i, -shift_i] for rows r0:r1 (rewritten only when the row block changes)."""
        rows = self._rows[: r1 - r0]
        if self._rows_span != (r0, r1):
            rows[:, :-1] = self._q[r0:r1]
            torch.neg(self.shift[r0:r1], out=rows[:, -1])
            self._rows_span = (r0, r1)
        return rows

    def _shifted_block(self, span: tuple[int, int, int, int], leave: LeaveOut, out: Tensor) -> Tensor:
        """S_ij - shift_i of the block ``span`` = (r0, r1, c0, c1), in ``out`` (left-out entries -inf)."""
        r0, r1, c0, c1 = span
        with torch.autocast(out.device.type, enabled=False):
            torch.mm(self._augmented_rows(r0, r1), self._cols[c0:c1].T, out=out)
        return leave.apply(out, r0, r1, c0, c1)

    def exp_block(self, span: tuple[int, int, int, int], leave: LeaveOut, out: Tensor) -> Tensor:
        """E_ij = 2^(S_ij - shift_i) of the block ``span`` = (r0, r1, c0, c1), in ``out`` (left-out entries 0)."""
        block = self._shifted_block(span, leave, out)
        return block.exp2_() if self._fused is None else self._fused.exp2_rows(block)

    def exp_row_sums(
        self, span: tuple[int, int, int, int], leave: LeaveOut, out: Tensor
    ) -> tuple[Tensor, Tensor]:
        """E_ij = 2^(S_ij - shift_i) in ``out`` and its row sums z_i = sum_j E_ij."""
        block = self._shifted_block(span, leave, out)
        if self._fused is None:
            return block.exp2_(), block.sum(dim=1)
        totals = block.new_empty(block.shape[0])
        return self._fused.exp2_rows(block, totals), totals

    def weighted_exp_block(
        self,
        span: tuple[int, int, int, int],
        leave: LeaveOut,
        factors: tuple[Tensor, Tensor],
        out: Tensor,
        spare: Tensor,
    ) -> Tensor:
        """W_ij = E_ij (1 + u_i v_j) with E_ij = 2^(S_ij - shift_i) and ``factors`` (u, v), in ``out`` (torch's
        operators form u v^T in ``spare``, a buffer of the same shape)."""
        block = self._shifted_block(span, leave, out)
        if self._fused is not None:
            return self._fused.exp2_rank_one(block, *factors)
        weights = block.exp2_()
        return weights.addcmul_(weights, outer_into(*factors, spare))

    def exp_sums(
        self, span: tuple[int, int, int, int], leave: LeaveOut, weights: Tensor, out: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Row sums z_i = sum_j E_ij and weighted column sums sum_i w_i E_ij of E_ij = 2^(S_ij - shift_i), the
        block computed in ``out`` (which the fused pass leaves holding S_ij - shift_i, torch's operators E_ij)."""
        block = self._shifted_block(span, leave, out)
        if self._fused is not None:
            return self._fused.exp2_sums(block, weights)
        exps = block.exp2_()
        return exps.sum(dim=1), torch.mv(exps.T, weights)


def shifted_path(q: Tensor) -> bool:
    """Whether the GEMM-shift fast path applies: float32/float64 inputs on the CPU (see the module docstring)."""
    return q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64)


def shifted_operands(q: Tensor, c: Tensor, shift: Tensor, block_rows: int) -> ShiftedOperands:
    """The operands whose block products (``block_rows`` rows at most) are S_ij - shift_i (``shift`` (n,) finite)."""
    return ShiftedOperands(q, c, shift.to(q.dtype), block_rows)


def bounded_operands(q: Tensor, c: Tensor, block_rows: int) -> ShiftedOperands:
    """Operands shifted by the Cauchy-Schwarz bound b_i = |q_i| max_j |c_j| >= max_j <q_i, c_j>."""
    bound = torch.linalg.vector_norm(q, dim=1) * torch.linalg.vector_norm(c, dim=1).max()
    return shifted_operands(q, c, bound, block_rows)


def trusted(totals: Tensor) -> bool:
    """Whether every block row (or column) sum relative to its shift is at least e^-60 (else redo it exactly)."""
    return bool((totals >= NEGLIGIBLE_TOTAL).all())
