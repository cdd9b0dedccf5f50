"""Tests of what a reader takes in at a glance: the verdict table first, the reconstruction checks beside it,
unbounded and non-negative intervals printed as what they are, numbers that never wrap, captioned figures and the
CSV tables linked (hand-built results, no verify run)."""

import math
import re
from html.parser import HTMLParser
from pathlib import Path

from crl.claims import ClaimResult, Role, Statistic, Verdict
from crl.report import write_report
from crl.report.html_page import is_numeric
from tests.report.test_report import INFO, _result


class _Cells(HTMLParser):
    """Every table cell of a page: its classes, its text, whether it sits in the verdict table, and the classes
    of the spans inside it that hold each piece of text."""

    def __init__(self) -> None:
        super().__init__()
        self.cells: list[dict[str, object]] = []
        self._cell: dict[str, object] | None = None
        self._spans: list[str] = []
        self._table_classes: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = dict(attrs).get("class") or ""
        if tag == "table":
            self._table_classes.append(classes)
        elif tag in ("td", "th"):
            verdicts = bool(self._table_classes) and "verdicts" in self._table_classes[-1]
            self._cell = {"classes": classes.split(), "text": "", "pieces": [], "verdicts": verdicts}
            self._spans = []
        elif tag == "span" and self._cell is not None:
            self._spans.append(classes)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self._table_classes:
            self._table_classes.pop()
        elif tag in ("td", "th") and self._cell is not None:
            self.cells.append(self._cell)
            self._cell = None
        elif tag == "span" and self._spans:
            self._spans.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell["text"] = str(self._cell["text"]) + data
            pieces = self._cell["pieces"]
            assert isinstance(pieces, list)
            pieces.append((data, " ".join(self._spans)))


def _page(tmp_path: Path, results: list[ClaimResult]) -> tuple[str, str]:
    files = write_report(tmp_path, results, INFO)
    return files.html.read_text(), files.markdown.read_text()


def _css_rules(page: str) -> dict[str, str]:
    """Selector -> declarations of the page's style sheet (the media query's rules included)."""
    css = page[page.index("<style>") + len("<style>") : page.index("</style>")]
    css = re.sub(r"@media[^{]*\{", "", css)
    return {
        selector.strip(): body
        for selector, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css)
        if selector.strip()
    }


def _with_statistic(claim_id: str, statistic: Statistic) -> ClaimResult:
    return _result(claim_id, Verdict.PASS, Verdict.FAIL, statistics=(statistic,))


def test_unbounded_interval_ends_are_printed_as_infinite(tmp_path: Path) -> None:
    """If this fails, an interval that censoring leaves unbounded prints as a finite number (it once read
    [-99, 99]) or as Python's 'inf' instead of an open end at infinity."""
    one_sided = Statistic("difference of slopes", 0.31, 0.12, math.inf, 0.995)
    unbounded = Statistic("slope", 0.5, -math.inf, math.inf, 0.995)
    page, markdown = _page(tmp_path, [_with_statistic("C6", one_sided), _with_statistic("C5", unbounded)])
    for text in (re.sub(r'src="data:[^"]*"', "", page), markdown):
        assert "0.31 [0.12, ∞)" in text and "0.5 (-∞, ∞)" in text
        assert not re.search(r"\binf\b", text) and not re.search(r"(?<![\d.])-?99(?![\d.])", text)


def test_intervals_of_non_negative_quantities_are_clipped_at_zero_for_display_only(tmp_path: Path) -> None:
    """If this fails, a KL's Student-t interval shows a negative lower end, the clipping is silent (the interval
    as computed is not named), or an interval that may be negative is clipped too."""
    kl = Statistic("E_z KL(M||Q), 1/tau = 8 (flat)", 0.0004, -0.0021, 0.0029, 0.995, "mean of 8", True)
    slope = Statistic("slope", -0.01, -0.03, 0.02, 0.995)
    result = _result("C9", Verdict.PASS, Verdict.FAIL, statistics=(kl, slope))
    page, markdown = _page(tmp_path, [result])
    for text in (re.sub(r"<[^>]+>", "", page), markdown):
        assert "0.0004 [0, 0.0029]" in text
        assert "CI as computed [-0.0021, 0.0029], shown clipped at 0 (a non-negative quantity)" in text
        assert "[-0.03, 0.02]" in text
    assert result.statistics[0].ci_low == -0.0021, "the verdict's interval is left as computed"


def test_numbers_never_break_inside_a_table_cell(tmp_path: Path) -> None:
    """If this fails, a number, an interval or a level can wrap across lines in a table cell (the style sheet
    lets cells break anywhere, or a numeric cell lacks the class that keeps it on one line)."""
    statistics = (
        Statistic("slope of L - E L_hat vs m", -1.003456, -1.0512345, -0.9612345, 0.99875, "bootstrap"),
        Statistic("difference", 0.31, 0.12, math.inf, 0.99875),
    )
    page, _ = _page(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL, statistics=statistics)])
    rules = _css_rules(page)
    nowrap = [selector for selector, body in rules.items() if "white-space: nowrap" in body]
    assert any("td.num" in selector for selector in nowrap) and any(
        ".num" in [part.strip() for part in s.split(",")] for s in nowrap
    )
    for selector, body in rules.items():
        if re.search(r"\b(td|th|table|body|p)\b", selector):
            assert "anywhere" not in body and "break-all" not in body, (selector, body)
    cells = _Cells()
    cells.feed(page)
    numeric = 0
    for cell in cells.cells:
        text = str(cell["text"]).strip()
        if is_numeric(text):
            numeric += 1
            assert "num" in cell["classes"], f"numeric cell {text!r} may wrap"
        pieces = cell["pieces"]
        assert isinstance(pieces, list)
        for data, spans in pieces:
            if re.search(r"\d", data) and not is_numeric(data.strip()):
                continue  # words with digits in them (a statistic's name) wrap between words, never inside one
            if data.strip() and is_numeric(data.strip()):
                assert "num" in cell["classes"] or "num" in spans, f"number {data!r} may wrap"
    assert numeric >= 6, "the statistics tables' values, intervals and levels were not found"
    verdict_cells = [cell for cell in cells.cells if cell["verdicts"]]
    assert any("-1.003 [-1.051, -0.9612]" in str(cell["text"]) for cell in verdict_cells)


def test_a_word_joined_by_a_hyphen_stays_whole_in_a_table_cell(tmp_path: Path) -> None:
    """If this fails, a browser may break "cross-entropy" or a date at its hyphen inside a table cell."""
    title = "O(1/k) to the integrated cross-entropy, pointwise"
    statistic = Statistic("gap - bound, run-time", 0.5, 0.4, 0.6, 0.999)
    page, _ = _page(
        tmp_path, [_result("C7", Verdict.PASS, Verdict.FAIL, title=title, statistics=(statistic,))]
    )
    table = page[page.index("<h2>Verdicts</h2>") : page.index("</table>", page.index("<h2>Verdicts</h2>"))]
    assert 'integrated <span class="nb">cross-entropy,</span> pointwise' in table
    assert 'gap - bound, <span class="nb">run-time</span>' in table
    assert '<span class="num">2026-01-01T00:00:00+00:00</span>' in page, "the run line's date may break"
    assert "white-space: nowrap" in _css_rules(page)[".nb"]


def test_a_reconstruction_check_sits_outside_the_verdict_table_with_its_control(tmp_path: Path) -> None:
    """If this fails, C8 (a reconstruction check that cannot fail on the sphere) is counted among the verdicts,
    loses its control, or its FAIL fails the run or goes unmentioned."""
    check = _result("C8", Verdict.FAIL, Verdict.INCONCLUSIVE, role=Role.RECONSTRUCTION, title="ideal search")
    page, markdown = _page(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL), check])
    assert not check.fails_run and check.check_findings == ["check FAIL"]
    table = page[page.index("<h2>Verdicts</h2>") : page.index("</table>", page.index("<h2>Verdicts</h2>"))]
    assert 'href="#C3"' in table and "C8" not in table
    checks_at = page.index("<h2>Reconstruction checks (not verdicts)</h2>")
    checks = page[checks_at : page.index("</table>", checks_at)]
    assert 'href="#C8"' in checks and "ideal search" in checks and "INCONCLUSIVE" in checks
    assert "share of alpha stays unspent" in checks and "does not change the exit status" in checks
    assert '<h2 id="C8">C8: ideal search (reconstruction check, not a verdict)</h2>' in page
    assert (
        "1 reconstruction check(s) not as expected (not verdicts: the exit status is unaffected): C8" in page
    )
    assert "All 1 claim(s) pass, and every negative control fails as it must." in markdown
    verdicts_md = markdown[markdown.index("## Verdicts") : markdown.index("## Reconstruction checks")]
    assert "| C3 |" in verdicts_md and "C8" not in verdicts_md
    assert "| C8 | ideal search | FAIL (unexpected) |" in markdown
    assert markdown.index("## C3:") < markdown.index("## C8: ideal search (reconstruction check")


def test_figures_have_captions_and_the_report_links_its_csv_tables(tmp_path: Path) -> None:
    """If this fails, a figure shows without a caption saying what its marks are, or the report does not say
    that it links to the CSV tables beside it (or does not link them)."""
    page, markdown = _page(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL)])
    caption = (
        "Figure C3.1: rate. gap against m (log x, log y); filled markers: measured values with their CI bars; "
        "dashed lines: fitted power laws (slope and CI in the legend); dotted: the theory&#x27;s slope. File "
        "figures/C3_rate.png."
    )
    assert f"<figcaption>{caption}</figcaption>" in page
    plain = caption.replace("&#x27;", "'")
    assert f"*{plain}*" in markdown
    assert "This report links to the CSV tables beside it" in page
    assert '<a href="tables/C3.csv">tables/C3.csv</a>' in page
    assert "[tables/C3.csv](tables/C3.csv)" in markdown
    assert (tmp_path / "tables" / "C3.csv").is_file()


def test_the_verdict_table_comes_first_and_stacks_on_a_narrow_screen(tmp_path: Path) -> None:
    """If this fails, the run's details or the references come before the verdict table, or the table has no
    layout for a phone-wide screen."""
    page, markdown = _page(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL)])
    assert page.index("<h2>Verdicts</h2>") < page.index("<b>References:</b>") < page.index('<h2 id="C3">')
    assert markdown.index("## Verdicts") < markdown.index("| run |") < markdown.index("## C3:")
    assert "@media (max-width: 40rem)" in page and 'name="viewport"' in page
    assert 'data-label="headline"' in page


def test_a_long_verdict_wraps_between_words_in_the_verdict_table(tmp_path: Path) -> None:
    """C5's and C10's "PASS; this rule was not shown able to FAIL here (...)" once sat in a cell that never
    wraps, pushing the table's columns off a 1,280 px screen: the verdict and control cells wrap between words
    (their text unchanged), with a minimum width that keeps a verdict word whole."""
    gate = ("the SSCRL exponent's P(FAIL) at bound + 2 delta 0.025 [0.008, 0.057]",) * 2
    result = _result("C5", Verdict.PASS, Verdict.FAIL, unshown_fail=gate)
    page, _ = _page(tmp_path, [result])
    cells = _Cells()
    cells.feed(page)
    verdict = next(c for c in cells.cells if c["verdicts"] and str(c["text"]).startswith("PASS; this rule"))
    assert verdict["classes"] == ["verdict"] and str(verdict["text"]) == result.verdict_text
    rules = _css_rules(page)
    assert "nowrap" not in rules["td.verdict"] and "min-width" in rules["td.verdict"]
