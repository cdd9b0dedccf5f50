"""The report's content, independent of its format: the run's header, the references, what the files beside the
report are, the figures' captions, and each claim's parts."""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from crl.claims.base import ClaimResult, FigureSpec, Statistic, Verdict
from crl.report.summary import clip_note, format_interval, format_level, format_number

REFERENCES = (
    (
        "[A]",
        "Y. Li, X. Wei, T. Yang, Y. Ying, Statistical Consistency and Generalization of Contrastive "
        "Representation Learning, arXiv:2605.02116 (ICML 2026).",
    ),
    (
        "[B]",
        "N. Whiteley, Similarity search generalisation in contrastive learning with InfoNCE loss, "
        "arXiv:2607.09405 (2026).",
    ),
)
"""The papers whose claims are checked, as cited by every claim's source."""

LEVELS_NOTE = (
    "Levels: the family-wise error rate alpha = 0.05 is fixed for the ten claims C1-C10, whatever a run "
    "selects: alpha/10 per claim, split equally over the parts its rule lists (each interval, each violation "
    "count), so each part and the claim's negative control are judged at 1 - 0.005/parts "
    "(docs/theory.md section 7). Every interval below shows its level."
)
"""Why the levels are what they are, stated once at the top of the report."""

CHECKS_NOTE = (
    "A reconstruction check tests crl's own reconstruction of a result in a setting where it cannot fail, so it "
    "is no evidence for or against the papers: it is shown here with its negative control, outside the verdict "
    "table. Its rule runs at its claim's level, but its share of alpha stays unspent (the budget above is "
    "unchanged), and its outcome does not change the exit status of crl verify (only an ERROR, crl's code "
    "raising, does)."
)
"""What a reconstruction check is, stated above their table."""

STAT_COLUMNS = ("statistic", "value", "CI", "level", "how")


@dataclass(frozen=True)
class RunInfo:
    """What the report's header says about the run.

    Attributes:
        run_id: the run's id (also in every figure and in results.sqlite).
        date: ISO 8601 UTC start time.
        crl_version: ``crl.__version__``.
        git_commit: the commit of the crl checkout (``"unknown"`` outside git), with ``+dirty`` if modified.
        fidelity: quick / standard / full.
        budget_s: the fidelity's wall-time budget (None: unbounded).
        seed: the base seed.
        machine: host, platform and CPU count.
        software: versions of Python and the numeric libraries.
        command: a command line that reruns (or resumes) the run, e.g. ``crl verify --fidelity quick ...``.
        wall_s: total seconds of the run.
        broken_modules: claim modules that failed to import -> error text.
    """

    run_id: str
    date: str
    crl_version: str
    git_commit: str
    fidelity: str
    budget_s: float | None
    seed: int
    machine: str
    software: str
    command: str
    wall_s: float
    broken_modules: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Section:
    """One claim's result with the files drawn for it."""

    result: ClaimResult
    figures: tuple[Path, ...]
    table: Path | None


@dataclass(frozen=True)
class NoteSection:
    """A report section outside the claims, without a verdict (descriptive figures, no alpha spent).

    Attributes:
        title: the section's heading.
        paragraphs: plain-text paragraphs before the table.
        columns: the table's column names.
        rows: the table's rows, one string per column.
    """

    title: str
    paragraphs: tuple[str, ...]
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def header_rows(info: RunInfo) -> list[tuple[str, str]]:
    """(label, value) pairs of the report's header."""
    budget = "unbounded" if info.budget_s is None else f"budget {info.budget_s:.0f} s"
    return [
        ("run", info.run_id),
        ("date", info.date),
        ("crl", f"{info.crl_version} (git {info.git_commit})"),
        ("fidelity", f"{info.fidelity} ({budget}; this run took {info.wall_s:.1f} s)"),
        ("seed", str(info.seed)),
        ("machine", info.machine),
        ("software", info.software),
        ("command", info.command),
        ("results", "results.sqlite (tables cells, runs, claim_results)"),
    ]


def stat_rows(statistics: Sequence[Statistic]) -> list[list[str]]:
    """Table rows of statistics, each with its interval's level; an interval shown clipped at 0 says so in the
    last column, with the interval as computed."""
    return [
        [
            s.name,
            format_number(s.value),
            format_interval(s),
            format_level(s.ci_level),
            "; ".join(part for part in (s.detail, clip_note(s)) if part) or "-",
        ]
        for s in statistics
    ]


STAT_NUMERIC = (False, True, True, True, False)
"""Which of :data:`STAT_COLUMNS` hold numbers (never broken across lines in the HTML)."""


def files_paragraph(sections: Sequence[Section], out_dir: Path) -> tuple[str, list[tuple[str, str]]]:
    """What lies beside the report, as a sentence, and the CSV tables it links to as (claim id, relative path)."""
    tables = [
        (section.result.claim_id, section.table.relative_to(out_dir).as_posix())
        for section in sections
        if section.table is not None
    ]
    text = (
        "This report links to the CSV tables beside it (tables/, one per claim, every measured cell as a row): "
        if tables
        else "No claim wrote a CSV table. "
    )
    return text, tables


FILES_AFTER = (
    "The figures are embedded here and saved as PNG in figures/; report.md holds the same report as Markdown; "
    "results.sqlite holds every computed cell and each claim's stored result."
)
"""The sentence after the CSV links: the other files beside the report."""


def figure_caption(claim_id: str, number: int, spec: FigureSpec, file: str) -> str:
    """A figure's caption: its number and title, its axes, what its marks mean, and its file."""
    scales = {"log": "log", "symlog": "symlog", "linear": "linear"}
    axes = f"{spec.y_label} against {spec.x_label} ({scales[spec.xscale]} x, {scales[spec.yscale]} y)"
    marks = []
    if any(not series.control for series in spec.points):
        marks.append("filled markers: measured values with their CI bars")
    if any(series.control for series in spec.points):
        marks.append("open markers: the negative control")
    if any(series.fit is not None for series in spec.points):
        marks.append("dashed lines: fitted power laws (slope and CI in the legend)")
    if spec.reference_slopes:
        marks.append("dotted: the theory's slope")
    if any(item.kind == "bound" for item in spec.curves):
        marks.append("solid red: bounds")
    if any(item.kind == "theory" for item in spec.curves):
        marks.append("dash-dot grey: predicted curves")
    return f"Figure {claim_id}.{number}: {spec.title}. {axes}; {'; '.join(marks)}. File {file}."


def provenance(result: ClaimResult) -> str:
    """Which runs a claim's cells came from, e.g. ``"40 cells: 28 computed in this run, 12 resumed ..."``."""
    if not result.cell_runs:
        return "no stored cells: everything was computed in this run"
    total = sum(result.cell_runs.values())
    here = result.cell_runs.get(result.run_id, 0)
    earlier = [
        f"{count} resumed from run {run}" for run, count in result.cell_runs.items() if run != result.run_id
    ]
    return f"{total} cells: " + ", ".join([f"{here} computed in this run", *earlier])


def outcome(result: ClaimResult) -> str:
    """``"holds"``, ``"INCONCLUSIVE (exit status 0): ..."`` or ``"FAILS THE RUN: <reasons>"``."""
    if result.fails_run:
        return "FAILS THE RUN: " + "; ".join(result.problems)
    if result.inconclusive:
        return "INCONCLUSIVE (exit status 0): " + "; ".join(result.inconclusive)
    return "holds"


def level_line(result: ClaimResult) -> str:
    """The level sentence of a claim's section."""
    each = "its single part" if result.parts == 1 else f"each of its {result.parts} parts"
    return f"{format_level(result.level)} for {each} (intervals, violation counts) and for the control"


def notes_paragraphs(result: ClaimResult) -> list[str]:
    """The notes as paragraphs (blank-line separated, lines joined), so that they wrap on the page."""
    blocks = [" ".join(block.split()) for block in result.notes.strip().split("\n\n")]
    return [block for block in blocks if block]


def notes_are_code(result: ClaimResult) -> bool:
    """Whether the notes are a traceback (an ERROR's), kept verbatim rather than wrapped as prose."""
    return result.verdict is Verdict.ERROR
