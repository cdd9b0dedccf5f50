"""``crl advise CONFIG``: more negatives or more data? A local doubling pilot at the config's (n, m) answers it.

Prints the pilot's cells and the wall time they imply on this machine (from a short timing probe, which also makes
the data the cells read ready: locked features it computes are cached, and their time is stated) before starting;
``--dry-run`` stops there. The cells run through the sweep store in ``--out`` (a rerun resumes) under a live count,
then the answer (the recommendation first, then each measured change in the error, the baseline, the scope), the
cells, the two options' costs, and the files written (advice.json, advice.png).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from crl._lock import FolderLock, claim_folder
from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from crl.advise.heldout import EvalSizes, Metric
    from crl.advise.mstar_session import MstarPlan, MstarResult
    from crl.advise.mstar_truth import TruthPlan, TruthResult
    from crl.advise.pilot import TimingProbe
    from crl.advise.session import AdviseOptions, AdviseResult, Plan
    from crl.sweep import Executor, ProgressHook
    from crl.train.config import TrainConfig

T = TypeVar("T")
P = TypeVar("P")
R = TypeVar("R")

PROGRESS_COLUMNS = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
"""The live line of the cells in a terminal: done of total (stored cells count as done), elapsed time; elsewhere
(a log, a pipe) one plain line per finished cell."""


def advise(
    config: Annotated[
        Path,
        typer.Argument(help="The TOML training config at your (n, m): [data] n_train, [loss] n_negatives."),
    ],
    out: Annotated[Path, typer.Option(help="Output folder (sweep store, advice.json, advice.png).")] = Path(
        "advise"
    ),
    seeds: Annotated[
        int, typer.Option(help="Seed runs per cell (>= 2; the interval's q is calibrated at 4).")
    ] = 4,
    epochs: Annotated[
        int, typer.Option(help="E: every cell trains E epochs of its n pairs (the recipe map).")
    ] = 10,
    first_seed: Annotated[int, typer.Option(help="The first of the seeds (seeds first..first+S-1).")] = 0,
    metric: Annotated[
        str | None,
        typer.Option(
            help="excess_risk (synthetic), knn_error (labels), recall_error, ndcg_error (locked texts)."
        ),
    ] = None,
    workers: Annotated[int, typer.Option(help="Parallel processes.")] = 1,
    eval_queries: Annotated[
        int,
        typer.Option(
            help="Held-out queries per cell (kNN test items, recall pairs, excess-risk anchors); 0: the whole "
            "test split (locked features)."
        ),
    ] = 2000,
    check: Annotated[
        bool, typer.Option(help="Also run the cells (2n, m) and (n, 2m) and compare the answer with them.")
    ] = False,
    mstar: Annotated[
        bool,
        typer.Option(
            help="How many negatives at your n? Predict m*(n) at n, 2n and 4n from a pilot at n/16, n/8, n/4 "
            "(every power-of-two m; at most 10% of the same grid at n; docs/advisor_mstar.md)."
        ),
    ] = False,
    mstar_truth: Annotated[
        str | None,
        typer.Option(
            help="Measure m* instead of predicting it: the full grid (every power-of-two m below n, and n) at "
            "these comma-separated n, e.g. 8000,16000,32000 (the truth of docs/advisor_mstar.md's checks)."
        ),
    ] = None,
    mstar_scale: Annotated[
        str,
        typer.Option(
            help="Where --mstar / --mstar-truth read m*'s tolerance: error (q of the error's plateau) or score "
            "(q of the score's plateau, 1 - error; for rate metrics near chance; docs/advisor_mstar.md, check 3)."
        ),
    ] = "error",
    executor: Annotated[
        str,
        typer.Option(
            help="Where --mstar / --mstar-truth cells run: process (--workers of this machine) or ray."
        ),
    ] = "process",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster to join with --executor ray (default: start one).")
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Show the cells and their wall time here (caching the features they read); train no cell."
        ),
    ] = False,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config field, e.g. --set loss.n_negatives=160."),
    ] = None,
) -> None:
    """Should you double the negatives (m) or the data (n)? Run a local pilot at your (n, m) and say."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.heldout import EvalSizes

    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.session import AdviseOptions

    if eval_queries < 2 and eval_queries != 0:
        raise typer.BadParameter(
            f"--eval-queries {eval_queries} must be >= 2 (or 0: the whole locked test split)"
        )
    options = AdviseOptions(
        seeds=seeds,
        epochs=epochs,
        first_seed=first_seed,
        metric=metric,
        workers=workers,
        check=check,
        sizes=EvalSizes(queries=eval_queries),
        executor=executor,
        address=address,
        mstar_scale=mstar_scale,
    )
    raise typer.Exit(
        advise_command(
            config,
            options,
            out=out,
            dry_run=dry_run,
            overrides=set_ or [],
            mstar=mstar,
            mstar_truth=mstar_truth,
        )
    )


def advise_command(
    config_path: Path,
    options: AdviseOptions,
    *,
    out: Path,
    dry_run: bool = False,
    overrides: list[str] | None = None,
    mstar: bool = False,
    mstar_truth: str | None = None,
) -> int:
    """Run ``crl advise`` (``mstar``: ``crl advise --mstar``; ``mstar_truth``: the truth grid at those n); 0 on
    success (also when the answer is too close to call), 2 for bad input."""
    if mstar_truth is not None:
        return _advise_flow(
            config_path,
            options,
            out,
            dry_run,
            overrides,
            partial(_plan_truth, options, mstar_truth),
            partial(_print_truth_plan, out=out, sizes=options.sizes),
            partial(_run_truth, options, out),
            _print_truth_result,
        )
    if mstar:
        return _advise_flow(
            config_path,
            options,
            out,
            dry_run,
            overrides,
            partial(_plan_mstar, options),
            partial(_print_mstar_plan, out=out, sizes=options.sizes),
            partial(_run_mstar, options, out),
            _print_mstar_result,
        )
    if options.mstar_scale != "error":
        return run_reporting_errors(_refuse_scale)
    return _advise_flow(
        config_path,
        options,
        out,
        dry_run,
        overrides,
        partial(_plan_doubling, options),
        _print_plan,
        partial(_run_doubling, options, out),
        _print_result,
    )


def _refuse_scale() -> int:
    raise ValueError(
        "--mstar-scale applies to --mstar and --mstar-truth (m*'s tolerance); the doubling pilot has no m*: "
        "leave it out, or add --mstar"
    )


def _plan_doubling(options: AdviseOptions, config: TrainConfig) -> Plan:
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.session import plan_session

    return plan_session(config, options)


def _run_doubling(
    options: AdviseOptions, out: Path, console: Console, config: TrainConfig, plan: Plan
) -> AdviseResult:
    """:func:`crl.advise.session.run_session` with its progress shown (:func:`_with_progress`)."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.session import run_session

    return _with_progress(console, lambda hook: run_session(config, options, plan, out, progress=hook))


def _plan_mstar(options: AdviseOptions, config: TrainConfig) -> MstarPlan:
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.mstar_session import plan_mstar

    return plan_mstar(config, options)


def _run_mstar(
    options: AdviseOptions, out: Path, console: Console, config: TrainConfig, plan: MstarPlan
) -> MstarResult:
    """:func:`crl.advise.mstar_session.run_mstar` with its progress shown (:func:`_with_progress`)."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.mstar_session import run_mstar

    with _executor(options) as runner:
        return _with_progress(
            console, lambda hook: run_mstar(config, options, plan, out, executor=runner, progress=hook)
        )


def _plan_truth(options: AdviseOptions, ns: str, config: TrainConfig) -> TruthPlan:
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.mstar_truth import parse_truth_ns, plan_truth

    return plan_truth(config, options, parse_truth_ns(ns))


def _run_truth(
    options: AdviseOptions, out: Path, console: Console, config: TrainConfig, plan: TruthPlan
) -> TruthResult:
    """:func:`crl.advise.mstar_truth.run_truth` with its progress shown (:func:`_with_progress`)."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.mstar_truth import run_truth

    with _executor(options) as runner:
        return _with_progress(
            console, lambda hook: run_truth(config, options, plan, out, executor=runner, progress=hook)
        )


@contextmanager
def _executor(options: AdviseOptions) -> Iterator[Executor]:
    """The executor ``--executor`` / ``--workers`` / ``--address`` name, closed after the cells."""
    # Deferred: `crl --help` does not need the executors (ray's among them).
    from crl.sweep.run import executor_named

    runner = executor_named(options.executor, workers=options.workers, address=options.address)
    try:
        yield runner
    finally:
        runner.close()


def _advise_flow(
    config_path: Path,
    options: AdviseOptions,
    out: Path,
    dry_run: bool,
    overrides: list[str] | None,
    plan: Callable[[TrainConfig], P],
    show_plan: Callable[[Console, TrainConfig, P, int], None],
    session: Callable[[Console, TrainConfig, P], R],
    show: Callable[[Console, R], None],
) -> int:
    """Load the config, plan and show the plan (``dry_run`` stops there), run the session holding OUT's lock, and
    show its result; bad input is one line naming the fix (exit 2)."""

    def body() -> int:
        # Deferred: the config schema builds its pydantic models on import, which `crl --help` does not need.
        from crl.train.config import load_config

        if options.workers < 1:
            raise ValueError(f"--workers {options.workers} must be >= 1")
        config = load_config(config_path, overrides or [])
        console = Console(soft_wrap=True, highlight=False)
        planned = plan(config)
        show_plan(console, config, planned, options.workers)
        if dry_run:
            return EXIT_OK
        with FolderLock(out, command="crl advise"):
            claim_folder(out, "crl advise")
            result = session(console, config, planned)
        show(console, result)
        return EXIT_OK

    return run_reporting_errors(body)


def _print_mstar_result(console: Console, result: MstarResult) -> None:
    for line in result.lines:
        console.print(line, markup=False)
    console.print(
        f"Baseline beside the pilot: {result.baseline.label}: {result.plan.metric} {result.baseline.error:.4f}; the "
        f"pilot's plateau errors (its two largest m at each n): {_plateaus(result)}.",
        markup=False,
    )
    console.print(f"written {result.json_path}", markup=False)


def _with_progress(console: Console, work: Callable[[ProgressHook], T]) -> T:
    """``work(hook)`` with its cells' progress shown: a bar on a terminal, else one line per finished cell."""
    if console.is_terminal:
        with Progress(*PROGRESS_COLUMNS, console=console) as progress:
            task = progress.add_task("cells", total=None)

            def advance(done: int, total: int) -> None:
                progress.update(task, completed=done, total=total)

            return work(advance)

    def line(done: int, total: int) -> None:
        console.print(f"cells: {done}/{total}", markup=False)

    return work(line)


def _print_mstar_plan(
    console: Console, config: TrainConfig, plan: MstarPlan, workers: int, *, out: Path, sizes: EvalSizes
) -> None:
    ns = sorted({n for n, _ in plan.points})
    console.print(
        f"your n = {plan.n_full:,}, {config.loss.regime} negatives ({config.loss.negatives}), metric {plan.metric}; "
        f"m* pilot at n = {', '.join(f'{n:,}' for n in ns)}, every power-of-two m below n and m = n: "
        f"{len(plan.points)} cells x {len(plan.seeds)} seeds, {plan.epochs} epochs of each n; "
        f"{plan.pilot_samples:,} processed samples, {plan.share:.1%} of the same grid at n = {plan.n_full:,} alone "
        f"({plan.full_samples:,}; the pilot may cost at most 10%)",
        markup=False,
    )
    if plan.probe is not None:
        runs = _missing(out, config, plan.points, plan.seeds, plan.epochs, plan.metric, sizes)
        _print_probe(console, config, plan.probe, runs, plan.epochs, workers, "pilot's cells", out)


def _missing(
    out: Path,
    config: TrainConfig,
    points: tuple[tuple[int, int], ...],
    seeds: tuple[int, ...],
    epochs: int,
    metric: Metric,
    sizes: EvalSizes,
) -> tuple[int, list[tuple[int, int]]]:
    """(all cell runs, the (n, m) of each run OUT's store lacks): :func:`crl.advise.pilot.missing_runs`."""
    # Deferred: it loads torch and faiss, which `crl --help` does not need.
    from crl.advise.pilot import missing_runs, pilot_cells

    cells = pilot_cells(config, points, seeds, epochs, metric, sizes)
    return len(cells), missing_runs(out, cells)


def _print_probe(
    console: Console,
    config: TrainConfig,
    probe: TimingProbe,
    runs: tuple[int, list[tuple[int, int]]],
    epochs: int,
    workers: int,
    what: str,
    out: Path,
) -> None:
    """The probe's wall time of the cell runs still to train on ``workers`` processes, with the data's own time;
    on a resume, how many runs OUT's store holds already."""
    total, missing = runs
    cells_s = probe.wall_seconds(config, missing, 1, epochs, workers)
    resume = (
        f" (a resume: {total - len(missing)} of {total} cell runs are in {out / 'advise.sqlite'} already; the "
        f"estimate is for the {len(missing)} left)"
        if len(missing) < total
        else ""
    )
    console.print(
        f"timing probe: {probe.feature_seconds:.1f} s to make the data ready; about {_minutes(cells_s)} for the "
        f"{what} with {workers} worker(s) on this machine ({cells_s * workers / 3600:.2f} CPU-h), "
        f"{_minutes(probe.feature_seconds + cells_s)} in all with the data{resume}",
        markup=False,
    )


def _print_truth_plan(
    console: Console, config: TrainConfig, plan: TruthPlan, workers: int, *, out: Path, sizes: EvalSizes
) -> None:
    console.print(
        f"m* truth grid, {config.loss.regime} negatives ({config.loss.negatives}), metric {plan.metric}: at n = "
        f"{', '.join(f'{n:,}' for n in plan.ns)}, every power-of-two m below n and m = n: {len(plan.points)} cells "
        f"x {len(plan.seeds)} seeds (first {plan.seeds[0]}), {plan.epochs} epochs of each n; "
        f"{plan.samples:,} processed samples",
        markup=False,
    )
    if plan.probe is not None:
        runs = _missing(out, config, plan.points, plan.seeds, plan.epochs, plan.metric, sizes)
        _print_probe(console, config, plan.probe, runs, plan.epochs, workers, "cells", out)


def _print_truth_result(console: Console, result: TruthResult) -> None:
    for n, passage in result.passages.items():
        fixed = ", ".join(f"q = {q:.0%} {interval.text()}" for q, interval in passage.fixed.items())
        console.print(
            f"n = {n:,}: m* (band) {passage.m_band.text()}; {fixed}; plateau {result.plan.metric} "
            f"{result.plateau[n]:.4f}",
            markup=False,
        )
    slopes = ", ".join(f"{name} {value:.3f}" for name, value in result.slopes().items())
    console.print(f"slope of log m* on log n over the uncensored n: {slopes}", markup=False)
    console.print(f"written {result.json_path}", markup=False)


def _plateaus(result: MstarResult) -> str:
    """Each pilot n's plateau error (:func:`crl.advise.mstar.plateau_error`)."""
    # Deferred: it loads numpy and the saturation statistics, which `crl --help` does not need.
    from crl.advise.mstar import plateau_error

    ns = sorted({n for n, _ in result.errors})
    return ", ".join(f"n = {n:,}: {plateau_error(result.errors, n):.4f}" for n in ns)


def _cells(points: tuple[tuple[int, int], ...]) -> str:
    return ", ".join(f"({n:,}, {m:,})" for n, m in points)


def _print_plan(console: Console, config: TrainConfig, plan: Plan, workers: int) -> None:
    seeds = len(plan.seeds)
    console.print(
        f"your (n, m) = ({plan.n_full:,}, {plan.m_now:,}), {config.loss.regime} negatives, metric {plan.metric}; "
        f"pilot cells (n, m): {_cells(plan.points)} x {seeds} seeds (first {plan.seeds[0]}), {plan.epochs} epochs "
        f"of each n, {plan.samples(config, plan.points):,} processed samples",
        markup=False,
    )
    if plan.checks:
        console.print(
            f"check cells: {_cells(plan.checks)} x {seeds} seeds, {plan.samples(config, plan.checks):,} processed "
            "samples",
            markup=False,
        )
    if plan.probe is not None:
        probe = plan.probe
        pilot_s = probe.wall_seconds(config, plan.points, seeds, plan.epochs, workers)
        check_s = probe.wall_seconds(config, plan.checks, seeds, plan.epochs, workers)
        console.print(
            f"timing probe: {probe.feature_seconds:.1f} s to make the data every cell reads ready (features "
            f"computed now are cached, so the cells read them); per cell {probe.setup_seconds:.2f} s of setup, "
            f"{1e3 * probe.seconds_per_step:.2f} ms per step + {1e6 * probe.seconds_per_sample:.1f} us per processed "
            f"sample, {probe.eval_seconds:.2f} s per evaluation -> about {_minutes(pilot_s)} for the pilot's cells"
            + (f" and {_minutes(check_s)} for the checks" if plan.checks else "")
            + f" with {workers} worker(s) on this machine, "
            f"{_minutes(probe.feature_seconds + pilot_s + check_s)} in all with the data",
            markup=False,
        )


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _print_result(console: Console, result: AdviseResult) -> None:
    answer = result.answer
    console.print(answer.sentence, markup=False)
    table = Table(title=f"cells: mean held-out {result.plan.metric} over seeds")
    for column in ("n", "m", "mean", "standard error", "runs"):
        table.add_column(column, justify="right")
    for (n, m), mean in sorted(result.means.items()):
        table.add_row(f"{n:,}", f"{m:,}", f"{mean.mean:.4f}", f"{mean.se:.4f}", str(mean.runs))
    console.print(table)
    console.print(
        f"baseline beside the cells: {answer.baseline.label}, held-out {result.plan.metric} "
        f"{answer.baseline.error:.4f}",
        markup=False,
    )
    for cost in answer.costs:
        console.print(
            f"doubling {cost.option} at the base: {cost.ratio:.2f}x the base's processed samples, error change "
            f"{-cost.gain:+.4f} ({cost.per_million_words}; < 0 lowers the error)",
            markup=False,
        )
    if answer.check is not None:
        inside = answer.low <= answer.check.value <= answer.high
        console.print(
            f"check cells: measured D = {answer.check.value:+.4f} (Welch 95%: {answer.check.low:+.4f} to "
            f"{answer.check.high:+.4f}), {'inside' if inside else 'outside'} the answer's interval",
            markup=False,
        )
    console.print(f"written: {result.json_path}, {result.figure_path}", markup=False)


def advise_check(
    predictions: Annotated[
        list[Path] | None,
        typer.Argument(help="Prediction folders of crl advise --mstar (each: mstar.json and advise.sqlite)."),
    ] = None,
    truth: Annotated[
        list[Path] | None,
        typer.Option(help="Truth folders of crl advise --mstar-truth (each: truth.json), one per regime."),
    ] = None,
    data: Annotated[str, typer.Option(help="The data set's name, for the tables.")] = "your data",
    out: Annotated[Path, typer.Option(help="The Markdown file to write.")] = Path("advisor_check.md"),
) -> None:
    """Score committed m* predictions against measured truth (docs/advisor_mstar.md, check 2), and tabulate the
    truth grids as the m*(n) experiment (m_q at q = 1%, 2%, 5%, slopes, [A]'s shape)."""
    raise typer.Exit(advise_check_command(predictions or [], truth or [], data=data, out=out))


def advise_check_command(predictions: list[Path], truth: list[Path], *, data: str, out: Path) -> int:
    """Write the check's Markdown to ``out`` and print it; 2 for bad input (no truth folder, a folder without its
    files, a prediction that differs from its store, two truth folders of one regime)."""

    def body() -> int:
        # Deferred: it loads torch and faiss, which `crl --help` does not need.
        from crl.advise.mstar_score import (
            load_prediction,
            load_truth,
            score_markdown,
            score_points,
            truth_markdown,
        )

        if not truth:
            raise ValueError(
                "--truth: give the truth folder of each regime (crl advise --mstar-truth --out DIR)"
            )
        truths = [load_truth(folder) for folder in truth]
        parts = [truth_markdown(truths, data)]
        if predictions:
            loaded = [load_prediction(folder) for folder in predictions]
            sources = (
                "Predictions " + ", ".join(map(str, predictions)) + "; truth " + ", ".join(map(str, truth))
            )
            points = score_points(loaded, truths, data)
            parts.insert(0, score_markdown(points, sources=sources, scale=loaded[0].scale))
        text = "\n".join(parts)
        out.write_text(text, encoding="utf-8")
        Console(soft_wrap=True, highlight=False).print(text, markup=False)
        return EXIT_OK

    return run_reporting_errors(body)
