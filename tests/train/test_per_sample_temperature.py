"""``[loss] temperature = "per_sample"`` (iSogCLR) and ``[run] precision = "bf16"`` in training runs.

If these fail, a run would accept per-sample settings it cannot use, not move the batch items' tau_i, lose them
across an interrupted run, or train under bf16 without the loss staying finite.
"""

import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from crl.train import trainer as trainer_module
from crl.train.config import ConfigError
from crl.train.loop import TrainingLoop
from crl.train.trainer import Trainer
from tests.train.helpers import fit, tiny_config

PER_SAMPLE = {
    "form": "gcl",
    "symmetric": False,
    "learnable_tau": False,
    "tau": 0.2,
    "temperature": "per_sample",
    "tau_lr": 0.05,
}


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"form": "infonce"}, "form = 'infonce' (needs 'gcl')"),
        ({"symmetric": True}, "symmetric = True"),
        ({"learnable_tau": True}, "learnable_tau = True"),
        ({"negatives": "queue", "n_negatives": 8}, "negatives = 'queue'"),
        ({"tau": 2.0}, "must lie in [tau_min, tau_max]"),
        ({"temperature": "global"}, "tau_lr set with temperature = 'global'"),
    ],
)
def test_unusable_settings_are_refused_by_name(tmp_path: Path, changes: dict, named: str) -> None:
    escaped = named.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(ConfigError, match=escaped):
        tiny_config(tmp_path, "bad", loss={**PER_SAMPLE, **changes})


def test_an_interrupted_per_sample_run_resumes_bit_for_bit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tau_i move off their start within the bounds, and a run killed after its step-3 checkpoint resumes to the
    uninterrupted run's final checkpoint byte for byte (tau_i, s_i, v_i, seen and step restored)."""
    run = {"checkpoint_every": 3, "keep_checkpoints": 10}
    optim = {"total_steps": 6, "warmup_steps": 2}
    full = fit(tiny_config(tmp_path, "full", loss=PER_SAMPLE, optim=optim, run=run))
    tensors = load_file(str(full.checkpoint))
    tau, seen = tensors["estimator.tau"], tensors["estimator.seen"]
    assert int(tensors["estimator.step"]) == 6 and bool(seen.any())
    assert bool((tau[seen] != 0.2).all()) and bool(((tau >= 0.05) & (tau <= 1.0)).all())
    assert bool((tau[~seen] == 0.2).all())
    killed = tiny_config(tmp_path, "killed", loss=PER_SAMPLE, optim=optim, run=run)
    step = TrainingLoop.train_step

    def crash_after_step_4(loop: TrainingLoop) -> torch.Tensor:
        if loop.step == 4:
            raise KeyboardInterrupt
        return step(loop)

    monkeypatch.setattr(TrainingLoop, "train_step", crash_after_step_4)
    with pytest.raises(KeyboardInterrupt):
        fit(killed)
    monkeypatch.setattr(TrainingLoop, "train_step", step)
    resumed = fit(killed)
    assert resumed.resumed_from == 3
    assert resumed.checkpoint.read_bytes() == full.checkpoint.read_bytes()


def test_bf16_precision_trains_and_differs_from_fp32(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    optim = {"total_steps": 2, "warmup_steps": 1}
    fp32 = fit(tiny_config(tmp_path, "fp32", optim=optim))
    monkeypatch.setattr(trainer_module, "cpu_has_native_bf16", lambda: True)
    bf16 = fit(tiny_config(tmp_path, "bf16", optim=optim, run={"precision": "bf16"}))
    a, b = load_file(str(fp32.checkpoint)), load_file(str(bf16.checkpoint))
    weights = [key for key in a if key.startswith("model.") and a[key].is_floating_point()]
    assert all(bool(torch.isfinite(b[key]).all()) for key in weights)
    assert any(not torch.equal(a[key], b[key]) for key in weights)


def test_bf16_on_a_cpu_without_native_bf16_warns_and_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a user of an AVX2 CPU would train 14x slower under bf16 without being told why."""
    threads = torch.get_num_threads()
    try:
        monkeypatch.setattr(trainer_module, "cpu_has_native_bf16", lambda: False)
        with pytest.warns(UserWarning, match='precision = "fp32"'):
            Trainer(tiny_config(tmp_path, "bf16", run={"precision": "bf16"}))
        monkeypatch.setattr(trainer_module, "cpu_has_native_bf16", lambda: True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            Trainer(tiny_config(tmp_path, "bf16-native", run={"precision": "bf16"}))
    finally:
        torch.set_num_threads(threads)
