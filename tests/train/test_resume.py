"""Resume exactness: a run killed with SIGKILL mid-way and resumed by `crl train` ends bitwise equal to a run
that was never interrupted (model, optimiser state, generator states, data position: the whole safetensors file).
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from crl.train.config import config_to_toml, load_config, parse_config
from crl.train.trainer import Trainer

CONFIG = Path(__file__).parent / "configs" / "tiny_digits.toml"
TOTAL, KILL_AFTER = 40, 10


def _write_config(tmp_path: Path, name: str) -> Path:
    data = load_config(CONFIG).model_dump()
    data["run"].update(out_dir=str(tmp_path / "runs"), name=name)
    path = tmp_path / f"{name}.toml"
    path.write_text(config_to_toml(parse_config(data)), encoding="utf-8")
    return path


def _train(config: Path) -> subprocess.Popen[bytes]:
    environment = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "crl", "train", str(config)],
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _finish(process: subprocess.Popen[bytes]) -> None:
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()


def _checkpoint(tmp_path: Path, name: str, step: int) -> Path:
    return tmp_path / "runs" / name / "checkpoints" / f"step-{step:08d}.safetensors"


@pytest.mark.slow
def test_sigkill_then_resume_is_bitwise_equal_to_an_uninterrupted_run(tmp_path: Path) -> None:
    """Kill `crl train` after a mid-way checkpoint, rerun it, and compare with a run never interrupted.

    Any state not saved or not restored (an RNG stream, the data position, AdamW's moments or step count, the
    schedule) changes the final bytes; duplicated metrics rows after the resume would show in metrics.jsonl.
    """
    full_config, killed_config = _write_config(tmp_path, "full"), _write_config(tmp_path, "killed")
    killed = _train(killed_config)
    marker = _checkpoint(tmp_path, "killed", KILL_AFTER).with_suffix(".json")
    deadline = time.monotonic() + 90
    while not marker.exists() and killed.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    assert killed.returncode == -signal.SIGKILL, "the run ended before it could be killed mid-way"
    assert not _checkpoint(tmp_path, "killed", TOTAL).exists(), "the killed run had already finished"

    resumed = _train(killed_config)
    threads = torch.get_num_threads()
    try:
        Trainer(load_config(full_config)).fit()  # uninterrupted, in this process, while the resume runs
    finally:
        torch.set_num_threads(threads)
    _finish(resumed)

    expected = _checkpoint(tmp_path, "full", TOTAL).read_bytes()
    assert _checkpoint(tmp_path, "killed", TOTAL).read_bytes() == expected

    def rows(name: str) -> list[dict[str, float]]:
        lines = (tmp_path / "runs" / name / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(line).items() if k != "pairs_per_s"} for line in lines]

    assert rows("killed") == rows("full")
    assert [row["step"] for row in rows("full")] == list(range(5, TOTAL + 1, 5))
    kept = sorted(p.name for p in (tmp_path / "runs" / "killed" / "checkpoints").glob("step-*"))
    assert kept == [f"step-{s:08d}.{e}" for s in (TOTAL - 5, TOTAL) for e in ("json", "safetensors")]
