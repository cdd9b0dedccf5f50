"""Score losses against shared candidates in chunks of anchors, in two reused workspaces, with exact gradients.

The pairwise losses are means over anchors of ``v_i = F(pos_i, s_i1, ..., s_iM)`` with
``pos_i = <a_i, p_i>`` and ``s_ij = <a_i, c_j>``. Autograd over chunks (checkpointing) allocates a few fresh
(chunk x M) temporaries per chunk, and the C allocator keeps the freed blocks: peak memory grew by 450-900 MiB at
n = 4096, M = 32768 (benchmarks/memory.py). Here a custom autograd function computes each chunk's scores into one
of two buffers allocated once (as :mod:`crl.objectives.tiled` does), evaluates F in place, and in the backward pass
recomputes the chunk and writes ``W_ij = dv_i/ds_ij`` into the other buffer:

    da_i = sum_j g_i W_ij c_j + g_i P_i p_i,   dc_j = sum_i g_i W_ij a_i,   dp_i = g_i P_i a_i,

with g the incoming gradient and ``P_i = dv_i/dpos_i``. Extra memory is two (chunk x M) buffers whatever n
(55-65 MiB at n = 4096, M = 32768, beside the contrastive loss's 52 MiB).

Contract of a :class:`ScoreKernel`: v depends on s, pos and tau only through s/tau and pos/tau, and on the bias b
(when the kernel has one) only through s/tau + b and pos/tau + b. Hence, exactly,

    dv_i/dtau = -(sum_j s_ij W_ij + pos_i P_i) / tau,   dv_i/db = tau (sum_j W_ij + P_i).

An anchor's own positive among the candidates (in-batch negatives) is left out by setting its score to -inf,
where every kernel's terms and weights are 0.
"""

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from crl.objectives._blocks import LOG2_E, Workspace, block_logits, spans
from crl.objectives._mask import LeaveOut


class ScoreKernel(ABC):
    """Per-anchor values and their derivatives from a (c, M) block of scores, computed in place."""

    @abstractmethod
    def values(
        self, pos: Tensor, scores: Tensor, spare: Tensor, m: int, tau: Tensor, bias: Tensor | None
    ) -> Tensor:
        """v (c,) from pos (c,) and the scores (c, M); may overwrite ``scores`` and ``spare`` (same shape)."""

    @abstractmethod
    def weights(
        self, pos: Tensor, scores: Tensor, out: Tensor, m: int, tau: Tensor, bias: Tensor | None
    ) -> Tensor:
        """Write ``W = dv/ds`` into ``out`` (``scores`` unchanged); return ``P = dv/dpos`` (c,)."""


def log1p_exp_neg_abs(x: Tensor, out: Tensor) -> Tensor:
    """``out <- log1p(e^-|x|) = log1p(2^(-|x| log2 e))``, the part of softplus(x) = relu(x) + log1p(e^-|x|) that
    is not piecewise linear (0 at x = -inf). exp2 takes about half the time of exp here
    (:mod:`crl.objectives._shifted`); the product |x| log2 e adds one rounding, relative |x| eps to e^-|x|, as large
    as that of x itself."""
    return torch.abs(x, out=out).mul_(-LOG2_E).exp2_().log1p_()


def softplus_(x: Tensor, spare: Tensor) -> Tensor:
    """``x <- log(1 + e^x) = relu(x) + log1p(e^-|x|)`` in place, with ``spare`` as the one temporary."""
    tail = log1p_exp_neg_abs(x, spare)
    return x.relu_().add_(tail)


class PairwiseKernel(ScoreKernel):
    """``v = (1/m) sum_j psi((s_j - pos)/tau)`` (formulas in :mod:`crl.objectives.pairwise`); W = psi'/(m tau)."""

    def __init__(self, psi: str, margin: float) -> None:
        self.psi = psi
        self.margin = margin

    def values(
        self, pos: Tensor, scores: Tensor, spare: Tensor, m: int, tau: Tensor, bias: Tensor | None
    ) -> Tensor:
        t = scores.sub_(pos[:, None]).div_(tau)
        if self.psi == "hinge":
            t.add_(self.margin).relu_()
        elif self.psi == "squared_hinge":
            t.add_(self.margin).relu_().square_()
        elif self.psi == "logistic":
            softplus_(t, spare)
        else:
            t.exp_()
        return t.sum(dim=1) / m

    def weights(
        self, pos: Tensor, scores: Tensor, out: Tensor, m: int, tau: Tensor, bias: Tensor | None
    ) -> Tensor:
        t = torch.sub(scores, pos[:, None], out=out).div_(tau)
        if self.psi == "hinge":
            t.add_(self.margin).gt_(0.0)
        elif self.psi == "squared_hinge":
            t.add_(self.margin).relu_().mul_(2.0)
        elif self.psi == "logistic":
            t.sigmoid_()
        else:
            t.exp_()
        t.div_(tau * m)
        return -t.sum(dim=1)


class _ChunkedScores(torch.autograd.Function):
    """v_i of a :class:`ScoreKernel` against shared candidates, chunk by chunk (see the module docstring)."""

    @staticmethod
    def forward(
        ctx: Any,
        a: Tensor,
        p: Tensor,
        cand: Tensor,
        tau: Tensor,
        bias: Tensor | None,
        kernel: ScoreKernel,
        offset: int | None,
        rows: int,
    ) -> Tensor:
        n, total = a.shape[0], cand.shape[0]
        m = total - 1 if offset is not None else total
        pos = (a * p).sum(dim=1)
        values = torch.empty(n, dtype=a.dtype, device=a.device)
        work = Workspace(min(n, rows), total, a, True)
        for r0, r1 in spans(n, rows):
            scores = block_logits(a, cand, r0, r1, 0, total, LeaveOut(offset), work.first(r1 - r0, total))
            values[r0:r1] = kernel.values(pos[r0:r1], scores, work.second(r1 - r0, total), m, tau, bias)
        ctx.save_for_backward(a, p, cand, tau, bias)
        ctx.setup = (kernel, offset, rows, m)
        return values

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        a, p, cand, tau, bias = ctx.saved_tensors
        kernel, offset, rows, m = ctx.setup
        n, total = a.shape[0], cand.shape[0]
        pos = (a * p).sum(dim=1)
        grad_a, grad_p, grad_c = torch.empty_like(a), torch.empty_like(p), torch.zeros_like(cand)
        sums = torch.zeros(2, dtype=a.dtype, device=a.device)  # sum g (s.W + pos P), sum g (sum_j W + P)
        work = Workspace(min(n, rows), total, a, True)
        for r0, r1 in spans(n, rows):
            scores = block_logits(a, cand, r0, r1, 0, total, LeaveOut(offset), work.first(r1 - r0, total))
            weights = work.second(r1 - r0, total)
            g_pos = kernel.weights(pos[r0:r1], scores, weights, m, tau, bias).mul_(grad[r0:r1])
            weights.mul_(grad[r0:r1, None])
            torch.mm(weights, cand, out=grad_a[r0:r1]).addcmul_(g_pos[:, None], p[r0:r1])
            torch.mul(g_pos[:, None], a[r0:r1], out=grad_p[r0:r1])
            grad_c.addmm_(weights.T, a[r0:r1])
            if offset is not None:
                scores.diagonal(r0 + offset).zero_()
            sums[0] += torch.dot(weights.view(-1), scores.view(-1)) + torch.dot(g_pos, pos[r0:r1])
            sums[1] += weights.sum() + g_pos.sum()
        grad_tau = -sums[0] / tau if ctx.needs_input_grad[3] else None
        grad_bias = tau * sums[1] if bias is not None and ctx.needs_input_grad[4] else None
        return grad_a, grad_p, grad_c, grad_tau, grad_bias, None, None, None


def chunked_kernel_values(
    kernel: ScoreKernel,
    a: Tensor,
    p: Tensor,
    candidates: Tensor,
    tau: Tensor,
    bias: Tensor | None,
    *,
    offset: int | None,
    rows: int,
) -> Tensor:
    """Per-anchor values (n,) of ``kernel`` for anchors ``a`` (n, d) with positives ``p`` against ``candidates``.

    ``offset``: candidate ``offset + i`` is anchor i's own positive and is left out (m = M - 1); ``rows`` anchors
    per chunk. Differentiable in a, p, candidates, tau and bias (exact, not checkpointed).
    """
    return _ChunkedScores.apply(
        a, p, candidates, tau.to(a), None if bias is None else bias.to(a), kernel, offset, rows
    )
