"""``crl advise CONFIG --budget SAMPLES``: more negatives or more data? A pilot over (n, m) answers it.

Prints the pilot design and the wall time it implies on this machine (from a short timing probe) before
starting; ``--dry-run`` stops there. The pilot runs through the sweep store in ``--out`` (a rerun resumes) under a
live count of its cells, then the fitted surface (each parameter's interval with what makes it implausible, if
anything), the advice at the config's own n and m, and the files written (advice.json, advice.png).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from crl._lock import FolderLock, claim_folder
from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from crl.advise.session import AdviseOptions, AdviseResult, Plan
    from crl.train.config import TrainConfig

PROGRESS_COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
"""The live line of the pilot's cells in a terminal: done of total (resumed cells count as done), elapsed time;
elsewhere (a log, a pipe) one plain line per finished cell."""


def advise(
    config: Annotated[Path, typer.Argument(help="The TOML training config you plan to run at full n.")],
    budget: Annotated[
        int, typer.Option(help="Pilot budget in processed samples (inputs through an encoder).")
    ],
    out: Annotated[Path, typer.Option(help="Output folder (sweep store, advice.json, advice.png).")] = Path(
        "advise"
    ),
    seeds: Annotated[int, typer.Option(help="Seed replicates of the pilot (>= 2).")] = 3,
    levels: Annotated[int, typer.Option(help="Number of pilot n values, halving down (>= 3).")] = 4,
    steps: Annotated[
        int | None, typer.Option(help="Steps per pilot cell (default: optim.total_steps).")
    ] = None,
    epochs: Annotated[
        int | None,
        typer.Option(
            help="Train each pilot cell E epochs of its n pairs (E floor(n / b) steps) instead of --steps."
        ),
    ] = None,
    max_m: Annotated[int | None, typer.Option(help="Cap on the pilot's m.")] = None,
    fractions: Annotated[
        str, typer.Option(help="The m/n grid, comma-separated ([A]'s 1%, 10%, 40%, 70%, 100%).")
    ] = "0.01,0.1,0.4,0.7,1.0",
    metric: Annotated[
        str | None,
        typer.Option(
            help="excess_risk (synthetic), knn_error (labels), recall_error, ndcg_error (locked texts)."
        ),
    ] = None,
    tol: Annotated[float, typer.Option(help="m* tolerance relative to the plateau (C6: 0.01).")] = 0.01,
    workers: Annotated[int, typer.Option(help="Parallel pilot processes.")] = 1,
    eval_queries: Annotated[
        int,
        typer.Option(
            help="Held-out queries per cell (kNN test items, recall pairs, excess-risk anchors); 0: the whole "
            "test split (locked features)."
        ),
    ] = 2000,
    check: Annotated[
        bool, typer.Option(help="Also run check cells at 2x and 4x the largest pilot n and report coverage.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option(help="Show the design and implied wall time, run nothing.")
    ] = False,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Override a config field, e.g. --set optim.lr=0.003.")
    ] = None,
) -> None:
    """Should you spend compute on more negatives (m) or more data (n)? Fit a pilot's error surface and say."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.heldout import EvalSizes

    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.session import AdviseOptions

    if eval_queries < 2 and eval_queries != 0:
        raise typer.BadParameter(
            f"--eval-queries {eval_queries} must be >= 2 (or 0: the whole locked test split)"
        )
    options = AdviseOptions(
        budget=budget,
        fractions=_fractions(fractions),
        seeds=seeds,
        levels=levels,
        steps=steps,
        epochs=epochs,
        max_m=max_m,
        metric=metric,
        rel_tol=tol,
        workers=workers,
        check=check,
        sizes=EvalSizes(queries=eval_queries),
    )
    raise typer.Exit(advise_command(config, options, out=out, dry_run=dry_run, overrides=set_ or []))


def _fractions(text: str) -> tuple[float, ...]:
    """``"0.01,0.1,1"`` -> (0.01, 0.1, 1.0); an unreadable list exits 2 with the option named."""
    try:
        return tuple(float(part) for part in text.split(","))
    except ValueError:
        raise typer.BadParameter(
            f"--fractions {text!r}: give numbers separated by commas, e.g. 0.01,0.1,0.4,1"
        ) from None


def advise_command(
    config_path: Path,
    options: AdviseOptions,
    *,
    out: Path,
    dry_run: bool = False,
    overrides: list[str] | None = None,
) -> int:
    """Run ``crl advise``; 0 on success (also when the advice is withheld), 2 for bad input."""

    def body() -> int:
        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.advise.session import plan_session

        # Deferred: the config schema builds its pydantic models on import, which `crl --help` does not need.
        from crl.train.config import load_config

        if not 0 < options.rel_tol < 1:
            raise ValueError(f"--tol {options.rel_tol} must lie in (0, 1), e.g. 0.01")
        if options.workers < 1:
            raise ValueError(f"--workers {options.workers} must be >= 1")
        config = load_config(config_path, overrides or [])
        console = Console(soft_wrap=True, highlight=False)
        plan = plan_session(config, options)
        _print_plan(console, config, plan, options.workers)
        if dry_run:
            return EXIT_OK
        with FolderLock(out, command="crl advise"):
            claim_folder(out, "crl advise")
            result = _session(console, config, options, plan, out)
        _print_result(console, result)
        return EXIT_OK

    return run_reporting_errors(body)


def _session(
    console: Console, config: TrainConfig, options: AdviseOptions, plan: Plan, out: Path
) -> AdviseResult:
    """:func:`crl.advise.session.run_session` with its progress shown (a bar on a terminal, else lines)."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.session import run_session

    if console.is_terminal:
        with Progress(*PROGRESS_COLUMNS, console=console) as progress:
            task = progress.add_task("pilot and check cells", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return run_session(config, options, plan, out, progress=advance)

    def line(done: int, total: int) -> None:
        console.print(f"pilot and check cells: {done}/{total}", markup=False)

    return run_session(config, options, plan, out, progress=line)


def _print_plan(console: Console, config: TrainConfig, plan: Plan, workers: int) -> None:
    design = plan.design
    n_values = ", ".join(str(n) for n in design.n_values)
    console.print(
        f"pilot: n in {{{n_values}}}, {len(design.points)} (n, m) cells x {len(design.seeds)} seeds, "
        + (
            f"{design.steps} steps each, "
            if design.epochs is None
            else f"{design.epochs} epochs of its n each, "
        )
        + f"{design.total_samples:,} processed samples; metric {plan.metric}; "
        f"your n = {plan.n_full}, m = {plan.m_now} ({config.loss.regime} negatives)",
        markup=False,
    )
    if plan.checks:
        cells = ", ".join(f"({p.n}, {p.m})" for p in plan.checks)
        console.print(f"check cells: {cells}, {plan.check_samples(config):,} processed samples", markup=False)
    if plan.probe is not None:
        steps, seeds = design.steps, len(design.seeds)
        pilot_s = plan.probe.wall_seconds(design.points, seeds, steps, config, workers, design.epochs)
        check_s = plan.probe.wall_seconds(plan.checks, seeds, steps, config, workers, design.epochs)
        console.print(
            f"timing probe: {1e3 * plan.probe.seconds_per_step:.2f} ms per step + "
            f"{1e6 * plan.probe.seconds_per_sample:.1f} us per processed sample, {plan.probe.eval_seconds:.2f} s "
            f"per evaluation -> about {pilot_s / 60:.1f} min for the pilot"
            + (f" and {check_s / 60:.1f} min for the checks" if plan.checks else "")
            + f" with {workers} worker(s) on this machine",
            markup=False,
        )


def _print_result(console: Console, result: AdviseResult) -> None:
    advice = result.advice
    table = Table(title=f"error surface ({advice.parameters['alpha'].level:.0%} intervals over seeds)")
    for column in ("parameter", "estimate", "low", "high"):
        table.add_column(column, justify="right")
    table.add_column("implausible?")
    for name, interval in advice.parameters.items():
        flags = "; ".join(advice.flags.get(name, ()))
        table.add_row(name, f"{interval.estimate:.4g}", f"{interval.low:.4g}", f"{interval.high:.4g}", flags)
    console.print(table)
    console.print(f"alpha vs [A]'s bound: {advice.rate_comparison}", markup=False)
    console.print(f"this advice covers: {advice.model}", markup=False)
    console.print(advice.recommendation, markup=False)
    console.print(advice.local_answer, markup=False)
    if result.check is not None:
        console.print(
            f"check cells: coverage {result.check.coverage:.0%} of {len(result.check.rows)}, median |relative "
            f"error| {result.check.median_abs_error:.1%}",
            markup=False,
        )
    console.print(f"written: {result.json_path}, {result.figure_path}", markup=False)
