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

The loss's values need no normalisation over the row, so on the CPU, when a gradient will be taken, the forward
pass turns each chunk's z into sigma(z) right after its softplus and forms R, the row sums and dc for g = 1
(O(n d + m d) kept for the backward pass). A uniform incoming gradient g_i = g (a mean or a sum of the values, the
usual case) then scales them: three GEMMs per chunk in all instead of four. Any other g (weighted anchors)
recomputes the logits as above. On CUDA the backward pass always recomputes: telling a uniform g apart would
synchronise with the host.
The softplus is relu(z) + log1p(e^-|z|), the exponential taken as exp2 (half the time of exp on this CPU), accurate
to the rounding of z itself (:func:`crl.objectives._score_kernel.log1p_exp_neg_abs`).
"""

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from crl.objectives._blocks import Workspace, accumulate_transposed, spans
from crl.objectives._mask import LeaveOut
from crl.objectives._score_kernel import log1p_exp_neg_abs


def _softplus_row_sums(z: Tensor, spare: Tensor) -> Tensor:
    """sum_j softplus(z_ij) = sum_j log1p(e^-|z_ij|) + sum_j max(z_ij, 0), with ``spare`` as the temporary (z kept)."""
    totals = log1p_exp_neg_abs(z, spare).sum(dim=1)
    return totals.add_(torch.clamp_min(z, 0.0, out=spare).sum(dim=1))


def _with_bias(q: Tensor, c: Tensor, bias: Tensor) -> tuple[Tensor, Tensor]:
    """([q, b], [c, 1]): operands whose product is q c^T + b."""
    return torch.cat([q, bias.expand(q.shape[0], 1)], dim=1), torch.cat([c, c.new_ones(c.shape[0], 1)], dim=1)


def _logits(operands: tuple[Tensor, Tensor], r0: int, r1: int, offset: int | None, out: Tensor) -> Tensor:
    """z[r0:r1] = q[r0:r1] c^T + b into ``out`` from :func:`_with_bias`'s operands, the own positives at -inf."""
    q, c = operands
    torch.mm(q[r0:r1], c.T, out=out)
    return LeaveOut(offset).apply(out, r0, r1, 0, c.shape[0])


@dataclass
class _Sums:
    """The chunk products the gradients need: R = sigma(Z) C, (W sigma(Z))^T kept transposed, row sums of sigma(Z)."""

    reduced: Tensor
    grad_c_t: Tensor
    row_sums: Tensor

    @classmethod
    def zeros(cls, a: Tensor, cand: Tensor) -> "_Sums":
        n = a.shape[0]
        return cls(torch.empty_like(a), cand.new_zeros(cand.shape[::-1]), a.new_zeros(n))

    def add(self, sig: Tensor, r0: int, r1: int, cand: Tensor, weighted: Tensor, row_sums: bool) -> None:
        """Rows r0:r1 of R and of the row sums, and the candidates' (weighted rows)^T sigma(Z) for this chunk."""
        torch.mm(sig, cand, out=self.reduced[r0:r1])
        accumulate_transposed(self.grad_c_t, weighted[r0:r1], sig)
        if row_sums:
            torch.sum(sig, dim=1, out=self.row_sums[r0:r1])


def _uniform(grad: Tensor) -> bool:
    """Whether every anchor's incoming gradient g_i is the same (a mean or sum of the values: the usual case)."""
    return bool((grad == grad[0]).all())


class _SigmoidChunks(torch.autograd.Function):
    """v_i of the sigmoid loss, chunk by chunk (module docstring)."""

    @staticmethod
    def forward(
        ctx: Any,
        a: Tensor,
        p: Tensor,
        cand: Tensor,
        tau: Tensor,
        bias: Tensor,
        offset: int | None,
        rows: int,
        fused: bool,
    ) -> Tensor:
        n, total = a.shape[0], cand.shape[0]
        q = a / tau
        pos = (a * p).sum(dim=1) / tau
        values = F.softplus(-(pos + bias))
        work = Workspace(min(n, rows), total, a, True)
        operands = _with_bias(q, cand, bias)
        sums = _Sums.zeros(a, cand) if fused else None
        for r0, r1 in spans(n, rows):
            z = _logits(operands, r0, r1, offset, work.first(r1 - r0, total))
            values[r0:r1] += _softplus_row_sums(z, work.second(r1 - r0, total))
            if sums is not None:
                sums.add(z.sigmoid_(), r0, r1, cand, q, ctx.needs_input_grad[4])
        if sums is None:
            ctx.save_for_backward(a, p, cand, tau, bias)
        else:
            ctx.save_for_backward(a, p, cand, tau, bias, sums.reduced, sums.grad_c_t, sums.row_sums)
        ctx.setup = (offset, rows)
        return values

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        a, p, cand, tau, bias, *kept = ctx.saved_tensors
        offset, rows = ctx.setup
        if kept and _uniform(grad):
            reduced, unit_grad_c_t, row_sums = kept
            grad_c_t = unit_grad_c_t * grad[0]
        else:
            sums = _recomputed_sums(a, cand, tau, bias, grad, offset, rows, ctx.needs_input_grad[4])
            reduced, grad_c_t, row_sums = sums.reduced, sums.grad_c_t, sums.row_sums
        pos = (a * p).sum(dim=1)
        p_weight = -torch.sigmoid(-(pos / tau + bias)) / tau
        g_pos = grad * p_weight
        grad_a = reduced * (grad / tau)[:, None] + g_pos[:, None] * p
        grad_p = g_pos[:, None] * a
        grad_tau = None
        if ctx.needs_input_grad[3]:
            grad_tau = -(grad * (a * reduced).sum(dim=1) / tau + g_pos * pos).sum() / tau
        grad_bias = None
        if ctx.needs_input_grad[4]:
            grad_bias = (grad * (row_sums + tau * p_weight)).sum()
        return grad_a, grad_p, grad_c_t.T.contiguous(), grad_tau, grad_bias, None, None, None


def _recomputed_sums(
    a: Tensor,
    cand: Tensor,
    tau: Tensor,
    bias: Tensor,
    grad: Tensor,
    offset: int | None,
    rows: int,
    bias_grad: bool,
) -> _Sums:
    """The gradient products with the anchors weighted by g_i / tau, from logits recomputed chunk by chunk."""
    n, total = a.shape[0], cand.shape[0]
    sums = _Sums.zeros(a, cand)
    weighted = a * (grad / tau)[:, None]
    work = Workspace(min(n, rows), total, a, False)
    operands = _with_bias(a / tau, cand, bias)
    for r0, r1 in spans(n, rows):
        sums.add(
            _logits(operands, r0, r1, offset, work.first(r1 - r0, total)).sigmoid_(),
            r0,
            r1,
            cand,
            weighted,
            bias_grad,
        )
    return sums


def sigmoid_chunk_values(
    a: Tensor, p: Tensor, candidates: Tensor, tau: Tensor, bias: Tensor, *, offset: int | None, rows: int
) -> Tensor:
    """Per-anchor sigmoid-loss values (n,) against shared ``candidates``; candidate ``offset + i`` is anchor i's own
    positive and is left out. Differentiable in a, p, candidates, tau and bias (exact).

    On the CPU, when a gradient will be taken, the forward pass also forms the gradient products (module
    docstring), so that a uniform incoming gradient needs no second pass over the logits."""
    tau, bias = tau.to(a), bias.to(a)
    leaves = (a, p, candidates, tau, bias)
    fused = a.device.type == "cpu" and torch.is_grad_enabled() and any(x.requires_grad for x in leaves)
    return _SigmoidChunks.apply(a, p, candidates, tau, bias, offset, rows, fused)
