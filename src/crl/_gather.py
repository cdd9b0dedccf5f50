"""A differentiable all-gather across the ranks of a process group (the SSCRL global batch).

Negatives import it to gather the embeddings of every rank with gradient (:class:`crl.negatives.Gathered`);
it lives at the bottom of the house because it knows nothing of negatives or training.
"""

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = ["all_gather", "all_gather_with_grad"]


class _AllGatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 whose backward sums the gradients of all ranks and keeps this rank's slice.

    Forward on rank r: Z = cat(z_0, ..., z_{K-1}). Every rank's loss L_r' may depend on every slice, so the
    gradient of the total sum_r' L_r' with respect to z_r is sum_r' dL_r'/dZ[slice r]: an all-reduce (sum)
    of the incoming gradients followed by taking slice r (a reduce-scatter).
    """

    @staticmethod
    def forward(ctx: torch.autograd.function.FunctionCtx, tensor: Tensor) -> Tensor:
        world = dist.get_world_size()
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor.contiguous())
        ctx.rank = dist.get_rank()  # type: ignore[attr-defined]
        ctx.rows = tensor.shape[0]  # type: ignore[attr-defined]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx: torch.autograd.function.FunctionCtx, grad: Tensor) -> Tensor:
        total = grad.contiguous().clone()
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        start = ctx.rank * ctx.rows  # type: ignore[attr-defined]
        return total[start : start + ctx.rows]  # type: ignore[attr-defined]


def all_gather_with_grad(tensor: Tensor) -> Tensor:
    """Concatenate ``tensor`` (n, ...) of every rank along dim 0, differentiably: (K*n, ...).

    The backward pass sums the gradients flowing into this rank's slice from the losses of all ranks (see
    :class:`_AllGatherWithGrad`). With data-parallel training, which averages parameter gradients over K
    ranks, a per-rank loss equal to the mean over the local anchors then yields exactly the gradient of the
    mean loss over the global batch. Every rank must pass the same shape. Without an initialised process
    group (one process) the tensor is returned unchanged.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    result: Tensor = _AllGatherWithGrad.apply(tensor)
    return result


def all_gather(tensor: Tensor) -> Tensor:
    """Concatenate ``tensor`` (n, ...) of every rank along dim 0, without gradient: (K*n, ...).

    Without an initialised process group (one process) the tensor is returned unchanged.
    """
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return tensor
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return torch.cat(parts, dim=0)
