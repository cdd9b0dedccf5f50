"""Tests of the claim contract: statistics, verdict rules, results, figure specs and the claim context."""

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from crl.claims import (
    Claim,
    ClaimContext,
    ClaimResult,
    ControlResult,
    Fidelity,
    FigureSpec,
    Role,
    Statistic,
    Verdict,
    combine_verdicts,
    loglog_figure,
    points,
    verdict_equivalent,
    verdict_no_violations,
)
from crl.claims.budget import part_level
from crl.claims.result import level_sentence
from crl.stats import bound_violations, loglog_slope, mean_se
from crl.sweep import Cell, SweepStore


class Echo(Claim):
    """A minimal claim whose run stores two cells and reports a fixed statistic."""

    id: ClassVar[str] = "C2"
    title: ClassVar[str] = "echo"
    source: ClassVar[str] = "test"
    evidence: ClassVar[str] = "the claims engine"
    statement: ClassVar[str] = "x = 1"
    rule: ClassVar[str] = "CI contains 1"
    parts: ClassVar[int] = 3
    control_description: ClassVar[str] = "x = 2"

    def run(self, ctx: ClaimContext) -> ClaimResult:
        records = ctx.run_cells([Cell({"i": i}, ctx.seed_for(i)) for i in range(2)], _identity)
        stat = Statistic("x", 1.0, 0.9, 1.1)
        return self.result(
            ctx,
            verdict=verdict_equivalent(stat, 1.0),
            statistics=[stat],
            control_verdict=verdict_equivalent(Statistic("x", 2.0, 1.9, 2.1), 1.0),
            control_statistics=[Statistic("x", 2.0, 1.9, 2.1)],
            table=[r.result for r in records],
            reasons=["a reason"],
            slack=0.5,
        )


def _identity(cell: Cell) -> dict[str, Any]:
    return dict(cell.params)


def _result(verdict: Verdict, control: Verdict) -> ClaimResult:
    return ClaimResult(
        claim_id="C1",
        title="t",
        source="s",
        evidence="e",
        statement="st",
        rule="r",
        parts=2,
        level=0.9975,
        fidelity=Fidelity.QUICK,
        verdict=verdict,
        statistics=(),
        control=ControlResult("c", control, reasons=("CI too wide",)),
        reasons=("misfit",),
    )


@pytest.mark.parametrize(
    ("verdict", "control", "problems", "inconclusive"),
    [
        (Verdict.PASS, Verdict.FAIL, [], []),
        (Verdict.FAIL, Verdict.FAIL, ["verdict FAIL"], []),
        (Verdict.ERROR, Verdict.ERROR, ["verdict ERROR", "negative control ERROR, expected FAIL"], []),
        (Verdict.INCONCLUSIVE, Verdict.FAIL, [], ["verdict INCONCLUSIVE: misfit"]),
        (Verdict.PASS, Verdict.PASS, ["negative control PASS, expected FAIL"], []),
        (Verdict.PASS, Verdict.INCONCLUSIVE, [], ["negative control INCONCLUSIVE: CI too wide"]),
    ],
)
def test_only_a_failing_claim_or_a_passing_control_fails_the_run(
    verdict: Verdict, control: Verdict, problems: list[str], inconclusive: list[str]
) -> None:
    """If this fails, `crl verify` could exit 0 with a claim that fails or a control that cannot fail, or exit 1
    on an INCONCLUSIVE verdict (which exits 0 and is listed first with its reasons, docs/theory.md section 7)."""
    result = _result(verdict, control)
    assert result.problems == problems
    assert result.fails_run == bool(problems)
    assert result.inconclusive == inconclusive


def test_violation_rule_and_combination() -> None:
    """If this fails, one violated part of a rule would not make the whole rule fail."""
    holds = bound_violations([0.0, 0.5], [1.0, 1.0])
    broken = bound_violations([0.0, 1.5], [1.0, 1.0])
    assert verdict_no_violations(holds) is Verdict.PASS
    assert verdict_no_violations(broken) is Verdict.FAIL
    assert combine_verdicts(Verdict.PASS, Verdict.PASS) is Verdict.PASS
    assert combine_verdicts(Verdict.PASS, Verdict.INCONCLUSIVE) is Verdict.INCONCLUSIVE
    assert combine_verdicts(Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.PASS) is Verdict.FAIL
    with pytest.raises(ValueError):
        combine_verdicts()


def test_statistics_carry_the_intervals_of_their_sources() -> None:
    """If this fails, a reported statistic would not show the CI its verdict was based on."""
    x = np.geomspace(2, 64, 6)
    fit = loglog_slope(x, 1 / x, 0.01 / x, rng=np.random.default_rng(0), n_boot=200)
    slope = Statistic.from_slope("slope", fit)
    assert (slope.value, slope.ci_low, slope.ci_high, slope.ci_level) == (
        fit.slope,
        fit.ci_low,
        fit.ci_high,
        fit.ci_level,
    )
    count = bound_violations(np.zeros(100), np.ones(100))
    violations = Statistic.from_violations("violations", count)
    assert violations.value == 0.0 and violations.ci_high == pytest.approx(100 * count.rate_upper)
    estimate = mean_se([1.0, 2.0, 3.0, 4.0])
    mean = Statistic.from_mean("mean", estimate, 0.9)
    assert (mean.ci_low, mean.ci_high) == estimate.t_ci(0.9)


def test_result_to_dict_is_plain_json_with_nested_fits() -> None:
    """If this fails, a claim result cannot be stored in results.sqlite (enums, tuples, dataclasses)."""
    x = np.geomspace(2, 64, 5)
    fit = loglog_slope(x, 1 / x, rng=np.random.default_rng(0), n_boot=100)
    figure = loglog_figure("f", "t", "m", "y", points("a", x, 1 / x, fit=fit), theory_slope=-1)
    result = ClaimResult(
        claim_id="C1",
        title="t",
        source="s",
        evidence="e",
        statement="st",
        rule="r",
        parts=1,
        level=0.995,
        fidelity=Fidelity.FULL,
        verdict=Verdict.PASS,
        statistics=(
            Statistic.from_slope("slope", fit),
            Statistic("unidentified", float("nan"), -math.inf, math.inf, 0.995, "no rate"),
        ),
        control=ControlResult("c", Verdict.FAIL),
        figures=(figure,),
        table=({"m": 2, "y": 0.5},),
    )
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["fidelity"] == "full" and data["verdict"] == "PASS" and data["control"]["verdict"] == "FAIL"
    assert data["figures"][0]["points"][0]["fit"]["slope"] == pytest.approx(-1.0)
    assert data["figures"][0]["reference_slopes"] == [-1.0]
    assert (data["parts"], data["level"], data["evidence"], data["reasons"]) == (1, 0.995, "e", [])
    unbounded = data["statistics"][1]
    assert (unbounded["value"], unbounded["ci_low"], unbounded["ci_high"]) == ("nan", "-inf", "inf")


def test_points_turn_errors_into_interval_ends_and_reject_bad_input() -> None:
    """If this fails, figure series with mismatched or non-finite values reach the renderer."""
    series = points("a", [1, 2], [10.0, 20.0], y_err=[1.0, 2.0])
    assert series.y_low == (9.0, 18.0) and series.y_high == (11.0, 22.0)
    with pytest.raises(ValueError, match="one per x"):
        points("a", [1, 2], [1.0])
    with pytest.raises(ValueError, match="NaN"):
        points("a", [1, 2], [1.0, float("nan")])
    with pytest.raises(ValueError, match="not both"):
        points("a", [1], [1.0], y_err=[0.1], y_low=[0.9], y_high=[1.1])
    with pytest.raises(ValueError, match="name"):
        FigureSpec("bad name/", "t", "x", "y", (series,))


def test_context_runs_cells_records_provenance_and_derives_distinct_seeds(tmp_path: Path) -> None:
    """If this fails, a claim cannot tell which run its cells came from, or its seeds collide across keys."""
    with SweepStore(tmp_path / "r.sqlite") as store:
        first = ClaimContext("C2", Fidelity.QUICK, store, seed=7, run_id="run-a", level=part_level(3))
        result = Echo().run(first)
        second = ClaimContext("C2", Fidelity.QUICK, store, seed=7, run_id="run-b", level=part_level(3))
        resumed = Echo().run(second)
    assert result.cell_runs == {"run-a": 2} and resumed.cell_runs == {"run-a": 2}
    assert resumed.run_id == "run-b" and resumed.table == ({"i": 0}, {"i": 1})
    assert (result.claim_id, result.control.description) == ("C2", "x = 2")
    assert result.rule == f"CI contains 1 {level_sentence(3, part_level(3))}"
    assert (
        "each of the claim's 3 parts (intervals, violation counts) and the control at 0.99833" in result.rule
    )
    assert (result.parts, result.level, result.evidence) == (3, part_level(3), "the claims engine")
    assert (result.reasons, result.control.reasons, result.slack) == (("a reason",), (), 0.5)
    assert result.verdict is Verdict.PASS and result.control.verdict is Verdict.FAIL
    assert first.seed_for("a") == second.seed_for("a") != first.seed_for("b")
    other_claim = ClaimContext("C3", Fidelity.QUICK, store, seed=7, run_id="run-a", level=0.99)
    assert other_claim.seed_for("a") != first.seed_for("a")
    assert first.rng("x").standard_normal() == second.rng("x").standard_normal()


def test_fidelity_budgets_follow_the_issue() -> None:
    """If this fails, the report would judge run times against budgets other than 3 min / 20 min / none."""
    assert Fidelity("quick").budget_s == 180.0
    assert Fidelity.STANDARD.budget_s == 1200.0
    assert Fidelity.FULL.budget_s == 7200.0


def test_a_reconstruction_check_fails_the_run_only_when_it_raises() -> None:
    """If this fails, a reconstruction check's FAIL or its control's PASS (outcomes of a rule that cannot fail on
    the sphere: no verdict) would fail the run, go unreported, or a crash of its code would pass."""
    failing = dataclasses.replace(_result(Verdict.FAIL, Verdict.PASS), role=Role.RECONSTRUCTION)
    assert not failing.is_verdict and not failing.fails_run
    assert failing.check_findings == ["check FAIL", "control PASS, expected FAIL"]
    crashed = dataclasses.replace(_result(Verdict.ERROR, Verdict.ERROR), role=Role.RECONSTRUCTION)
    assert crashed.fails_run and crashed.check_findings == []
    verdict = _result(Verdict.FAIL, Verdict.PASS)
    assert verdict.is_verdict and verdict.fails_run and verdict.check_findings == []


def test_the_role_is_stored_and_an_old_stored_result_reads_as_a_verdict() -> None:
    """If this fails, the stored result loses its role, or one stored before roles existed cannot be read back or
    reads as a reconstruction check."""
    stored = dataclasses.replace(_result(Verdict.PASS, Verdict.FAIL), role=Role.RECONSTRUCTION).to_dict()
    assert stored["role"] == "reconstruction" and Role.of_stored(stored) is Role.RECONSTRUCTION
    old = _result(Verdict.PASS, Verdict.FAIL).to_dict()
    del old["role"]
    assert Role.of_stored(old) is Role.VERDICT


def test_a_claim_passes_its_role_into_its_result(tmp_path: Path) -> None:
    """If this fails, a claim declared a reconstruction check comes out of run() as a verdict."""

    class EchoCheck(Echo):
        role: ClassVar[Role] = Role.RECONSTRUCTION

    with SweepStore(tmp_path / "r.sqlite") as store:
        ctx = ClaimContext("C2", Fidelity.QUICK, store, seed=0, run_id="run", level=part_level(3))
        assert EchoCheck().run(ctx).role is Role.RECONSTRUCTION
        assert Echo().run(ctx).role is Role.VERDICT
