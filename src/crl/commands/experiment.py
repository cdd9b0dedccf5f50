"""``crl experiment NAME``: run a real-data experiment (not a verdict) that resumes from its database."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from crl._lock import FolderLock, check_report_items, claim_folder
from crl.commands._errors import EXIT_OK, run_reporting_errors

if TYPE_CHECKING:
    from crl.experiments.mstar.design import DataName, Grid
    from crl.sweep.executors import Executor

EXPERIMENTS = ("mstar",)
REPLACED = {"fashion-mstar": "crl experiment mstar --data fashion"}
"""Experiments that no longer exist, and the command that replaced each."""


def experiment(
    name: Annotated[
        str,
        typer.Argument(
            help="The experiment: mstar ([A]'s m*(n) on locked features, docs/claims/C6_real.md)."
        ),
    ],
    data: Annotated[
        str, typer.Option(help="wordnet (definition -> lemma list) or fashion (Fashion-MNIST).")
    ] = "",
    fidelity: Annotated[
        str,
        typer.Option(help="tiny (a smoke test), reduced (<= 20 min on 2 cores), full (<= 8 h on 2 cores)."),
    ] = "reduced",
    out: Annotated[Path, typer.Option(help="Folder of results.sqlite, the figures and report.md.")] = Path(
        "runs/mstar"
    ),
    seeds: Annotated[
        int, typer.Option(help="Seeds per cell (0: the fidelity's); more seeds resume and add cells.")
    ] = 0,
    n_max: Annotated[
        int, typer.Option(help="Leave out every n above this, in every arm (0: all n of the fidelity).")
    ] = 0,
    backbone_path: Annotated[
        str,
        typer.Option(
            help="fashion: a crl CNN checkpoint for the locked features, trained on images 50,000-59,999 only "
            "(configs/fashion_backbone_cnn.toml; '': raw pixels); wordnet: a sentence-transformers folder ('': the "
            "packaged MiniLM)."
        ),
    ] = "",
    workers: Annotated[
        int, typer.Option(help="Processes training cells in parallel (or CPUs of a local Ray instance).")
    ] = 1,
    executor: Annotated[
        str, typer.Option(help="Where cells are computed: process (this machine) or ray (crl's extra 'ray').")
    ] = "process",
    address: Annotated[
        str | None, typer.Option(help="Ray cluster to join with --executor ray (default: start one).")
    ] = None,
    threads: Annotated[
        int, typer.Option(help="torch threads in this process (features, and cells with --workers 1).")
    ] = 1,
    report_only: Annotated[
        bool,
        typer.Option(
            help="Compute no cell: write the report of the cells OUT/results.sqlite holds now (a long run's "
            "interim report; each curve uses the seeds finished at all its m)."
        ),
    ] = False,
    mq_tables: Annotated[
        bool,
        typer.Option(
            help="Compute nothing, load no data: write OUT/mq.md (the m_q tables at q = 1, 2, 5% and [A]'s "
            "shape) and OUT/mq.png, from the cells OUT/results.sqlite holds (docs/claims/C6_real.md)."
        ),
    ] = False,
    advisor_check: Annotated[
        bool,
        typer.Option(
            help="Compute nothing, load no data: write OUT/advisor_check.md, `crl advise --mstar`'s predictor "
            "replayed on the cells OUT/results.sqlite holds (docs/advisor_mstar.md, check 1)."
        ),
    ] = False,
) -> None:
    """Run an experiment's cells that OUT/results.sqlite lacks (resuming a stopped run), then write its report."""
    status = experiment_command(
        name,
        data=data,
        fidelity=fidelity,
        out=out,
        seeds=seeds,
        n_max=n_max,
        backbone_path=backbone_path,
        workers=workers,
        executor=executor,
        address=address,
        threads=threads,
        report_only=report_only,
        mq_tables=mq_tables,
        advisor_check=advisor_check,
    )
    raise typer.Exit(status)


def _commit() -> str:
    """The short hash of the checkout's HEAD ('unknown' outside a git checkout)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return done.stdout.strip()


def _write_mq_tables(database: Path, data: DataName, grid: Grid, out: Path) -> int:
    """Write OUT/mq.md from the store alone (``--mq-tables``)."""
    # Deferred: the store reader loads torch and faiss (through crl.train), which `crl --help` does not need.
    from crl.experiments.mstar.experiment import stored_records

    # Deferred: the tables load scipy, which `crl --help` does not need.
    from crl.experiments.mstar.passage import passage_markdown, render_passage_figure

    records = stored_records(database, data, grid)
    source = f"the {len(records)} cells of {database} (commit {_commit()})"
    (out / "mq.md").write_text(passage_markdown(records, data, grid, source=source), encoding="utf-8")
    figure = render_passage_figure(records, data, grid, out / "mq.png", title=f"m_q(n) {data}: {source}")
    Console(soft_wrap=True).print(f"written {out / 'mq.md'}, {figure}", markup=False, highlight=False)
    return EXIT_OK


def _write_advisor_check(database: Path, data: DataName, grid: Grid, out: Path) -> int:
    """Write OUT/advisor_check.md from the store alone (``--advisor-check``)."""
    # Deferred: the predictor and the store reader load scipy, torch and faiss, which `crl --help` does not need.
    from crl.advise.mstar_check import check_markdown, check_points

    # Deferred: the store reader loads torch and faiss (through crl.train), which `crl --help` does not need.
    from crl.experiments.mstar.experiment import stored_records

    records = stored_records(database, data, grid)
    source = f"the {len(records)} cells of {database} (commit {_commit()})"
    text = check_markdown(check_points(records, data, grid), source=source)
    (out / "advisor_check.md").write_text(text, encoding="utf-8")
    Console(soft_wrap=True).print(text, markup=False, highlight=False)
    return EXIT_OK


def _check_name(name: str) -> None:
    """Raise ``ValueError`` with the fix when ``name`` is not an experiment."""
    if name in REPLACED:
        raise ValueError(f"experiment {name!r} was replaced by `{REPLACED[name]}` (docs/claims/C6_real.md)")
    if name not in EXPERIMENTS:
        raise ValueError(f"experiment {name!r} is not known; choose one of {', '.join(EXPERIMENTS)}")


def experiment_command(
    name: str,
    *,
    data: str,
    fidelity: str,
    out: Path,
    seeds: int = 0,
    n_max: int = 0,
    backbone_path: str = "",
    workers: int = 1,
    executor: str = "process",
    address: str | None = None,
    threads: int = 1,
    report_only: bool = False,
    mq_tables: bool = False,
    advisor_check: bool = False,
) -> int:
    """Run ``crl experiment``: compute the grid's missing locked features, then its missing cells (progress
    printed), and write OUT/report.md, OUT/curves.png and OUT/mstar.png, named by this invocation's run id and
    the commit checked out when it started; with ``report_only``, no cell is computed and the report covers
    the cells the store holds; with ``mq_tables``, only OUT/mq.md and OUT/mq.png from the store (no features, no
    cells, nothing written into the store). One process writes into OUT at a time (its lock), OUT must not hold
    another command's results, a report covering no cell is refused, and one covering fewer cells than the report
    before keeps that report as OUT/report.N-cells.md (:func:`crl._lock.check_report_items`). Bad arguments are
    one line naming the option and the fix (exit 2)."""

    def body() -> int:
        _check_name(name)
        if threads < 1:
            raise ValueError(f"--threads {threads} must be >= 1")
        # Deferred: it loads torch and faiss (through crl.train), which `crl --help` does not need.
        from crl.experiments.mstar.design import grid_of

        named, grid = grid_of(data, fidelity, seeds=seeds, n_max=n_max, backbone_path=backbone_path)
        database = out / "results.sqlite"
        if (report_only or mq_tables or advisor_check) and not database.is_file():
            flag = "--mq-tables" if mq_tables else "--advisor-check" if advisor_check else "--report-only"
            raise ValueError(f"{flag}: no results store at {database}; run without {flag} first")
        if mq_tables:
            return _write_mq_tables(database, named, grid, out)
        if advisor_check:
            return _write_advisor_check(database, named, grid, out)

        # Deferred: `crl --help` does not need the sweep engine and its executors (ray's among them).
        from crl.sweep.run import executor_named

        runner = executor_named(executor, workers=workers, address=address)
        try:
            with FolderLock(out, command=f"crl experiment {name}"):
                claim_folder(out, f"crl experiment {name}")
                return locked(named, grid, database, runner)
        finally:
            runner.close()

    def locked(named: DataName, grid: Grid, database: Path, runner: Executor) -> int:
        """The experiment's cells and report, holding OUT's lock."""
        # Deferred: torch takes seconds to import, and `crl --help` does not need it.
        import torch

        torch.set_num_threads(threads)

        # Deferred: it loads torch and faiss (through crl.train), which `crl --help` does not need.
        from crl.experiments.mstar.design import claim_of, grid_cells

        # Deferred: the cells load torch and faiss, which `crl --help` does not need.
        from crl.experiments.mstar.experiment import (
            prepare_features,
            run_experiment,
            scrl_overlaps,
            stored_records,
        )

        console = Console(soft_wrap=True)
        label = f"{claim_of(named)} ({fidelity})"

        def say(text: str) -> None:
            console.print(text, markup=False, highlight=False)

        def progress(done: int, total: int) -> None:
            say(f"{label}: {done}/{total} cells")

        # Deferred: the sweep store is this command's own, and `crl --help` does not need it.
        from crl.sweep import new_run_id

        run_id, commit = new_run_id(), _commit()
        try:
            say(f"{label}: locked features (computed once, then read from the feature cache) ...")
            say(f"{label}: features ready, {prepare_features(named, grid)} items computed now")
            if report_only:
                records = stored_records(database, named, grid)
                say(f"{label}: report of the {len(records)} stored cells of {len(grid_cells(named, grid))}")
            else:
                records = run_experiment(
                    database, named, grid, run_id=run_id, executor=runner, progress=progress
                )
        finally:
            runner.close()

        # Deferred: the summary loads scipy, which `crl --help` does not need.
        from crl.experiments.mstar.summary import summarise

        summary = summarise(records, named, grid)
        fuller = check_report_items(out, len(records), "cells")
        if fuller is not None and (out / "report.md").is_file():
            kept = out / f"report.{fuller}-cells.md"
            os.replace(out / "report.md", kept)
            say(
                f"warning: this report covers {len(records)} cells, the one before {fuller}: that one is kept as {kept}"
            )

        # Deferred: the report draws with matplotlib, which `crl --help` does not need.
        from crl.experiments.mstar.report import markdown_report, render_figures

        figures = render_figures(
            summary, named, out, title=f"m*(n) {named} {fidelity}: run {run_id}, commit {commit}"
        )
        report = markdown_report(
            summary,
            named,
            grid,
            fidelity=fidelity,
            run_id=run_id,
            commit=commit,
            overlaps=scrl_overlaps(named, grid),
        )
        (out / "report.md").write_text(report, encoding="utf-8")
        say("written " + ", ".join(str(path) for path in (out / "report.md", *figures)))
        return EXIT_OK

    return run_reporting_errors(body)
