"""Real two-process gloo tests of the gathered negatives: 2 ranks x batch b = 1 process x batch 2b.

Each worker process joins a gloo group through a file store, runs the production path (DDP-wrapped
DualEncoder with a learnable Temperature, Gathered negatives, crl.train.loss.batch_loss) and writes its
gradients; the test compares them with one process on the concatenated batch using
crl.objectives.contrastive_loss (the plain in-batch loss, no gathering involved). The same two processes then
run the whole Trainer (DDP, Gathered negatives, checkpoints with per-rank generator states) and its final
weights are compared with a one-process Trainer run on the doubled batch.
"""

import json
import multiprocessing
import os
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from safetensors.torch import load_file, save_file
from torch.nn.parallel import DistributedDataParallel

from crl.models import MLP, DualEncoder, Encoder, Temperature
from crl.negatives import EmbeddedBatch, Gathered, Queue, all_gather_with_grad
from crl.objectives import contrastive_loss
from crl.train.config import TrainConfig, config_to_toml, load_config
from crl.train.loss import batch_loss
from crl.train.trainer import Trainer
from tests.train.helpers import fit, tiny_config

WORLD, BATCH = 2, 5
CASES = [("infonce", True), ("dcl", False), ("gcl", True)]
TRAINER_STEPS = {"total_steps": 12, "warmup_steps": 2, "lr": 1e-4}

RANK_TIMEOUT_S = 300
"""How long a rank may take (spawned: it imports torch and crl, then trains); a hung rank fails, a slow one
under a loaded machine (49 s alone, over 60 s beside a full test run) does not."""


def _model() -> DualEncoder:
    generator = torch.Generator().manual_seed(0)
    anchor = Encoder(MLP(6, [8], 4, generator=generator))
    positive = Encoder(MLP(6, [8], 4, generator=generator))
    return DualEncoder(anchor, positive, Temperature(0.2, learnable=True))


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(1)
    return torch.randn(WORLD * BATCH, 6, generator=generator), torch.randn(
        WORLD * BATCH, 6, generator=generator
    )


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters()}


def _worker(rank: int, store: str, out: str, config_path: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    x, y = _data()
    local = slice(rank * BATCH, (rank + 1) * BATCH)
    results: dict[str, torch.Tensor] = {}
    for form, symmetric in CASES:
        model = _model()
        network = DistributedDataParallel(model)
        anchors, positives = network(x[local], y[local])
        batch = EmbeddedBatch(anchors, positives)
        negatives = Gathered().draw(batch, torch.Generator())
        batch_loss(batch, negatives, tau=model.tau(), form=form, symmetric=symmetric).backward()
        results.update({f"{form}.{name}": grad for name, grad in _grads(model).items()})
    # all_gather_with_grad alone: loss_r = <w_r, gather(z)>, so dz_r = sum_r' w_r'[slice r].
    z = torch.full((BATCH, 3), float(rank + 1), requires_grad=True)
    weights = torch.arange(WORLD * BATCH * 3, dtype=torch.float32).reshape(WORLD * BATCH, 3) * (rank + 1)
    (all_gather_with_grad(z) * weights).sum().backward()
    results["gather.grad"] = z.grad
    queue = Queue(3 * BATCH, 3, distributed=True)
    queue.update(EmbeddedBatch(z.detach(), z.detach()))
    results["queue.memory"] = queue.state_dict()["memory_y"]
    save_file(results, str(Path(out) / f"rank{rank}.safetensors"))
    # The whole Trainer on 2 ranks (joins this process group; fit() leaves it at the end).
    os.environ.update(RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank))
    Trainer(load_config(config_path)).fit()


@pytest.mark.distributed
def test_two_ranks_give_the_gradient_of_one_process_with_the_double_batch(tmp_path: Path) -> None:
    """DDP + gathered in-batch negatives must equal single-process in-batch training on the 2b batch (1e-5).

    Failure modes this catches: a gather without gradient, a backward that forgets to sum over ranks (or sums
    twice), a rank scoring its own positive as a negative, or a learnable tau left out of the averaging.
    """
    two_ranks = tiny_config(tmp_path, "two_ranks", data={"batch_size": 32}, optim=TRAINER_STEPS)
    one_process = tiny_config(tmp_path, "one_process", data={"batch_size": 64}, optim=TRAINER_STEPS)
    ranks_config = tmp_path / "two_ranks.toml"
    ranks_config.write_text(config_to_toml(two_ranks))
    context = multiprocessing.get_context("spawn")
    processes = [
        context.Process(
            target=_worker, args=(rank, str(tmp_path / "store"), str(tmp_path), str(ranks_config))
        )
        for rank in range(WORLD)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=RANK_TIMEOUT_S)
        assert process.exitcode == 0
    ranks = [load_file(str(tmp_path / f"rank{rank}.safetensors")) for rank in range(WORLD)]
    x, y = _data()
    for form, symmetric in CASES:
        model = _model()
        anchors, positives = model(x, y)
        contrastive_loss(anchors, positives, None, tau=model.tau(), form=form, symmetric=symmetric).backward()
        for name, expected in _grads(model).items():
            for result in ranks:
                assert torch.allclose(result[f"{form}.{name}"], expected, atol=1e-5, rtol=0), (form, name)
    weights = torch.arange(WORLD * BATCH * 3, dtype=torch.float32).reshape(WORLD * BATCH, 3)
    for rank, result in enumerate(ranks):
        expected_gather = weights[rank * BATCH : (rank + 1) * BATCH] * sum(r + 1 for r in range(WORLD))
        assert torch.equal(result["gather.grad"], expected_gather)
        # the distributed queue holds the batches of both ranks, on both ranks
        assert sorted(result["queue.memory"][: WORLD * BATCH, 0].tolist()) == [1.0] * BATCH + [2.0] * BATCH
    # The Trainer: 2 ranks x 32 pairs (gathered negatives, DDP) follow 1 process x 64 pairs. AdamW divides each
    # gradient by its own running RMS, so float32 rounding of the tiniest gradient entries can move single weights
    # by up to about lr / 10, how often depending on the CPU's kernels: at lr 3e-3 the runs drifted apart by up to
    # 5e-4 of a tensor's norm and 4e-5 in the loss on one machine. At lr 1e-4 they stay within 2e-7 of each
    # tensor's norm, while a rank that scored only its own batch's negatives would log a loss about log 2 apart.
    # Compared: each tensor's relative Frobenius distance (1e-5), the share of entries off by more than lr / 30
    # (1e-4) and the logged losses (1e-5).
    single = fit(one_process)
    distributed = two_ranks.run_dir / "checkpoints" / single.checkpoint.name
    for key, value in load_file(str(single.checkpoint)).items():
        if key.startswith("model."):
            difference = load_file(str(distributed))[key] - value
            assert difference.norm() <= 1e-5 * max(value.norm().item(), 1e-6), key
            off = (difference.abs() > one_process.optim.lr / 30).float().mean().item()
            assert off <= 1e-4, (key, off)
    for row_one, row_two in zip(_rows(one_process), _rows(two_ranks), strict=True):
        assert abs(row_one["loss"] - row_two["loss"]) < 1e-5


def _rows(config: TrainConfig) -> list[dict[str, float]]:
    return [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
