"""The self-contained HTML report (``report.html``): figures embedded as base64 PNG, text that wraps.

Colours follow the summary's tones: green for good news (a claim's PASS, a control's expected FAIL), red for
an unexpected result, yellow for INCONCLUSIVE (with its reason) and for a bound that holds without informing.
"""

import base64
import html
from collections.abc import Sequence
from pathlib import Path

from crl.claims.base import Statistic
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
    SummaryCell,
    Tone,
    control_cell,
    overall,
    slack_cell,
    summary_cells,
    summary_order,
    verdict_cell,
)

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0; }
td, th { border: 1px solid #ccc; padding: 0.25rem 0.5rem; vertical-align: top; }
th { background: #f3f3f3; text-align: left; }
blockquote { border-left: 4px solid #888; margin: 0; padding-left: 1rem; white-space: pre-wrap; }
pre { background: #f6f6f6; padding: 0.5rem; white-space: pre-wrap; overflow-wrap: anywhere; }
p, td { overflow-wrap: anywhere; }
img { max-width: 100%; }
.good { color: #11772d; font-weight: bold; }
.bad { color: #b00020; font-weight: bold; }
.unsure { color: #8a5a00; background: #fff4c2; font-weight: bold; }
"""


def html_page(
    sections: Sequence[Section], info: RunInfo, out_dir: Path, notes: Sequence[NoteSection] = ()
) -> str:
    """The HTML report: header, references, summary (INCONCLUSIVE first), one section per claim, then the
    sections without a verdict (``notes``)."""
    e = html.escape
    results = [section.result for section in sections]
    body = [
        f"<h1>crl verify: run {e(info.run_id)}</h1>",
        _table(["", ""], [[SummaryCell(a), SummaryCell(b)] for a, b in header_rows(info)], header=False),
        "<p><b>References:</b></p><ul>"
        + "".join(f"<li><b>{e(key)}</b> {e(text)}</li>" for key, text in REFERENCES)
        + "</ul>",
        f"<p>{e(LEVELS_NOTE)}</p>",
        "<h2>Summary</h2>",
        *[f"<p>{_span(cell)}</p>" for cell in overall(results, info.broken_modules)],
        _table(SUMMARY_COLUMNS, [summary_cells(result) for result in summary_order(results)]),
    ]
    for name, error in info.broken_modules.items():
        body += [f'<h3 class="bad">Claim module {e(name)} failed to import</h3>', f"<pre>{e(error)}</pre>"]
    body += [_claim_section(section, out_dir) for section in sections]
    for note in notes:
        body += [f"<h2>{e(note.title)} (no verdict)</h2>", *[f"<p>{e(text)}</p>" for text in note.paragraphs]]
        body.append(_table(note.columns, [[SummaryCell(cell) for cell in row] for row in note.rows]))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>crl verify {e(info.run_id)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _claim_section(section: Section, out_dir: Path) -> str:
    """One claim's HTML section."""
    e = html.escape
    r = section.result
    state = "bad" if r.fails_run else "unsure" if r.inconclusive else "good"
    parts = [
        f'<h2 id="{e(r.claim_id)}">{e(r.claim_id)}: {e(r.title)}</h2>',
        f"<p><b>Tests:</b> {e(r.evidence)}</p>",
        f"<p><b>Source:</b> {e(r.source)}</p>",
        f"<p><b>Statement:</b> {e(r.statement)}</p>",
        f"<p><b>Pre-registered rule</b> (docs/claims/{e(r.claim_id)}.md):</p><blockquote>{e(r.rule)}</blockquote>",
        f"<p><b>Level:</b> {e(level_line(r))}</p>",
        "<p><b>Measured:</b></p>",
        _stat_table(r.statistics) if r.statistics else "<p>(no statistics)</p>",
        f"<p><b>Verdict:</b> {_span(verdict_cell(r))}; "
        f'outcome: <span class="{state}">{e(outcome(r))}</span></p>',
        f"<p><b>Bound slack:</b> {_span(slack_cell(r))}</p>",
        f"<p><b>Negative control:</b> {e(r.control.description)}</p>",
        f"<p><b>Control verdict:</b> {_span(control_cell(r))}</p>",
    ]
    if r.control.statistics:
        parts.append(_stat_table(r.control.statistics))
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
    parts += _notes(section)
    time_text = "-" if r.wall_s is None else f"{r.wall_s:.1f} s"
    parts.append(f"<p><b>Time:</b> {e(time_text)} at fidelity {e(r.fidelity)}</p>")
    return "\n".join(parts)


def _notes(section: Section) -> list[str]:
    """The notes: a traceback in a wrapping ``pre``, prose as paragraphs."""
    r = section.result
    if not r.notes.strip():
        return []
    if notes_are_code(r):
        return ["<p><b>Notes:</b></p>", f"<pre>{html.escape(r.notes)}</pre>"]
    return ["<p><b>Notes:</b></p>", *[f"<p>{html.escape(text)}</p>" for text in notes_paragraphs(r)]]


def _stat_table(statistics: Sequence[Statistic]) -> str:
    """A table of statistics (name, value, CI, level, how)."""
    rows = [[SummaryCell(text) for text in row] for row in stat_rows(statistics)]
    return _table(STAT_COLUMNS, rows)


def _table(columns: Sequence[str], rows: Sequence[Sequence[SummaryCell]], *, header: bool = True) -> str:
    """An HTML table of escaped, toned cells."""
    head = "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in columns) + "</tr>" if header else ""
    body = "".join("<tr>" + "".join(f"<td>{_span(cell)}</td>" for cell in row) + "</tr>" for row in rows)
    return f"<table>{head}{body}</table>"


def _span(cell: SummaryCell) -> str:
    """The cell's escaped text, in its tone's class unless plain."""
    text = html.escape(cell.text)
    return text if cell.tone is Tone.PLAIN else f'<span class="{cell.tone.value}">{text}</span>'
