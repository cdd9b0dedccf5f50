"""``crl power``: the power tool beside ``crl verify`` (C6's per-seed table re-judged, bad arguments refused)."""

from pathlib import Path

from typer.testing import CliRunner

from crl.commands import app

PILOT = Path(__file__).resolve().parents[2] / "results" / "c6" / "pilot_6121_full.csv"


def test_c6_pilot_table_is_rejudged_from_the_command_line() -> None:
    """If this fails, `crl power --claim C6 --judge-table` no longer re-judges the committed pilot table with the
    checkout's rule: at q = 0.2 its DD is 0.2618, INCONCLUSIVE (docs/claims/C6.md, revision 5's pilot)."""
    result = CliRunner().invoke(app, ["power", "--claim", "C6", "--judge-table", str(PILOT), "--q", "0.2"])
    assert result.exit_code == 0, result.output
    assert "| claim | INCONCLUSIVE | 0.2618 |" in result.output


def test_bad_arguments_are_one_line_naming_the_option(tmp_path: Path) -> None:
    """If this fails, an unknown claim, two C6 actions at once or a missing run folder give a traceback instead of
    exit status 2 with the option named."""
    runner = CliRunner()
    unknown = runner.invoke(app, ["power", str(tmp_path), "--claim", "C3"])
    assert unknown.exit_code == 2 and "--claim" in unknown.output
    both = runner.invoke(app, ["power", str(tmp_path), "--claim", "C6", "--gate", "--choose-q"])
    assert both.exit_code == 2 and "at most one" in both.output
    missing = runner.invoke(app, ["power", "--claim", "C5"])
    assert missing.exit_code == 2 and "RUN_DIR" in missing.output
