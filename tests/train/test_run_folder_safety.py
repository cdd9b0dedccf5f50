"""A run folder stays safe as an operator meets it: one writer at a time, a half-written log, a damaged
checkpoint, a full disk (issue 9 items 1-4). Each test reproduces a failure that main had before."""

import builtins
import errno
import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from crl._lock import FolderLock, FolderLockedError
from crl.commands.evaluate import eval_command
from crl.commands.train import train_command
from crl.train.config import TrainConfig, config_to_toml
from crl.train.loop import TrainingLoop
from crl.train.trainer import Trainer
from tests.train.helpers import fit, tiny_config

# 12 steps, a checkpoint every 3, a row every 5: a run stopped after step 8 resumes from step 6, mid-window.
STEPS = {"optim": {"total_steps": 12, "warmup_steps": 2}, "run": {"checkpoint_every": 3, "log_every": 5}}
SHORT = {"optim": {"total_steps": 10, "warmup_steps": 2}}


@pytest.fixture(autouse=True)
def _keep_thread_count() -> Any:
    """`crl train` in process sets torch's thread count from the config; restore it after each test."""
    threads = torch.get_num_threads()
    yield
    torch.set_num_threads(threads)


class _KilledError(Exception):
    """Stands for a process killed mid-run."""


def _stopped_at(monkeypatch: pytest.MonkeyPatch, step: int) -> None:
    """Make every TrainingLoop raise :class:`_KilledError` before it takes step ``step``."""
    original = TrainingLoop.train_step

    def train_step(self: TrainingLoop) -> Any:
        if self.step + 1 == step:
            raise _KilledError
        return original(self)

    monkeypatch.setattr(TrainingLoop, "train_step", train_step)


def _interrupted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> TrainConfig:
    """A run of STEPS stopped before step 8 (its last checkpoint is step 6)."""
    config = tiny_config(tmp_path, name, **STEPS)
    with monkeypatch.context() as patch:
        _stopped_at(patch, 8)
        with pytest.raises(_KilledError):
            fit(config)
    return config


def _rows(config: TrainConfig) -> list[dict[str, float]]:
    """metrics.jsonl without the timing column."""
    lines = (config.run_dir / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k != "pairs_per_s"} for line in lines]


def _config_file(tmp_path: Path, config: TrainConfig) -> Path:
    path = tmp_path / f"{config.run.name}.toml"
    path.write_text(config_to_toml(config), encoding="utf-8")
    return path


_HOLD = "import sys, time; from pathlib import Path; from crl._lock import FolderLock\n"
_HOLD += (
    "lock = FolderLock(Path(sys.argv[1]), command='crl train'); print('held', flush=True); time.sleep(120)"
)


def test_a_second_writer_stops_at_once_naming_the_holder_and_a_killed_holder_blocks_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: two `crl train` on one run folder both wrote (a FileNotFoundError while pruning, duplicated
    metrics rows). Now the second exits with status 2 naming the holder's pid and host; once the holder is
    killed with SIGKILL, its lock file is left behind but the run trains."""
    config = tiny_config(tmp_path, "shared", **SHORT)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(config.run_dir)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert train_command(_config_file(tmp_path, config)) == 2
        message = " ".join(capsys.readouterr().err.split())
        assert f"is in use by crl train (pid {holder.pid} on host {socket.gethostname()}" in message
        assert not (config.run_dir / "metrics.jsonl").exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
    assert (config.run_dir / ".crl.lock").exists()
    assert fit(config).step == 10


def test_the_trainer_holds_the_lock_for_the_whole_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While fit() saves a checkpoint, any other writer is refused, naming this process; after fit, none is."""
    config = tiny_config(tmp_path, "held", **SHORT)
    refusals: list[str] = []
    save = Trainer._save

    def checked_save(self: Trainer) -> Path:
        with pytest.raises(FolderLockedError) as refused:
            FolderLock(config.run_dir, command="crl train")
        refusals.append(str(refused.value))
        return save(self)

    monkeypatch.setattr(Trainer, "_save", checked_save)
    fit(config)
    assert len(refusals) == 2 and all(f"(pid {os.getpid()} on host" in text for text in refusals)
    FolderLock(config.run_dir, command="crl train").release()


def test_a_resume_off_a_log_boundary_logs_the_rows_of_an_uninterrupted_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: resumed from step 6, the row of step 10 averaged steps 7-10 only. Now the open log window is in
    the checkpoint, and every row (loss included, bitwise) equals the uninterrupted run's."""
    full = tiny_config(tmp_path, "full", **STEPS)
    fit(full)
    interrupted = _interrupted(tmp_path, monkeypatch, "resumed")
    assert fit(interrupted).resumed_from == 6
    assert [row["step"] for row in _rows(full)] == [5, 10, 12]
    assert _rows(interrupted) == _rows(full)


def test_a_half_written_last_log_line_is_dropped_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a partial last line (a full disk mid-write) made every later `crl train` die with a
    JSONDecodeError naming no file. Now it is dropped with a warning naming the file, and the run resumes."""
    full = tiny_config(tmp_path, "full", **STEPS)
    fit(full)
    interrupted = _interrupted(tmp_path, monkeypatch, "partial")
    with open(interrupted.run_dir / "metrics.jsonl", "a") as log:
        log.write('{"step": 10, "epoch": 0, "lo')
    with pytest.warns(UserWarning, match=r"metrics\.jsonl ends in a partial line"):
        fit(interrupted)
    assert _rows(interrupted) == _rows(full)


def test_a_corrupt_log_line_before_the_last_is_an_error_naming_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A damaged line in the middle is not a cut-short write: resuming must stop and say where it is."""
    config = _interrupted(tmp_path, monkeypatch, "corrupt")
    path = config.run_dir / "metrics.jsonl"
    path.write_text("garbage\n" + path.read_text())
    with pytest.raises(ValueError, match=rf"{path} line 1 is not a JSON row"):
        fit(config)


def test_a_damaged_newest_checkpoint_is_skipped_for_the_newest_intact_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: a truncated newest checkpoint crashed train and eval without naming it, though an intact
    older one sat beside it. Now the resume warns, names it and restarts from the older one; `crl eval` of the
    damaged file is an error naming it."""
    config = tiny_config(tmp_path, "damaged", **SHORT)
    fit(config)
    newest = config.run_dir / "checkpoints" / "step-00000010.safetensors"
    newest.write_bytes(newest.read_bytes()[:1000])
    assert eval_command(newest) == 2
    assert f"checkpoint file '{newest}' is damaged" in " ".join(capsys.readouterr().err.split())
    with pytest.warns(UserWarning, match=f"checkpoint file '{newest}' is damaged"):
        result = fit(config)
    assert result.resumed_from == 5 and result.step == 10
    assert fit(config).already_complete  # the damaged checkpoint was replaced by an intact one


def test_a_full_disk_is_one_clear_message_and_leaves_no_temporaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: ENOSPC while writing a checkpoint left its .tmp-PID file (keeping the disk full) and a
    traceback. Now the temporary and the half-written checkpoint are removed, the message names the file and
    the checkpoint a rerun resumes from, and a rerun removes temporaries that a killed writer left."""
    config = tiny_config(tmp_path, "full_disk", **SHORT)
    checkpoints = config.run_dir / "checkpoints"
    real_open = builtins.open

    def full_disk_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if "step-00000010.json.tmp" in str(file):
            handle.write(b"{half")
            handle.close()
            raise OSError(errno.ENOSPC, "No space left on device")
        return handle

    monkeypatch.setattr("crl._lock.open", full_disk_open, raising=False)
    assert train_command(_config_file(tmp_path, config)) == 2
    message = " ".join(capsys.readouterr().err.split())
    assert (
        f"error: no space left on device while writing {checkpoints / 'step-00000010.json'}; free space and "
        f"rerun (the run resumes from {checkpoints / 'step-00000005.safetensors'})"
    ) in message
    assert sorted(p.name for p in checkpoints.iterdir()) == [
        "step-00000005.json",
        "step-00000005.safetensors",
    ]
    monkeypatch.undo()
    (checkpoints / ".step-00000010.safetensors.tmp-99999").write_bytes(b"left by a killed writer")
    assert fit(config).resumed_from == 5
    assert not list(checkpoints.glob(".*"))
