"""Writes a run's report: ``report.md``, a self-contained ``report.html``, figures as PNG and tables as CSV.

Layout of the output folder::

    report.md  report.html  figures/<claim>_<name>.png  tables/<claim>.csv  results.sqlite (written by sweep)

The report opens with the run's one-line conclusion and a compact verdict table (claim, what it tests in a few
words, verdict, headline statistic with its CI and level, negative control; INCONCLUSIVE rows first), then the
reconstruction checks (C8: not verdicts) in a table of their own with their controls; then the files beside the
report (the CSV tables, linked), the run (id, date, crl version, git commit, fidelity, seed, machine, a command
that reruns it, wall time) and the papers [A] and [B]. Each claim's section follows, verdicts first: what the
verdict is evidence for, the verdict with its reasons, the negative control and its verdict, the level, the
measured statistics with their confidence intervals and levels, the bound slack, the figures (drawn here from
the claim's data, each stamped with the run id and captioned), the statement, source and pre-registered rule,
and where its cells came from (this run, or a resumed earlier one).
"""

import csv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crl.claims.base import ClaimResult
from crl.report.figures import render_figure
from crl.report.html_page import html_page
from crl.report.markdown import markdown_page
from crl.report.sections import NoteSection, RunInfo, Section


@dataclass(frozen=True)
class ReportFiles:
    """The files a report consists of (paths inside the output folder)."""

    markdown: Path
    html: Path
    figures: tuple[Path, ...]
    tables: tuple[Path, ...]


def write_report(
    out_dir: Path, results: Sequence[ClaimResult], info: RunInfo, notes: Sequence[NoteSection] = ()
) -> ReportFiles:
    """Draw the figures, write the tables, and write ``report.md`` and ``report.html`` into ``out_dir``;
    ``notes`` are sections without a verdict, after the claims.

    Raises:
        ValueError: if a claim names two figures alike.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    sections = [_draw_section(out_dir, result, info.run_id) for result in results]
    markdown = out_dir / "report.md"
    markdown.write_text(markdown_page(sections, info, out_dir, notes), encoding="utf-8")
    page = out_dir / "report.html"
    page.write_text(html_page(sections, info, out_dir, notes), encoding="utf-8")
    return ReportFiles(
        markdown=markdown,
        html=page,
        figures=tuple(path for section in sections for path in section.figures),
        tables=tuple(section.table for section in sections if section.table is not None),
    )


def _draw_section(out_dir: Path, result: ClaimResult, run_id: str) -> Section:
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
    return Section(result, figures, table)


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
