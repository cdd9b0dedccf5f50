"""Data-parallel training under ``torchrun``: process group, device, DDP wrapping, small collectives.

``torchrun --nproc_per_node=K -m crl train CONFIG`` starts K processes with RANK, WORLD_SIZE and LOCAL_RANK in
their environment. :func:`init_distributed` joins the process group (gloo on CPU, nccl on CUDA) and picks the
device; without those variables it returns a one-process context and touches nothing.

Gradient bookkeeping (see :func:`crl.negatives.all_gather_with_grad`): each rank's loss is the mean over its n
local anchors against the gathered K*n candidates; the gather's backward sums the gradients of all ranks and DDP
averages parameter gradients over the K ranks, which gives exactly the gradient of the mean loss over the global
batch of K*n pairs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

import torch
import torch.distributed as dist
from torch import Tensor, nn
from torch.nn.parallel import DistributedDataParallel

__all__ = ["DistContext", "all_gather_equal", "init_distributed", "mean_over_ranks", "shutdown", "wrap_model"]


@dataclass(frozen=True)
class DistContext:
    """Where this process stands: rank r of K, and its device."""

    rank: int
    world_size: int
    local_rank: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        """True on rank 0, which logs and writes checkpoints."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        """True when K > 1 processes train together."""
        return self.world_size > 1


def _pick_device(preference: Literal["auto", "cpu", "cuda"], local_rank: int) -> torch.device:
    if preference == "cuda" and not torch.cuda.is_available():
        raise ValueError("run.device = 'cuda' but CUDA is not available here; use 'cpu' or 'auto'")
    if preference == "cuda" or (preference == "auto" and torch.cuda.is_available()):
        torch.cuda.set_device(local_rank)
        return torch.device("cuda", local_rank)
    return torch.device("cpu")


def init_distributed(device: Literal["auto", "cpu", "cuda"] = "auto") -> DistContext:
    """Join the torchrun process group if this process was started by torchrun (WORLD_SIZE > 1).

    The backend is nccl on CUDA and gloo on CPU. Rendezvous uses torchrun's MASTER_ADDR/MASTER_PORT.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    chosen = _pick_device(device, local_rank)
    if world_size > 1 and not dist.is_initialized():
        backend = "nccl" if chosen.type == "cuda" else "gloo"
        dist.init_process_group(backend=backend, rank=rank, world_size=world_size)
    return DistContext(rank=rank, world_size=world_size, local_rank=local_rank, device=chosen)


def shutdown(context: DistContext, *, wait_for_peers: bool) -> None:
    """Leave the process group (if this context joined one).

    With ``wait_for_peers`` (the normal end of a run) every rank first waits at a barrier, so that none leaves the
    group, and exits, while a peer still has a collective or its gloo connections in flight; after an error on one
    rank its peers would wait for it in vain, so the caller passes False then.
    """
    if context.distributed and dist.is_initialized():
        if wait_for_peers:
            dist.barrier()
        dist.destroy_process_group()


def wrap_model(model: nn.Module, context: DistContext) -> nn.Module:
    """DDP-wrap ``model`` when K > 1 (parameters broadcast from rank 0, gradients averaged); else return it."""
    if not context.distributed:
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=device_ids)


def mean_over_ranks(value: Tensor) -> Tensor:
    """The mean of a tensor over ranks (the value itself in one process); no gradient."""
    if not (dist.is_available() and dist.is_initialized()):
        return value
    total = value.detach().clone()
    dist.all_reduce(total, op=dist.ReduceOp.SUM)
    return total / dist.get_world_size()


def all_gather_equal(value: Tensor) -> list[Tensor]:
    """Every rank's copy of a same-shaped tensor, in rank order (``[value]`` in one process); no gradient.

    Used to collect per-rank generator states into rank 0's checkpoint.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return [value]
    parts = [torch.empty_like(value) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, value.contiguous())
    return parts
