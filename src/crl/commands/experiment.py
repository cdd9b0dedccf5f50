"""``crl experiment NAME``: run a real-data experiment (not a verdict) that resumes from its database."""

import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from crl.commands._errors import EXIT_OK, run_reporting_errors

EXPERIMENTS = ("fashion-mstar",)


def experiment(
    name: Annotated[
        str, typer.Argument(help="The experiment: fashion-mstar ([A]'s m*(n) on Fashion-MNIST).")
    ],
    fidelity: Annotated[
        str,
        typer.Option(help="tiny (seconds, a smoke test), reduced (about 1 h), full (about 2 h on 2 cores)."),
    ] = "reduced",
    out: Annotated[Path, typer.Option(help="Folder of results.sqlite, the figure and the table.")] = Path(
        "runs/fashion_mstar"
    ),
    workers: Annotated[int, typer.Option(help="Processes training cells in parallel.")] = 1,
    threads: Annotated[int, typer.Option(help="torch threads in this process (with --workers 1).")] = 1,
) -> None:
    """Run an experiment's cells that OUT/results.sqlite lacks (resuming a killed run), then write its report."""
    raise typer.Exit(experiment_command(name, fidelity=fidelity, out=out, workers=workers, threads=threads))


def _commit() -> str:
    """The short hash of the checkout's HEAD ('unknown' outside a git checkout)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()


def experiment_command(name: str, *, fidelity: str, out: Path, workers: int = 1, threads: int = 1) -> int:
    """Run ``crl experiment``: compute the missing cells, print progress, write OUT/report.md and OUT/curves.png
    (named by this invocation's run id and the commit checked out when it started)."""

    def body() -> int:
        # Deferred: torch takes seconds to import, and `crl --help` does not need it.
        import torch

        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.experiments.fashion_mstar import FIDELITIES, run_experiment, summarise

        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.experiments.fashion_report import markdown_report, render_curves

        # Deferred: the sweep store is this command's own, and `crl --help` does not need it.
        from crl.sweep import new_run_id

        if name not in EXPERIMENTS:
            raise ValueError(f"experiment {name!r} is not known; choose one of {', '.join(EXPERIMENTS)}")
        if fidelity not in FIDELITIES:
            raise ValueError(f"--fidelity {fidelity!r} is not known; choose one of {', '.join(FIDELITIES)}")
        torch.set_num_threads(threads)
        console = Console(soft_wrap=True)
        grid, run_id, commit = FIDELITIES[fidelity], new_run_id(), _commit()
        out.mkdir(parents=True, exist_ok=True)

        def progress(done: int, total: int) -> None:
            console.print(f"{name} ({fidelity}): {done}/{total} cells", markup=False, highlight=False)

        records = run_experiment(
            out / "results.sqlite", grid, run_id=run_id, workers=workers, progress=progress
        )
        curves, baseline = summarise(records, grid)
        title = f"{name} {fidelity}: run {run_id}, commit {commit}"
        render_curves(curves, baseline, out / "curves.png", title=title)
        report = markdown_report(curves, baseline, grid, run_id=run_id, commit=commit)
        (out / "report.md").write_text(report, encoding="utf-8")
        console.print(f"written {out / 'report.md'} and {out / 'curves.png'}", markup=False, highlight=False)
        return EXIT_OK

    return run_reporting_errors(body)
