"""``crl train CONFIG``: validate the config, train (or resume), print a summary on rank 0.

Expected errors (a bad config, a run folder in use by another process, a damaged checkpoint given to
--init-from, a full disk) are one line and exit status 2; warnings (a damaged checkpoint skipped on resume, a
half-written log line dropped) are one ``warning:`` line each.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from crl.commands._console import output_console
from crl.commands._errors import EXIT_OK, run_reporting_errors, warnings_as_lines
from crl.commands._progress import announce_import, stages_on_stderr

if TYPE_CHECKING:
    from crl.train.trainer import RunResult


def train(
    config: Annotated[Path, typer.Argument(help="TOML config (see configs/fashion_sscrl.toml).")],
    out: Annotated[
        Path | None, typer.Option(help="Parent folder of the run folder (sets run.out_dir).")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Override one field, e.g. --set loss.n_negatives=1024 (repeatable; the value is a TOML "
            "literal, a bare word a string).",
        ),
    ] = None,
    init_from: Annotated[
        Path | None,
        typer.Option(
            help="Start this new run from the encoder weights of a checkpoint or run folder (its newest "
            "checkpoint); not its optimiser or schedule. Recorded as run.init_from.",
        ),
    ] = None,
) -> None:
    """Train a contrastive encoder; resumes from the newest checkpoint of the run folder.

    The run's config.toml records the config after --out, --set and --init-from. Distributed:
    torchrun --nproc_per_node=K -m crl train CONFIG (gloo on CPU, nccl on CUDA).
    """
    raise typer.Exit(
        train_command(config, overrides=command_line_overrides(out, set_ or []), init_from=init_from)
    )


def command_line_overrides(out: Path | None, sets: Sequence[str]) -> list[str]:
    """``--out DIR`` as the override ``run.out_dir="DIR"`` (first, so an explicit --set wins), then ``--set``."""
    return ([f"run.out_dir={json.dumps(str(out))}"] if out is not None else []) + list(sets)


def init_from_override(init_from: Path) -> str:
    """``--init-from PATH`` as ``run.init_from="CHECKPOINT"``, a run folder resolved to its newest checkpoint.

    Raises:
        FileNotFoundError: if there is no checkpoint at ``init_from``.
    """
    # Deferred: it loads torch, which `crl --help` does not need.
    from crl.train.checkpoint import resolve_checkpoint

    return f"run.init_from={json.dumps(str(resolve_checkpoint(init_from)))}"


def train_command(config_path: Path, overrides: Sequence[str] = (), init_from: Path | None = None) -> int:
    """Run ``crl train``: 0 on success, 2 for a bad config or path (the error names the field, value and fix)."""

    def body() -> int:
        # Deferred: the config schema builds its pydantic models on import, which `crl --help` does not need.
        from crl.train.config import load_config

        with stages_on_stderr():
            announce_import(f"crl train {config_path}: importing torch (a few seconds)")
            # Deferred: it loads torch, which `crl --help` does not need.
            from crl.train.trainer import Trainer

            chosen = [*overrides, init_from_override(init_from)] if init_from is not None else list(overrides)
            config = load_config(config_path, chosen)
            with warnings_as_lines():
                trainer = Trainer(config)
        with warnings_as_lines(), stages_on_stderr(live=False):
            result = trainer.fit()
        if int(os.environ.get("RANK", "0")) == 0:
            console = output_console()
            console.print(summary_table(result))
            console.print(f"run folder: {result.run_dir}", markup=False, highlight=False)
            console.print(f"checkpoint: {result.checkpoint}", markup=False, highlight=False)
            if result.already_complete:
                console.print(already_complete_note(result), markup=False, highlight=False)
        return EXIT_OK

    return run_reporting_errors(body)


def summary_table(result: RunResult) -> Table:
    """A two-column table of a finished run: steps, time, the last logged metrics and the vectors chosen on the
    validation images (paths are printed on their own lines, so they are never wrapped or cut)."""
    table = Table(title="crl train", show_header=False)
    table.add_column("field", no_wrap=True)
    table.add_column("value", no_wrap=True)
    start = "fresh run" if result.resumed_from == 0 else f"resumed from step {result.resumed_from}"
    if result.already_complete:
        start = "already complete, nothing trained"
    table.add_row("steps", f"{result.step} ({start})")
    table.add_row("wall time", f"{result.wall_time_s:.1f} s")
    for key, value in result.metrics.items():
        if key != "step":
            table.add_row(key, f"{value:.6g}")
    if result.vectors is not None:
        table.add_row("vectors", result.vectors.describe())
    return table


def already_complete_note(result: RunResult) -> str:
    """What to do when the run folder already holds the finished run."""
    return (
        f"the run is already complete (step {result.step}); nothing was trained. To train on from its weights, "
        f"start a new run: crl train CONFIG --set run.name=NEW --init-from {result.run_dir}"
    )
