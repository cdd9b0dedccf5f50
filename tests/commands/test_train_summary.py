"""The train summary: says whether the run was fresh or resumed, and never cuts a path.

If these fail, a new user reads "resumed from 0" after a fresh run, or copies a checkpoint path that the
table wrapped mid-name.
"""

from pathlib import Path

from rich.console import Console

from crl.commands.train import summary_table
from crl.train.trainer import RunResult


def _render(resumed_from: int) -> str:
    result = RunResult(
        run_dir=Path("/tmp/a/very/long/run/folder/name/that/would/wrap/in/a/narrow/terminal"),
        checkpoint=Path("/tmp/a/very/long/run/folder/checkpoints/step-00001500.safetensors"),
        step=1500,
        metrics={"step": 1500.0, "loss": 1.25},
        wall_time_s=3.0,
        resumed_from=resumed_from,
    )
    console = Console(width=60, record=True)
    console.print(summary_table(result))
    return console.export_text()


def test_a_fresh_run_says_so() -> None:
    text = _render(0)
    assert "fresh run" in text and "resumed" not in text


def test_a_resumed_run_names_its_step() -> None:
    assert "resumed from step 700" in _render(700)


def test_paths_are_not_in_the_table() -> None:
    assert "step-00001500" not in _render(0), "paths go on their own lines, outside the table"
