"""The tiled kernel's CPU fast path: each block's row shift computed inside its GEMM.

Every block of :mod:`crl.objectives.tiled` is exponentiated after a per-row shift: the row maximum in the forward
pass (so that exp never overflows), the row log-sum-exp (less log g_i) in the backward pass. Appending the column
``-shift_i`` to the queries and a column of ones to the candidates makes the block GEMM write the shifted logits

    [q_i, -shift_i] . [c_j, 1] = S_ij - shift_i

directly: one GEMM of depth d + 1 (about 1/d more FLOPs) replaces a max pass and a subtraction pass over the block,
which on a CPU are memory-bound. The forward pass cannot know the row maxima before the GEMM, so it shifts by the
Cauchy-Schwarz bound b_i = |q_i| max_j |c_j| >= max_j S_ij: exp(S_ij - b_i) <= 1 never overflows. A row whose block
sum falls below e^-60 (its maximum far below the bound, where float32 terms could underflow) is not trusted: the
caller redoes that block with the exact row maxima. Float32 and float64 on the CPU only: under autocast the appended
shift would be rounded to bf16/fp16, and on CUDA the underflow test would synchronise with the host per block.
"""

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from crl.objectives._blocks import block_logits
from crl.objectives._mask import LeaveOut

NEGLIGIBLE_TOTAL = math.exp(-60.0)
"""A block row (or column) sum below this, relative to its shift, is recomputed from the exact maxima."""


@dataclass(frozen=True)
class ShiftedOperands:
    """Queries with ``-shift`` appended and candidates with a column of ones: their product is S_ij - shift_i.

    Attributes:
        queries: (n, d + 1) ``[q, -shift]``.
        candidates: (m, d + 1) ``[c, 1]``.
        shift: (n,) the shift of each row.
    """

    queries: Tensor
    candidates: Tensor
    shift: Tensor

    def exp_block(self, r0: int, r1: int, c0: int, c1: int, leave: LeaveOut, out: Tensor) -> Tensor:
        """exp(S_ij - shift_i) of rows r0:r1 and columns c0:c1, in ``out`` (left-out entries 0)."""
        return block_logits(self.queries, self.candidates, r0, r1, c0, c1, leave, out).exp_()


def shifted_path(q: Tensor) -> bool:
    """Whether the GEMM-shift fast path applies: float32/float64 inputs on the CPU (see the module docstring)."""
    return q.device.type == "cpu" and q.dtype in (torch.float32, torch.float64)


def shifted_operands(q: Tensor, c: Tensor, shift: Tensor) -> ShiftedOperands:
    """The operands whose block products are S_ij - shift_i (``shift`` (n,) finite, in q's dtype)."""
    queries = torch.cat([q, -shift.to(q.dtype)[:, None]], dim=1)
    candidates = torch.cat([c, c.new_ones(c.shape[0], 1)], dim=1)
    return ShiftedOperands(queries, candidates, shift)


def bounded_operands(q: Tensor, c: Tensor) -> ShiftedOperands:
    """Operands shifted by the Cauchy-Schwarz bound b_i = |q_i| max_j |c_j| >= max_j <q_i, c_j>."""
    bound = torch.linalg.vector_norm(q, dim=1) * torch.linalg.vector_norm(c, dim=1).max()
    return shifted_operands(q, c, bound)


def trusted_row_totals(block: Tensor) -> Tensor | None:
    """Row sums of a block of exp(S_ij - b_i), or None when one is below e^-60 (redo the block exactly)."""
    totals = block.sum(dim=1)
    return totals if bool((totals >= NEGLIGIBLE_TOTAL).all()) else None
