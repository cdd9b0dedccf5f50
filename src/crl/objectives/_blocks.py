"""Block primitives of the tiled kernels: spans, reusable workspaces, block logits and products in any precision.

:mod:`crl.objectives.tiled` (log-sum-exps), :mod:`crl.objectives._sigmoid_kernel` and
:mod:`crl.objectives._score_kernel` compute their n x m scores one block at a time with these. Under
``torch.autocast`` the GEMM operands are in the autocast dtype and the blocks and accumulators in float32.
"""

import math

import torch
from torch import Tensor

from crl.objectives._mask import LeaveOut

LOG2_E = 1.0 / math.log(2.0)
"""log2(e): e^x = 2^(x log2 e), exponentiated by exp2, which takes about half the time of exp on this CPU."""
LN_2 = math.log(2.0)
"""ln(2): log sum_j e^(x_j) = ln 2 * log2 sum_j 2^(x_j log2 e) (the tiled kernel's base-2 log-sum-exps)."""


def spans(size: int, step: int) -> list[tuple[int, int]]:
    """``[(0, step), (step, 2 step), ..., (k step, size)]``: the blocks of a dimension of ``size``."""
    return [(start, min(start + step, size)) for start in range(0, size, step)]


class Workspace:
    """Two reusable (rows x cols) buffers: fresh multi-MiB tensors each block would cost a page fault per page."""

    def __init__(self, rows: int, cols: int, like: Tensor, two: bool) -> None:
        self._first = torch.empty(rows * cols, dtype=like.dtype, device=like.device)
        self._second = torch.empty(rows * cols if two else 0, dtype=like.dtype, device=like.device)

    def first(self, rows: int, cols: int) -> Tensor:
        return self._first[: rows * cols].view(rows, cols)

    def second(self, rows: int, cols: int) -> Tensor:
        return self._second[: rows * cols].view(rows, cols)


def low_precision(x: Tensor) -> torch.dtype | None:
    """The GEMM dtype of an enclosing ``torch.autocast`` on ``x``'s device (bf16/fp16), or None outside one."""
    kind = x.device.type
    if x.dtype != torch.float64 and kind in ("cpu", "cuda") and torch.is_autocast_enabled(kind):
        low = torch.get_autocast_dtype(kind)
        return low if low != x.dtype else None
    return None


def block_logits(
    q: Tensor, c: Tensor, r0: int, r1: int, c0: int, c1: int, leave: LeaveOut, out: Tensor
) -> Tensor:
    """S[r0:r1, c0:c1] = q[r0:r1] c[c0:c1]^T written into ``out``, its left-out entries at -inf.

    ``q`` and ``c`` may be in a lower precision than ``out`` (autocast): the product is then formed in theirs
    (accumulated in float32 by the GEMM) and stored in ``out``'s float32. On CUDA the GEMM writes float32
    directly (``out_dtype``); the CPU's bf16 GEMM rounds its output to bf16 before the copy.
    """
    with torch.autocast(q.device.type, enabled=False):
        if q.dtype == out.dtype:
            torch.mm(q[r0:r1], c[c0:c1].T, out=out)
        elif q.device.type == "cuda":
            out.copy_(torch.mm(q[r0:r1], c[c0:c1].T, out_dtype=out.dtype))
        else:
            out.copy_(torch.mm(q[r0:r1], c[c0:c1].T))
    return leave.apply(out, r0, r1, c0, c1)


def outer_into(u: Tensor, v: Tensor, out: Tensor) -> Tensor:
    """u v^T in ``out``, as a depth-1 GEMM (faster here than ``torch.outer``'s broadcast multiply), in float32."""
    with torch.autocast(u.device.type, enabled=False):
        return torch.mm(u[:, None], v[None, :], out=out)


def accumulate_product(out: Tensor, weights: Tensor, x: Tensor) -> None:
    """out += weights @ x, with the GEMM in ``x``'s dtype (lower than ``out``'s under autocast)."""
    with torch.autocast(out.device.type, enabled=False):
        if x.dtype == out.dtype:
            out.addmm_(weights, x)
        else:
            out.add_(torch.mm(weights.to(x.dtype), x))


def accumulate_transposed(out_t: Tensor, x: Tensor, weights: Tensor) -> None:
    """out_t += x^T @ weights: a candidates' gradient W^T x kept transposed, (d, cols), with the GEMM in ``x``'s dtype.

    The GEMM then reads the (rows x cols) block as stored instead of through its transpose, which on the CPU runs
    markedly faster (for a 2048 x 4096 block and d = 128 on one thread: about 79 against 56 GFLOP/s).
    """
    with torch.autocast(out_t.device.type, enabled=False):
        if x.dtype == out_t.dtype:
            out_t.addmm_(x.T, weights)
        else:
            out_t.add_(torch.mm(x.T, weights.to(x.dtype)))


class TransposedBlocks:
    """A candidates' gradient dc (m, d) kept transposed per block of ``cols`` columns: the block of columns c0:c1 is
    one contiguous (d, c1 - c0) matrix, so that :func:`accumulate_transposed` writes it with unit strides.

    A strided (d, cols) view of one (d, m) matrix instead made each block's GEMM about 8% slower (1024 x 1024
    blocks, d = 128, one thread: 3.74 against 3.44 ms).
    """

    def __init__(self, m: int, d: int, cols: int, like: Tensor) -> None:
        self._flat = torch.zeros(m * d, dtype=like.dtype, device=like.device)
        self._m, self._d, self._cols = m, d, cols

    def block(self, c0: int, c1: int) -> Tensor:
        """The (d, c1 - c0) transposed gradient of columns c0:c1, one of ``spans(m, cols)``."""
        return self._flat[c0 * self._d : c1 * self._d].view(self._d, c1 - c0)

    def gradient(self) -> Tensor:
        """dc (m, d), untransposed."""
        out = self._flat.new_empty(self._m, self._d)
        for c0, c1 in spans(self._m, self._cols):
            out[c0:c1] = self.block(c0, c1).T
        return out


def accumulator_dtype(x: Tensor) -> torch.dtype:
    """float32 for half-precision GEMM inputs (the log-sum-exps and gradients accumulate there), else x's."""
    return torch.float32 if x.dtype in (torch.float16, torch.bfloat16) else x.dtype
