"""A run folder is one run on one data set: resume checks the data's fingerprint, a finished run says so, and
--init-from starts a new run from another's weights.

If these fail, rerunning a config on changed arrays silently returns the old model (or dies in a raw
state_dict size mismatch), and there is no way to train on from a finished run.
"""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from crl.commands import app
from crl.train.checkpoint import load_train_state
from crl.train.config import ConfigError, TrainConfig, config_to_toml
from crl.train.fingerprint import read_fingerprint
from tests.train.helpers import fit, tiny_config

N = 96


def _pairs(path: Path, *, dim: int = 6, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(N, dim)).astype(np.float32)
    np.savez(path, x=x, y=x + 0.1 * rng.normal(size=(N, dim)).astype(np.float32))
    return path


def _config(tmp_path: Path, name: str, data: Path, **sections: dict[str, Any]) -> TrainConfig:
    optim = {"total_steps": 6, "warmup_steps": 1, **sections.pop("optim", {})}
    model = {"hidden": [16], **sections.pop("model", {})}
    return tiny_config(
        tmp_path,
        name,
        data={"source": "arrays", "path": str(data), "batch_size": 16},
        model=model,
        optim=optim,
        run={"checkpoint_every": 3, **sections.pop("run", {})},
        **sections,
    )


def test_resume_on_other_arrays_names_what_differs(tmp_path: Path) -> None:
    data = _pairs(tmp_path / "pairs.npz")
    first = fit(_config(tmp_path, "run", data))
    saved = read_fingerprint(first.run_dir)
    assert saved is not None and [a.name for a in saved.arrays] == ["x", "y"]
    _pairs(data, seed=1)  # same shapes, other values
    with pytest.raises(
        ValueError, match=r"trained on other data[\s\S]*x \(86, 6\) float32 sha256 [0-9a-f]{12} in"
    ):
        fit(_config(tmp_path, "run", data))
    _pairs(data, dim=8)  # another input dimension: named, not a state_dict size mismatch
    with pytest.raises(ValueError, match=r"x \(86, 6\)[^\n]*x \(86, 8\)[\s\S]*new run.name or --out"):
        fit(_config(tmp_path, "run", data, model={"hidden": [16]}))


def test_a_finished_run_is_already_complete_and_is_not_extended(tmp_path: Path) -> None:
    data = _pairs(tmp_path / "pairs.npz")
    config = _config(tmp_path, "done", data)
    fit(config)
    again = fit(config)
    assert again.already_complete and again.step == 6
    path = tmp_path / "done.toml"
    path.write_text(config_to_toml(config), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(path)])
    assert result.exit_code == 0 and "already complete" in result.output and "--init-from" in result.output
    with pytest.raises(ConfigError, match=r"total_steps: 6 in the run folder, 12 now[\s\S]*--init-from"):
        fit(_config(tmp_path, "done", data, optim={"total_steps": 12}))


def test_init_from_starts_a_new_run_from_the_weights(tmp_path: Path) -> None:
    """With a vanishing lr the new run's encoders stay at the checkpoint's weights; its config records it."""
    data = _pairs(tmp_path / "pairs.npz")
    first = fit(_config(tmp_path, "first", data))
    path = tmp_path / "second.toml"
    second = _config(tmp_path, "second", data, optim={"lr": 1e-12})
    path.write_text(config_to_toml(second), encoding="utf-8")
    result = CliRunner().invoke(app, ["train", str(path), "--init-from", str(first.run_dir)])
    assert result.exit_code == 0, result.output
    assert f'init_from = "{first.checkpoint}"' in (second.run_dir / "config.toml").read_text()
    before = load_train_state(first.checkpoint).model
    after = load_train_state(second.run_dir / "checkpoints" / "step-00000006.safetensors").model
    for name, value in before.items():
        if not name.startswith("temperature"):
            torch.testing.assert_close(after[name], value, atol=1e-6, rtol=0)


def test_init_from_another_architecture_is_refused(tmp_path: Path) -> None:
    data = _pairs(tmp_path / "pairs.npz")
    first = fit(_config(tmp_path, "first", data))
    other = _config(tmp_path, "wide", data, model={"hidden": [24]}, run={"init_from": str(first.checkpoint)})
    with pytest.raises(ValueError, match=r"--init-from .*does not fit[\s\S]*\(24, 6\) here"):
        fit(other)


def test_a_folder_without_data_json_still_names_a_shape_mismatch(tmp_path: Path) -> None:
    """Run folders written before data.json: another input dimension is named, not a raw state_dict error."""
    data = _pairs(tmp_path / "pairs.npz")
    config = _config(tmp_path, "old", data)
    fit(config)
    (config.run_dir / "data.json").unlink()
    _pairs(data, dim=8)
    with pytest.raises(
        ValueError, match=r"does not fit this run's model .*\(16, 6\) in the checkpoint, \(16, 8\) here"
    ):
        fit(config)
