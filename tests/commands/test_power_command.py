"""``crl power``: the power tool beside ``crl verify`` (C6's per-seed table re-judged, bad arguments refused)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.claims import replay
from crl.claims.context import Fidelity
from crl.claims.gates import shortfalls
from crl.commands import app

PILOT = Path(__file__).resolve().parents[2] / "results" / "c6" / "pilot_6121_full.jsonl.gz"
FULL_SEED_0 = PILOT.with_name("full_0.jsonl.gz")


def test_a_committed_table_is_rejudged_from_the_command_line() -> None:
    """If this fails, `crl power --claim C6 --rejudge` does not print what crl.claims.replay judges from the
    committed pilot cells (the claim's own rule on the table's cells, with the run's seed)."""
    result = CliRunner().invoke(
        app,
        ["power", "--claim", "C6", "--rejudge", str(PILOT), "--fidelity", "full", "--run-seed", "6121"],
    )
    assert result.exit_code == 0, result.output
    expected = replay.verdict_lines(replay.rejudge(PILOT, "C6", Fidelity.FULL, 6121))
    assert result.output.splitlines()[: len(expected)] == expected


def test_a_rejudged_pass_whose_gate_failed_says_so() -> None:
    """If this fails, re-judging C6's cells of the timed full run at seed 0 (a PASS, DD 0.543 [0.104, 0.982])
    prints a plain PASS, hiding that its gate gave P(FAIL) 0 at DD = -0.2."""
    result = CliRunner().invoke(
        app,
        ["power", "--claim", "C6", "--rejudge", str(FULL_SEED_0), "--fidelity", "full", "--run-seed", "0"],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "C6: PASS; this rule was not shown able to FAIL here (DD: P(FAIL) 0.000 [0.000, 0.018] at -0.2"
    )
    assert "| 0.5426 | [0.1037" in result.output


@pytest.mark.parametrize("fidelity", ["standard", "full"])
def test_c6s_recorded_gate_is_the_one_its_pilot_table_gives(fidelity: str) -> None:
    """If this fails, the P(FAIL) that labels a C6 PASS "not shown able to FAIL" (crl.claims.gates) is not what
    `crl power TABLE --claim C6 --gate` computes from the committed pilot cells on that fidelity's grid (full: the
    registered gate of docs/claims/C6.md; standard: the same cells at n <= 256)."""
    result = CliRunner().invoke(
        app, ["power", str(PILOT), "--claim", "C6", "--fidelity", fidelity, "--gate", "--seeds", "24"]
    )
    assert result.exit_code == 0, result.output
    rows = [
        line.split(" | ") for line in result.output.splitlines() if line.startswith(("| 0 (32)", "| 1 (32)"))
    ]
    assert len(rows) == 2 and all(row[-1] == "fails |" for row in rows)
    (recorded,) = shortfalls("C6", Fidelity(fidelity))
    assert all(recorded.p_fail.startswith(row[3]) for row in rows)


def test_bad_arguments_are_one_line_naming_the_option(tmp_path: Path) -> None:
    """If this fails, an unknown claim, two C6 actions at once or a missing run folder give a traceback instead of
    exit status 2 with the option named."""
    runner = CliRunner()
    unknown = runner.invoke(app, ["power", str(tmp_path), "--claim", "C3"])
    assert unknown.exit_code == 2 and "--claim" in unknown.output
    both = runner.invoke(app, ["power", str(tmp_path), "--claim", "C6", "--gate", "--choose-q"])
    assert both.exit_code == 2 and "one of --choose-q and --gate" in both.output
    missing = runner.invoke(app, ["power", "--claim", "C5"])
    assert missing.exit_code == 2 and "RUN_DIR" in missing.output
    other = runner.invoke(app, ["power", str(tmp_path / "missing"), "--claim", "C6", "--gate"])
    assert other.exit_code == 2 and "results.sqlite" in other.output
    wrong = runner.invoke(
        app, ["power", str(PILOT.parents[1] / "c5" / "full_3931.jsonl.gz"), "--claim", "C6", "--gate"]
    )
    assert wrong.exit_code == 2 and "holds cells of C5" in wrong.output
