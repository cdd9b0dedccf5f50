"""`crl verify`: run the pre-registered claims, store every cell, write the report, judge the run.

A run selects claims from the registry, runs each with a :class:`~crl.claims.ClaimContext` whose cells go to
``OUT/results.sqlite`` (so an interrupted run continues where it stopped), draws ``OUT/report.md`` and
``OUT/report.html`` with their figures, prints a summary table, and exits non-zero when a claim that should
hold does not, when a negative control does not fail, when a claim raises, or when a claim module is broken.
"""

import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from crl import __version__
from crl.claims.base import (
    Claim,
    ClaimContext,
    ClaimResult,
    ControlResult,
    Fidelity,
    Verdict,
    bonferroni_level,
)
from crl.claims.registry import Registry, default_registry
from crl.report.document import ReportFiles, RunInfo, format_interval, format_number, write_report
from crl.sweep import SweepStore, new_run_id

RESULTS_FILE = "results.sqlite"


class NoClaimsError(ValueError):
    """No claim is registered, so there is nothing to verify."""


@dataclass(frozen=True)
class VerifyOutcome:
    """What a verify run produced.

    Attributes:
        run_id: the run's id.
        results: one result per selected claim, in registry order.
        broken_modules: claim modules that failed to import -> error text.
        report: the report's files.
        exit_code: 0 when every claim holds and every control fails; 1 otherwise.
    """

    run_id: str
    results: tuple[ClaimResult, ...]
    broken_modules: dict[str, str]
    report: ReportFiles
    exit_code: int


def run_verify(
    *,
    fidelity: Fidelity,
    out: Path,
    claim_ids: Sequence[str] | None = None,
    seed: int = 0,
    workers: int = 1,
    fresh: bool = False,
    registry: Registry | None = None,
    console: Console | None = None,
    command: str = "",
) -> VerifyOutcome:
    """Run the selected claims, write the report into ``out``, and judge the run.

    Args:
        fidelity: how much each claim computes.
        out: output folder (results.sqlite, report.md, report.html, figures/, tables/).
        claim_ids: ids like ``["C3", "C7"]`` (case-insensitive); ``None`` runs every registered claim.
        seed: base seed; each claim derives its seeds from it and its id.
        workers: process-pool size for the claims' cells (1: in process).
        fresh: delete ``out/results.sqlite`` first, recomputing every cell (default: resume).
        registry: the claims to choose from (default: those shipped in :mod:`crl.claims`).
        console: where progress and the summary go (default: stdout).
        command: the command line, for the report's header.

    Raises:
        NoClaimsError: if no claim is registered.
        UnknownClaimError: if a requested id is not registered (the message lists the valid ones).
        ValueError: if ``workers < 1``.
    """
    if workers < 1:
        raise ValueError(f"workers={workers!r} must be >= 1.")
    console = console or Console()
    registry = default_registry() if registry is None else registry
    broken = dict(registry.broken)
    for name in broken:
        console.print(f"[red]claim module {name} failed to import[/red] (details in the report)")
    if not registry.claims:
        raise NoClaimsError(
            "no claims are registered: add modules crl/claims/cNN_<name>.py exposing CLAIM "
            "(see docs/claims_engine.md)"
            + (f"; these claim modules failed to import: {', '.join(broken)}" if broken else "")
        )
    selected = registry.select(claim_ids)
    out.mkdir(parents=True, exist_ok=True)
    if fresh:
        for suffix in ("", "-wal", "-shm"):
            (out / f"{RESULTS_FILE}{suffix}").unlink(missing_ok=True)
    run_id = new_run_id()
    started, start = datetime.now(UTC), time.perf_counter()
    with SweepStore(out / RESULTS_FILE) as store:
        store.begin_run(
            run_id,
            {"fidelity": str(fidelity), "seed": seed, "claims": [c.id for c in selected], "crl": __version__},
        )
        level = bonferroni_level(len(registry.claims))
        results = _run_claims(selected, store, fidelity, seed, run_id, workers, console, level)
        store.finish_run(run_id)
    info = RunInfo(
        run_id=run_id,
        date=started.isoformat(timespec="seconds"),
        crl_version=__version__,
        git_commit=_git_commit(),
        fidelity=str(fidelity),
        budget_s=fidelity.budget_s,
        seed=seed,
        machine=f"{platform.node()}, {platform.platform()}, {os.cpu_count()} CPUs",
        software=_software_versions(),
        command=command or shlex.join(sys.argv),
        wall_s=time.perf_counter() - start,
        broken_modules=broken,
    )
    report = write_report(out, results, info)
    failed = bool(broken) or any(result.fails_run for result in results)
    _print_summary(console, results, info, report)
    return VerifyOutcome(run_id, tuple(results), broken, report, 1 if failed else 0)


def parse_fidelity(value: str) -> Fidelity:
    """``"quick"``, ``"standard"`` or ``"full"`` (any case) as a :class:`Fidelity`.

    Raises:
        ValueError: naming the value and the valid ones.
    """
    try:
        return Fidelity(value.strip().lower())
    except ValueError:
        valid = ", ".join(f.value for f in Fidelity)
        raise ValueError(f"--fidelity {value!r} is not known; use one of {valid}.") from None


def _run_claims(
    claims: Sequence[Claim],
    store: SweepStore,
    fidelity: Fidelity,
    seed: int,
    run_id: str,
    workers: int,
    console: Console,
    level: float,
) -> list[ClaimResult]:
    """Run each claim under a progress bar at family-wise ``level``, storing each outcome as it is known."""
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task(f"claims ({fidelity})", total=len(claims))
        for claim in claims:
            cells = progress.add_task(f"  {claim.id} cells", total=None)
            ctx = ClaimContext(
                claim.id, fidelity, store, seed, run_id, workers, _CellProgress(progress, cells), level=level
            )
            result = _run_one(claim, ctx)
            store.put_claim_result(
                run_id,
                claim.id,
                verdict=str(result.verdict),
                control_verdict=str(result.control.verdict),
                result=result.to_dict(),
            )
            results.append(result)
            progress.update(cells, visible=False)
            progress.advance(overall)
            progress.console.print(_claim_line(result))
    return results


def _claim_line(result: ClaimResult) -> str:
    """One log line per finished claim (also where no live progress bar is shown, as in CI logs)."""
    line = (
        f"{result.claim_id} {result.title}: [{_STYLE[result.verdict]}]{result.verdict}[/], control "
        f"[{_STYLE[result.control.verdict]}]{result.control.verdict}[/] ({result.wall_s or 0.0:.1f} s)"
    )
    if result.verdict is Verdict.ERROR:
        error = result.notes.rstrip().splitlines()[-1]
        line += f"\n  {escape(error)} (traceback in the report)"
    return line


def _run_one(claim: Claim, ctx: ClaimContext) -> ClaimResult:
    """Run one claim, timing it; an exception becomes an ERROR result carrying the traceback."""
    start = time.perf_counter()
    try:
        result = claim.run(ctx)
        if not isinstance(result, ClaimResult) or result.claim_id != claim.id:
            raise TypeError(f"{claim.id}.run returned {result!r:.200}; return self.result(ctx, ...).")
    except Exception:
        result = _error_result(claim, ctx, traceback.format_exc())
    return replace(result, wall_s=time.perf_counter() - start)


def _error_result(claim: Claim, ctx: ClaimContext, error: str) -> ClaimResult:
    """The result recorded for a claim whose ``run`` raised."""
    return ClaimResult(
        claim_id=claim.id,
        title=claim.title,
        source=claim.source,
        statement=claim.statement,
        rule=claim.rule,
        fidelity=ctx.fidelity,
        verdict=Verdict.ERROR,
        statistics=(),
        control=ControlResult(claim.control_description, Verdict.ERROR),
        notes=f"run raised:\n{error}",
        run_id=ctx.run_id,
        cell_runs=dict(ctx.cell_runs),
        expected_verdict=claim.expected_verdict,
    )


@dataclass(frozen=True)
class _CellProgress:
    """The ``progress(done, total)`` hook of a claim's cells: moves one rich progress bar."""

    progress: Progress
    task: TaskID

    def __call__(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


_STYLE = {
    Verdict.PASS: "green",
    Verdict.FAIL: "red",
    Verdict.INCONCLUSIVE: "yellow",
    Verdict.ERROR: "bold red",
}


def _print_summary(
    console: Console, results: Sequence[ClaimResult], info: RunInfo, report: ReportFiles
) -> None:
    """The terminal summary: one row per claim, the overall outcome, and where the report is."""
    table = Table(title=f"crl verify {info.fidelity}: run {info.run_id}")
    for column in ("claim", "statistic", "value", "CI", "verdict", "control", "time"):
        table.add_column(column, overflow="fold")
    for r in results:
        head = r.statistics[0] if r.statistics else None
        table.add_row(
            f"{r.claim_id} {r.title}",
            head.name if head else "-",
            format_number(head.value) if head else "-",
            format_interval(head) if head else "-",
            f"[{_STYLE[r.verdict]}]{r.verdict}[/]",
            f"[{_STYLE[r.control.verdict]}]{r.control.verdict}[/]",
            f"{r.wall_s or 0.0:.1f} s",
        )
    console.print(table)
    failing = [r for r in results if r.fails_run]
    for r in failing:
        console.print(f"[red]{r.claim_id} fails the run:[/red] {'; '.join(r.problems)}")
    if not failing and not info.broken_modules:
        console.print(f"[green]All {len(results)} claim(s) hold and every negative control fails.[/green]")
    if info.budget_s is not None and info.wall_s > info.budget_s:
        console.print(
            f"[yellow]took {info.wall_s:.0f} s, over the {info.fidelity} budget of {info.budget_s:.0f} s[/]"
        )
    console.print(f"report: {report.html}  {report.markdown}")


def _git_commit() -> str:
    """The crl checkout's commit (``+dirty`` when tracked files changed), or ``"unknown"`` outside git."""
    where = Path(__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return f"{commit}+dirty" if dirty else commit


def _software_versions() -> str:
    """Python and the numeric libraries' versions, read from package metadata (nothing is imported)."""
    parts = [f"Python {platform.python_version()}"]
    for package in ("numpy", "scipy", "torch", "faiss-cpu", "matplotlib"):
        try:
            parts.append(f"{package} {importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            parts.append(f"{package} (not installed)")
    return ", ".join(parts)
