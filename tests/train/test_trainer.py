"""The Trainer in one process: it learns, logs, refuses a changed config, and runs every sampler and source."""

import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from crl.train.config import ConfigError
from tests.train.helpers import fit, tiny_config

SHORT = {"total_steps": 10, "warmup_steps": 2}


def test_tiny_run_learns_and_logs(tmp_path: Path) -> None:
    """The logged loss must fall over 40 steps, and the run folder must hold config, metrics, events, checkpoints."""
    config = tiny_config(tmp_path, "learns", run={"tensorboard": True})
    result = fit(config)
    rows = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(5, 41, 5))
    assert rows[-1]["loss"] < 0.8 * rows[0]["loss"]
    assert set(rows[0]) == {"step", "epoch", "loss", "lr", "tau", "pairs_per_s"}
    assert result.step == 40 and result.checkpoint.name == "step-00000040.safetensors"
    assert (config.run_dir / "config.toml").is_file()
    assert any((config.run_dir / "tensorboard").glob("events.out.tfevents.*"))
    again = fit(config)
    assert again.resumed_from == 40 and again.checkpoint == result.checkpoint


def test_progress_off_a_terminal_is_one_plain_line_per_logged_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With stdout not a terminal (here captured; a pipe or a CI log alike) a live progress bar shows nothing, so
    the trainer prints each logged row as one line, the same loss as metrics.jsonl's."""
    config = tiny_config(tmp_path, "plain", optim=SHORT, run={"progress": True, "log_every": 2})
    fit(config)
    lines = capsys.readouterr().out.splitlines()
    rows = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == len(rows) == 5
    for line, row in zip(lines, rows, strict=True):
        assert line.startswith(f"plain step {row['step']}/10 loss {row['loss']:.4f} lr ")
        assert " tau " in line and " pairs/s " in line and line.endswith(" s")


def test_a_changed_config_does_not_resume_silently(tmp_path: Path) -> None:
    """Resuming a run folder with other hyper-parameters would mix two runs: it must fail and name the field."""
    fit(tiny_config(tmp_path, "same", optim=SHORT))
    with pytest.raises(ConfigError, match=r"\[optim\] lr: 0.003 in the run folder, 0.01 now"):
        fit(tiny_config(tmp_path, "same", optim={**SHORT, "lr": 0.01}))
    fit(tiny_config(tmp_path, "same", optim=SHORT, run={"progress": True}))  # display settings may change


@pytest.mark.parametrize(
    "loss",
    [
        {"negatives": "shared_pool", "n_negatives": 16},
        {"negatives": "independent_pool", "n_negatives": 16, "symmetric": False},
        {"negatives": "queue", "n_negatives": 300},
        {"negatives": "in_batch", "form": "gcl", "learnable_tau": False},
    ],
    ids=lambda loss: f"{loss['negatives']}-{loss.get('form', 'infonce')}",
)
def test_every_sampler_trains_and_checkpoints_its_state(tmp_path: Path, loss: dict) -> None:
    """Each [loss] negatives must run end to end; the queue's memory must be in the checkpoint."""
    config = tiny_config(tmp_path, "sampler", loss=loss, optim=SHORT)
    result = fit(config)
    assert result.metrics["loss"] == result.metrics["loss"]  # finite (NaN raises inside the trainer)
    tensors = load_file(str(result.checkpoint))
    if loss["negatives"] == "queue":
        assert tensors["sampler.memory_y"].shape == (300, 16) and int(tensors["sampler.filled"]) == 300
        assert tensors["sampler.memory_x"].shape == (300, 16)  # symmetric loss: anchors remembered too


def test_synthetic_truth_draws_negatives_from_p_minus(tmp_path: Path) -> None:
    """source = 'synthetic' must train on n drawn pairs with negatives y' ~ p- from the truth's sampler."""
    config = tiny_config(
        tmp_path,
        "synthetic",
        data={"source": "synthetic", "n_train": 512, "dim": 3, "kappa": 8.0, "batch_size": 64},
        model={"hidden": [32]},
        loss={"negatives": "independent_pool", "n_negatives": 32, "symmetric": False},
        optim={"total_steps": 30, "warmup_steps": 2},
    )
    result = fit(config)
    rows = [json.loads(line) for line in (config.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert result.step == 30 and rows[-1]["loss"] < rows[0]["loss"]
