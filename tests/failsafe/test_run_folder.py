"""A run folder met in a bad state: an empty config.toml, rows deleted from metrics.jsonl, and a full disk while
logging (TensorBoard events or metrics.jsonl) outside a checkpoint write."""

import builtins
import errno
import itertools
import warnings
from pathlib import Path
from typing import Any

import pytest
from tensorboard.summary.writer.record_writer import RecordWriter

from crl._lock import DiskFullError
from crl.train.config import ConfigError, TrainConfig
from crl.train.run_log import log_irregularities
from tests.train.helpers import fit, tiny_config

# 6 steps, a row every step, a checkpoint every 2 (the newest 2 kept).
STEPS = {"optim": {"total_steps": 6, "warmup_steps": 1}, "run": {"checkpoint_every": 2, "log_every": 1}}
_ENOSPC = OSError(errno.ENOSPC, "No space left on device")


def _steps(config: TrainConfig) -> list[str]:
    lines = (config.run_dir / "metrics.jsonl").read_text().splitlines()
    return [line.split(",")[0] for line in lines]


def test_an_empty_config_toml_in_the_run_folder_is_named_with_the_fix(tmp_path: Path) -> None:
    """Before: an empty config.toml read as a config of defaults, reported as 'another config' listing 17
    differences. Now the error says the run folder's config.toml is empty and how to go on."""
    config = tiny_config(tmp_path, "empty", **STEPS)
    config.run_dir.mkdir(parents=True)
    empty = config.run_dir / "config.toml"
    empty.write_text("")
    message = (
        f"the run folder's config.toml '{empty}' is empty, so the run in '{config.run_dir}' cannot be checked "
        "against this config; delete that folder to train from step 0, or copy the config that run was "
        "started with into that file to resume it"
    )
    with pytest.raises(ConfigError) as raised:
        fit(config)
    assert str(raised.value) == message


def test_rows_deleted_from_metrics_jsonl_are_warned_about_on_resume(tmp_path: Path) -> None:
    """Before: lines deleted from the middle of metrics.jsonl went unnoticed. Now the resume warns with their
    count and the file, and the run goes on."""
    config = tiny_config(tmp_path, "gaps", **STEPS)
    fit(config)
    for suffix in (".json", ".safetensors"):
        (config.run_dir / "checkpoints" / f"step-00000006{suffix}").unlink()
    log = config.run_dir / "metrics.jsonl"
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:1] + lines[3:]))
    with pytest.warns(UserWarning, match=rf"{log} has 2 rows missing and 0 rows out of order up to step 4"):
        assert fit(config).resumed_from == 4
    assert _steps(config) == [f'{{"step": {step}' for step in (1, 4, 5, 6)]


def test_log_irregularities_counts_disorder_and_ignores_a_changed_log_every() -> None:
    """Rows out of order are counted; rows of an earlier log_every (not multiples of this one) are not taken
    for missing rows; held-out rows are checked against eval_every on their own."""
    rows = [f'{{"step": {step}, "loss": 1.0}}' for step in (5, 10, 8)] + ['{"step": 10, "heldout/mrr": 0.5}']
    assert log_irregularities(rows, {"train": 3, "heldout": 5}, 10) == (1, 1)


def test_a_full_disk_in_tensorboard_stops_its_logging_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: ENOSPC in TensorBoard's writer thread printed a thread traceback naming no file, then killed the
    run from a later add_scalar. Now (the choice: TensorBoard is secondary to metrics.jsonl) one warning names
    the run folder and says TensorBoard logging stopped; training and metrics.jsonl go on."""
    config = tiny_config(
        tmp_path, "tensorboard_full", optim=STEPS["optim"], run={**STEPS["run"], "tensorboard": True}
    )
    written, original = itertools.count(), RecordWriter.write

    def write(self: RecordWriter, data: bytes) -> None:
        if next(written) >= 5:
            raise _ENOSPC
        original(self, data)

    monkeypatch.setattr(RecordWriter, "write", write)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert fit(config).step == 6
    messages = [str(warning.message) for warning in caught]
    assert messages == [
        f"TensorBoard logging stopped: writing events into {config.run_dir / 'tensorboard'} of the run folder "
        f"{config.run_dir} failed ([Errno 28] No space left on device); training goes on and "
        f"{config.run_dir / 'metrics.jsonl'} keeps every row"
    ]
    assert _steps(config) == [f'{{"step": {step}' for step in range(1, 7)]


def test_a_full_disk_while_writing_metrics_jsonl_is_a_clear_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC from metrics.jsonl's write is one DiskFullError naming the file and where a rerun resumes."""
    config = tiny_config(tmp_path, "log_full", **STEPS)
    real_open = builtins.open

    def full_disk_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = real_open(file, mode, *args, **kwargs)
        if str(file).endswith("metrics.jsonl") and "a" in mode:

            def write(text: str) -> int:
                raise _ENOSPC

            monkeypatch.setattr(handle, "write", write)
        return handle

    monkeypatch.setattr("crl.train.run_log.open", full_disk_open, raising=False)
    with pytest.raises(DiskFullError) as raised:
        fit(config)
    assert str(raised.value) == (
        f"no space left on device while writing {config.run_dir / 'metrics.jsonl'}; free space and rerun "
        "(the run starts at step 0)"
    )
