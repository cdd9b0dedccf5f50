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

from tests.quick_verify import RUN, TIMEOUT_S, command, environment

EXPECTED_FILE = Path(__file__).with_name("expected_quick_verdicts.json")


def _expected() -> dict[str, dict[str, str]]:
    """Claim id -> {"claim": verdict, "control": verdict}, as committed."""
    data = json.loads(EXPECTED_FILE.read_text(encoding="utf-8"))
    return {claim: dict(verdicts) for claim, verdicts in data["verdicts"].items()}


def _verify(out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(out), capture_output=True, text=True, env=environment(), timeout=TIMEOUT_S, check=False
    )


def _exit_code(expected: dict[str, dict[str, str]]) -> int:
    """The exit status the expected verdicts imply: 1 if a claim FAILs or a control PASSes, else 0."""
    fails = any(
        v["claim"] in ("FAIL", "ERROR") or v["control"] in ("PASS", "ERROR") for v in expected.values()
    )
    return 1 if fails else 0


def _check_report(out: Path, rows: list[tuple[str, str, str, str]]) -> None:
    """Every stored result has its rule, statistics, figures and level, and the report shows its section."""
    markdown = (out / "report.md").read_text()
    for claim, _, _, payload in rows:
        result: dict[str, Any] = json.loads(payload)
        assert result["rule"] and result["statistics"] and result["figures"], claim
        assert result["evidence"] and result["parts"] >= 1, claim
        assert all(s["ci_low"] <= s["value"] <= s["ci_high"] for s in result["statistics"]), claim
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
    assert first.returncode == _exit_code(expected), first.stdout[-4000:] + first.stderr[-4000:]
    with sqlite3.connect(out / "results.sqlite") as conn:
        rows = conn.execute("SELECT claim, verdict, control_verdict, result FROM claim_results").fetchall()
        cells_before = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
    verdicts = {claim: {"claim": verdict, "control": control} for claim, verdict, control, _ in rows}
    assert verdicts == expected, first.stdout[-4000:]
    _check_report(out, rows)
    second = _verify(out)
    assert second.returncode == first.returncode, second.stdout[-4000:]
    with sqlite3.connect(out / "results.sqlite") as conn:
        cells_after = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert cells_after == cells_before and runs == 2
