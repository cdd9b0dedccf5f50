"""The logic behind ``crl train CONFIG``: validate, train (or resume), print a summary on rank 0."""

from __future__ import annotations

import os
from pathlib import Path

from rich.console import Console
from rich.table import Table

from crl.train.config import ConfigError, load_config
from crl.train.trainer import RunResult, Trainer

__all__ = ["summary_table", "train_command"]


def summary_table(result: RunResult) -> Table:
    """A two-column table of a finished run: folder, checkpoint, steps, time and the last logged metrics."""
    table = Table(title="crl train", show_header=False)
    table.add_row("run folder", str(result.run_dir))
    table.add_row("checkpoint", str(result.checkpoint))
    table.add_row("steps", f"{result.step} (resumed from {result.resumed_from})")
    table.add_row("wall time", f"{result.wall_time_s:.1f} s")
    for key, value in result.metrics.items():
        if key != "step":
            table.add_row(key, f"{value:.6g}")
    return table


def train_command(config_path: Path) -> int:
    """Run ``crl train``: 0 on success, 2 for a bad config (the error names the field, value and fix)."""
    console = Console(stderr=True, soft_wrap=True)
    try:
        config = load_config(config_path)
        result = Trainer(config).fit()
    except ConfigError as error:
        console.print(f"error: {error}", style="red", highlight=False, markup=False)
        return 2
    if int(os.environ.get("RANK", "0")) == 0:
        Console().print(summary_table(result))
    return 0
