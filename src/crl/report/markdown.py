"""The Markdown report (``report.md``): the same content as the HTML page, as plain Markdown."""

import re
from collections.abc import Sequence
from pathlib import Path

from crl.report.sections import (
    LEVELS_NOTE,
    REFERENCES,
    STAT_COLUMNS,
    NoteSection,
    RunInfo,
    Section,
    header_rows,
    level_line,
    notes_are_code,
    notes_paragraphs,
    outcome,
    provenance,
    stat_rows,
)
from crl.report.summary import (
    SUMMARY_COLUMNS,
    control_cell,
    overall,
    slack_cell,
    summary_cells,
    summary_order,
    verdict_cell,
)


def markdown_page(
    sections: Sequence[Section], info: RunInfo, out_dir: Path, notes: Sequence[NoteSection] = ()
) -> str:
    """The Markdown report: header, references, summary (INCONCLUSIVE first), one section per claim, then the
    sections without a verdict (``notes``)."""
    results = [section.result for section in sections]
    lines = [f"# crl verify: run {info.run_id}", "", "| | |", "|---|---|"]
    lines += [f"| {label} | {_header_value(label, value)} |" for label, value in header_rows(info)]
    lines += ["", "**References:**", ""]
    lines += [f"- **{key}** {text}" for key, text in REFERENCES]
    lines += ["", LEVELS_NOTE, "", "## Summary", ""]
    lines += [line for cell in overall(results, info.broken_modules) for line in (cell.text, "")]
    rows = [[cell.text for cell in summary_cells(result)] for result in summary_order(results)]
    lines.append(_table(SUMMARY_COLUMNS, rows))
    for name, error in info.broken_modules.items():
        lines += ["", f"### Claim module {name} failed to import", "", "```", error.rstrip(), "```"]
    for section in sections:
        lines += ["", *_claim_section(section, out_dir)]
    for note in notes:
        lines += ["", f"## {note.title} (no verdict)", ""]
        lines += [line for paragraph in note.paragraphs for line in (_cell(paragraph), "")]
        lines.append(_table(note.columns, note.rows))
    return "\n".join(lines) + "\n"


def _header_value(label: str, value: str) -> str:
    """A header cell: the command line (user-supplied text) as a code span, the rest as plain text."""
    return markdown_code(value) if label == "command" else _cell(value)


def _claim_section(section: Section, out_dir: Path) -> list[str]:
    """One claim's Markdown section."""
    r = section.result
    lines = [
        f"## {r.claim_id}: {r.title}",
        "",
        f"**Tests:** {r.evidence}",
        "",
        f"**Source:** {r.source}",
        "",
        f"**Statement:** {r.statement}",
        "",
        f"**Pre-registered rule** (docs/claims/{r.claim_id}.md):",
        "",
        *[f"> {line}" for line in r.rule.splitlines()],
        "",
        f"**Level:** {level_line(r)}",
        "",
        "**Measured:**",
        "",
        _table(STAT_COLUMNS, stat_rows(r.statistics)) if r.statistics else "(no statistics)",
        "",
        f"**Verdict:** {verdict_cell(r).text}; outcome: {outcome(r)}",
        "",
        f"**Bound slack:** {slack_cell(r).text}",
        "",
        f"**Negative control:** {r.control.description}",
        "",
        f"**Control verdict:** {control_cell(r).text}",
        "",
    ]
    if r.control.statistics:
        lines += [_table(STAT_COLUMNS, stat_rows(r.control.statistics)), ""]
    for path in section.figures:
        lines += [f"![{r.claim_id} {path.stem}]({path.relative_to(out_dir).as_posix()})", ""]
    origin = "Figures drawn from" if section.figures else "Data from"
    lines += [f"*{origin} run {r.run_id}; {provenance(r)}.*", ""]
    if section.table is not None:
        link = section.table.relative_to(out_dir).as_posix()
        lines += [f"**Data:** [{link}]({link}) ({len(r.table)} rows)", ""]
    lines += _notes(section)
    lines.append(f"**Time:** {'-' if r.wall_s is None else f'{r.wall_s:.1f} s'} at fidelity {r.fidelity}")
    return lines


def _notes(section: Section) -> list[str]:
    """The notes: a traceback verbatim in a code block, prose as wrapping paragraphs."""
    r = section.result
    if not r.notes.strip():
        return []
    if notes_are_code(r):
        return ["**Notes:**", "", "```", r.notes.rstrip(), "```", ""]
    return ["**Notes:**", "", *[line for text in notes_paragraphs(r) for line in (text, "")]]


def _table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def markdown_code(text: str) -> str:
    """User-supplied text (the command line with its paths and claim ids) as a literal Markdown code span.

    Inside a code span nothing is emphasis, a link or raw HTML; the fence is one backtick longer than the
    longest run of backticks in the text, padded with a space where the text starts or ends with a backtick or
    a space; line breaks become spaces and ``|`` is escaped so that a table cell stays one cell.
    """
    one_line = text.replace("\r", " ").replace("\n", " ").replace("|", "\\|")
    fence = "`" * (max((len(run) for run in re.findall("`+", one_line)), default=0) + 1)
    pad = " " if one_line[:1] in ("`", " ") or one_line[-1:] in ("`", " ") else ""
    return f"{fence}{pad}{one_line}{pad}{fence}"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")
