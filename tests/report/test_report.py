"""Tests of the report writer and the figure renderer on hand-built claim results."""

import csv
import dataclasses
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from crl.claims import (
    ClaimResult,
    ControlResult,
    Fidelity,
    Statistic,
    Verdict,
    bound_figure,
    curve,
    loglog_figure,
    points,
)
from crl.report import RunInfo, render_figure, write_report
from crl.report.figures import merge_curves, series_label
from crl.stats import loglog_slope

INFO = RunInfo(
    run_id="20260101T000000Z-abc123",
    date="2026-01-01T00:00:00+00:00",
    crl_version="0.1.0",
    git_commit="deadbeef",
    fidelity="quick",
    budget_s=180.0,
    seed=0,
    machine="test machine",
    software="Python",
    command="crl verify --fidelity quick",
    wall_s=1.5,
)


def _result(claim_id: str, verdict: Verdict, control: Verdict, **extra: object) -> ClaimResult:
    x = np.geomspace(4, 256, 6)
    fit = loglog_slope(x, 2 / x, 0.02 / x, rng=np.random.default_rng(0), n_boot=200)
    figure = loglog_figure("rate", "rate", "m", "gap", points("gap", x, 2 / x, fit=fit), theory_slope=-1.0)
    fields: dict[str, object] = {
        "claim_id": claim_id,
        "title": f"title of {claim_id}",
        "source": "[A] Thm 4.5",
        "evidence": "[A] Thm 4.5 (a rate)",
        "statement": "L(s) - E L_hat(s) = O(1/m) & <bounded>",
        "rule": "docs/theory.md section 7, C3: slope CI contains -1 Fixed by crl: m in {4, ..., 256}.",
        "parts": 2,
        "level": 0.9975,
        "fidelity": Fidelity.QUICK,
        "verdict": verdict,
        "statistics": (Statistic("slope", -1.01, -1.08, -0.95, 0.9975, "parametric"),),
        "control": ControlResult(
            "a 1/sqrt(m) process", control, (Statistic("slope", -0.5, -0.55, -0.45, 0.9975),), ("misfit",)
        ),
        "figures": (figure,),
        "table": ({"m": 4, "gap": 0.5}, {"m": 8, "gap": 0.25, "note": "x"}),
        "run_id": INFO.run_id,
        "cell_runs": {INFO.run_id: 10, "20251231T000000Z-000000": 2},
        "wall_s": 0.5,
        "reasons": ("too few points",),
        "slack": 0.02,
    }
    fields.update(extra)
    return ClaimResult(**fields)  # type: ignore[arg-type]


def test_report_states_rule_statistic_ci_verdicts_and_provenance(tmp_path: Path) -> None:
    """If this fails, a report section lacks the rule, the CI, a verdict, the control, or the runs it came from."""
    files = write_report(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL)], INFO)
    markdown = files.markdown.read_text()
    for text in (
        "# crl verify: run 20260101T000000Z-abc123",
        "0.1.0 (git deadbeef)",
        "quick (budget 180 s; this run took 1.5 s)",
        "> docs/theory.md section 7, C3: slope CI contains -1 Fixed by crl",
        "| slope | -1.01 | [-1.08, -0.95] | 0.9975 | parametric |",
        "**Tests:** [A] Thm 4.5 (a rate)",
        "**Level:** 0.9975 for each of its 2 parts (intervals, violation counts) and for the control",
        "**Verdict:** PASS; outcome: holds",
        "**Bound slack:** 0.02 (holds, not informative)",
        "**Negative control:** a 1/sqrt(m) process",
        "**Control verdict:** FAIL (expected)",
        "![C3 C3_rate](figures/C3_rate.png)",
        "12 cells: 10 computed in this run, 2 resumed from run 20251231T000000Z-000000",
        "All 1 claim(s) pass, and every negative control fails as it must.",
        "**[A]** Y. Li, X. Wei, T. Yang, Y. Ying, Statistical Consistency and Generalization of Contrastive",
        "**[B]** N. Whiteley, Similarity search generalisation",
        "| C3 | title of C3 | PASS | slope: -1.01 [-1.08, -0.95] (0.9975) | FAIL (expected) |",
    ):
        assert text in markdown
    page = files.html.read_text()
    assert "&lt;bounded&gt;" in page and "<bounded>" not in page
    assert not re.search(r'src="(?!data:image/png;base64,)', page), (
        "the HTML must not reference external files"
    )
    assert files.figures == (tmp_path / "figures" / "C3_rate.png",)
    with files.tables[0].open() as handle:
        rows = list(csv.DictReader(handle))
    assert rows == [{"m": "4", "gap": "0.5", "note": ""}, {"m": "8", "gap": "0.25", "note": "x"}]


def test_report_marks_failures_and_shows_errors(tmp_path: Path) -> None:
    """If this fails, a failing claim or a crashed one looks like a success in the report."""
    crashed = _result(
        "C8", Verdict.ERROR, Verdict.ERROR, figures=(), table=(), statistics=(), notes="run raised:\nBoom"
    )
    files = write_report(tmp_path, [_result("C3", Verdict.PASS, Verdict.PASS), crashed], INFO)
    markdown = files.markdown.read_text()
    assert "2 of 2 claim(s) fail the run" in markdown
    assert "C3 (negative control PASS, expected FAIL)" in markdown
    assert "```\nrun raised:\nBoom\n```" in markdown
    page = files.html.read_text()
    assert '<span class="bad">PASS (unexpected)</span>' in page and '<span class="bad">ERROR</span>' in page
    assert "<pre>run raised:\nBoom</pre>" in page


def test_colours_say_what_is_expected_and_inconclusive_comes_first_with_its_reason(tmp_path: Path) -> None:
    """If this fails, a control's expected FAIL is shown red like a failure, or an INCONCLUSIVE verdict is not
    first in the verdict table, not yellow, or its section says no reason; or the page opens with a paragraph
    that repeats the table's reasons."""
    passing = _result("C3", Verdict.PASS, Verdict.FAIL)
    unsure = _result("C7", Verdict.INCONCLUSIVE, Verdict.INCONCLUSIVE)
    files = write_report(tmp_path, [passing, unsure], INFO)
    page = files.html.read_text()
    assert '<span class="good">FAIL (expected)</span>' in page and '<span class="good">PASS</span>' in page
    table = page[page.index("<h2>Verdicts</h2>") : page.index("</table>", page.index("<h2>Verdicts</h2>"))]
    assert table.index('href="#C7"') < table.index('href="#C3"')
    assert '<span class="unsure">INCONCLUSIVE</span> <a href="#C7">why</a>' in table
    assert "too few points" not in table and "misfit" not in table
    opening = page[: page.index("<h2>Verdicts</h2>")]
    assert (
        "No claim of 2 fails and no negative control passes; 1 INCONCLUSIVE (verdict or control: C7; reasons in "
        "their sections)." in opening
    )
    assert "too few points" not in opening
    section = page[page.index('<h2 id="C7">') :]
    assert "<b>Why INCONCLUSIVE:</b>" in section and "<li>too few points</li>" in section
    assert "<b>Why the control is INCONCLUSIVE:</b>" in section and "<li>misfit</li>" in section
    markdown = files.markdown.read_text()
    assert (
        "No claim of 2 fails and no negative control passes; 1 INCONCLUSIVE (verdict or control: C7;"
        in markdown
    )
    assert "**Why INCONCLUSIVE:**\n\n- too few points" in markdown


def test_notes_wrap_and_the_header_names_a_rerunnable_command(tmp_path: Path) -> None:
    """If this fails, the notes sit in one horizontally scrolling line, or the command row cannot be rerun."""
    notes = "first line of a long note\ncontinued here.\n\nA second paragraph."
    files = write_report(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL, notes=notes)], INFO)
    page = files.html.read_text()
    assert "<p>first line of a long note continued here.</p><p>" not in page
    assert "<p>first line of a long note continued here.</p>" in page and "<p>A second paragraph.</p>" in page
    assert "white-space: pre-wrap" in page
    notes_at = page.index("<p>first line of a long note")
    assert page.rfind("<table", 0, notes_at) < page.rfind("</table>", 0, notes_at), "notes inside a table"
    markdown = files.markdown.read_text()
    assert "first line of a long note continued here.\n\nA second paragraph." in markdown
    assert "| command | `crl verify --fidelity quick` |" in markdown


def test_user_text_on_the_command_line_is_escaped_in_both_reports(tmp_path: Path) -> None:
    """If this fails, an --out path with Markdown/HTML in it lands raw in report.md (a live tag, a link, a new
    column)."""
    command = "crl verify --out 'runs/<img src=x>|*b* [a](b) `c`'"
    info = dataclasses.replace(INFO, command=command)
    files = write_report(tmp_path, [_result("C3", Verdict.PASS, Verdict.FAIL)], info)
    markdown = files.markdown.read_text()
    assert "| command | ``crl verify --out 'runs/<img src=x>\\|*b* [a](b) `c`'`` |" in markdown
    page = files.html.read_text()
    assert "&lt;img src=x&gt;" in page and "<img src=x>" not in page


def test_duplicate_figure_names_are_refused(tmp_path: Path) -> None:
    """If this fails, one figure of a claim would silently overwrite another."""
    result = _result("C3", Verdict.PASS, Verdict.FAIL)
    twice = _result("C3", Verdict.PASS, Verdict.FAIL, figures=result.figures * 2)
    with pytest.raises(ValueError, match="several figures named"):
        write_report(tmp_path, [twice], INFO)


def test_figures_are_png_stamped_with_the_run_and_count_hidden_points(tmp_path: Path) -> None:
    """If this fails, a figure cannot be traced to its run, or log axes drop non-positive points silently."""
    x = np.linspace(0.0, 2.0, 9)
    spec = bound_figure(
        "bound",
        "calibration",
        "L - L*",
        "E* - E",
        points("random s", x, np.sqrt(x) / 2),
        bound=curve("sqrt(2x/tau)", x, np.sqrt(2 * x)),
        log_x=True,
        log_y=True,
    )
    path = render_figure(spec, tmp_path / "f" / "bound.png", run_id="run-xyz")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.size[0] > 400
        assert "run run-xyz" in image.info["Description"]
        assert "2 value(s) <= 0 not shown" in image.info["Description"]
    linear = render_figure(
        bound_figure("lin", "t", "x", "y", points("p", x, x), bound=curve("b", x, 2 * x)),
        tmp_path / "lin.png",
        run_id="r",
    )
    assert linear.stat().st_size > 5_000
    symlog = bound_figure(
        "sym",
        "t",
        "x",
        "y",
        points("p", x, x - 1),
        bound=curve("b", x, x),
        x_scale="symlog",
        y_scale="symlog",
    )
    assert (symlog.xscale, symlog.yscale) == ("symlog", "symlog")
    with Image.open(render_figure(symlog, tmp_path / "sym.png", run_id="r")) as image:
        assert "not shown" not in image.info["Description"]


def test_identical_curves_are_drawn_once_and_controls_say_so() -> None:
    """If this fails, three identical bounds stack up in the legend, or a control's series is not named one."""
    x = [1.0, 2.0]
    same = [curve("bound, tau = 1", x, [1.0, 0.5]), curve("bound, tau = 1", x, [1.0, 0.5])]
    merged = merge_curves(
        [*same, curve("other bound", x, [1.0, 0.5]), curve("theory", x, [1.0, 0.5], kind="theory")]
    )
    assert [m.labels for m in merged] == [("bound, tau = 1", "other bound"), ("theory",)]
    assert (
        series_label(points("phi = scaled identity", x, x, control=True)) == "control: phi = scaled identity"
    )
    assert series_label(points("control: uniform anchors", x, x, control=True)) == "control: uniform anchors"
    fit = loglog_slope(
        np.array([1.0, 2.0, 4.0]), np.array([1.0, 0.5, 0.25]), rng=np.random.default_rng(0), n_boot=100
    )
    assert series_label(points("gap", [1, 2, 4], [1, 0.5, 0.25], fit=fit)).startswith(
        "gap (fit slope -1.000 ["
    )
