"""End-to-end tests of `crl verify` on toy claims defined here (a known 1/m process and its controls)."""

import html
import json
import math
import sqlite3
from pathlib import Path
from typing import Any, ClassVar

import pytest
from typer.testing import CliRunner

import crl.verify
from crl.claims import (
    Claim,
    ClaimContext,
    ClaimResult,
    Fidelity,
    Registry,
    Role,
    Statistic,
    Verdict,
    loglog_figure,
    points,
    verdict_equivalent,
)
from crl.claims.budget import part_level
from crl.commands import app
from crl.stats import loglog_slope
from crl.sweep import Cell

M_GRID = (4, 8, 16, 32, 64, 128, 256)


def decay_cell(cell: Cell) -> dict[str, Any]:
    """Mean and standard error of exponential draws with mean m^-rate (the toy 'error at m')."""
    draws = cell.numpy_rng().exponential(cell.params["m"] ** -cell.params["rate"], size=cell.params["draws"])
    return {"mean": float(draws.mean()), "se": float(draws.std(ddof=1) / math.sqrt(draws.size))}


class ToyRate(Claim):
    """Claims that E X_m decays as 1/m; its control is a process decaying as ``m ** -control_rate``."""

    id: ClassVar[str] = "C3"
    title: ClassVar[str] = "Toy rate 1/m"
    source: ClassVar[str] = "a test of the claims engine"
    evidence: ClassVar[str] = "the claims engine (a toy)"
    statement: ClassVar[str] = "E X_m = 1/m for X_m ~ Exp(mean m^-1) <in a toy>"
    rule: ClassVar[str] = "the log-log slope's bootstrap CI contains -1"
    parts: ClassVar[int] = 2
    control_description: ClassVar[str] = "the same rule on a process with mean m^-1/2"
    true_rate: ClassVar[float] = 1.0
    control_rate: ClassVar[float] = 0.5
    delta: ClassVar[float] = 0.1

    def run(self, ctx: ClaimContext) -> ClaimResult:
        draws = {Fidelity.QUICK: 2000, Fidelity.STANDARD: 8000, Fidelity.FULL: 32000}[ctx.fidelity]
        arms = {"claim": self.true_rate, "control": self.control_rate}
        cells = [
            Cell({"arm": arm, "m": m, "rate": rate, "draws": draws}, ctx.seed_for(arm, m))
            for arm, rate in arms.items()
            for m in M_GRID
        ]
        records = ctx.run_cells(cells, decay_cell)
        rows = [{**r.cell.params, **r.result} for r in records]
        fits = {}
        for arm in arms:
            arm_rows = [row for row in rows if row["arm"] == arm]
            fits[arm] = loglog_slope(
                [row["m"] for row in arm_rows],
                [row["mean"] for row in arm_rows],
                [row["se"] for row in arm_rows],
                rng=ctx.rng("bootstrap", arm),
                n_boot=500,
                ci=ctx.level,
            )
        claim_stat = Statistic.from_slope("slope of E X_m vs m", fits["claim"])
        control_stat = Statistic.from_slope("slope of the control vs m", fits["control"])
        series = [
            points(
                arm,
                [row["m"] for row in rows if row["arm"] == arm],
                [row["mean"] for row in rows if row["arm"] == arm],
                y_err=[1.96 * row["se"] for row in rows if row["arm"] == arm],
                fit=fits[arm],
            )
            for arm in arms
        ]
        figure = loglog_figure("slope", "Toy rate", "m", "E X_m", *series, theory_slope=-1.0)
        verdict = verdict_equivalent(claim_stat, -1.0, self.delta)
        return self.result(
            ctx,
            verdict=verdict,
            statistics=[claim_stat],
            control_verdict=verdict_equivalent(control_stat, -1.0),
            control_statistics=[control_stat],
            figures=[figure],
            table=rows,
            reasons=["CI too wide"] if verdict is Verdict.INCONCLUSIVE else [],
        )


class ToyWrongRate(ToyRate):
    """A claim that should hold but whose process decays as 1/sqrt(m): its verdict must come out FAIL."""

    id: ClassVar[str] = "C5"
    title: ClassVar[str] = "Toy rate that does not hold"
    true_rate: ClassVar[float] = 0.5
    control_rate: ClassVar[float] = 2.0


class ToyPassingControl(ToyRate):
    """A claim whose 'control' has the claimed rate, so the control passes: the rule is not shown to fail."""

    id: ClassVar[str] = "C7"
    title: ClassVar[str] = "Toy control that passes"
    control_rate: ClassVar[float] = 1.0


class ToyInconclusive(ToyRate):
    """A claim whose CI cannot be as narrow as its rule asks: INCONCLUSIVE, which must not fail the run."""

    id: ClassVar[str] = "C9"
    title: ClassVar[str] = "Toy claim that cannot tell"
    delta: ClassVar[float] = 1e-9


class ToyFailingCheck(ToyRate):
    """A reconstruction check whose rule FAILs and whose control PASSes: reported, but not a verdict."""

    id: ClassVar[str] = "C8"
    title: ClassVar[str] = "Toy reconstruction check"
    role: ClassVar[Role] = Role.RECONSTRUCTION
    true_rate: ClassVar[float] = 0.5
    control_rate: ClassVar[float] = 1.0


class ToyRaisingCheck(ToyFailingCheck):
    """A reconstruction check whose run raises."""

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise RuntimeError("toy check failure inside run")


class ToyRaises(ToyRate):
    """A claim whose run raises."""

    id: ClassVar[str] = "C8"
    title: ClassVar[str] = "Toy claim that raises"

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise RuntimeError("toy failure inside run")


def _invoke(monkeypatch: pytest.MonkeyPatch, registry: Registry, *args: str) -> Any:
    """Run `crl verify ARGS` in process with ``registry`` in place of the shipped claims, without the report's
    section beside C8 (learned vs ideal search trains real models; tests/experiments/test_learned_vs_ideal.py
    tests it, and the toy C8s here test only the claims engine)."""
    monkeypatch.setattr(crl.verify, "default_registry", lambda: registry)
    monkeypatch.setattr(crl.verify, "note_sections", lambda *args: ())
    return CliRunner().invoke(app, ["verify", *args], catch_exceptions=False)


def test_verify_quick_runs_a_true_claim_writes_every_output_and_exits_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, `crl verify --fidelity quick` does not produce the report, figures and SQLite it promises."""
    out = tmp_path / "v"
    result = _invoke(monkeypatch, Registry.of([ToyRate()]), "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "FAIL" in result.output  # the claim passes, its control fails
    assert "All 1 claim(s) pass, and every negative control fails as it must." in " ".join(
        result.output.split()
    )
    markdown = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    with sqlite3.connect(out / "results.sqlite") as conn:
        run_id, fidelity = conn.execute(
            "SELECT run_id, json_extract(meta, '$.fidelity') FROM runs"
        ).fetchone()
        n_cells = conn.execute("SELECT count(*) FROM cells WHERE claim LIKE 'C3@%'").fetchone()[0]
        stored = json.loads(conn.execute("SELECT result FROM claim_results").fetchone()[0])
    assert fidelity == "quick" and n_cells == 2 * len(M_GRID)
    assert stored["verdict"] == "PASS" and stored["control"]["verdict"] == "FAIL"
    assert stored["level"] == part_level(ToyRate.parts) and stored["parts"] == ToyRate.parts
    assert f"crl verify --fidelity quick --out {out} --seed 0" in markdown
    for text, escape in ((markdown, str), (page, html.escape)):
        assert run_id in text
        assert escape(ToyRate.rule) in text and escape(ToyRate.control_description) in text
    assert "![C3 C3_slope](figures/C3_slope.png)" in markdown
    assert "data:image/png;base64," in page and "&lt;in a toy&gt;" in page
    assert (out / "figures" / "C3_slope.png").stat().st_size > 10_000
    assert (out / "tables" / "C3.csv").read_text().splitlines()[0] == "arm,draws,m,rate,mean,se"
    claim_slope = stored["statistics"][0]
    assert claim_slope["ci_low"] <= -1.0 <= claim_slope["ci_high"]


def test_a_rerun_resumes_from_the_stored_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If this fails, a second `crl verify` into the same folder recomputes cells instead of resuming."""
    out = tmp_path / "v"
    registry = Registry.of([ToyRate()])
    assert _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out)).exit_code == 0
    assert _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out)).exit_code == 0
    with sqlite3.connect(out / "results.sqlite") as conn:
        runs = [row[0] for row in conn.execute("SELECT run_id FROM runs ORDER BY started")]
        cell_runs = {row[0] for row in conn.execute("SELECT run_id FROM cells")}
        second = json.loads(
            conn.execute("SELECT result FROM claim_results WHERE run_id = ?", (runs[1],)).fetchone()[0]
        )
    assert len(runs) == 2 and cell_runs == {runs[0]}
    assert second["cell_runs"] == {runs[0]: 2 * len(M_GRID)}
    assert f"14 resumed from run {runs[0]}" in (out / "report.md").read_text()
    fresh = _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out), "--fresh")
    assert fresh.exit_code == 0
    with sqlite3.connect(out / "results.sqlite") as conn:
        assert conn.execute("SELECT count(DISTINCT run_id) FROM cells").fetchone()[0] == 1
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 1


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (ToyWrongRate(), "C5 (verdict FAIL)"),
        (ToyPassingControl(), "C7 (negative control PASS, expected FAIL)"),
        (ToyRaises(), "C8 (verdict ERROR, negative control ERROR, expected FAIL)"),
    ],
)
def test_a_claim_that_does_not_hold_makes_the_run_fail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Claim, problem: str
) -> None:
    """If this fails, a false claim, a control that passes, or a crash would leave the exit status 0."""
    out = tmp_path / "v"
    result = _invoke(monkeypatch, Registry.of([ToyRate(), bad]), "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 1, result.output
    assert f"1 of 2 claim(s) fail the run: {problem}" in " ".join(result.output.split())
    markdown = (out / "report.md").read_text()
    assert "C3: Toy rate 1/m" in markdown and "FAILS THE RUN" in markdown
    if isinstance(bad, ToyRaises):
        assert "toy failure inside run" in markdown


def test_selected_claims_only_run_and_ids_are_case_insensitive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, --claims runs claims that were not asked for (here the failing C5)."""
    registry = Registry.of([ToyRate(), ToyWrongRate()])
    result = _invoke(
        monkeypatch, registry, "--fidelity", "quick", "--claims", "c3", "--out", str(tmp_path / "v")
    )
    assert result.exit_code == 0, result.output
    assert "C5" not in (tmp_path / "v" / "report.md").read_text()


def test_unknown_ids_zero_claims_and_bad_fidelity_are_usage_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a typo in --claims or an empty registry would silently verify nothing."""
    registry = Registry.of([ToyRate(), ToyWrongRate()])
    unknown = _invoke(monkeypatch, registry, "--claims", "C3,C42", "--out", str(tmp_path / "a"))
    assert unknown.exit_code == 2
    assert "unknown claim id(s) C42; registered claims: C3, C5" in " ".join(unknown.output.split())
    empty = _invoke(monkeypatch, Registry.of([]), "--out", str(tmp_path / "b"))
    assert empty.exit_code == 2 and "no claims are registered" in empty.output
    fidelity = _invoke(monkeypatch, registry, "--fidelity", "fast", "--out", str(tmp_path / "c"))
    assert fidelity.exit_code == 2 and "quick, standard, full" in fidelity.output


def test_a_broken_claim_module_fails_the_run_but_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a claim module that cannot be imported would vanish from the run unnoticed."""
    registry = Registry((ToyRate(),), {"crl.claims.c09_broken": "Traceback ...\nImportError: nope"})
    result = _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(tmp_path / "v"))
    assert result.exit_code == 1
    assert "crl.claims.c09_broken failed to import" in result.output
    assert "ImportError: nope" in (tmp_path / "v" / "report.md").read_text()


def test_an_inconclusive_claim_exits_zero_and_comes_first_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, INCONCLUSIVE fails the run, or hides below the passing claims without saying why
    (docs/theory.md section 7: it exits zero but is listed first, with its reason)."""
    out = tmp_path / "v"
    registry = Registry.of([ToyRate(), ToyInconclusive()])
    result = _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    summary = output[output.index("crl verify quick: run") :]
    assert summary.index("C9 Toy claim") < summary.index("C3 Toy rate")
    assert "1 claim(s) INCONCLUSIVE (exit status 0): C9 (verdict INCONCLUSIVE: CI too wide)" in output
    markdown = (out / "report.md").read_text()
    table = markdown[markdown.index("## Verdicts") : markdown.index("## C3")]
    assert table.index("| C9 | Toy claim that cannot tell | INCONCLUSIVE |") < table.index(
        "| C3 | Toy rate 1/m"
    )
    assert "**Why INCONCLUSIVE:**\n\n- CI too wide" in markdown[markdown.index("## C9") :]
    page = (out / "report.html").read_text()
    assert '<span class="unsure">INCONCLUSIVE</span> <a href="#C9">why</a>' in page
    assert "<li>CI too wide</li>" in page[page.index('<h2 id="C9">') :]


def test_every_claim_and_its_control_are_judged_at_the_claims_per_part_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, `crl verify` hands a claim a level other than 1 - 0.05/(10 parts), whatever the registry
    holds, or a control's interval is not at its claim's level (docs/theory.md section 7)."""
    out = tmp_path / "v"
    registry = Registry.of([ToyRate(), ToyWrongRate()])
    assert (
        _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out), "--claims", "C3").exit_code
        == 0
    )
    with sqlite3.connect(out / "results.sqlite") as conn:
        stored = json.loads(conn.execute("SELECT result FROM claim_results").fetchone()[0])
    assert stored["level"] == pytest.approx(1 - 0.05 / 10 / ToyRate.parts)
    assert [s["ci_level"] for s in stored["control"]["statistics"]] == [stored["level"]]
    assert [s["ci_level"] for s in stored["statistics"]] == [stored["level"]]
    assert (
        "each of the claim's 2 parts (intervals, violation counts) and the control at 0.9975"
        in stored["rule"]
    )


def test_an_output_folder_with_rich_markup_in_its_name_is_printed_as_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, an --out path like 'runs/a[/]b' crashes the end of a run with rich's MarkupError."""
    out = tmp_path / "a[/]b"
    result = _invoke(monkeypatch, Registry.of([ToyRate()]), "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "a[/]b" in result.output


def test_the_report_names_the_commit_the_run_started_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a checkout changed during a long run would be named as the code that computed its cells."""
    checkout = {"commit": "startcommit"}
    run_claims = crl.verify._run_claims

    def run_then_check_out(*args: Any, **kwargs: Any) -> Any:
        results = run_claims(*args, **kwargs)
        checkout["commit"] = "latercommit"  # the checkout moves while the run is still going
        return results

    monkeypatch.setattr(crl.verify, "_git_commit", lambda: checkout["commit"])
    monkeypatch.setattr(crl.verify, "_run_claims", run_then_check_out)
    out = tmp_path / "v"
    assert (
        _invoke(monkeypatch, Registry.of([ToyRate()]), "--fidelity", "quick", "--out", str(out)).exit_code
        == 0
    )
    markdown = (out / "report.md").read_text()
    assert "git startcommit" in markdown and "latercommit" not in markdown


def test_a_reconstruction_check_is_reported_but_does_not_decide_the_exit_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If this fails, a reconstruction check (C8: it cannot fail on the sphere, so it is no verdict) fails the run
    by its rule's FAIL or its control's PASS, hides them, or sits in the verdict table; or its crash passes."""
    out = tmp_path / "v"
    registry = Registry.of([ToyRate(), ToyFailingCheck()])
    result = _invoke(monkeypatch, registry, "--fidelity", "quick", "--out", str(out))
    assert result.exit_code == 0, result.output
    output = " ".join(result.output.split())
    assert "All 1 claim(s) pass, and every negative control fails as it must." in output
    assert (
        "1 reconstruction check(s) not as expected (not verdicts: the exit status is unaffected): C8 (check "
        "FAIL, control PASS, expected FAIL)" in output
    )
    assert output.index("reconstruction checks (not verdicts") > output.index("C3 Toy rate")
    with sqlite3.connect(out / "results.sqlite") as conn:
        stored = {
            claim: json.loads(r) for claim, r in conn.execute("SELECT claim, result FROM claim_results")
        }
    assert stored["C8"]["role"] == "reconstruction" and stored["C3"]["role"] == "verdict"
    assert stored["C8"]["verdict"] == "FAIL" and stored["C8"]["control"]["verdict"] == "PASS"
    markdown = (out / "report.md").read_text()
    verdicts = markdown[markdown.index("## Verdicts") : markdown.index("## Reconstruction checks")]
    assert "| C3 |" in verdicts and "C8" not in verdicts
    raised = _invoke(monkeypatch, Registry.of([ToyRate(), ToyRaisingCheck()]), "--out", str(tmp_path / "r"))
    assert raised.exit_code == 1
    assert "1 of 2 claim(s) fail the run: C8 (verdict ERROR" in " ".join(raised.output.split())


def test_a_fidelity_other_than_standard_writes_to_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`crl verify --fidelity quick` without --out once replaced make verify's standard report in runs/verify:
    it must write runs/verify-quick and leave runs/verify as it was."""
    monkeypatch.chdir(tmp_path)
    standard = tmp_path / "runs" / "verify"
    standard.mkdir(parents=True)
    (standard / "report.md").write_text("the standard report")
    result = _invoke(monkeypatch, Registry.of([ToyRate()]), "--fidelity", "Quick")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "runs" / "verify-quick" / "report.md").exists()
    assert sorted(p.name for p in standard.iterdir()) == ["report.md"]
    assert (standard / "report.md").read_text() == "the standard report"
