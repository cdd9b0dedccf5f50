"""Writes a run's report: ``report.md``, a self-contained ``report.html``, figures as PNG and tables as CSV.

Layout of the output folder::

    report.md  report.html  figures/<claim>_<name>.png  tables/<claim>.csv  results.sqlite (written by sweep)

The header names the run (id, date, crl version, git commit, fidelity, seed, machine, command, wall time);
each claim's section gives its statement and source, the pre-registered rule, the measured statistics with
their confidence intervals, the verdict, the negative control's verdict, the figures (drawn here from the
claim's data, each stamped with the run id) and where its cells came from (this run, or a resumed earlier
one).
"""

import base64
import csv
import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crl.claims.base import ClaimResult, Statistic, Verdict
from crl.report.figures import render_figure


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
        command: the command line that started the run.
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
class ReportFiles:
    """The files a report consists of (paths inside the output folder)."""

    markdown: Path
    html: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]


@dataclass(frozen=True)
class _Section:
    """One claim's result with the files drawn for it."""

    result: ClaimResult
    figures: tuple[Path, ...]
    table: Path | None


def write_report(out_dir: Path, results: Sequence[ClaimResult], info: RunInfo) -> ReportFiles:
    """Draw the figures, write the tables, and write ``report.md`` and ``report.html`` into ``out_dir``.

    Raises:
        ValueError: if a claim names two figures alike.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [_draw_section(out_dir, result, info.run_id) for result in results]
    markdown = out_dir / "report.md"
    markdown.write_text(_markdown(sections, info, out_dir), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(_html(sections, info, out_dir), encoding="utf-8")
    return ReportFiles(
        markdown=markdown,
        html=page,
        figures=tuple(path for section in sections for path in section.figures),
        tables=tuple(section.table for section in sections if section.table is not None),
    )


def format_number(value: float) -> str:
    """A number with 4 significant digits (``inf`` as is)."""
    return f"{value:.4g}"


def format_interval(statistic: Statistic) -> str:
    """``[low, high]`` of a statistic's confidence interval."""
    return f"[{format_number(statistic.ci_low)}, {format_number(statistic.ci_high)}]"


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
    """``"holds"`` or ``"FAILS THE RUN: <reasons>"``."""
    return "FAILS THE RUN: " + "; ".join(result.problems) if result.fails_run else "holds"


def _draw_section(out_dir: Path, result: ClaimResult, run_id: str) -> _Section:
    """Render a claim's figures and write its table."""
    names = [spec.name for spec in result.figures]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"{result.claim_id} has several figures named {duplicates}; give each its own name.")
    figures = tuple(
        render_figure(spec, out_dir / "figures" / f"{result.claim_id}_{spec.name}.png", run_id=run_id)
        for spec in result.figures
    )
    table = (
        _write_table(out_dir / "tables" / f"{result.claim_id}.csv", result.table) if result.table else None
    )
    return _Section(result, figures, table)


def _write_table(path: Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """Write tidy rows as CSV; the columns are the keys in order of first appearance."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _header_rows(info: RunInfo) -> list[tuple[str, str]]:
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


def _summary_rows(sections: Sequence[_Section]) -> list[list[str]]:
    """One summary row per claim: id, title, headline statistic, value, CI, verdict, control, time."""
    rows = []
    for section in sections:
        r = section.result
        head = r.statistics[0] if r.statistics else None
        rows.append(
            [
                r.claim_id,
                r.title,
                head.name if head else "-",
                format_number(head.value) if head else "-",
                format_interval(head) if head else "-",
                f"{r.verdict} (expected {r.expected_verdict})",
                f"{r.control.verdict} (expected {r.control.expected_verdict})",
                "-" if r.wall_s is None else f"{r.wall_s:.1f} s",
            ]
        )
    return rows


_SUMMARY_COLUMNS = ["claim", "title", "statistic", "value", "CI", "verdict", "negative control", "time"]
_STAT_COLUMNS = ["statistic", "value", "CI", "level", "how"]


def _stat_rows(statistics: Sequence[Statistic]) -> list[list[str]]:
    """Table rows of statistics."""
    return [
        [s.name, format_number(s.value), format_interval(s), f"{s.ci_level:g}", s.detail or "-"]
        for s in statistics
    ]


def _overall(sections: Sequence[_Section], info: RunInfo) -> str:
    """The report's one-line conclusion."""
    failing = [s.result for s in sections if s.result.fails_run]
    parts = []
    if failing:
        parts.append(
            f"{len(failing)} of {len(sections)} claim(s) fail the run: "
            + "; ".join(f"{r.claim_id} ({', '.join(r.problems)})" for r in failing)
        )
    else:
        parts.append(f"All {len(sections)} claim(s) hold, and every negative control fails as it must.")
    if info.broken_modules:
        parts.append(
            f"{len(info.broken_modules)} claim module(s) failed to import: {', '.join(info.broken_modules)}."
        )
    return " ".join(parts)


def _markdown(sections: Sequence[_Section], info: RunInfo, out_dir: Path) -> str:
    """The Markdown report."""
    lines = [f"# crl verify: run {info.run_id}", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {_md_cell(value)} |" for label, value in _header_rows(info)]
    lines += [
        "",
        "## Summary",
        "",
        _md_table(_SUMMARY_COLUMNS, _summary_rows(sections)),
        "",
        _overall(sections, info),
    ]
    for name, error in info.broken_modules.items():
        lines += ["", f"### Claim module {name} failed to import", "", "```", error.rstrip(), "```"]
    for section in sections:
        lines += ["", *_markdown_section(section, out_dir)]
    return "\n".join(lines) + "\n"


def _markdown_section(section: _Section, out_dir: Path) -> list[str]:
    """One claim's Markdown section."""
    r = section.result
    lines = [
        f"## {r.claim_id}: {r.title}",
        "",
        f"**Source:** {r.source}",
        "",
        f"**Statement:** {r.statement}",
        "",
        "**Pre-registered rule:**",
        "",
        *[f"> {line}" for line in r.rule.splitlines()],
        "",
        "**Measured:**",
        "",
        _md_table(_STAT_COLUMNS, _stat_rows(r.statistics)) if r.statistics else "(no statistics)",
        "",
        f"**Verdict:** {r.verdict} (expected {r.expected_verdict}); outcome: {outcome(r)}",
        "",
        f"**Negative control:** {r.control.description}",
        "",
        f"**Control verdict:** {r.control.verdict} (expected {r.control.expected_verdict})",
        "",
    ]
    if r.control.statistics:
        lines += [_md_table(_STAT_COLUMNS, _stat_rows(r.control.statistics)), ""]
    for path in section.figures:
        lines += [f"![{r.claim_id} {path.stem}]({path.relative_to(out_dir).as_posix()})", ""]
    if section.figures:
        lines += [f"*Figures drawn from run {r.run_id}; {provenance(r)}.*", ""]
    else:
        lines += [f"*Data from run {r.run_id}; {provenance(r)}.*", ""]
    if section.table is not None:
        link = section.table.relative_to(out_dir).as_posix()
        lines += [f"**Data:** [{link}]({link}) ({len(r.table)} rows)", ""]
    if r.notes:
        lines += ["**Notes:**", "", "```", r.notes.rstrip(), "```", ""]
    lines.append(f"**Time:** {'-' if r.wall_s is None else f'{r.wall_s:.1f} s'} at fidelity {r.fidelity}")
    return lines


def _md_table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_md_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _md_cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
td, th { border: 1px solid #ccc; padding: 0.25rem 0.5rem; }
th { background: #f3f3f3; text-align: left; }
blockquote { border-left: 4px solid #888; margin: 0; padding-left: 1rem; white-space: pre-line; }
pre { background: #f6f6f6; padding: 0.5rem; overflow-x: auto; }
img { max-width: 100%; }
.PASS, .holds { color: #11772d; font-weight: bold; }
.FAIL, .ERROR, .fails { color: #b00020; font-weight: bold; }
.INCONCLUSIVE { color: #a05a00; font-weight: bold; }
"""


def _html(sections: Sequence[_Section], info: RunInfo, out_dir: Path) -> str:
    """The self-contained HTML report (figures embedded as base64 PNG)."""
    e = html.escape
    body = [
        f"<h1>crl verify: run {e(info.run_id)}</h1>",
        _html_table(["", ""], _header_rows(info), header=False),
    ]
    body += ["<h2>Summary</h2>", _html_summary(sections), f"<p>{e(_overall(sections, info))}</p>"]
    for name, error in info.broken_modules.items():
        body += [f"<h3>Claim module {e(name)} failed to import</h3>", f"<pre>{e(error)}</pre>"]
    for section in sections:
        body.append(_html_section(section, out_dir))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>crl verify {e(info.run_id)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _html_summary(sections: Sequence[_Section]) -> str:
    """The summary table with coloured verdicts."""
    rows = []
    for section, row in zip(sections, _summary_rows(sections), strict=True):
        r = section.result
        cells = [html.escape(cell) for cell in row]
        cells[5] = _badge(r.verdict, cells[5])
        cells[6] = _badge(r.control.verdict, cells[6])
        rows.append("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    head = "".join(f"<th>{html.escape(c)}</th>" for c in _SUMMARY_COLUMNS)
    return f"<table><tr>{head}</tr>{''.join(rows)}</table>"


def _html_section(section: _Section, out_dir: Path) -> str:
    """One claim's HTML section."""
    e = html.escape
    r = section.result
    state = "fails" if r.fails_run else "holds"
    parts = [
        f'<h2 id="{e(r.claim_id)}">{e(r.claim_id)}: {e(r.title)}</h2>',
        f"<p><b>Source:</b> {e(r.source)}</p>",
        f"<p><b>Statement:</b> {e(r.statement)}</p>",
        f"<p><b>Pre-registered rule:</b></p><blockquote>{e(r.rule)}</blockquote>",
        "<p><b>Measured:</b></p>",
        _html_table(_STAT_COLUMNS, _stat_rows(r.statistics)) if r.statistics else "<p>(no statistics)</p>",
        f"<p><b>Verdict:</b> {_badge(r.verdict, str(r.verdict))} (expected {e(r.expected_verdict)}); "
        f'outcome: <span class="{state}">{e(outcome(r))}</span></p>',
        f"<p><b>Negative control:</b> {e(r.control.description)}</p>",
        f"<p><b>Control verdict:</b> {_badge(r.control.verdict, str(r.control.verdict))} "
        f"(expected {e(r.control.expected_verdict)})</p>",
    ]
    if r.control.statistics:
        parts.append(_html_table(_STAT_COLUMNS, _stat_rows(r.control.statistics)))
    for path in section.figures:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        parts.append(
            f'<figure><img alt="{e(r.claim_id)} {e(path.stem)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{e(path.relative_to(out_dir).as_posix())}</figcaption></figure>"
        )
    origin = "Figures drawn from" if section.figures else "Data from"
    parts.append(f"<p><i>{origin} run {e(r.run_id)}; {e(provenance(r))}.</i></p>")
    if section.table is not None:
        link = e(section.table.relative_to(out_dir).as_posix())
        parts.append(f'<p><b>Data:</b> <a href="{link}">{link}</a> ({len(r.table)} rows)</p>')
    if r.notes:
        parts.append(f"<p><b>Notes:</b></p><pre>{e(r.notes)}</pre>")
    time_text = "-" if r.wall_s is None else f"{r.wall_s:.1f} s"
    parts.append(f"<p><b>Time:</b> {e(time_text)} at fidelity {e(r.fidelity)}</p>")
    return "\n".join(parts)


def _html_table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, header: bool = True) -> str:
    """An HTML table of escaped text."""
    head = "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _badge(verdict: Verdict, text: str) -> str:
    """``text`` (already escaped) in the colour of ``verdict``."""
    return f'<span class="{verdict.value}">{text}</span>'
