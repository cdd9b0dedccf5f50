"""Run construction: the LR schedule's closed form, weight-decay groups, seeded streams, data order, samplers."""

import math
from typing import get_args

import pytest
import torch

from crl.negatives import EmbeddedBatch, Gathered, Independent, Queue, Shared
from crl.train.build import (
    MODEL_KINDS,
    NEGATIVE_KINDS,
    Streams,
    WarmupCosine,
    build_model,
    build_optimizer,
    build_sampler,
    build_schedule,
)
from crl.train.config import LossConfig, ModelConfig, parse_config
from crl.train.cursor import DataCursor


def test_every_encoder_and_negatives_kind_has_one_registry_entry() -> None:
    """A kind missing here fails with a KeyError at build time instead of when the config is read."""
    assert set(MODEL_KINDS) == set(get_args(get_args(ModelConfig)[0]))
    assert set(NEGATIVE_KINDS) == set(get_args(LossConfig.model_fields["negatives"].annotation))


def test_warmup_cosine_closed_form() -> None:
    """Linear warm-up to the peak at step W-1, cosine to r at T, midpoint (1 + r)/2, flat after T."""
    f = WarmupCosine(warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    assert f(0) == pytest.approx(0.1) and f(4) == pytest.approx(0.5) and f(9) == pytest.approx(1.0)
    assert f(10) == pytest.approx(1.0)
    assert f(60) == pytest.approx(0.55)
    assert f(35) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))
    assert f(110) == pytest.approx(0.1) and f(500) == pytest.approx(0.1)
    assert WarmupCosine(0, 10, 0.0)(0) == pytest.approx(1.0)


def test_schedule_drives_the_optimizer_learning_rate() -> None:
    """After t scheduler steps the optimiser's lr must be lr * f(t)."""
    config = parse_config({"optim": {"lr": 0.5, "warmup_steps": 3, "total_steps": 9}})
    parameter = torch.nn.Parameter(torch.zeros(2))
    optimizer = torch.optim.AdamW([parameter], lr=config.optim.lr)
    schedule = build_schedule(optimizer, config.optim)
    f = WarmupCosine(3, 9, 0.0)
    for t in range(12):
        assert optimizer.param_groups[0]["lr"] == pytest.approx(0.5 * f(t))
        optimizer.step()
        schedule.step()


def test_weight_decay_skips_biases_and_the_temperature() -> None:
    """Decay on biases or on log(1/tau) would pull them to zero: only matrices and kernels decay."""
    config = parse_config({"model": {"encoder": "cnn", "channels": [2]}, "loss": {"learnable_tau": True}})
    model = build_model(config.model, config.loss, (8, 8), (8, 8), torch.Generator().manual_seed(0))
    decay, no_decay = build_optimizer(model, config.optim).param_groups
    assert decay["weight_decay"] == config.optim.weight_decay and no_decay["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decay["params"]) and all(p.dim() < 2 for p in no_decay["params"])
    assert any(p is model.temperature.log_inverse for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_cursor_visits_each_pair_once_per_epoch_and_resumes() -> None:
    """Within an epoch no pair repeats and floor(n/B) batches are served; a restored cursor continues exactly."""
    cursor = DataCursor(23, 5, torch.Generator().manual_seed(0))
    epoch = [cursor.next_batch() for _ in range(4)]
    assert torch.cat(epoch).unique().numel() == 20 and cursor.epoch == 0
    twin = DataCursor(23, 5, torch.Generator())
    twin.generator.set_state(cursor.generator.get_state())
    twin.restore(cursor.state())
    for _ in range(7):
        assert torch.equal(cursor.next_batch(), twin.next_batch())
    assert cursor.epoch == twin.epoch == 2  # 4 + 7 batches of 4 per epoch
    with pytest.raises(ValueError, match="global batch"):
        DataCursor(4, 5, torch.Generator())


class _Pool:
    n_pairs, anchor_shape, positive_shape, generate_negatives = 50, (2,), (2,), None


class _Truth(_Pool):
    @staticmethod
    def generate_negatives(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
        return torch.randn(*shape, 2, generator=generator)


@pytest.mark.parametrize(
    ("loss", "source", "world", "kind"),
    [
        ({}, _Pool(), 1, "in_batch"),
        ({"negatives": "shared_pool", "n_negatives": 7}, _Pool(), 1, "indices"),
        ({"negatives": "independent_pool", "n_negatives": 7}, _Pool(), 1, "indices"),
        ({"negatives": "shared_pool", "n_negatives": 7}, _Truth(), 1, "samples"),
        ({"negatives": "independent_pool", "n_negatives": 7}, _Truth(), 1, "samples"),
    ],
)
def test_sampler_follows_the_config(loss: dict, source: object, world: int, kind: str) -> None:
    """[loss] negatives picks the regime and the source: pool indices, or p- samples for synthetic truths."""
    config = parse_config({"loss": loss})
    sampler = build_sampler(config, source, distributed=world > 1)  # type: ignore[arg-type]
    expected = {"shared": Shared, "independent": Independent}[config.loss.regime]
    assert isinstance(sampler, expected)
    batch = EmbeddedBatch(torch.zeros(3, 2), torch.zeros(3, 2))
    drawn = sampler.draw(batch, torch.Generator().manual_seed(0))
    assert drawn.kind == kind and drawn.regime == config.loss.regime
    if kind == "indices":
        assert int(drawn.y.max()) < 50


def test_queue_sampler_has_the_configured_size() -> None:
    """negatives = 'queue' must give a memory of m entries of the embedding dimension."""
    config = parse_config({"loss": {"negatives": "queue", "n_negatives": 9}, "model": {"embedding_dim": 5}})
    sampler = build_sampler(config, _Pool())  # type: ignore[arg-type]
    assert isinstance(sampler, Queue) and sampler.memory_y.shape == (9, 5)


def test_in_batch_negatives_are_gathered_across_ranks() -> None:
    """With K > 1 processes in-batch negatives must come from the global batch (Gathered), not the local one."""
    sampler = build_sampler(parse_config({}), _Pool(), distributed=True)  # type: ignore[arg-type]
    assert isinstance(sampler, Gathered)


def test_streams_follow_the_regime() -> None:
    """Shared negatives are drawn alike on every rank; independent ones per rank; views always per rank."""

    def first(generator: torch.Generator) -> float:
        return float(torch.rand(1, generator=generator))

    shared = [Streams.derive(0, rank=rank, regime="shared") for rank in (0, 1)]
    independent = [Streams.derive(0, rank=rank, regime="independent") for rank in (0, 1)]
    assert first(shared[0].negatives) == first(shared[1].negatives)
    assert first(independent[0].negatives) != first(independent[1].negatives)
    assert first(shared[0].views) != first(shared[1].views)
    assert first(shared[0].order) == first(shared[1].order)
