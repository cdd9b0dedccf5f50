"""Exact log-sum-exp over m candidates without holding the n x m score matrix.

For queries q_i (already divided by tau) and candidates c_j, the logits are S_ij = <q_i, c_j>. The contrastive
forms of [A] and [B] need, per anchor, only the row log-sum-exp ``lse_i = log sum_j exp(S_ij)`` (and, for the
symmetric CLIP loss, the column log-sum-exp ``lse_j = log sum_i exp(S_ij)`` of the same matrix). This module computes
both block by block in a custom autograd function: the forward pass keeps one (rows x cols) block at a time and
stores only the inputs and the log-sum-exps; the backward pass recomputes each block and forms

    dq_i = sum_j W_ij c_j,   dc_j = sum_i W_ij q_i,   W_ij = g_i softmax_row(S)_ij + h_j softmax_col(S)_ij,

with g, h the incoming gradients of the row and column log-sum-exps. Extra memory is O(block) whatever n and m;
the cost is four GEMMs (one forward, three backward) against three for the dense computation, and both directions
of the symmetric loss share them.
"""

import math

import torch
from torch import Tensor
from torch.autograd.function import FunctionCtx, once_differentiable

DEFAULT_BLOCK_ROWS = 2048
DEFAULT_BLOCK_COLS = 4096


def _blocks(size: int, step: int) -> list[tuple[int, int]]:
    return [(start, min(start + step, size)) for start in range(0, size, step)]


def _block_logits(q: Tensor, c: Tensor, r0: int, r1: int, c0: int, c1: int, exclude_diagonal: bool) -> Tensor:
    """S[r0:r1, c0:c1] = q[r0:r1] c[c0:c1]^T, with S_ii = -inf when ``exclude_diagonal``."""
    block = q[r0:r1] @ c[c0:c1].T
    if exclude_diagonal:
        block.diagonal(r0 - c0).fill_(-math.inf)
    return block


class _TiledLogSumExp(torch.autograd.Function):
    """Row and (optionally) column log-sum-exp of q c^T computed in blocks; see the module docstring."""

    @staticmethod
    def forward(
        ctx: FunctionCtx,
        q: Tensor,
        c: Tensor,
        exclude_diagonal: bool,
        want_columns: bool,
        block_rows: int,
        block_cols: int,
    ) -> tuple[Tensor, Tensor]:
        n, m = q.shape[0], c.shape[0]
        row_lse = torch.full((n,), -math.inf, dtype=q.dtype, device=q.device)
        col_lse = torch.full((m if want_columns else 0,), -math.inf, dtype=q.dtype, device=q.device)
        for r0, r1 in _blocks(n, block_rows):
            for c0, c1 in _blocks(m, block_cols):
                block = _block_logits(q, c, r0, r1, c0, c1, exclude_diagonal)
                torch.logaddexp(row_lse[r0:r1], torch.logsumexp(block, dim=1), out=row_lse[r0:r1])
                if want_columns:
                    torch.logaddexp(col_lse[c0:c1], torch.logsumexp(block, dim=0), out=col_lse[c0:c1])
        ctx.save_for_backward(q, c, row_lse, col_lse)
        ctx.exclude_diagonal = exclude_diagonal  # type: ignore[attr-defined]
        ctx.blocks = (block_rows, block_cols)  # type: ignore[attr-defined]
        return row_lse, col_lse

    @staticmethod
    @once_differentiable
    def backward(ctx: FunctionCtx, grad_row: Tensor, grad_col: Tensor) -> tuple[Tensor | None, ...]:
        q, c, row_lse, col_lse = ctx.saved_tensors  # type: ignore[attr-defined]
        exclude_diagonal: bool = ctx.exclude_diagonal  # type: ignore[attr-defined]
        block_rows, block_cols = ctx.blocks  # type: ignore[attr-defined]
        need_q, need_c = ctx.needs_input_grad[0], ctx.needs_input_grad[1]  # type: ignore[attr-defined]
        grad_q = torch.zeros_like(q) if need_q else None
        grad_c = torch.zeros_like(c) if need_c else None
        for r0, r1 in _blocks(q.shape[0], block_rows):
            for c0, c1 in _blocks(c.shape[0], block_cols):
                logits = _block_logits(q, c, r0, r1, c0, c1, exclude_diagonal)
                weights = _block_weights(logits, row_lse[r0:r1], grad_row[r0:r1], col_lse, grad_col, c0, c1)
                if grad_q is not None:
                    grad_q[r0:r1].addmm_(weights, c[c0:c1])
                if grad_c is not None:
                    grad_c[c0:c1].addmm_(weights.T, q[r0:r1])
        return grad_q, grad_c, None, None, None, None


def _block_weights(
    logits: Tensor, row_lse: Tensor, grad_row: Tensor, col_lse: Tensor, grad_col: Tensor, c0: int, c1: int
) -> Tensor:
    """W = g_i exp(S_ij - lse_i) + h_j exp(S_ij - lse_j) for one block, reusing the logits' memory when it can."""
    if col_lse.numel() == 0:
        return logits.sub_(row_lse[:, None]).exp_().mul_(grad_row[:, None])
    by_column = (logits - col_lse[None, c0:c1]).exp_().mul_(grad_col[None, c0:c1])
    return logits.sub_(row_lse[:, None]).exp_().mul_(grad_row[:, None]).add_(by_column)


def _block_sizes(block_size: int | None) -> tuple[int, int]:
    if block_size is None:
        return DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_COLS
    return block_size, block_size


def tiled_logsumexp(
    queries: Tensor, candidates: Tensor, *, exclude_diagonal: bool = False, block_size: int | None = None
) -> Tensor:
    """Row log-sum-exp ``lse_i = log sum_j exp(<q_i, c_j>)`` of the n x m logits, in O(block) extra memory.

    Args:
        queries: (n, d) queries, already scaled by 1/tau.
        candidates: (m, d) candidates (negatives, or the batch's positives).
        exclude_diagonal: leave out j = i (in-batch negatives: the positive is not its own negative; needs n = m).
        block_size: rows and columns per block (default 2048 x 4096).

    Returns:
        (n,) tensor, differentiable in both inputs; equal to ``torch.logsumexp(q @ c.T, 1)`` up to rounding.
    """
    rows, cols = _block_sizes(block_size)
    row_lse, _ = _TiledLogSumExp.apply(queries, candidates, exclude_diagonal, False, rows, cols)
    return row_lse


def tiled_logsumexp_both(
    queries: Tensor, candidates: Tensor, *, exclude_diagonal: bool = False, block_size: int | None = None
) -> tuple[Tensor, Tensor]:
    """Row and column log-sum-exps of the same logits S = q c^T, sharing every block (symmetric CLIP loss).

    Returns:
        ``(row_lse (n,), col_lse (m,))`` with ``row_lse_i = log sum_j exp S_ij`` and ``col_lse_j = log sum_i exp S_ij``.
    """
    rows, cols = _block_sizes(block_size)
    row_lse, col_lse = _TiledLogSumExp.apply(queries, candidates, exclude_diagonal, True, rows, cols)
    return row_lse, col_lse


def dense_logsumexp_both(
    queries: Tensor, candidates: Tensor, *, exclude_diagonal: bool = False, want_columns: bool = True
) -> tuple[Tensor, Tensor | None]:
    """The plain reference: materialise S = q c^T (n x m) and take its row (and column) log-sum-exps."""
    logits = queries @ candidates.T
    if exclude_diagonal:
        eye = torch.eye(logits.shape[0], logits.shape[1], dtype=torch.bool, device=logits.device)
        logits = logits.masked_fill(eye, -math.inf)
    row_lse = torch.logsumexp(logits, dim=1)
    col_lse = torch.logsumexp(logits, dim=0) if want_columns else None
    return row_lse, col_lse
