"""The Markdown report (``report.md``): the same content as the HTML page, in the same order, as plain Markdown."""

import re
from collections.abc import Sequence
from pathlib import Path

from crl.claims.base import ClaimResult, Verdict
from crl.report.sections import (
    CHECKS_NOTE,
    FILES_AFTER,
    LEVELS_NOTE,
    REFERENCES,
    STAT_COLUMNS,
    NoteSection,
    RunInfo,
    Section,
    figure_caption,
    files_paragraph,
    header_rows,
    level_line,
    notes_are_code,
    notes_paragraphs,
    outcome,
    provenance,
    stat_rows,
)
from crl.report.summary import (
    TABLE_COLUMNS,
    checks,
    control_cell,
    headline,
    overall,
    slack_cell,
    verdict_cell,
    verdicts,
)


def markdown_page(
    sections: Sequence[Section], info: RunInfo, out_dir: Path, notes: Sequence[NoteSection] = ()
) -> str:
    """The Markdown report: the verdict table (INCONCLUSIVE first), the reconstruction checks, the files beside
    it, the run and references, one section per claim (verdicts, then checks), then the sections without a
    verdict (``notes``)."""
    results = [section.result for section in sections]
    lines = [f"# crl verify: run {info.run_id}", ""]
    lines += [
        line for cell in overall(results, info.broken_modules, reasons=False) for line in (cell.text, "")
    ]
    lines += ["## Verdicts", "", _verdict_table(verdicts(results)), "", LEVELS_NOTE]
    found = checks(results)
    if found:
        lines += ["", "## Reconstruction checks (not verdicts)", "", CHECKS_NOTE, "", _verdict_table(found)]
    for name, error in info.broken_modules.items():
        lines += ["", f"### Claim module {name} failed to import", "", "```", error.rstrip(), "```"]
    text, tables = files_paragraph(sections, out_dir)
    links = ", ".join(f"[{path}]({path})" for _, path in tables)
    lines += ["", "## Files, run and references", "", f"{text}{links}{'.' if links else ''} {FILES_AFTER}"]
    lines += ["", "| | |", "|---|---|"]
    lines += [f"| {label} | {_header_value(label, value)} |" for label, value in header_rows(info)]
    lines += ["", "**References:**", ""]
    lines += [f"- **{key}** {text}" for key, text in REFERENCES]
    ordered = [s for s in sections if s.result.is_verdict] + [s for s in sections if not s.result.is_verdict]
    for section in ordered:
        lines += ["", *_claim_section(section, out_dir)]
    for note in notes:
        lines += ["", f"## {note.title} (no verdict)", ""]
        lines += [line for paragraph in note.paragraphs for line in (_cell(paragraph), "")]
        lines.append(_table(note.columns, note.rows))
    return "\n".join(lines) + "\n"


def _verdict_table(results: Sequence[ClaimResult]) -> str:
    """The compact table: claim, what it tests, verdict, headline statistic with CI and level, control."""
    rows = []
    for r in results:
        head = headline(r)
        rows.append(
            [
                r.claim_id,
                r.title,
                verdict_cell(r, reasons=False).text,
                "-" if head is None else f"{head.name}: {head.numbers} ({head.level})",
                control_cell(r, reasons=False).text,
            ]
        )
    return _table(TABLE_COLUMNS, rows)


def _header_value(label: str, value: str) -> str:
    """A header cell: the command line (user-supplied text) as a code span, the rest as plain text."""
    return markdown_code(value) if label == "command" else _cell(value)


def _claim_section(section: Section, out_dir: Path) -> list[str]:
    """One claim's Markdown section."""
    r = section.result
    kind = "" if r.is_verdict else " (reconstruction check, not a verdict)"
    lines = [
        f"## {r.claim_id}: {r.title}{kind}",
        "",
        f"**Tests:** {r.evidence}",
        "",
        f"**Verdict:** {verdict_cell(r, reasons=False).text}; outcome: {outcome(r)}",
        "",
        *_reasons("Why INCONCLUSIVE", r.reasons, r.verdict),
        f"**Negative control:** {r.control.description}",
        "",
        f"**Control verdict:** {control_cell(r, reasons=False).text}",
        "",
        *_reasons("Why the control is INCONCLUSIVE", r.control.reasons, r.control.verdict),
        f"**Level:** {level_line(r)}",
        "",
        "**Measured:**",
        "",
        _table(STAT_COLUMNS, stat_rows(r.statistics)) if r.statistics else "(no statistics)",
        "",
    ]
    if r.control.statistics:
        lines += [
            "**Measured on the control:**",
            "",
            _table(STAT_COLUMNS, stat_rows(r.control.statistics)),
            "",
        ]
    lines += [f"**Bound slack:** {slack_cell(r).text}", ""]
    for number, (path, spec) in enumerate(zip(section.figures, r.figures, strict=True), start=1):
        file = path.relative_to(out_dir).as_posix()
        lines += [
            f"![{r.claim_id} {path.stem}]({file})",
            "",
            f"*{figure_caption(r.claim_id, number, spec, file)}*",
            "",
        ]
    lines += [
        f"**Statement:** {r.statement}",
        "",
        f"**Source:** {r.source}",
        "",
        f"**Pre-registered rule** (docs/claims/{r.claim_id}.md):",
        "",
        *[f"> {line}" for line in r.rule.splitlines()],
        "",
    ]
    origin = "Figures drawn from" if section.figures else "Data from"
    lines += [f"*{origin} run {r.run_id}; {provenance(r)}.*", ""]
    if section.table is not None:
        link = section.table.relative_to(out_dir).as_posix()
        lines += [f"**Data:** [{link}]({link}) ({len(r.table)} rows, CSV)", ""]
    lines += _notes(section)
    lines.append(f"**Time:** {'-' if r.wall_s is None else f'{r.wall_s:.1f} s'} at fidelity {r.fidelity}")
    return lines


def _reasons(title: str, reasons: Sequence[str], verdict: Verdict) -> list[str]:
    """An INCONCLUSIVE's reasons as a list under ``title`` (nothing for another verdict)."""
    if verdict is not Verdict.INCONCLUSIVE:
        return []
    return [f"**{title}:**", "", *[f"- {reason}" for reason in reasons or ("no reason given",)], ""]


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
