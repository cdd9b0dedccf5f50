"""`crl verify`: run the pre-registered claims, store every cell, write the report, judge the run.

A run selects claims from the registry, runs each with a :class:`~crl.claims.ClaimContext` whose cells go to
``OUT/results.sqlite`` (so an interrupted run continues where it stopped), draws ``OUT/report.md`` and
``OUT/report.html`` with their figures, and prints a summary table. Each claim runs at the per-part level
``part_level(claim.parts)`` of the fixed C1-C10 budget (docs/theory.md section 7). One process writes into
``OUT`` at a time: a run holds ``OUT``'s lock (:mod:`crl._lock`), and a second one stops at once, naming the
holder's pid and host.

Exit policy: the run exits non-zero only when a claim FAILs or ERRORs, when a negative control PASSes or
ERRORs, or when a claim module is broken. INCONCLUSIVE verdicts (of a claim or a control) exit zero but are
listed first, with their reasons, in the terminal summary and in the report. A reconstruction check (a claim whose
``role`` is :attr:`~crl.claims.Role.RECONSTRUCTION`, C8) is not a verdict: it runs like any claim, at its
claim's level, and is stored, but its FAIL or its control's PASS is reported (in red, in its own table) without
changing the exit status, and its share of alpha stays unspent; only its ERROR (crl's code raised) fails the run,
as a broken claim module does.
"""

import importlib.metadata
import os
import platform
import shlex
import subprocess
import time
import traceback
from collections.abc import Sequence
from contextlib import closing, nullcontext
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from crl import __version__
from crl._lock import FolderLock, check_report_items, claim_folder
from crl.claims.base import Claim, ClaimContext, ClaimResult, ControlResult, Fidelity, Verdict
from crl.claims.budget import part_level
from crl.claims.context import code_fingerprint
from crl.claims.deciding import deciding_rows
from crl.claims.registry import Registry, default_registry
from crl.experiments.learned_vs_ideal import (
    GRIDS,
    SECTION_COLUMNS,
    SECTION_TITLE,
    Cell,
    compute_cell,
    grid_cells,
    section_paragraphs,
    section_rows,
)
from crl.report.document import ReportFiles, write_report
from crl.report.sections import NoteSection, RunInfo
from crl.report.summary import SummaryCell, Tone, checks, overall, summary_cells, verdicts
from crl.sweep import Executor, StoreError, SweepStore, WarmPool, check_results_file, new_run_id, run_cells

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
        exit_code: 1 when a claim FAILs or ERRORs, a control PASSes or ERRORs, or a claim module is broken;
            0 otherwise (INCONCLUSIVE verdicts included); a reconstruction check counts only when it ERRORs.
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
    executor: Executor | None = None,
    fresh: bool = False,
    registry: Registry | None = None,
    console: Console | None = None,
    command: str = "",
) -> VerifyOutcome:
    """Run the selected claims, write the report into ``out``, and judge the run.

    Args:
        fidelity: how much each claim computes.
        out: output folder (results.sqlite, report.md, report.html, figures/, tables/); one holding another
            command's results is refused, and a report of fewer claims than the one before keeps that one as
            ``report.N-claims.md`` (:func:`crl._lock.check_report_items`).
        claim_ids: ids like ``["C3", "C7"]`` (case-insensitive); ``None`` runs every registered claim.
        seed: base seed; each claim derives its seeds from it and its id.
        workers: process-pool size for the claims' cells (1: in process); one pool serves the whole run
            (:class:`crl.sweep.WarmPool`: its workers start once, not once per sweep).
        executor: where the cells are computed instead (e.g. :class:`crl.sweep.ray_executor.RayExecutor`);
            this process stays the single writer of ``out/results.sqlite``.
        fresh: delete ``out/results.sqlite`` first, recomputing every cell (default: resume).
        registry: the claims to choose from (default: those shipped in :mod:`crl.claims`).
        console: where progress and the summary go (default: stdout).
        command: the command line for the report's header (default: a ``crl verify`` line that reruns it).

    Raises:
        NoClaimsError: if no claim is registered.
        UnknownClaimError: if a requested id is not registered (the message lists the valid ones).
        ValueError: if ``workers < 1``.
        FolderLockedError: if another process writes into ``out`` (naming its pid and host).
        StoreError: if ``out/results.sqlite`` is damaged or not crl's (:class:`ResultsFileError`, before any
            claim runs), or SQLite fails on it during the run; a cell changed outside crl is recomputed instead,
            with a warning naming it.
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
    with FolderLock(out, command="crl verify"):  # one writer in out, from --fresh to the report
        claim_folder(out, "crl verify")
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                (out / f"{RESULTS_FILE}{suffix}").unlink(missing_ok=True)
        run_id = new_run_id()
        started, start = datetime.now(UTC), time.perf_counter()
        # the code that computes the cells, even if the checkout changes during the run
        commit = _git_commit()
        check_results_file(out / RESULTS_FILE)  # a damaged or foreign file: named, with --fresh
        pool = WarmPool(workers) if executor is None and workers > 1 else None
        with SweepStore(out / RESULTS_FILE) as store, closing(pool) if pool is not None else nullcontext():
            executor = executor if pool is None else pool
            store.begin_run(
                run_id,
                {
                    "fidelity": str(fidelity),
                    "seed": seed,
                    "claims": [c.id for c in selected],
                    "crl": __version__,
                },
            )
            results = _run_claims(selected, store, fidelity, seed, run_id, workers, console, executor)
            notes = (
                note_sections(fidelity, seed, SectionRun(store, run_id, workers, executor))
                if any(claim.id == "C8" for claim in selected)
                else ()
            ) + deciding_sections(results)
            store.finish_run(run_id)
        info = RunInfo(
            run_id=run_id,
            date=started.isoformat(timespec="seconds"),
            crl_version=__version__,
            git_commit=commit,
            fidelity=str(fidelity),
            budget_s=fidelity.budget_s,
            seed=seed,
            machine=f"{platform.node()}, {platform.platform()}, {os.cpu_count()} CPUs",
            software=_software_versions(),
            command=command or rerun_command(fidelity, out, seed, claim_ids),
            wall_s=time.perf_counter() - start,
            broken_modules=broken,
        )
        fuller = check_report_items(out, len(results), "claims")
        if fuller is not None and (out / "report.md").is_file():
            kept = out / f"report.{fuller}-claims.md"
            os.replace(out / "report.md", kept)
            console.print(
                f"warning: this report covers {len(results)} claims, the one before {fuller}: that one is kept as "
                f"{escape(str(kept))}"
            )
        report = write_report(out, results, info, notes)
        failed = bool(broken) or any(result.fails_run for result in results)
        _print_summary(console, results, info, report)
        return VerifyOutcome(run_id, tuple(results), broken, report, 1 if failed else 0)


LEARNED_VS_IDEAL = "learned-vs-ideal"
"""The store's namespace prefix of the learned-vs-ideal cells (the claims' are their ids)."""


@dataclass(frozen=True)
class SectionRun:
    """Where a report section's cells are computed and kept: the run's store and run id, ``workers`` processes
    or ``executor``."""

    store: SweepStore
    run_id: str
    workers: int = 1
    executor: Executor | None = None


def note_sections(fidelity: Fidelity, seed: int, where: SectionRun) -> tuple[NoteSection, ...]:
    """The report's sections without a verdict, beside C8 ([B]'s ideal search): learned vs ideal search
    (:func:`learned_vs_ideal_section`); one that fails shows its error instead of stopping the run."""
    try:
        return (learned_vs_ideal_section(str(fidelity), seed, where),)
    except Exception as error:  # a descriptive section must not cost the claims' report
        return (NoteSection(SECTION_TITLE, (f"not computed: {type(error).__name__}: {error}",), (), ()),)


DECIDING_TITLE = "What full decides: committed full verdicts beside this run's undecided ones"
DECIDING_COLUMNS = (
    "claim",
    "this run",
    "at full (re-judged from the committed table)",
    "table and run",
    "gate at full",
)


def deciding_sections(results: Sequence[ClaimResult]) -> tuple[NoteSection, ...]:
    """The report's section of :mod:`crl.claims.deciding` (none when nothing is undecided or the run is full); one
    that fails shows its error instead of stopping the run."""
    try:
        rows = deciding_rows(results)
    except Exception as error:  # a descriptive section must not cost the claims' report
        return (NoteSection(DECIDING_TITLE, (f"not computed: {type(error).__name__}: {error}",), (), ()),)
    if not rows:
        return ()
    paragraphs = (
        "These claims decide only at full fidelity (about 2 hours on 2 cores): standard cannot reach their power "
        "gates. Each row re-judges the claim's committed full table with this checkout's rule (no cell is "
        "computed) and says what that run is; a PASS whose gate failed is labelled so.",
        "Re-judge: " + "; ".join(f"`{row.run.command()}`" for row in rows) + ".",
    )
    table = tuple(
        (
            row.claim,
            row.here,
            row.at_full,
            f"{row.run.table}, run {row.run.run_id}: {row.run.status}",
            row.gate,
        )
        for row in rows
    )
    return (NoteSection(DECIDING_TITLE, paragraphs, DECIDING_COLUMNS, table),)


def learned_vs_ideal_section(fidelity: str, seed: int, where: SectionRun) -> NoteSection:
    """The report's section of :mod:`crl.experiments.learned_vs_ideal`: what was done and one row per (k, tau).

    Its cells run through the sweep engine in the run's store, namespaced like a claim's by the fingerprint of
    the code they run: a resumed or repeated run reuses them, and ``workers`` processes share the grid."""
    _, _, setup = GRIDS[fidelity]
    namespace = f"{LEARNED_VS_IDEAL}@{code_fingerprint(compute_cell.__module__)}"
    records = run_cells(
        where.store,
        namespace,
        grid_cells(fidelity, seed),
        compute_cell,
        run_id=where.run_id,
        workers=where.workers,
        executor=where.executor,
    )
    cells = [Cell(**record.result) for record in records]
    return NoteSection(SECTION_TITLE, section_paragraphs(setup), SECTION_COLUMNS, section_rows(cells))


def rerun_command(fidelity: Fidelity, out: Path, seed: int, claim_ids: Sequence[str] | None) -> str:
    """A ``crl verify`` command line that reruns the run (resuming from ``out``'s stored cells)."""
    words = ["crl", "verify", "--fidelity", str(fidelity), "--out", str(out), "--seed", str(seed)]
    if claim_ids is not None:
        words += ["--claims", ",".join(i.strip().upper() for i in claim_ids if i.strip())]
    return shlex.join(words)


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
    executor: Executor | None,
) -> list[ClaimResult]:
    """Run each claim under a progress bar at its per-part level, storing each outcome as it is known."""
    results = []
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        overall = progress.add_task(f"claims ({fidelity})", total=len(claims))
        for claim in claims:
            cells = progress.add_task(f"  {claim.id} cells", total=None)
            ctx = ClaimContext(
                claim.id,
                fidelity,
                store,
                seed,
                run_id,
                workers,
                _CellProgress(progress, cells),
                level=part_level(claim.parts),
                executor=executor,
                module=type(claim).__module__,
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
    cells = summary_cells(result)
    line = (
        f"{result.claim_id} {result.title}: {_rich(cells[5])}, control {_rich(cells[6])} "
        f"({result.wall_s or 0.0:.1f} s)"
    )
    if result.verdict is Verdict.ERROR:
        error = result.notes.rstrip().splitlines()[-1]
        line += f"\n  {escape(error)} (traceback in the report)"
    return line


def _run_one(claim: Claim, ctx: ClaimContext) -> ClaimResult:
    """Run one claim, timing it; an exception becomes an ERROR result carrying the traceback, except a failure of
    the results store, which stops the run (it is no verdict on the claim)."""
    start = time.perf_counter()
    try:
        result = claim.run(ctx)
        if not isinstance(result, ClaimResult) or result.claim_id != claim.id:
            raise TypeError(f"{claim.id}.run returned {result!r:.200}; return self.result(ctx, ...).")
    except StoreError:
        raise
    except Exception:
        result = _error_result(claim, ctx, traceback.format_exc())
    return replace(result, wall_s=time.perf_counter() - start)


def _error_result(claim: Claim, ctx: ClaimContext, error: str) -> ClaimResult:
    """The result recorded for a claim whose ``run`` raised."""
    return ClaimResult(
        claim_id=claim.id,
        title=claim.title,
        source=claim.source,
        evidence=claim.evidence,
        statement=claim.statement,
        rule=claim.rule,
        parts=claim.parts,
        level=ctx.level,
        fidelity=ctx.fidelity,
        verdict=Verdict.ERROR,
        statistics=(),
        control=ControlResult(claim.control_description, Verdict.ERROR),
        notes=f"run raised:\n{error}",
        run_id=ctx.run_id,
        cell_runs=dict(ctx.cell_runs),
    )


@dataclass(frozen=True)
class _CellProgress:
    """The ``progress(done, total)`` hook of a claim's cells: moves one rich progress bar."""

    progress: Progress
    task: TaskID

    def __call__(self, done: int, total: int) -> None:
        self.progress.update(self.task, completed=done, total=total)


_STYLE = {Tone.GOOD: "green", Tone.BAD: "bold red", Tone.UNSURE: "yellow"}


def _rich(cell: SummaryCell) -> str:
    """A summary cell as rich markup in its tone's colour."""
    text = escape(cell.text)
    return text if cell.tone is Tone.PLAIN else f"[{_STYLE[cell.tone]}]{text}[/]"


def _print_summary(
    console: Console, results: Sequence[ClaimResult], info: RunInfo, report: ReportFiles
) -> None:
    """The terminal summary: one row per verdict (INCONCLUSIVE first), the reconstruction checks in a table of their
    own, the run's conclusion, the report's files."""
    tables = [(f"crl verify {info.fidelity}: run {info.run_id}", verdicts(results))]
    if checks(results):
        tables.append(
            ("reconstruction checks (not verdicts: the exit status is unaffected)", checks(results))
        )
    for title, rows in tables:
        table = Table(title=title)
        columns = ("claim", "tests", "level", "headline [CI] at level", "verdict", "control", "slack", "time")
        for column in columns:
            table.add_column(column, overflow="fold")
        for result in rows:
            cells = summary_cells(result)
            table.add_row(*(_rich(cells[i]) for i in (0, 1, 3, 4, 5, 6, 7, 8)))
        console.print(table)
    for line in overall(results, info.broken_modules):
        console.print(_rich(line))
    if info.budget_s is not None and info.wall_s > info.budget_s:
        console.print(
            f"[yellow]took {info.wall_s:.0f} s, over the {info.fidelity} budget of {info.budget_s:.0f} s[/]"
        )
    console.print(f"report: {escape(str(report.html))}  {escape(str(report.markdown))}")


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
