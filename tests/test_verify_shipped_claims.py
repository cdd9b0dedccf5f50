"""`crl verify --fidelity quick` end to end on the shipped claims, as `make verify` runs them (CI's check that every
claim of the papers holds at quick fidelity and that every negative control fails)."""

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

SHIPPED = ("C1", "C2", "C3", "C4", "C7", "C8", "C9")


def _verify(out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "crl", "verify", "--fidelity", "quick", "--out", str(out)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)


def test_quick_verify_holds_every_claim_fails_every_control_and_resumes(tmp_path: Path) -> None:
    """If this fails, a claim of [A]/[B] does not hold at quick fidelity, a negative control cannot fail, the report
    misses a part, or a second run into the same folder recomputes cells instead of resuming."""
    out = tmp_path / "verify"
    first = _verify(out)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-4000:]
    with sqlite3.connect(out / "results.sqlite") as conn:
        rows = conn.execute("SELECT claim, verdict, control_verdict, result FROM claim_results").fetchall()
        cells_before = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
    verdicts = {claim: (verdict, control) for claim, verdict, control, _ in rows}
    assert verdicts == {claim: ("PASS", "FAIL") for claim in SHIPPED}
    markdown = (out / "report.md").read_text()
    for claim, _, _, payload in rows:
        result = json.loads(payload)
        assert result["rule"] and result["statistics"] and result["figures"], claim
        assert all(s["ci_low"] <= s["value"] <= s["ci_high"] for s in result["statistics"]), claim
        assert f"## {claim}: {result['title']}" in markdown, claim
        for figure in result["figures"]:
            assert (out / "figures" / f"{claim}_{figure['name']}.png").stat().st_size > 5_000, figure["name"]
    second = _verify(out)
    assert second.returncode == 0, second.stdout[-4000:]
    with sqlite3.connect(out / "results.sqlite") as conn:
        cells_after = conn.execute("SELECT count(*), count(DISTINCT run_id) FROM cells").fetchone()
        runs = conn.execute("SELECT count(*) FROM runs").fetchone()[0]
    assert cells_after == cells_before and runs == 2
