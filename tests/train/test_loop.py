"""The pure training loop: no files, no process-wide state, reproducible, the Trainer's own steps, mapping batches.

If these fail, a sweep worker that calls crl.train.loop.train would write into its folder, change torch's thread
count, train a different model than `crl train`, or fail on text batches (token ids and attention masks).
"""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from torch import Tensor

from crl.data import PairSource
from crl.models import embed
from crl.train.build import Streams
from crl.train.checkpoint import load_train_state, save_train_state
from crl.train.config import TrainConfig
from crl.train.data import build_source
from crl.train.loop import TrainingLoop, train
from tests.train.helpers import fit, tiny_config

SHORT = {"total_steps": 8, "warmup_steps": 2}
VOCAB, LENGTH = 40, 6


class TokenPairs:
    """n pairs of token sequences as mapping batches: y is x with its tokens shuffled and the last one padded.

    Token ids lie in 1..V-1 (0 pads); the attention mask is 1 on tokens and 0 on padding.
    """

    def __init__(self, n: int, generator: torch.Generator) -> None:
        self.ids = torch.randint(1, VOCAB, (n, LENGTH), generator=generator)
        self.n_pairs, self.anchor_shape, self.positive_shape = n, (LENGTH,), (LENGTH,)
        self.generate_negatives = None

    @staticmethod
    def _batch(ids: Tensor) -> dict[str, Tensor]:
        return {"input_ids": ids, "attention_mask": (ids > 0).long()}

    def _positive_ids(self, indices: Tensor, generator: torch.Generator) -> Tensor:
        shuffled = self.ids[indices][:, torch.randperm(LENGTH, generator=generator)]
        shuffled[:, -1] = 0
        return shuffled

    def pairs(
        self, indices: Tensor, generator: torch.Generator
    ) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
        return self._batch(self.ids[indices]), self._batch(self._positive_ids(indices, generator))

    def anchors(self, indices: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        return self._batch(self.ids[indices])

    def positives(self, indices: Tensor, generator: torch.Generator) -> dict[str, Tensor]:
        return self._batch(self._positive_ids(indices, generator))


def _digits(tmp_path: Path, **sections: dict) -> tuple[TrainConfig, PairSource]:
    config = tiny_config(tmp_path, "loop", optim=SHORT, **sections)
    return config, build_source(config.data, seed=config.run.seed)


def test_train_touches_no_files_and_no_process_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """train() must leave the working folder empty and torch's thread count alone (the config asks for 1)."""
    config, source = _digits(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        outcome = train(config, source, Streams.derive(config.run.seed, regime=config.loss.regime))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert list(work.iterdir()) == [] and not config.run_dir.exists()
    assert [row.step for row in outcome.metrics] == list(range(1, 9))
    assert outcome.metrics[-1].loss < outcome.metrics[0].loss


def test_train_is_a_function_of_its_arguments(tmp_path: Path, one_thread: None) -> None:
    """Two calls with equal streams must give bitwise equal weights and metrics (no hidden random state)."""
    config, source = _digits(tmp_path)
    first, second = (train(config, source, Streams.derive(0, regime=config.loss.regime)) for _ in range(2))
    assert first.metrics == second.metrics
    for a, b in zip(first.model.parameters(), second.model.parameters(), strict=True):
        assert torch.equal(a, b)
    other = train(config, source, Streams.derive(1, regime=config.loss.regime))
    assert other.metrics != first.metrics


def test_the_trainer_trains_exactly_the_loop(tmp_path: Path, one_thread: None) -> None:
    """Trainer(config).fit() is the loop plus a run folder: its final weights equal train()'s, bit for bit."""
    config, source = _digits(tmp_path, loss={"negatives": "queue", "n_negatives": 200})
    outcome = train(config, source, Streams.derive(config.run.seed, regime=config.loss.regime))
    saved = load_file(str(fit(config).checkpoint))
    for name, value in outcome.model.state_dict().items():
        assert torch.equal(saved[f"model.{name}"], value), name


def test_a_train_state_round_trip_continues_bitwise(tmp_path: Path, one_thread: None) -> None:
    """TrainState -> safetensors + JSON -> TrainState into a fresh loop must continue like the original loop."""
    config, source = _digits(tmp_path, loss={"negatives": "shared_pool", "n_negatives": 16})
    streams = Streams.derive(config.run.seed, regime=config.loss.regime)
    original = TrainingLoop(config, source, streams)
    for _ in range(3):
        original.train_step()
    path = save_train_state(tmp_path / "checkpoints", original.state(), keep=1)
    restored = TrainingLoop(config, source, Streams.derive(config.run.seed, regime=config.loss.regime))
    restored.restore(load_train_state(path))
    while not original.done:
        assert torch.equal(original.train_step(), restored.train_step())
    for a, b in zip(original.model.parameters(), restored.model.parameters(), strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize(
    "loss",
    [
        {"negatives": "in_batch"},
        {"negatives": "shared_pool", "n_negatives": 12},
        {"negatives": "independent_pool", "n_negatives": 6, "symmetric": False},
    ],
    ids=lambda loss: loss["negatives"],
)
def test_mapping_batches_train_a_token_encoder(tmp_path: Path, loss: dict, one_thread: None) -> None:
    """Token-id batches (input_ids + attention_mask) must flow through the loop, pool negatives and embed()."""
    config = tiny_config(
        tmp_path,
        "tokens",
        data={"batch_size": 32},
        model={
            "encoder": "bag",
            "vocab_size": VOCAB,
            "token_dim": 16,
            "embedding_dim": 8,
            "towers": "shared",
        },
        loss={**loss, "learnable_tau": False},
        optim={"total_steps": 30, "warmup_steps": 2, "lr": 0.02},
    )
    source = TokenPairs(256, torch.Generator().manual_seed(0))
    outcome = train(config, source, Streams.derive(0, regime=config.loss.regime))
    losses = [row.loss for row in outcome.metrics]
    assert sum(losses[-5:]) < 0.8 * sum(losses[:5])
    anchors = source.anchors(torch.arange(100), torch.Generator())
    embedded = embed(outcome.model.encode_anchors, anchors, batch_size=7, device=torch.device("cpu"))
    assert embedded.shape == (100, 8)
    assert torch.allclose(embedded, outcome.model.encode_anchors(anchors).detach(), atol=1e-6)
