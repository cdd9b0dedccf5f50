"""``crl power``: the power tool beside ``crl verify`` (C6's per-seed table re-judged, bad arguments refused)."""

from pathlib import Path

from typer.testing import CliRunner

from crl.claims import replay
from crl.claims.context import Fidelity
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
    """If this fails, re-judging C6's cells of the timed full run at seed 0 (a PASS; by revision 6's band DD 0.556
    [0.179, 0.934])
    prints a plain PASS, hiding that the one power method gave P(FAIL) 0.077 at DD = -0.2 at its 64 seeds."""
    result = CliRunner().invoke(
        app,
        ["power", "--claim", "C6", "--rejudge", str(FULL_SEED_0), "--fidelity", "full", "--run-seed", "0"],
    )
    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        "C6: PASS; this rule was not shown able to FAIL here (DD: P(FAIL) 0.077 [0.053, 0.108] at -0.2"
    )
    assert "| 0.5563 | [0.1786" in result.output


def test_the_power_table_is_printed_from_the_command_line() -> None:
    """If this fails, `crl power TABLE --claim C6` does not print the one power method's table on the table's two
    halves (one row per seed set for the part and for the control, at the design's seeds)."""
    result = CliRunner().invoke(
        app,
        ["power", str(PILOT), "--claim", "C6", "--fidelity", "standard", "--seeds", "32", "--resamples", "4"],
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith(("| C6 DD", "| control: C6"))]
    assert len(rows) == 4 and "Design: 32 seeds; 4 synthetic designs" in result.output


def test_bad_arguments_are_one_line_naming_the_option(tmp_path: Path) -> None:
    """If this fails, an unknown claim, --choose-q off C6, a missing source or a table of another claim give a
    traceback instead of exit status 2 with the option named."""
    runner = CliRunner()
    unknown = runner.invoke(app, ["power", str(tmp_path), "--claim", "C11"])
    assert unknown.exit_code == 2 and "claim='C11'" in unknown.output
    off_c6 = runner.invoke(app, ["power", str(tmp_path), "--claim", "C5", "--choose-q"])
    assert off_c6.exit_code == 2 and "--claim C6" in off_c6.output
    missing = runner.invoke(app, ["power", "--claim", "C5"])
    assert missing.exit_code == 2 and "SOURCES" in missing.output
    other = runner.invoke(app, ["power", str(tmp_path / "missing"), "--claim", "C6"])
    assert other.exit_code == 2 and "results.sqlite" in other.output
    wrong = runner.invoke(
        app, ["power", str(PILOT.parents[1] / "c5" / "full_3931.jsonl.gz"), "--claim", "C6"]
    )
    assert wrong.exit_code == 2 and "holds cells of C5" in wrong.output
