"""The self-contained HTML report (``report.html``): figures embedded as base64 PNG, text that wraps.

The page opens with the compact verdict table (claim, what it tests, verdict, headline statistic with its CI and
level, negative control), INCONCLUSIVE rows first, then the reconstruction checks in their own table, what lies
beside the report (the CSV tables, linked), the run and the references; one section per claim follows, with its
reasons, statistics and captioned figures. Numbers never break across lines (``white-space: nowrap``), words
break only between themselves, and a table wider than a narrow screen scrolls inside its own box; below 40rem the
verdict table is stacked, one claim per block.

Colours follow the summary's tones: green for good news (a claim's PASS, a control's expected FAIL), red for
an unexpected result, yellow for INCONCLUSIVE (with its reason) and for a bound that holds without informing.
"""

import base64
import html
import re
from collections.abc import Sequence
from pathlib import Path

from crl.claims.base import ClaimResult, Statistic, Verdict
from crl.report.sections import (
    CHECKS_NOTE,
    FILES_AFTER,
    LEVELS_NOTE,
    REFERENCES,
    STAT_COLUMNS,
    STAT_NUMERIC,
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
    SummaryCell,
    Tone,
    checks,
    control_cell,
    headline,
    overall,
    slack_cell,
    verdict_cell,
    verdicts,
)

_STACKED_LABELS = ("claim", "tests", "verdict", "headline", "control")
"""The labels of the verdict table's cells when it is stacked on a narrow screen (:data:`TABLE_COLUMNS`, shorter)."""

_CSS = """
body { font-family: system-ui, sans-serif; line-height: 1.4; max-width: 72rem; margin: 1.5rem auto;
  padding: 0 1rem; overflow-wrap: break-word; hyphens: none; }
h1 { font-size: 1.5rem; margin-bottom: 0.25rem; }
h2 { margin-top: 2rem; border-bottom: 1px solid #ddd; }
.run { color: #555; margin-top: 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 0.5rem 0; }
td, th { border: 1px solid #ccc; padding: 0.25rem 0.5rem; vertical-align: top; text-align: left;
  overflow-wrap: normal; word-break: normal; }
th { background: #f3f3f3; }
td.num, th.num, .num { white-space: nowrap; font-variant-numeric: tabular-nums; }
.nb { white-space: nowrap; }
td.how { min-width: 16rem; }
table.verdicts td:first-child { white-space: nowrap; }
td.verdict { min-width: 6rem; }
.stat { color: #444; }
blockquote { border-left: 4px solid #888; margin: 0; padding-left: 1rem; }
pre { background: #f6f6f6; padding: 0.5rem; white-space: pre-wrap; overflow-wrap: anywhere; }
code { overflow-wrap: anywhere; }
figure { margin: 1rem 0; }
figcaption { font-size: 0.9rem; color: #333; }
img { max-width: 100%; height: auto; }
.small { font-size: 0.9rem; color: #444; }
.good { color: #11772d; font-weight: bold; }
.bad { color: #b00020; font-weight: bold; }
.unsure { color: #8a5a00; background: #fff4c2; font-weight: bold; }
@media (max-width: 40rem) {
  body { padding: 0 0.5rem; }
  table.stack, table.stack tbody, table.stack tr, table.stack td { display: block; }
  table.stack tr:first-child { display: none; }
  table.stack tr { border: 1px solid #ccc; margin-bottom: 0.5rem; }
  table.stack td { border: none; padding: 0.15rem 0.5rem; min-width: 0; }
  table.stack td::before { content: attr(data-label) ": "; color: #666; font-weight: normal; }
  table.stack td:first-child::before { content: ""; }
  table.stack td:first-child { font-weight: bold; }
}
"""


def html_page(
    sections: Sequence[Section], info: RunInfo, out_dir: Path, notes: Sequence[NoteSection] = ()
) -> str:
    """The HTML report: the verdict table (INCONCLUSIVE first), the reconstruction checks, the files beside it,
    the run and references, one section per claim (verdicts, then checks), then the sections without a verdict
    (``notes``)."""
    e = html.escape
    results = [section.result for section in sections]
    found = checks(results)
    body = [
        f"<h1>crl verify: run {e(info.run_id)}</h1>",
        f'<p class="run">{_run_line(info)}</p>',
        *[f"<p>{_span(cell)}</p>" for cell in overall(results, info.broken_modules, reasons=False)],
        "<h2>Verdicts</h2>",
        _verdict_table(verdicts(results)),
        f'<p class="small">{e(LEVELS_NOTE)}</p>',
    ]
    if found:
        body += [
            "<h2>Reconstruction checks (not verdicts)</h2>",
            f"<p>{e(CHECKS_NOTE)}</p>",
            _verdict_table(found),
        ]
    for name, error in info.broken_modules.items():
        body += [f'<h3 class="bad">Claim module {e(name)} failed to import</h3>', f"<pre>{e(error)}</pre>"]
    body += [
        "<h2>Files, run and references</h2>",
        _files(sections, out_dir),
        _table(
            ["", ""],
            [[SummaryCell(a), SummaryCell(b)] for a, b in header_rows(info)],
            header=False,
            words=False,
        ),
        "<p><b>References:</b></p><ul>"
        + "".join(f"<li><b>{e(key)}</b> {e(text)}</li>" for key, text in REFERENCES)
        + "</ul>",
    ]
    ordered = [s for s in sections if s.result.is_verdict] + [s for s in sections if not s.result.is_verdict]
    body += [_claim_section(section, out_dir) for section in ordered]
    for note in notes:
        body += [f"<h2>{e(note.title)} (no verdict)</h2>", *[f"<p>{e(text)}</p>" for text in note.paragraphs]]
        body.append(_table(note.columns, [[SummaryCell(cell) for cell in row] for row in note.rows]))
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>crl verify {e(info.run_id)}</title><style>{_CSS}</style></head>\n<body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def _run_line(info: RunInfo) -> str:
    """The line under the title: fidelity, seed, date, commit and wall time, each piece kept on one line."""
    pieces = (
        f"{info.fidelity} fidelity",
        f"seed {info.seed}",
        info.date,
        f"crl {info.crl_version} (git {info.git_commit})",
        f"{info.wall_s:.0f} s",
    )
    return ", ".join(f'<span class="num">{html.escape(piece)}</span>' for piece in pieces)


def _verdict_table(results: Sequence[ClaimResult]) -> str:
    """The compact table: claim (linked to its section), what it tests, verdict, headline statistic, control."""
    e = html.escape
    head = "<tr>" + "".join(f"<th>{e(column)}</th>" for column in TABLE_COLUMNS) + "</tr>"
    rows = []
    for r in results:
        why = f' <a href="#{e(r.claim_id)}">why</a>'
        cells = [
            f'<a href="#{e(r.claim_id)}">{e(r.claim_id)}</a>',
            _words(r.title),
            _span(verdict_cell(r, reasons=False)) + (why if r.verdict is Verdict.INCONCLUSIVE else ""),
            _headline(r),
            _span(control_cell(r, reasons=False))
            + (why if r.control.verdict is Verdict.INCONCLUSIVE else ""),
        ]
        classes = ("", "", ' class="verdict"', "", ' class="verdict"')
        rows.append(
            "<tr>"
            + "".join(
                f'<td{cls} data-label="{e(label)}">{cell}</td>'
                for cls, label, cell in zip(classes, _STACKED_LABELS, cells, strict=True)
            )
            + "</tr>"
        )
    return f'<div class="scroll"><table class="verdicts stack">{head}{"".join(rows)}</table></div>'


def _headline(result: ClaimResult) -> str:
    """The headline statistic: its name (which may wrap), then its numbers and level (which never do)."""
    head = headline(result)
    if head is None:
        return "-"
    e = html.escape
    return (
        f'<span class="stat">{_words(head.name)}</span> <span class="num">{e(head.numbers)}</span> '
        f'<span class="num small">({e(head.level)})</span>'
    )


def _files(sections: Sequence[Section], out_dir: Path) -> str:
    """The paragraph on the files beside the report, linking each CSV table."""
    e = html.escape
    text, tables = files_paragraph(sections, out_dir)
    links = ", ".join(f'<a href="{e(path)}">{e(path)}</a>' for _, path in tables)
    return f"<p>{e(text)}{links}{'.' if links else ''} {e(FILES_AFTER)}</p>"


def _claim_section(section: Section, out_dir: Path) -> str:
    """One claim's HTML section: what it tests, its verdict with reasons, the control, what was measured, the
    figures with captions, the rule, and where its data came from."""
    e = html.escape
    r = section.result
    state = "bad" if r.fails_run else "unsure" if r.inconclusive else "good"
    kind = "" if r.is_verdict else " (reconstruction check, not a verdict)"
    parts = [
        f'<h2 id="{e(r.claim_id)}">{e(r.claim_id)}: {e(r.title)}{e(kind)}</h2>',
        f"<p><b>Tests:</b> {e(r.evidence)}</p>",
        f"<p><b>Verdict:</b> {_span(verdict_cell(r, reasons=False))}; "
        f'outcome: <span class="{state}">{e(outcome(r))}</span></p>',
        *_reasons("Why INCONCLUSIVE", r.reasons, r.verdict),
        f"<p><b>Negative control:</b> {e(r.control.description)}</p>",
        f"<p><b>Control verdict:</b> {_span(control_cell(r, reasons=False))}</p>",
        *_reasons("Why the control is INCONCLUSIVE", r.control.reasons, r.control.verdict),
        f"<p><b>Level:</b> {e(level_line(r))}</p>",
        "<p><b>Measured:</b></p>",
        _stat_table(r.statistics) if r.statistics else "<p>(no statistics)</p>",
    ]
    if r.control.statistics:
        parts += ["<p><b>Measured on the control:</b></p>", _stat_table(r.control.statistics)]
    parts.append(f"<p><b>Bound slack:</b> {_span(slack_cell(r))}</p>")
    for number, (path, spec) in enumerate(zip(section.figures, r.figures, strict=True), start=1):
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        file = path.relative_to(out_dir).as_posix()
        caption = figure_caption(r.claim_id, number, spec, file)
        parts.append(
            f'<figure><a href="{e(file)}"><img alt="{e(r.claim_id)} {e(spec.title)}" '
            f'src="data:image/png;base64,{data}"></a><figcaption>{e(caption)}</figcaption></figure>'
        )
    parts += [
        f"<p><b>Statement:</b> {e(r.statement)}</p>",
        f"<p><b>Source:</b> {e(r.source)}</p>",
        f"<p><b>Pre-registered rule</b> (docs/claims/{e(r.claim_id)}.md):</p><blockquote>{e(r.rule)}</blockquote>",
    ]
    origin = "Figures drawn from" if section.figures else "Data from"
    parts.append(f"<p><i>{origin} run {e(r.run_id)}; {e(provenance(r))}.</i></p>")
    if section.table is not None:
        link = e(section.table.relative_to(out_dir).as_posix())
        parts.append(f'<p><b>Data:</b> <a href="{link}">{link}</a> ({len(r.table)} rows, CSV)</p>')
    parts += _notes(section)
    time_text = "-" if r.wall_s is None else f"{r.wall_s:.1f} s"
    parts.append(f"<p><b>Time:</b> {e(time_text)} at fidelity {e(r.fidelity)}</p>")
    return "\n".join(parts)


def _reasons(title: str, reasons: Sequence[str], verdict: Verdict) -> list[str]:
    """An INCONCLUSIVE's reasons as a list under ``title`` (nothing for another verdict)."""
    if verdict is not Verdict.INCONCLUSIVE:
        return []
    items = "".join(f"<li>{html.escape(reason)}</li>" for reason in reasons or ("no reason given",))
    return [f'<p><b>{html.escape(title)}:</b></p><ul class="unsure-reasons">{items}</ul>']


def _notes(section: Section) -> list[str]:
    """The notes: a traceback in a wrapping ``pre``, prose as paragraphs."""
    r = section.result
    if not r.notes.strip():
        return []
    if notes_are_code(r):
        return ["<p><b>Notes:</b></p>", f"<pre>{html.escape(r.notes)}</pre>"]
    return ["<p><b>Notes:</b></p>", *[f"<p>{html.escape(text)}</p>" for text in notes_paragraphs(r)]]


def _stat_table(statistics: Sequence[Statistic]) -> str:
    """A table of statistics (name, value, CI, level, how); the numeric cells never wrap."""
    rows = [[SummaryCell(text) for text in row] for row in stat_rows(statistics)]
    return _table(STAT_COLUMNS, rows, numeric=STAT_NUMERIC, stack=True)


def _table(
    columns: Sequence[str],
    rows: Sequence[Sequence[SummaryCell]],
    *,
    header: bool = True,
    numeric: Sequence[bool] = (),
    stack: bool = False,
    words: bool = True,
) -> str:
    """An HTML table of escaped, toned cells in a box that scrolls sideways on a narrow screen.

    The columns flagged in ``numeric``, and every cell that holds only numbers, get class ``num`` (never broken
    across lines); the last column of a table with numeric columns class ``how``. ``stack`` stacks the rows on a
    narrow screen, each cell labelled with its column; ``words`` keeps words joined by a hyphen whole (the
    header's identifiers, paths and platform strings may break there instead).
    """

    def attributes(index: int, text: str | None) -> str:
        label = f' data-label="{html.escape(columns[index])}"' if stack and text is not None else ""
        if (index < len(numeric) and numeric[index]) or (text is not None and is_numeric(text)):
            return f' class="num"{label}'
        if numeric and index == len(columns) - 1:
            return f' class="how"{label}'
        return label

    head = (
        "<tr>"
        + "".join(f"<th{attributes(i, None)}>{html.escape(c)}</th>" for i, c in enumerate(columns))
        + "</tr>"
        if header
        else ""
    )
    body = "".join(
        "<tr>"
        + "".join(
            f"<td{attributes(i, cell.text)}>{_span(cell, in_table=words)}</td>" for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    kind = ' class="stack"' if stack else ""
    return f'<div class="scroll"><table{kind}>{head}{body}</table></div>'


_NUMBER_CHARACTERS = re.compile(r"[0-9.,+\-−eE\[\]()∞%×/ ]+|inf|nan")


def is_numeric(text: str) -> bool:
    """Whether a cell holds only numbers (values, intervals, counts, ``∞``), which must never wrap."""
    return (
        bool(text.strip())
        and any(ch.isdigit() or ch == "∞" for ch in text)
        and not _NUMBER_CHARACTERS.sub("", text)
    )


def _span(cell: SummaryCell, *, in_table: bool = False) -> str:
    """The cell's escaped text, in its tone's class unless plain; in a table (``in_table=True``) a word joined by a
    hyphen is kept whole (:func:`_words`)."""
    text = _words(cell.text) if in_table else html.escape(cell.text)
    return text if cell.tone is Tone.PLAIN else f'<span class="{cell.tone.value}">{text}</span>'


_JOINED = re.compile(r"\w-\w")


def _words(text: str) -> str:
    """``text`` escaped, each word joined by a hyphen ("cross-entropy", "2026-12-02") in a span that never breaks,
    since a browser would otherwise break a table cell at the hyphen."""
    return "".join(
        f'<span class="nb">{html.escape(piece)}</span>' if _JOINED.search(piece) else html.escape(piece)
        for piece in re.split(r"(\s+)", text)
    )
