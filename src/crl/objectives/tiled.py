"""Exact log-sum-exp over m candidates without holding the n x m score matrix.

For queries a_i, candidates c_j and temperature tau, the logits are <a_i, c_j> / tau. The contrastive forms of [A]
and [B] need, per anchor, only the row log-sum-exp ``lse_i = log sum_j exp(<a_i, c_j> / tau)`` (and, for the
symmetric CLIP loss, the column log-sum-exp ``lse_j = log sum_i exp(<a_i, c_j> / tau)`` of the same matrix). This
module computes both block by block in a custom autograd function: the forward pass keeps one (rows x cols) block
at a time and stores only the inputs and the log-sum-exps; the backward pass recomputes each block and forms

    dq_i = sum_j W_ij c_j,   dc_j = sum_i W_ij q_i,   W_ij = g_i softmax_row(S)_ij + h_j softmax_col(S)_ij,

with g, h the incoming gradients of the row and column log-sum-exps.

The kernel works in base 2: its queries are q_i = log2(e) a_i / tau, formed in float64 and rounded once (as a_i / tau
alone would be), so that S_ij = <q_i, c_j> and e^(<a_i, c_j> / tau) = 2^S_ij. Every block is then exponentiated by
exp2, about half the time of exp on this CPU, with no pass to change the base; its log-sum-exps are log2 sum 2^S,
and the public functions return them times ln 2. Extra memory is O(block) beyond O((n + m) d)
(the gradients, and on the CPU one copy of c with a column of ones) whatever n and m; the cost is four GEMMs (one
forward, three backward) against three for the dense computation, and both directions of the symmetric loss share
them.
"""

import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from crl._validate import check_count
from crl.objectives._blocks import (
    LN_2,
    LOG2_E,
    Workspace,
    accumulate_product,
    accumulate_transposed,
    accumulator_dtype,
    block_logits,
    low_precision,
    spans,
)
from crl.objectives._mask import LeaveOut
from crl.objectives._shifted import (
    ShiftedOperands,
    bounded_operands,
    shifted_path,
    trusted,
)
from crl.objectives._tiled_backward import backward_blocks

DEFAULT_BLOCK_ROWS = 1024
DEFAULT_BLOCK_COLS = 1024
"""A 4 MiB float32 block stays in this CPU's 32 MiB L3 cache between the GEMM that writes it and the passes and
GEMMs that read it: in one run (n = m = 16384, one thread) the symmetric loss took 1.61x its three GEMMs with
1024 x 1024 blocks against 1.73x with 2048 x 4096 (docs/benchmarks.md)."""
DEFAULT_STRIPE_ELEMENTS = 2048 * 4096
"""Scores per stripe of full rows (the one-sided forecast). Its GEMMs need tall stripes: 64-row stripes of 2^20
scores took the one-sided loss to 1.59x its three GEMMs, 512-row stripes of 2^23 scores to 1.31x (m = 16384)."""
CUDA_BLOCK = (4096, 8192)
"""Rows and columns per block on CUDA, where smaller blocks make too small a GEMM."""


class Tiles(NamedTuple):
    """How the kernel cuts the n x m logits: (rows x cols) blocks, or stripes of full rows of ``stripe`` scores."""

    rows: int
    cols: int
    stripe: int


def _accumulate_lse(block: Tensor, dim: int, lse: Tensor) -> None:
    """lse <- logaddexp2(lse, log2 sum 2^block along ``dim``), overwriting ``block`` (one max, sub, exp2, sum pass)."""
    top = block.amax(dim=dim, keepdim=True).nan_to_num_(neginf=0.0)
    block.sub_(top).exp2_()
    total = block.sum(dim=dim).log2_().add_(top.squeeze(dim))
    torch.logaddexp2(lse, total, out=lse)


def _merge_rows(totals: Tensor, top: Tensor, row_lse: Tensor) -> None:
    """row_lse <- logaddexp2(row_lse, log2 z_i + top_i) from a block's row sums z_i = sum_j 2^(S_ij - top_i)."""
    torch.logaddexp2(row_lse, totals.log2_().add_(top), out=row_lse)


def _merge_columns(col_total: Tensor, peak: Tensor, col_lse: Tensor, recompute: Callable[[], Tensor]) -> None:
    """col_lse <- logaddexp2(col_lse, log2 sum_i 2^S_ij) from a block's sums col_total_j = sum_i 2^(S_ij - peak).

    The sums come from the rows' exp2 pass, E_ij = 2^(S_ij - top_i), as sum_i E_ij 2^(top_i - peak) with
    peak = max_i top_i: one matrix-vector product (or one fused pass) instead of a second exp2 pass. Rows whose
    top_i lies far below the peak underflow there; a column whose sum comes out below e^-60 (where that could
    matter) is redone exactly from ``recompute()`` (the block's logits again).
    """
    if trusted(col_total):
        torch.logaddexp2(col_lse, col_total.log2_().add_(peak), out=col_lse)
    else:
        _accumulate_lse(recompute(), 0, col_lse)


def _column_weights(top: Tensor) -> tuple[Tensor, Tensor]:
    """(2^(top_i - peak), peak) with peak = max_i top_i: the weights that turn a block's row-shifted exps into
    column sums relative to the peak (:func:`_merge_columns`)."""
    peak = top.max()
    return (top - peak).exp2_(), peak


GradientForecast = Callable[[Tensor, int, int], Tensor]
"""Maps (row log-sum-exps of rows r0:r1, in nats, r0, r1) to the gradient that the loss will send to them, up to a
scalar."""


def _block_exps(
    q: Tensor,
    c: Tensor,
    shifted: ShiftedOperands | None,
    span: tuple[int, int, int, int],
    leave: LeaveOut,
    out: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:
    """E_ij = 2^(S_ij - top_i) of one block (in ``out``), its row sums z_i and the shifts top_i: the fast path's
    bounds b_i (:mod:`crl.objectives._shifted`) when every row sum can be trusted, else the exact row maxima."""
    if shifted is not None:
        exps, totals = shifted.exp_row_sums(span, leave, out)
        if trusted(totals):
            return exps, totals, shifted.shift[span[0] : span[1]]
    return _exact_block_exps(q, c, span, leave, out)


def _exact_block_exps(
    q: Tensor, c: Tensor, span: tuple[int, int, int, int], leave: LeaveOut, out: Tensor
) -> tuple[Tensor, Tensor, Tensor]:
    """E_ij = 2^(S_ij - top_i) of one block (in ``out``), its row sums and top_i = max_j S_ij (0 for empty rows)."""
    block = block_logits(q, c, *span, leave, out)
    top = block.amax(dim=1).nan_to_num_(neginf=0.0)
    return block, block.sub_(top[:, None]).exp2_().sum(dim=1), top


def _shifted_block_both(
    shifted: ShiftedOperands,
    span: tuple[int, int, int, int],
    leave: LeaveOut,
    out: Tensor,
    lse: tuple[Tensor, Tensor],
    recompute: Callable[[], Tensor],
) -> bool:
    """Accumulate one block's row and column log-sum-exps ``lse`` from the fast path's single pass of row and
    weighted column sums (:meth:`ShiftedOperands.exp_sums`); False (nothing accumulated) when a row sum cannot be
    trusted, and the caller takes the exact path."""
    r0, r1, c0, c1 = span
    top = shifted.shift[r0:r1]
    weights, peak = _column_weights(top)
    totals, col_total = shifted.exp_sums(span, leave, weights, out)
    if not trusted(totals):
        return False
    row_lse, col_lse = lse
    _merge_rows(totals, top, row_lse[r0:r1])
    _merge_columns(col_total, peak, col_lse[c0:c1], recompute)
    return True


def _forward_blocks(
    q: Tensor, c: Tensor, leave: LeaveOut, want_columns: bool, block_rows: int, block_cols: int
) -> tuple[Tensor, Tensor]:
    """Base-2 row (and column) log-sum-exps, one (rows x cols) block at a time, from one exp2 pass per block.

    On the CPU the column sums come from the same exp2 pass (:func:`_merge_columns`), on the fast path from the
    same fused pass as the row sums (:func:`_shifted_block_both`); off the CPU (no host synchronisation per block)
    each block's column log-sum-exps are computed exactly from its logits again.
    """
    n, m = q.shape[0], c.shape[0]
    like = q.new_empty(0, dtype=accumulator_dtype(q))
    row_lse = torch.full((n,), -math.inf, dtype=like.dtype, device=q.device)
    col_lse = torch.full((m if want_columns else 0,), -math.inf, dtype=like.dtype, device=q.device)
    work = Workspace(min(n, block_rows), min(m, block_cols), like, want_columns)
    shifted = bounded_operands(q, c, block_rows) if shifted_path(q) else None
    on_cpu = q.device.type == "cpu"
    for r0, r1 in spans(n, block_rows):
        for c0, c1 in spans(m, block_cols):
            span, out = (r0, r1, c0, c1), work.first(r1 - r0, c1 - c0)
            if not want_columns:
                _, totals, top = _block_exps(q, c, shifted, span, leave, out)
                _merge_rows(totals, top, row_lse[r0:r1])
                continue
            recompute = partial(block_logits, q, c, *span, leave, work.second(r1 - r0, c1 - c0))
            if shifted is not None and _shifted_block_both(
                shifted, span, leave, out, (row_lse, col_lse), recompute
            ):
                continue
            if not on_cpu:
                _accumulate_lse(recompute(), 0, col_lse[c0:c1])
            exps, totals, top = _exact_block_exps(q, c, span, leave, out)
            _merge_rows(totals, top, row_lse[r0:r1])
            if on_cpu:
                weights, peak = _column_weights(top)
                _merge_columns(torch.mv(exps.T, weights), peak, col_lse[c0:c1], recompute)
    return row_lse, col_lse


def _forward_stripes(
    q: Tensor,
    c: Tensor,
    leave: LeaveOut,
    stripe_rows: int,
    forecast: GradientForecast,
    needs: tuple[bool, bool],
) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
    """Base-2 row log-sum-exps over stripes of full rows, and the gradients for the forecast row weights g, in 3 GEMMs.

    A stripe holds every column, so its lse_i are final at once: with E_ij = 2^(S_ij - top_i) and
    z_i = sum_j E_ij, the weights are W_ij = g_i E_ij / z_i, and dq = W c, dc = W^T q need no second pass.
    """
    n, m = q.shape[0], c.shape[0]
    acc = accumulator_dtype(q)
    row_lse = torch.empty(n, dtype=acc, device=q.device)
    grad_q = torch.zeros(q.shape, dtype=acc, device=q.device) if needs[0] else None
    grad_c_t = torch.zeros(c.shape[::-1], dtype=acc, device=c.device) if needs[1] else None
    forecasts = torch.empty(n, dtype=acc, device=q.device)
    work = Workspace(min(n, stripe_rows), m, row_lse, False)
    shifted = bounded_operands(q, c, stripe_rows) if shifted_path(q) else None
    for r0, r1 in spans(n, stripe_rows):
        block, total, top = _block_exps(q, c, shifted, (r0, r1, 0, m), leave, work.first(r1 - r0, m))
        torch.add(total.log2(), top, out=row_lse[r0:r1])
        forecasts[r0:r1] = forecast(row_lse[r0:r1] * LN_2, r0, r1)
        scale = (forecasts[r0:r1] / total)[:, None]
        if grad_q is not None:
            accumulate_product(grad_q[r0:r1], block, c)
            grad_q[r0:r1].mul_(scale)
        if grad_c_t is not None:
            accumulate_transposed(grad_c_t, (q[r0:r1] * scale).to(q.dtype), block)
    return row_lse, forecasts, grad_q, None if grad_c_t is None else grad_c_t.T.contiguous()


def _proportion(grad: Tensor, forecast: Tensor) -> Tensor | None:
    """The scalar u with grad = u * forecast (to 1e-6 of max|grad|), or None when the loss sent something else.

    u = <grad, forecast> / <forecast, forecast> is formed in float64: float32 dot products of n ~ 10^4 terms carry
    relative errors of order 1e-6 (summation order varies with the thread count), which rejected an exactly
    proportional gradient whenever the factor was not a power of two (the base-2 kernel's ln 2 is not)."""
    wide = forecast.double()
    norm = wide.dot(wide)
    if not bool(norm > 0):
        return None
    u = (grad.double().dot(wide) / norm).to(grad.dtype)
    tolerance = 1e-6 * float(grad.abs().max())
    return u if float((grad - u * forecast).abs().max()) <= tolerance else None


class _TiledLogSumExp(torch.autograd.Function):
    """Base-2 row and (optionally) column log-sum-exp of q c^T computed in blocks; see the module docstring.

    With a gradient ``forecast`` (one-sided losses reduced by a mean), the forward pass runs over stripes of full rows
    and also computes the gradients for the forecast weights (3 GEMMs in all). The backward pass uses them, scaled,
    when the incoming gradient is proportional to the forecast, and otherwise recomputes exactly. The proportionality
    test reads two numbers on the host, so the forecast runs on the CPU only; on CUDA the backward pass always
    recomputes (4 GEMMs, no host synchronisation).

    Mixed precision: inside ``torch.autocast`` (bf16 on the CPU, bf16/fp16 on CUDA) the inputs are cast once to the
    autocast dtype and every GEMM runs in it, while the blocks' exp2/sum passes, the log-sum-exps and the gradient
    accumulators stay in float32; the gradients are returned in float32.
    """

    @staticmethod
    def forward(
        ctx: Any,
        q: Tensor,
        c: Tensor,
        leave: LeaveOut,
        want_columns: bool,
        tiles: Tiles,
        forecast: GradientForecast | None,
    ) -> tuple[Tensor, Tensor]:
        needs = (bool(ctx.needs_input_grad[0]), bool(ctx.needs_input_grad[1]))
        low = low_precision(q)
        if low is not None:
            q, c = q.to(low), c.to(low)
        stripe_rows = tiles.stripe // c.shape[0]
        empty = q.new_empty(0, dtype=accumulator_dtype(q))
        on_cpu = q.device.type == "cpu"
        if forecast is not None and on_cpu and not want_columns and stripe_rows >= 1 and any(needs):
            row_lse, forecasts, grad_q, grad_c = _forward_stripes(q, c, leave, stripe_rows, forecast, needs)
            col_lse = empty
            ctx.forecast = (forecasts, grad_q, grad_c)
        else:
            row_lse, col_lse = _forward_blocks(q, c, leave, want_columns, tiles.rows, tiles.cols)
            ctx.forecast = None
        ctx.save_for_backward(q, c, row_lse, col_lse)
        ctx.leave = leave
        ctx.blocks = (tiles.rows, tiles.cols)
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
                )
        grad_q, grad_c = backward_blocks(
            q, c, row_lse, col_lse, grad_row, grad_col, ctx.leave, ctx.blocks, needs
        )
        return grad_q, grad_c, None, None, None, None


def _tiles(block_size: int | None, device: torch.device) -> Tiles:
    """The defaults (CPU: 1024 x 1024 blocks, 2048 x 4096-score stripes; CUDA: 4096 x 8192 for both), or
    ``block_size`` (an int >= 1, checked) for the rows and columns of both."""
    if block_size is not None:
        check_count("block_size", block_size, 1)
        return Tiles(block_size, block_size, block_size * block_size)
    if device.type == "cuda":
        return Tiles(*CUDA_BLOCK, CUDA_BLOCK[0] * CUDA_BLOCK[1])
    return Tiles(DEFAULT_BLOCK_ROWS, DEFAULT_BLOCK_COLS, DEFAULT_STRIPE_ELEMENTS)


Temperature = Tensor | float | None
"""tau: a float, a 0-d tensor, or an (n,) tensor of per-query temperatures; None for queries already divided by it."""


def _per_query(tau: Tensor, dtype: torch.dtype) -> Tensor:
    """tau in ``dtype``, shaped to divide (n, d) queries (a column for per-query tau_i)."""
    tau = tau.to(dtype)
    return tau[:, None] if tau.ndim == 1 else tau


class _Base2Queries(torch.autograd.Function):
    """q = log2(e) a / tau (tau a tensor: 0-d, or an (n, 1) column), rounded once from float64.

    Autograd's own product would keep the float64 copy of a for tau's gradient (8 n d bytes, 64 MiB at n = 65536,
    d = 128); here the backward pass uses q, which the kernel keeps anyway: da = g log2(e) / tau, dtau = -sum g q / tau.
    """

    @staticmethod
    def forward(ctx: Any, queries: Tensor, tau: Tensor) -> Tensor:
        q = (queries.to(torch.float64) * (LOG2_E / tau.to(torch.float64))).to(queries.dtype)
        ctx.save_for_backward(q, tau)
        return q

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None]:
        q, tau = ctx.saved_tensors
        grad_queries = grad * (LOG2_E / tau) if ctx.needs_input_grad[0] else None
        grad_tau = None
        if ctx.needs_input_grad[1]:
            per_entry = -(grad * q) / tau
            grad_tau = per_entry.sum() if tau.ndim == 0 else per_entry.sum(dim=1, keepdim=True)
        return grad_queries, grad_tau


def base2_queries(queries: Tensor, tau: Temperature) -> Tensor:
    """q_i = log2(e) a_i / tau_i, the kernel's base-2 queries, in ``queries``' dtype.

    The product is formed in float64 (O(n d)) and rounded once, as a_i / tau alone would be: rounding a_i / tau
    first and then multiplying by log2 e would round every query twice, which doubled the float32 gradient error at
    tau = 0.01 (tests/objectives/test_tiled_fast_paths.py). Differentiable in ``queries`` and ``tau``.
    """
    if isinstance(tau, Tensor):
        return _Base2Queries.apply(queries, _per_query(tau, queries.dtype))
    scale = LOG2_E if tau is None else LOG2_E / float(tau)
    return (queries.to(torch.float64) * scale).to(queries.dtype)


def divided_queries(queries: Tensor, tau: Temperature) -> Tensor:
    """a_i / tau_i (``queries`` unchanged when tau is None): the dense path's queries."""
    if tau is None:
        return queries
    return queries / (_per_query(tau, queries.dtype) if isinstance(tau, Tensor) else float(tau))


def tiled_logsumexp(
    queries: Tensor,
    candidates: Tensor,
    *,
    tau: Temperature = None,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    block_size: int | None = None,
    forecast: GradientForecast | None = None,
) -> Tensor:
    """Row log-sum-exp ``lse_i = log sum_j exp(<a_i, c_j> / tau_i)`` of the n x m logits, in O(block) extra memory
    beyond O((n + m) d).

    Args:
        queries: (n, d) queries a_i.
        candidates: (m, d) candidates (negatives, or the batch's positives).
        tau: the temperature (a float, 0-d or (n,) tensor), or None for queries already divided by it. Passing it
            is the more accurate in float32: the kernel's base-2 queries log2(e) a_i / tau are then rounded once
            (:func:`base2_queries`).
        exclude_offset: leave out j = i + offset: the positive of query i when the candidates hold the batch's
            positives from row ``offset`` on (in-batch: 0; a batch gathered from several ranks: this rank's first row).
        row_ids, col_ids: (n,) and (m,) integer ids; leave out every j with ``col_ids[j] == row_ids[i]`` (false
            negatives: the same item as query i's positive). Both or neither (:mod:`crl.objectives._mask`).
        block_size: rows and columns per block (default 1024 x 1024, stripes of 2048 x 4096 scores; 4096 x 8192
            on CUDA).
        forecast: optional ``(lse[r0:r1], r0, r1) -> g[r0:r1]``, the gradient the loss will send to the row
            log-sum-exps up to one scalar factor (a mean of per-anchor losses). With it, the gradients are computed
            in the forward pass over stripes of full rows (3 GEMMs instead of 4); a backward pass that receives
            anything else falls back to the exact recomputation.

    Returns:
        (n,) tensor, differentiable in the queries, candidates and tau; equal to
        ``torch.logsumexp(a @ c.T / tau, 1)`` up to rounding (-inf for a row whose every candidate is left out).
    """
    leave = LeaveOut(exclude_offset, row_ids, col_ids)
    tiles = _tiles(block_size, queries.device)
    q = base2_queries(queries, tau)
    row_lse, _ = _TiledLogSumExp.apply(q, candidates, leave, False, tiles, forecast)
    return row_lse * LN_2


def tiled_logsumexp_both(
    queries: Tensor,
    candidates: Tensor,
    *,
    tau: Temperature = None,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
    block_size: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Row and column log-sum-exps of the same logits S = a c^T / tau, sharing every block (symmetric CLIP loss).

    Arguments as :func:`tiled_logsumexp`; the left-out entries are left out of both.

    Returns:
        ``(row_lse (n,), col_lse (m,))`` with ``row_lse_i = log sum_j exp S_ij`` and ``col_lse_j = log sum_i exp S_ij``.
    """
    leave = LeaveOut(exclude_offset, row_ids, col_ids)
    tiles = _tiles(block_size, queries.device)
    q = base2_queries(queries, tau)
    row_lse, col_lse = _TiledLogSumExp.apply(q, candidates, leave, True, tiles, None)
    return row_lse * LN_2, col_lse * LN_2


def dense_logsumexp(
    queries: Tensor,
    candidates: Tensor,
    *,
    tau: Temperature = None,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
) -> Tensor:
    """The plain reference of :func:`tiled_logsumexp`: ``logsumexp(a @ c.T / tau, 1)`` with the n x m matrix in
    memory."""
    logits = divided_queries(queries, tau) @ candidates.T
    logits = LeaveOut(exclude_offset, row_ids, col_ids).dense(logits)
    return torch.logsumexp(logits.to(accumulator_dtype(logits)), dim=1)


def dense_logsumexp_both(
    queries: Tensor,
    candidates: Tensor,
    *,
    tau: Temperature = None,
    exclude_offset: int | None = None,
    row_ids: Tensor | None = None,
    col_ids: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The plain reference of :func:`tiled_logsumexp_both`: ``(row_lse (n,), col_lse (m,))`` of S = a c^T / tau."""
    logits = divided_queries(queries, tau) @ candidates.T
    logits = LeaveOut(exclude_offset, row_ids, col_ids).dense(logits).to(accumulator_dtype(logits))
    return torch.logsumexp(logits, dim=1), torch.logsumexp(logits, dim=0)
