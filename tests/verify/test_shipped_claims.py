"""`crl verify --fidelity quick` end to end on the shipped claims, as `make verify` runs them.

The expected verdicts of every claim and its control at seed 0 live in tests/expected_quick_verdicts.json: a
committed record that changes only with an explanation in the commit, never to make a rule pass
(docs/theory.md section 7). This test is CI's check that the run still gives them, that the report has every
part, that every control is judged at its claim's level, and that a second run resumes instead of recomputing.
"""

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest

from crl.claims import Fidelity, Role
from crl.claims.replay import export_cells, rejudge
from tests.quick_verify import RUN, TIMEOUT_S, command, environment

EXPECTED_FILE = Path(__file__).resolve().parents[1] / "expected_quick_verdicts.json"


def _expected() -> dict[str, dict[str, str]]:
    """Claim id -> {"claim": verdict, "control": verdict}, as committed."""
    data = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    return {claim: dict(verdicts) for claim, verdicts in data["verdicts"].items()}


def _verify(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(out), capture_output=True, text=True, env=environment(), timeout=TIMEOUT_S, check=False
    )


def _exit_code(expected: dict[str, dict[str, str]], roles: dict[str, Role]) -> int:
    """The exit status the expected verdicts imply: 1 if a claim FAILs or a control PASSes, else 0; a
    reconstruction check (C8: no verdict) counts only when it ERRORs."""

    def fails(claim: str, verdicts: dict[str, str]) -> bool:
        if roles.get(claim, Role.VERDICT) is Role.RECONSTRUCTION:
            return "ERROR" in verdicts.values()
        return verdicts["claim"] in ("FAIL", "ERROR") or verdicts["control"] in ("PASS", "ERROR")

    return 1 if any(fails(claim, verdicts) for claim, verdicts in expected.items()) else 0


def _check_report(out: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """Every stored result has its rule, statistics, figures and level, and the report shows its section."""
    markdown = (out / "report.md").read_text()
    opening = markdown[markdown.index("## Verdicts") : markdown.index("## Files, run and references")]
    verdict_table = opening.split("## Reconstruction checks")[0]
    for claim, _, _, payload in rows:
        result: dict[str, Any] = json.loads(payload)
        is_verdict = Role.of_stored(result) is Role.VERDICT
        assert (f"| {claim} |" in verdict_table) == is_verdict, f"{claim}: verdict table vs role"
        assert f"| {claim} |" in opening, f"{claim} is in neither the verdict table nor the checks'"
        assert result["rule"] and result["statistics"] and result["figures"], claim
        assert result["evidence"] and result["parts"] >= 1, claim
        # an unbounded end is stored as the string "inf" or "-inf" (ClaimResult.to_dict): float() reads it back
        assert all(
            float(s["ci_low"]) <= float(s["value"]) <= float(s["ci_high"]) for s in result["statistics"]
        ), claim
        levels = {s["ci_level"] for s in result["control"]["statistics"]}
        assert levels <= {result["level"]}, f"{claim}: control judged at {levels}, claim at {result['level']}"
        assert f"## {claim}: {result['title']}" in markdown, claim
        for figure in result["figures"]:
            assert (out / "figures" / f"{claim}_{figure['name']}.png").stat().st_size > 5_000, figure["name"]


def test_quick_verify_gives_the_committed_verdicts_and_resumes(request: pytest.FixtureRequest) -> None:
    """If this fails, a verdict of the quick run differs from tests/expected_quick_verdicts.json (explain the
    change in the commit that updates the file, never bend a rule), the report misses a part, a control is judged
    at another level than its claim, or a second run into the same folder recomputes cells instead of resuming.
    The first run was started in the background at collection (tests/quick_verify.py)."""
    expected = _expected()
    background = request.config.stash[RUN]
    out = background.out
    first = background.result()
    with sqlite3.connect(out / "results.sqlite") as conn:
        rows = conn.execute("SELECT claim, verdict, control_verdict, result FROM claim_results").fetchall()
        cells_before = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
    roles = {claim: Role.of_stored(json.loads(payload)) for claim, _, _, payload in rows}
    assert roles.get("C8") in (None, Role.RECONSTRUCTION), "C8 is a reconstruction check, not a verdict"
    assert first.returncode == _exit_code(expected, roles), first.stdout[-4000:] + first.stderr[-4000:]
    verdicts = {claim: {"claim": verdict, "control": control} for claim, verdict, control, _ in rows}
    assert verdicts == expected, first.stdout[-4000:]
    _check_report(out, rows)
    second = _verify(out)
    assert second.returncode == first.returncode, second.stdout[-4000:]
    with sqlite3.connect(out / "results.sqlite") as conn:
        cells_after = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert cells_after == cells_before and runs == 2
    for claim in ("C4", "C6"):
        _check_rejudged(out, claim, rows)


def _check_rejudged(out: Path, claim: str, rows: list[tuple[str, str, str, str]]) -> None:
    """The claim's cells exported as a table and re-judged from it (crl power --export-cells / --rejudge) give the
    verdicts and statistics the run stored: the committed table of a run carries everything its verdict needs."""
    table = out / f"{claim}.jsonl.gz"
    assert export_cells(out, claim, table) > 0
    again = rejudge(table, claim, Fidelity.QUICK, 0)
    stored = next(json.loads(payload) for name, _, _, payload in rows if name == claim)
    assert (
        str(again.verdict) == stored["verdict"] and str(again.control.verdict) == stored["control"]["verdict"]
    )
    for mine, theirs in zip(again.statistics, stored["statistics"], strict=True):
        assert (mine.value, mine.ci_low, mine.ci_high) == pytest.approx(
            (float(theirs["value"]), float(theirs["ci_low"]), float(theirs["ci_high"])), rel=1e-12
        ), (claim, mine.name)
