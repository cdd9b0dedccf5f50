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
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from crl._vocab import check_count
from crl.objectives._blocks import (
    Workspace,
    accumulate_product,
    accumulator_dtype,
    block_logits,
    low_precision,
    spans,
)
from crl.objectives._mask import LeaveOut

DEFAULT_BLOCK_ROWS = 2048
DEFAULT_BLOCK_COLS = 4096


def _accumulate_lse(block: Tensor, dim: int, lse: Tensor) -> None:
    """lse <- logaddexp(lse, log sum exp(block) along ``dim``), overwriting ``block`` (one max, sub, exp, sum pass)."""
    top = block.amax(dim=dim, keepdim=True).nan_to_num_(neginf=0.0)
    block.sub_(top).exp_()
    total = block.sum(dim=dim).log_().add_(top.squeeze(dim))
    torch.logaddexp(lse, total, out=lse)


_NEGLIGIBLE_TOTAL = math.exp(-60.0)
"""Column sums below this (relative to the block's largest row maximum) are recomputed exactly."""


def _accumulate_both_lse(
    block: Tensor, row_lse: Tensor, col_lse: Tensor, recompute: Callable[[], Tensor]
) -> None:
    """Row and column log-sum-exps of one block from a single exp pass.

    With E_ij = exp(S_ij - top_i) (top_i the row maximum) and K = max_i top_i, the column sums are
    sum_i exp(S_ij) = e^K sum_i E_ij exp(top_i - K): one matrix-vector product instead of a second exp pass. Rows
    whose top_i lies far below K underflow there; a column whose sum comes out below e^-60 (where that could matter)
    is redone exactly from ``recompute()`` (the block's logits again). Off the CPU (no host synchronisation per
    block), the columns are always computed exactly from ``recompute()``.
    """
    if block.device.type != "cpu":
        _accumulate_lse(recompute(), 0, col_lse)
        _accumulate_lse(block, 1, row_lse)
        return
    top = block.amax(dim=1).nan_to_num_(neginf=0.0)
    block.sub_(top[:, None]).exp_()
    peak = top.max()
    col_total = torch.mv(block.T, (top - peak).exp_())
    torch.logaddexp(row_lse, block.sum(dim=1).log_().add_(top), out=row_lse)
    if bool((col_total >= _NEGLIGIBLE_TOTAL).all()):
        torch.logaddexp(col_lse, col_total.log_().add_(peak), out=col_lse)
    else:
        _accumulate_lse(recompute(), 0, col_lse)


def _fold_gradient(lse: Tensor, grad: Tensor) -> tuple[Tensor, Tensor | None]:
    """Write g_i exp(S_ij - lse_i) as exp(S_ij - (lse_i - log g_i)) when every g_i > 0 (the usual case: a mean of
    contrastive losses), saving one pass over each block; otherwise return the scale g to multiply by. Off the CPU
    the scale is always returned (no host synchronisation)."""
    if grad.device.type == "cpu" and bool((grad > 0).all()):
        return lse - grad.log(), None
    return lse, grad


GradientForecast = Callable[[Tensor, int, int], Tensor]
"""Maps (row log-sum-exps of rows r0:r1, r0, r1) to the gradient that the loss will send to them, up to a scalar."""


def _forward_blocks(
    q: Tensor, c: Tensor, leave: LeaveOut, want_columns: bool, block_rows: int, block_cols: int
) -> tuple[Tensor, Tensor]:
    """Row (and column) log-sum-exps, one (rows x cols) block at a time."""
    n, m = q.shape[0], c.shape[0]
    like = q.new_empty(0, dtype=accumulator_dtype(q))
    row_lse = torch.full((n,), -math.inf, dtype=like.dtype, device=q.device)
    col_lse = torch.full((m if want_columns else 0,), -math.inf, dtype=like.dtype, device=q.device)
    work = Workspace(min(n, block_rows), min(m, block_cols), like, want_columns)
    for r0, r1 in spans(n, block_rows):
        for c0, c1 in spans(m, block_cols):
            block = block_logits(q, c, r0, r1, c0, c1, leave, work.first(r1 - r0, c1 - c0))
            if not want_columns:
                _accumulate_lse(block, 1, row_lse[r0:r1])
                continue
            spare = work.second(r1 - r0, c1 - c0)

            def recompute(
                r0: int = r0, r1: int = r1, c0: int = c0, c1: int = c1, spare: Tensor = spare
            ) -> Tensor:
                return block_logits(q, c, r0, r1, c0, c1, leave, spare)

            _accumulate_both_lse(block, row_lse[r0:r1], col_lse[c0:c1], recompute)
    return row_lse, col_lse


def _forward_stripes(
    q: Tensor,
    c: Tensor,
    leave: LeaveOut,
    stripe_rows: int,
    forecast: GradientForecast,
    needs: tuple[bool, bool],
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """Row log-sum-exps over stripes of full rows, and the gradients for the forecast row weights g, in 3 GEMMs.

    A stripe holds every column, so its lse_i are final at once: with E_ij = exp(S_ij - max_i) and
    z_i = sum_j E_ij, the weights are W_ij = g_i E_ij / z_i, and dq = W c, dc = W^T q need no second pass.
    """
    n, m = q.shape[0], c.shape[0]
    acc = accumulator_dtype(q)
    row_lse = torch.empty(n, dtype=acc, device=q.device)
    grad_q = torch.zeros(q.shape, dtype=acc, device=q.device) if needs[0] else None
    grad_c = torch.zeros(c.shape, dtype=acc, device=c.device) if needs[1] else None
    forecasts = torch.empty(n, dtype=acc, device=q.device)
    work = Workspace(min(n, stripe_rows), m, row_lse, False)
    for r0, r1 in spans(n, stripe_rows):
        block = block_logits(q, c, r0, r1, 0, m, leave, work.first(r1 - r0, m))
        top = block.amax(dim=1, keepdim=True).nan_to_num_(neginf=0.0)
        total = block.sub_(top).exp_().sum(dim=1)
        torch.add(total.log(), top.squeeze(1), out=row_lse[r0:r1])
        forecasts[r0:r1] = forecast(row_lse[r0:r1], r0, r1)
        scale = (forecasts[r0:r1] / total)[:, None]
        if grad_q is not None:
            accumulate_product(grad_q[r0:r1], block, c)
            grad_q[r0:r1].mul_(scale)
        if grad_c is not None:
            accumulate_product(grad_c, block.T, (q[r0:r1] * scale).to(q.dtype))
    return row_lse, forecasts, grad_q, grad_c


def _proportion(grad: Tensor, forecast: Tensor) -> Tensor | None:
    """The scalar u with grad = u * forecast (to 1e-6 of max|grad|), or None when the loss sent something else."""
    norm = forecast.dot(forecast)
    if not bool(norm > 0):
        return None
    u = grad.dot(forecast) / norm
    tolerance = 1e-6 * float(grad.abs().max())
    return u if float((grad - u * forecast).abs().max()) <= tolerance else None


_RANK_ONE_LIMIT = {torch.float64: 600.0}
"""Largest rs_i - cs_j for which a block's weights are formed with one exp pass (float32 and others: 30)."""


def _rank_one_factors(row_shift: Tensor, col_shift: Tensor) -> tuple[Tensor, Tensor] | None:
    """u, v with exp(rs_i - cs_j) = u_i v_j for one block, or None when some rs_i - cs_j may exceed the limit.

    The symmetric weights W_ij = exp(S_ij - rs_i) + exp(S_ij - cs_j) are then E_ij (1 + u_i v_j) with
    E_ij = exp(S_ij - rs_i): one exp pass instead of two. With K = max_i rs_i, u_i = exp(rs_i - K) <= 1 and
    v_j = exp(K - cs_j) <= e^limit; an E_ij that underflows carries a column term below e^(limit - 87) (float32),
    negligible, and the limit (30 in float32, 600 in float64) keeps every factor finite.
    """
    peak = row_shift.max()
    spread = float(peak - col_shift.min())
    if not spread <= _RANK_ONE_LIMIT.get(row_shift.dtype, 30.0):
        return None
    return (row_shift - peak).exp(), (peak - col_shift).exp()


def _backward_blocks(
    q: Tensor,
    c: Tensor,
    row_lse: Tensor,
    col_lse: Tensor,
    grad_row: Tensor,
    grad_col: Tensor,
    leave: LeaveOut,
    blocks: tuple[int, int],
    needs: tuple[bool, bool],
) -> tuple[Tensor | None, Tensor | None]:
    """Recompute each block and accumulate dq = W c and dc = W^T q (see the module docstring)."""
    block_rows, block_cols = blocks
    columns = col_lse.numel() > 0
    n, m = q.shape[0], c.shape[0]
    acc = row_lse.dtype
    grad_q = torch.zeros(q.shape, dtype=acc, device=q.device) if needs[0] else None
    grad_c = torch.zeros(c.shape, dtype=acc, device=c.device) if needs[1] else None
    work = Workspace(min(n, block_rows), min(m, block_cols), row_lse, columns)
    row_shift, row_scale = _fold_gradient(row_lse, grad_row)
    col_shift, col_scale = _fold_gradient(col_lse, grad_col) if columns else (col_lse, None)
    rank_one = columns and row_scale is None and col_scale is None and q.device.type == "cpu"
    for r0, r1 in spans(n, block_rows):
        for c0, c1 in spans(m, block_cols):
            weights = block_logits(q, c, r0, r1, c0, c1, leave, work.first(r1 - r0, c1 - c0))
            factors = _rank_one_factors(row_shift[r0:r1], col_shift[c0:c1]) if rank_one else None
            by_column = None
            if factors is not None:
                weights.sub_(row_shift[r0:r1, None]).exp_()
                spread = torch.outer(factors[0], factors[1], out=work.second(r1 - r0, c1 - c0))
                weights.addcmul_(weights, spread)
            elif columns:
                by_column = torch.sub(
                    weights, col_shift[None, c0:c1], out=work.second(r1 - r0, c1 - c0)
                ).exp_()
                if col_scale is not None:
                    by_column.mul_(col_scale[None, c0:c1])
            if factors is None:
                weights.sub_(row_shift[r0:r1, None]).exp_()
            if row_scale is not None:
                weights.mul_(row_scale[r0:r1, None])
            if by_column is not None:
                weights.add_(by_column)
            if grad_q is not None:
                accumulate_product(grad_q[r0:r1], weights, c[c0:c1])
            if grad_c is not None:
                accumulate_product(grad_c[c0:c1], weights.T, q[r0:r1])
    return grad_q, grad_c


class _TiledLogSumExp(torch.autograd.Function):
    """Row and (optionally) column log-sum-exp of q c^T computed in blocks; see the module docstring.

    With a gradient ``forecast`` (one-sided losses reduced by a mean), the forward pass runs over stripes of full rows
    and also computes the gradients for the forecast weights (3 GEMMs in all). The backward pass uses them, scaled,
    when the incoming gradient is proportional to the forecast, and otherwise recomputes exactly. The proportionality
    test reads two numbers on the host, so the forecast runs on the CPU only; on CUDA the backward pass always
    recomputes (4 GEMMs, no host synchronisation).

    Mixed precision: inside ``torch.autocast`` (bf16 on the CPU, bf16/fp16 on CUDA) the inputs are cast once to the
    autocast dtype and every GEMM runs in it, while the blocks' exp/sum passes, the log-sum-exps and the gradient
    accumulators stay in float32; the gradients are returned in float32.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        c: Tensor,
        leave: LeaveOut,
        want_columns: bool,
        block_rows: int,
        block_cols: int,
        forecast: GradientForecast | None,
    ) -> tuple[Tensor, Tensor]:
        needs = (bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]))
        low = low_precision(q)
        if low is not None:
            q, c = q.to(low), c.to(low)
        stripe_rows = (block_rows * block_cols) // c.shape[0]
        empty = q.new_empty(0, dtype=accumulator_dtype(q))
        on_cpu = q.device.type == "cpu"
        if forecast is not None and on_cpu and not want_columns and stripe_rows >= 1 and any(needs):
            row_lse, forecasts, grad_q, grad_c = _forward_stripes(q, c, leave, stripe_rows, forecast, needs)
            col_lse = empty
            ctx.forecast = (forecasts, grad_q, grad_c)
        else:
            row_lse, col_lse = _forward_blocks(q, c, leave, want_columns, block_rows, block_cols)
            ctx.forecast = None
        ctx.save_for_backward(q, c, row_lse, col_lse)
        ctx.leave = leave
        ctx.blocks = (block_rows, block_cols)
        return row_lse, col_lse

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad_row: Tensor, grad_col: Tensor) -> tuple[Tensor | None, ...]:
        q, c, row_lse, col_lse = ctx.saved_tensors
        needs = (bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]))
        if ctx.forecast is not None:
            forecasts, grad_q, grad_c = ctx.forecast
            u = _proportion(grad_row, forecasts)
            if u is not None:
                return (
                    grad_q * u if grad_q is not None and needs[0] else None,
                    grad_c * u if grad_c is not None and needs[1] else None,
                    None,
                    None,
                    None,
                    None,
                    None,
                )
        grad_q, grad_c = _backward_blocks(
            q, c, row_lse, col_lse, grad_row, grad_col, ctx.leave, ctx.blocks, needs
        )
        return grad_q, grad_c, None, None, None, None, None


def _block_sizes(block_size: int | None, device: torch.device) -> tuple[int, int]:
    """(rows, cols) per block: the defaults (4x larger on CUDA, where a 2048 x 4096 block is too small a GEMM), or
    ``block_size`` (an int >= 1, checked) for both."""
    if block_size is None:
        scale = 2 if device.type == "cuda" else 1
        return DEFAULT_BLOCK_ROWS * scale, DEFAULT_BLOCK_COLS * scale
    check_count("block_size", block_size, 1)
    return block_size, block_size


def tiled_logsumexp(
    queries: Tensor,
    candidates: Tensor,
    *,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    block_size: int | None = None,
    forecast: GradientForecast | None = None,
) -> Tensor:
    """Row log-sum-exp ``lse_i = log sum_j exp(<q_i, c_j>)`` of the n x m logits, in O(block) extra memory.

    Args:
        queries: (n, d) queries, already scaled by 1/tau.
        candidates: (m, d) candidates (negatives, or the batch's positives).
        exclude_offset: leave out j = i + offset: the positive of query i when the candidates hold the batch's
            positives from row ``offset`` on (in-batch: 0; a batch gathered from several ranks: this rank's first row).
        row_ids, col_ids: (n,) and (m,) integer ids; leave out every j with ``col_ids[j] == row_ids[i]`` (false
            negatives: the same item as query i's positive). Both or neither (:mod:`crl.objectives._mask`).
        block_size: rows and columns per block (default 2048 x 4096; 4096 x 8192 on CUDA).
        forecast: optional ``(lse[r0:r1], r0, r1) -> g[r0:r1]``, the gradient the loss will send to the row
            log-sum-exps up to one scalar factor (a mean of per-anchor losses). With it, the gradients are computed
            in the forward pass over stripes of full rows (3 GEMMs instead of 4); a backward pass that receives
            anything else falls back to the exact recomputation.

    Returns:
        (n,) tensor, differentiable in both inputs; equal to ``torch.logsumexp(q @ c.T, 1)`` up to rounding
        (-inf for a row whose every candidate is left out).
    """
    rows, cols = _block_sizes(block_size, queries.device)
    leave = LeaveOut(exclude_offset, row_ids, col_ids)
    row_lse, _ = _TiledLogSumExp.apply(queries, candidates, leave, False, rows, cols, forecast)
    return row_lse


def tiled_logsumexp_both(
    queries: Tensor,
    candidates: Tensor,
    *,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    block_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Row and column log-sum-exps of the same logits S = q c^T, sharing every block (symmetric CLIP loss).

    Arguments as :func:`tiled_logsumexp`; the left-out entries are left out of both.

    Returns:
        ``(row_lse (n,), col_lse (m,))`` with ``row_lse_i = log sum_j exp S_ij`` and ``col_lse_j = log sum_i exp S_ij``.
    """
    rows, cols = _block_sizes(block_size, queries.device)
    leave = LeaveOut(exclude_offset, row_ids, col_ids)
    row_lse, col_lse = _TiledLogSumExp.apply(queries, candidates, leave, True, rows, cols, None)
    return row_lse, col_lse


def dense_logsumexp(
    queries: Tensor,
    candidates: Tensor,
    *,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
) -> Tensor:
    """The plain reference of :func:`tiled_logsumexp`: ``logsumexp(q @ c.T, 1)`` with the n x m matrix in memory."""
    logits = LeaveOut(exclude_offset, row_ids, col_ids).dense(queries @ candidates.T)
    return torch.logsumexp(logits.to(accumulator_dtype(logits)), dim=1)


def dense_logsumexp_both(
    queries: Tensor,
    candidates: Tensor,
    *,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The plain reference of :func:`tiled_logsumexp_both`: ``(row_lse (n,), col_lse (m,))`` of S = q c^T."""
    logits = LeaveOut(exclude_offset, row_ids, col_ids).dense(queries @ candidates.T)
    logits = logits.to(accumulator_dtype(logits))
    return torch.logsumexp(logits, dim=1), torch.logsumexp(logits, dim=0)
