"""A gloo rank for tests/negatives/test_mining.py, in its own small module so spawned processes import little."""

import torch
import torch.distributed as dist

from crl.negatives import EmbeddedBatch
from crl.negatives.mining import Mined


def bank_worker(rank: int, store: str, out: str) -> None:
    """Rank ``rank`` of 2 writes pool items 4 rank .. 4 rank + 3 into a Mined sampler and saves its state."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    vectors = torch.arange(8 * 3, dtype=torch.float32).reshape(8, 3)
    sampler = Mined(8, 3, 2, window=(1, 4), refresh_every=1)
    mine = torch.arange(rank * 4, rank * 4 + 4)
    sampler.update(EmbeddedBatch(vectors[mine], vectors[mine], indices=mine))
    torch.save(sampler.state_dict(), out)
    dist.destroy_process_group()
