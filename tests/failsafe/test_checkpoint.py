"""Checkpoints whose JSON state was edited, lone files of a write cut short, and checkpoints written before the
state checksum: each resume falls back, prunes or warns, and still ends bitwise equal to an uninterrupted run."""

import json
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from crl.train.checkpoint import list_checkpoints, save_checkpoint
from crl.train.config import TrainConfig
from tests.train.helpers import fit, tiny_config

# 6 steps, a checkpoint every 2 and the newest 2 kept: a finished run holds steps 4 and 6.
STEPS = {"optim": {"total_steps": 6, "warmup_steps": 1}, "run": {"checkpoint_every": 2, "log_every": 2}}


def _checkpoint(config: TrainConfig, step: int, suffix: str = ".safetensors") -> Path:
    return config.run_dir / "checkpoints" / f"step-{step:08d}{suffix}"


def _finished(tmp_path: Path, name: str) -> tuple[TrainConfig, bytes]:
    """A finished run of STEPS and the bytes of its final checkpoint's tensors."""
    config = tiny_config(tmp_path, name, **STEPS)
    fit(config)
    return config, _checkpoint(config, 6).read_bytes()


def _edit_state(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Change a checkpoint's JSON the way a hand edit would (its checksums untouched)."""
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document, indent=1, sort_keys=True))


def _falls_back_to_the_previous_checkpoint(
    tmp_path: Path, name: str, edit: Callable[[dict[str, Any]], None]
) -> None:
    """Edit the newest JSON: the resume must warn naming it, restart from step 4 and end with the same bytes."""
    config, uninterrupted = _finished(tmp_path, name)
    edited = _checkpoint(config, 6, ".json")
    _edit_state(edited, edit)
    with pytest.warns(UserWarning, match=f"checkpoint file '{edited}' is damaged: its state differs"):
        result = fit(config)
    assert (result.resumed_from, result.step) == (4, 6)
    assert _checkpoint(config, 6).read_bytes() == uninterrupted


def _double_base_lrs(document: dict[str, Any]) -> None:
    document["schedule"]["base_lrs"] = [2 * lr for lr in document["schedule"]["base_lrs"]]


def _move_position(document: dict[str, Any]) -> None:
    document["data"]["position"] += 1


def _change_epoch(document: dict[str, Any]) -> None:
    document["data"]["epoch"] += 1


def test_an_edited_base_lrs_falls_back_to_the_previous_checkpoint(tmp_path: Path) -> None:
    """Before: the run resumed silently with the edited LR schedule (other final weights)."""
    _falls_back_to_the_previous_checkpoint(tmp_path, "base_lrs", _double_base_lrs)


def test_an_edited_data_position_falls_back_to_the_previous_checkpoint(tmp_path: Path) -> None:
    """Before: the run resumed silently at another place in the data (other final weights)."""
    _falls_back_to_the_previous_checkpoint(tmp_path, "position", _move_position)


def test_an_edited_epoch_falls_back_to_the_previous_checkpoint(tmp_path: Path) -> None:
    """Before: the run resumed silently and wrote the edited epoch into every later metrics row."""
    _falls_back_to_the_previous_checkpoint(tmp_path, "epoch", _change_epoch)


def test_a_lone_tensor_file_is_pruned_on_resume(tmp_path: Path) -> None:
    """A kill between the two writes leaves step-<t>.safetensors without its JSON. Before: it stayed forever
    when step t was not written again (checkpoint_every changed on resume). Now the resume removes it, warning."""
    config, _ = _finished(tmp_path, "orphan")
    orphan = _checkpoint(config, 5)
    shutil.copyfile(_checkpoint(config, 4), orphan)
    with pytest.warns(UserWarning, match=f"checkpoint file '{orphan}' has no step-00000005.json beside it"):
        assert fit(config).already_complete
    assert not orphan.exists()
    assert [step for step, _ in list_checkpoints(config.run_dir / "checkpoints")] == [4, 6]


def test_a_lone_json_is_pruned_by_the_next_save(tmp_path: Path) -> None:
    """The reverse orphan (a JSON whose tensors were deleted) is removed when the next checkpoint prunes."""
    save_checkpoint(tmp_path, 2, {"x": torch.ones(2)}, {}, keep=2)
    lone = tmp_path / "step-00000002.json"
    (tmp_path / "step-00000002.safetensors").unlink()
    with pytest.warns(
        UserWarning, match=f"checkpoint file '{lone}' has no step-00000002.safetensors beside it"
    ):
        save_checkpoint(tmp_path, 4, {"x": torch.ones(2)}, {}, keep=2)
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "step-00000004.json",
        "step-00000004.safetensors",
    ]


def test_a_checkpoint_without_a_state_checksum_resumes_with_one_warning(tmp_path: Path) -> None:
    """Checkpoints written before the state checksum must still resume (bitwise), warning exactly once."""
    config, uninterrupted = _finished(tmp_path, "old_format")
    older = _checkpoint(config, 4, ".json")
    _edit_state(older, lambda document: document.pop("state_sha256"))
    _checkpoint(config, 6).unlink()
    _checkpoint(config, 6, ".json").unlink()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fit(config)
    about_checksums = [str(warning.message) for warning in caught if "state checksum" in str(warning.message)]
    assert about_checksums == [
        f"checkpoint file '{older}' carries no state checksum (written by an earlier crl): a change to its JSON "
        "state cannot be detected; the checkpoints written from now on carry one"
    ]
    assert result.resumed_from == 4
    assert _checkpoint(config, 6).read_bytes() == uninterrupted
