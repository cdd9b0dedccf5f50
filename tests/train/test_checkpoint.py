"""Checkpoints: exact round trips (tensors, JSON, AdamW state), atomic completion, keeping the newest K, and
every kind of damage detected with the file named."""

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from crl.train.checkpoint import (
    CheckpointError,
    OptimizerState,
    list_checkpoints,
    load_checkpoint,
    load_optimizer_state,
    newest_checkpoint,
    optimizer_state,
    save_checkpoint,
)


def test_round_trip_is_exact(tmp_path: Path) -> None:
    """Every tensor (any dtype, 0-dim included) and every JSON scalar must come back unchanged."""
    tensors = {
        "a.weight": torch.randn(3, 4, dtype=torch.float64),
        "rng.views.rank0": torch.Generator().manual_seed(5).get_state(),
        "step": torch.tensor(7.0),
    }
    state = {"data": {"position": 12, "epoch": 3}, "lr": [0.1 / 3]}
    path = save_checkpoint(tmp_path, 40, tensors, state, keep=3)
    loaded = load_checkpoint(path)
    assert loaded.step == 40 and loaded.state == {**state, "step": 40}
    assert set(loaded.tensors) == set(tensors)
    for key, value in tensors.items():
        assert loaded.tensors[key].dtype == value.dtype and torch.equal(loaded.tensors[key], value)


def test_only_the_newest_k_complete_checkpoints_are_kept(tmp_path: Path) -> None:
    """keep=K must delete older checkpoints (both files), so a long run does not fill the disk."""
    for step in (5, 10, 15, 20):
        save_checkpoint(tmp_path, step, {"x": torch.zeros(1)}, {}, keep=2)
    assert [step for step, _ in list_checkpoints(tmp_path)] == [15, 20]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "step-00000015.json",
        "step-00000015.safetensors",
        "step-00000020.json",
        "step-00000020.safetensors",
    ]


def test_incomplete_checkpoints_are_ignored(tmp_path: Path) -> None:
    """A kill mid-write leaves a temporary file or tensors without their JSON: resume must skip those."""
    good = save_checkpoint(tmp_path, 10, {"x": torch.ones(2)}, {}, keep=5)
    (tmp_path / "step-00000015.safetensors").write_bytes(b"partial")
    (tmp_path / ".step-00000020.json.tmp-123").write_text("{")
    assert newest_checkpoint(tmp_path) == good
    assert newest_checkpoint(tmp_path / "nothing-here") is None


def _train(model: torch.nn.Module, optimizer: torch.optim.Optimizer, steps: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 4, generator=generator)
        optimizer.zero_grad()
        model(x).square().mean().backward()
        optimizer.step()


def test_adamw_state_round_trip_continues_bitwise(tmp_path: Path) -> None:
    """AdamW restored from named tensors + JSON groups must continue exactly like the original optimiser."""

    def make() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
        groups = [
            {"params": [model[0].weight, model[2].weight]},
            {"params": [model[0].bias, model[2].bias], "weight_decay": 0.0},
        ]
        return model, torch.optim.AdamW(groups, lr=0.01, betas=(0.8, 0.95))

    original, optimizer = make()
    _train(original, optimizer, 3, seed=0)
    saved = optimizer_state(optimizer, original)
    path = save_checkpoint(
        tmp_path,
        3,
        {**saved.tensors, **{f"model.{k}": v for k, v in original.state_dict().items()}},
        {"optimizer": saved.groups},
        keep=1,
    )
    loaded = load_checkpoint(path)
    restored, restored_optimizer = make()
    restored.load_state_dict({k[6:]: v for k, v in loaded.tensors.items() if k.startswith("model.")})
    groups = json.loads(json.dumps(loaded.state["optimizer"]))
    optim_tensors = {k: v for k, v in loaded.tensors.items() if k.startswith("optim.")}
    load_optimizer_state(restored_optimizer, restored, OptimizerState(optim_tensors, groups))
    _train(original, optimizer, 4, seed=1)
    _train(restored, restored_optimizer, 4, seed=1)
    for a, b in zip(original.parameters(), restored.parameters(), strict=True):
        assert torch.equal(a, b)
    assert restored_optimizer.param_groups[1]["weight_decay"] == 0.0
    assert restored_optimizer.param_groups[0]["betas"] == (0.8, 0.95)


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _flip_weight_bits(path: Path) -> None:
    payload = bytearray(path.read_bytes())
    payload[-3] ^= 0b0100_0000  # inside the last tensor's data: the weights still parse, with another value
    path.write_bytes(bytes(payload))


def _change_header_dtype(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b'"dtype":"F32"', b'"dtype":"I32"', 1))


def _edit_json_step(path: Path) -> None:
    document = json.loads(path.read_text())
    path.write_text(json.dumps({**document, "step": 15}))


DAMAGE: dict[str, tuple[str, Callable[[Path], None]]] = {
    "truncated tensors": ("safetensors", _truncate),
    "truncated json": ("json", _truncate),
    "flipped weight bits": ("safetensors", _flip_weight_bits),
    "changed header dtype": ("safetensors", _change_header_dtype),
    "edited json step": ("json", _edit_json_step),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_every_kind_of_damage_is_detected_and_names_the_file(tmp_path: Path, damage: str) -> None:
    """Before: a truncated file crashed without naming it, and flipped bits, a changed dtype or an edited step
    loaded silently (garbage weights, or the wrong step believed). Each must raise naming the damaged file."""
    weights = {"model.w": torch.linspace(-1.0, 1.0, 64).reshape(8, 8), "model.b": torch.ones(8)}
    path = save_checkpoint(tmp_path, 10, weights, {"note": "x"}, keep=2)
    suffix, damage_file = DAMAGE[damage]
    damaged = path.with_suffix(f".{suffix}")
    damage_file(damaged)
    with pytest.raises(CheckpointError, match=f"checkpoint file '{damaged}' is damaged"):
        load_checkpoint(path)


def test_a_checkpoint_written_before_checksums_still_loads(tmp_path: Path) -> None:
    """A JSON without the sha256 entries (earlier versions: neither the tensors' nor the state's) loads with a
    warning that its state is not checked, its step still checked against the tensors."""
    path = save_checkpoint(tmp_path, 10, {"x": torch.ones(2)}, {}, keep=2)
    json_path = path.with_suffix(".json")
    document = json.loads(json_path.read_text())
    del document["safetensors_sha256"], document["state_sha256"]
    json_path.write_text(json.dumps(document))
    with pytest.warns(UserWarning, match="carries no state checksum"):
        assert load_checkpoint(path).step == 10
    json_path.write_text(json.dumps({**document, "step": 11}))
    with pytest.raises(CheckpointError, match="step"), pytest.warns(UserWarning, match="no state checksum"):
        load_checkpoint(path)
