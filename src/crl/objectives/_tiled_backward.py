"""The tiled kernel's backward pass: each block recomputed once, feeding both input gradients.

For base-2 row (and column) log-sum-exps of S = q c^T (:mod:`crl.objectives.tiled`) with incoming gradients g
(and h), the block weights are

    W_ij = g_i 2^(S_ij - lse_i) + h_j 2^(S_ij - lse'_j),

and dq = W c, dc = W^T q accumulate block by block (:func:`backward_blocks`). Positive g_i fold into the shift
(2^(S_ij - (lse_i - log2 g_i))), saving a pass; the symmetric weights come from one exp2 pass in rank-one form
(:func:`_rank_one_factors`); on the CPU fast path the block GEMM writes S_ij - rs_i itself and one fused pass
forms the weights (:mod:`crl.objectives._shifted`).
"""

import torch
from torch import Tensor

from crl.objectives._blocks import (
    TransposedBlocks,
    Workspace,
    accumulate_product,
    accumulate_transposed,
    block_logits,
    outer_into,
    spans,
)
from crl.objectives._mask import LeaveOut
from crl.objectives._shifted import ShiftedOperands, shifted_operands, shifted_path


def _fold_gradient(lse: Tensor, grad: Tensor) -> tuple[Tensor, Tensor | None]:
    """Write g_i 2^(S_ij - lse_i) as 2^(S_ij - (lse_i - log2 g_i)) when every g_i > 0 (the usual case: a mean of
    contrastive losses), saving one pass over each block; otherwise return the scale g to multiply by. Off the CPU
    the scale is always returned (no host synchronisation)."""
    if grad.device.type == "cpu" and bool((grad > 0).all()):
        return lse - grad.log2(), None
    return lse, grad


_RANK_ONE_LIMIT = {torch.float64: 865.0}
"""Largest rs_i - cs_j (base 2) for which a block's weights are formed with one exp2 pass (float32 and others: 43;
in nats 600 and 30)."""


def _rank_one_factors(row_shift: Tensor, col_shift: Tensor) -> tuple[Tensor, Tensor] | None:
    """u, v with 2^(rs_i - cs_j) = u_i v_j for one block, or None when some rs_i - cs_j may exceed the limit.

    The symmetric weights W_ij = 2^(S_ij - rs_i) + 2^(S_ij - cs_j) are then E_ij (1 + u_i v_j) with
    E_ij = 2^(S_ij - rs_i): one exp2 pass instead of two. With K = max_i rs_i, u_i = 2^(rs_i - K) <= 1 and
    v_j = 2^(K - cs_j) <= 2^limit; an E_ij that underflows carries a column term below 2^(limit - 126) (float32),
    negligible, and the limit (43 in float32, 865 in float64) keeps every factor finite.
    """
    peak = row_shift.max()
    spread = float(peak - col_shift.min())
    if not spread <= _RANK_ONE_LIMIT.get(row_shift.dtype, 43.0):
        return None
    return (row_shift - peak).exp2(), (peak - col_shift).exp2()


def _rows(values: Tensor | None, start: int, stop: int) -> Tensor | None:
    """values[start:stop], or None."""
    return None if values is None else values[start:stop]


def _exact_weights(
    logits: Tensor,
    shifts: tuple[Tensor, Tensor],
    scales: tuple[Tensor | None, Tensor | None],
    factors: tuple[Tensor, Tensor] | None,
    spare: Tensor,
) -> Tensor:
    """W_ij = g_i 2^(S_ij - lse_i) (+ h_j 2^(S_ij - lse'_j) with columns) of one block, from its logits S (in place).

    ``shifts`` are the block's row and column shifts (the gradients folded in when positive, else ``scales``);
    with rank-one ``factors`` the column term comes from the row term's exp2 pass (:func:`_rank_one_factors`).
    """
    (row_shift, col_shift), (row_scale, col_scale) = shifts, scales
    if factors is not None:
        weights = logits.sub_(row_shift[:, None]).exp2_()
        return weights.addcmul_(weights, outer_into(*factors, spare))
    by_column = None
    if col_shift.numel() > 0:
        by_column = torch.sub(logits, col_shift[None, :], out=spare).exp2_()
        if col_scale is not None:
            by_column.mul_(col_scale[None, :])
    weights = logits.sub_(row_shift[:, None]).exp2_()
    if row_scale is not None:
        weights.mul_(row_scale[:, None])
    return weights if by_column is None else weights.add_(by_column)


def _row_shifted(
    q: Tensor, c: Tensor, row_shift: Tensor, eligible: bool, blocks: tuple[int, int]
) -> ShiftedOperands | None:
    """The backward pass's fast-path operands (products S_ij - rs_i), where they apply and every rs_i is finite."""
    if eligible and shifted_path(q) and bool(torch.isfinite(row_shift).all()):
        return shifted_operands(q, c, row_shift, blocks[0])
    return None


def backward_blocks(
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
    """Recompute each block and accumulate dq = W c and dc = W^T q (see the module docstring).

    On the CPU fast path (:mod:`crl.objectives._shifted`) the block GEMM writes S_ij - rs_i directly, for the
    one-sided weights and for the symmetric ones in rank-one form; other blocks use :func:`_exact_weights`.
    """
    block_rows, block_cols = blocks
    columns = col_lse.numel() > 0
    n, m = q.shape[0], c.shape[0]
    acc = row_lse.dtype
    grad_q = torch.zeros(q.shape, dtype=acc, device=q.device) if needs[0] else None
    grad_c_t = TransposedBlocks(m, c.shape[1], block_cols, row_lse) if needs[1] else None
    work = Workspace(min(n, block_rows), min(m, block_cols), row_lse, columns)
    row_shift, row_scale = _fold_gradient(row_lse, grad_row)
    col_shift, col_scale = _fold_gradient(col_lse, grad_col) if columns else (col_lse, None)
    rank_one = columns and row_scale is None and col_scale is None and q.device.type == "cpu"
    shifted = _row_shifted(q, c, row_shift, rank_one or not columns, blocks)
    for r0, r1 in spans(n, block_rows):
        for c0, c1 in spans(m, block_cols):
            out = work.first(r1 - r0, c1 - c0)
            spare = work.second(r1 - r0, c1 - c0) if columns else out  # the column term's buffer
            factors = _rank_one_factors(row_shift[r0:r1], col_shift[c0:c1]) if rank_one else None
            if shifted is not None and factors is not None:
                weights = shifted.weighted_exp_block((r0, r1, c0, c1), leave, factors, out, spare)
            elif shifted is not None and not columns:
                weights = shifted.exp_block((r0, r1, c0, c1), leave, out)
                if row_scale is not None:
                    weights.mul_(row_scale[r0:r1, None])
            else:
                weights = _exact_weights(
                    block_logits(q, c, r0, r1, c0, c1, leave, out),
                    (row_shift[r0:r1], col_shift[c0:c1]),
                    (_rows(row_scale, r0, r1), _rows(col_scale, c0, c1)),
                    factors,
                    spare,
                )
            if grad_q is not None:
                accumulate_product(grad_q[r0:r1], weights, c[c0:c1])
            if grad_c_t is not None:
                accumulate_transposed(grad_c_t.block(c0, c1), q[r0:r1], weights)
    return grad_q, None if grad_c_t is None else grad_c_t.gradient()
