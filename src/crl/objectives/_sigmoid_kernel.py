"""SigLIP's sigmoid loss against shared candidates with softplus and sigmoid fused into the blocks.

For anchors a_i, positives p_i and candidates c_j, with q_i = a_i / tau, the logits z_ij = <q_i, c_j> + b come out
of one GEMM per chunk of anchors, [q_i, b] . [c_j, 1] (the bias as one more depth of the product, the 1/tau in q:
no pass over the chunk besides the GEMM's own write), and

    v_i = softplus(-(pos_i/tau + b)) + sum_j softplus(z_ij),          pos_i = <a_i, p_i>

takes one fused softplus pass and one row sum per chunk. The backward pass recomputes z, turns it into sigma(z)
in place (one pass) and forms every gradient from two GEMMs and O(n d) work:

    R = sigma(Z) C (per chunk),   da_i = g_i (R_i / tau + P_i p_i),   dc = sigma(Z)^T (g a / tau),
    dp_i = g_i P_i a_i,   dtau = -(1/tau) sum_i g_i (<a_i, R_i> / tau + P_i pos_i),
    db = sum_i g_i (sum_j sigma(z_ij) - sigma(-(pos_i/tau + b))),

with P_i = -sigma(-(pos_i/tau + b)) / tau, g the incoming gradient; sum_j sigma(z_ij) s_ij is <a_i, R_i> (no pass
over the chunk), and the row sums of sigma(Z) are read only when b needs a gradient. An anchor's own positive among
the candidates (in batch) is at z = -inf, where softplus and sigma are 0. Extra memory: two (chunk x M) buffers.
The softplus uses torch's threshold form (z itself above 20 in float32, 37 in float64), exact to the dtype's
rounding.
"""

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from crl.objectives._blocks import Workspace, accumulate_transposed, spans
from crl.objectives._mask import LeaveOut

_SOFTPLUS_THRESHOLD = {torch.float64: 37.0}
"""Above this, softplus(z) = z to the dtype's rounding (float32 and others: 20)."""


def _with_bias(q: Tensor, c: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """([q, b], [c, 1]): operands whose product is q c^T + b."""
    return torch.cat([q, bias.expand(q.shape[0], 1)], dim=1), torch.cat([c, c.new_ones(c.shape[0], 1)], dim=1)


def _logits(operands: tuple[Tensor, Tensor], r0: int, r1: int, offset: int | None, out: Tensor) -> Tensor:
    """z[r0:r1] = q[r0:r1] c^T + b into ``out`` from :func:`_with_bias`'s operands, the own positives at -inf."""
    q, c = operands
    torch.mm(q[r0:r1], c.T, out=out)
    return LeaveOut(offset).apply(out, r0, r1, 0, c.shape[0])


class _SigmoidChunks(torch.autograd.Function):
    """v_i of the sigmoid loss, chunk by chunk (module docstring)."""

    @staticmethod
    def forward(
        ctx: Any, a: Tensor, p: Tensor, cand: Tensor, tau: Tensor, bias: Tensor, offset: int | None, rows: int
    ) -> Tensor:
        n, total = a.shape[0], cand.shape[0]
        q = a / tau
        pos = (a * p).sum(dim=1) / tau
        values = F.softplus(-(pos + bias))
        work = Workspace(min(n, rows), total, a, True)
        threshold = _SOFTPLUS_THRESHOLD.get(a.dtype, 20.0)
        operands = _with_bias(q, cand, bias)
        for r0, r1 in spans(n, rows):
            z = _logits(operands, r0, r1, offset, work.first(r1 - r0, total))
            terms = torch.ops.aten.softplus.out(z, 1.0, threshold, out=work.second(r1 - r0, total))
            values[r0:r1] += terms.sum(dim=1)
        ctx.save_for_backward(a, p, cand, tau, bias)
        ctx.setup = (offset, rows)
        return values

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        a, p, cand, tau, bias = ctx.saved_tensors
        offset, rows = ctx.setup
        n, total = a.shape[0], cand.shape[0]
        q = a / tau
        pos = (a * p).sum(dim=1)
        p_weight = -torch.sigmoid(-(pos / tau + bias)) / tau
        reduced = torch.empty_like(a)
        row_sums = torch.zeros(n, dtype=a.dtype, device=a.device)
        grad_c_t = cand.new_zeros(cand.shape[::-1])
        scaled = a * (grad / tau)[:, None]
        work = Workspace(min(n, rows), total, a, False)
        operands = _with_bias(q, cand, bias)
        for r0, r1 in spans(n, rows):
            sig = _logits(operands, r0, r1, offset, work.first(r1 - r0, total)).sigmoid_()
            torch.mm(sig, cand, out=reduced[r0:r1])
            accumulate_transposed(grad_c_t, scaled[r0:r1], sig)
            if ctx.needs_input_grad[4]:
                torch.sum(sig, dim=1, out=row_sums[r0:r1])
        g_pos = grad * p_weight
        grad_a = reduced * (grad / tau)[:, None] + g_pos[:, None] * p
        grad_p = g_pos[:, None] * a
        grad_tau = None
        if ctx.needs_input_grad[3]:
            grad_tau = -(grad * (a * reduced).sum(dim=1) / tau + g_pos * pos).sum() / tau
        grad_bias = None
        if ctx.needs_input_grad[4]:
            grad_bias = (grad * (row_sums + tau * p_weight)).sum()
        return grad_a, grad_p, grad_c_t.T.contiguous(), grad_tau, grad_bias, None, None


def sigmoid_chunk_values(
    a: Tensor, p: Tensor, candidates: Tensor, tau: Tensor, bias: Tensor, *, offset: int | None, rows: int
) -> Tensor:
    """Per-anchor sigmoid-loss values (n,) against shared ``candidates``; candidate ``offset + i`` is anchor i's own
    positive and is left out. Differentiable in a, p, candidates, tau and bias (exact)."""
    return _SigmoidChunks.apply(a, p, candidates, tau.to(a), bias.to(a), offset, rows)
