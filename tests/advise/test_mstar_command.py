"""``crl advise --mstar``, ``--mstar-truth`` and ``crl advise-check`` end to end on a tiny synthetic truth: the
plan stated first, the truth grid by the pilot's own cells, resumed without recomputing, the check's Markdown, bad
input as one line."""

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app

ARGS = ["--seeds", "3", "--epochs", "1", "--eval-queries", "100"]


def _cells(out: Path) -> int:
    with sqlite3.connect(out / "advise.sqlite") as connection:
        return int(connection.execute("select count(*) from cells").fetchone()[0])


def test_the_truth_dry_run_states_its_grid_and_writes_nothing(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "truth"
    result = CliRunner().invoke(
        app, ["advise", str(config), *ARGS, "--mstar-truth", "128,64", "--out", str(out), "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    text = result.output.replace("\n", " ")
    assert "at n = 64, 128, every power-of-two m below n and m = n: 15 cells x 3 seeds (first 0)" in text
    assert "CPU-h" in text and not out.exists()


def test_a_resumed_grid_is_estimated_for_the_runs_it_still_lacks(
    config: Path, tmp_path: Path, one_thread: None
) -> None:
    """The plan's wall time counts only the cell runs OUT's store lacks, and says how many it holds."""
    out = tmp_path / "truth"
    first = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--mstar-truth", "32", "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert _cells(out) == 3 * 6

    def files() -> dict[str, str]:
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in sorted(out.iterdir())}

    before = files()
    resumed = CliRunner().invoke(
        app, ["advise", str(config), *ARGS, "--mstar-truth", "32,64", "--out", str(out), "--dry-run"]
    )
    assert files() == before, "a dry run must not write to the folder it prices"
    assert resumed.exit_code == 0, resumed.output
    text = resumed.output.replace("\n", " ")
    assert "(a resume: 18 of 39 cell runs are in" in text and "the estimate is for the 21 left)" in text
    fresh = CliRunner().invoke(
        app,
        ["advise", str(config), *ARGS, "--mstar-truth", "32,64", "--out", str(tmp_path / "new"), "--dry-run"],
    )
    assert fresh.exit_code == 0 and "a resume" not in fresh.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--mstar-truth", "8k"], "--mstar-truth '8k': give comma-separated integers"),
        (["--mstar-truth", "16,64"], "give distinct n >= 32"),
        (["--mstar-truth", "64,64"], "give distinct n >= 32"),
        (["--mstar-truth", "64", "--seeds", "2"], "--seeds 2 must be >= 3 for --mstar-truth"),
        (["--mstar-truth", "64", "--executor", "spark"], "--executor 'spark' is not known"),
        (["--mstar-truth", "64", "--mstar-scale", "loud"], "--mstar-scale 'loud': give one of error, score"),
        (["--mstar", "--mstar-scale", "score"], "--mstar-scale score needs a rate metric"),
        (["--mstar-scale", "score"], "--mstar-scale applies to --mstar and --mstar-truth"),
    ],
)
def test_bad_truth_input_is_one_line_naming_the_option(
    config: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    result = CliRunner().invoke(app, ["advise", str(config), *ARGS, *extra, "--out", str(tmp_path / "t")])
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ") and "Traceback" not in result.output


@pytest.mark.slow
def test_predict_measure_and_score_end_to_end(config: Path, tmp_path: Path, one_thread: None) -> None:
    runner = CliRunner()
    pilot, truth, report = tmp_path / "pilot", tmp_path / "truth", tmp_path / "check.md"
    result = runner.invoke(
        app, ["advise", str(config), *ARGS, "--mstar", "--set", "data.n_train=1024", "--out", str(pilot)]
    )
    assert result.exit_code == 0, result.output
    assert "m* pilot at n = 32, 64, 128" in result.output
    measured = runner.invoke(
        app,
        ["advise", str(config), *ARGS, "--mstar-truth", "128,1024", "--out", str(truth), "--workers", "2"],
    )
    assert measured.exit_code == 0, measured.output
    document = json.loads((truth / "truth.json").read_text(encoding="utf-8"))
    assert set(document["truth"]) == {"128", "1024"} and document["seeds"] == [0, 1, 2]
    assert set(document["truth"]["1024"]["fixed"]) == {"0.01", "0.02", "0.05"}
    assert (
        set(document["slopes"]) == {"band", "1%", "2%", "5%"}
        and "slope of log m* on log n" in measured.output
    )
    assert _cells(truth) == 3 * (8 + 11)
    again = runner.invoke(
        app, ["advise", str(config), *ARGS, "--mstar-truth", "128,1024", "--out", str(truth)]
    )
    assert again.exit_code == 0 and _cells(truth) == 3 * (8 + 11), "a rerun must recompute nothing"
    assert "(a resume: 57 of 57 cell runs are in" in again.output.replace("\n", " ")
    assert json.loads((truth / "truth.json").read_text(encoding="utf-8")) == document
    scored = runner.invoke(
        app, ["advise-check", str(pilot), "--truth", str(truth), "--data", "toy", "--out", str(report)]
    )
    assert scored.exit_code == 0, scored.output
    text = report.read_text(encoding="utf-8")
    assert "| SSCRL | 1,024 -> 1,024 | 32, 64, 128 |" in text and "**SSCRL** (1 points)" in text
    assert "## m*(n) on toy" in text and "excess_risk, no rate of a score: no m_q table" in text
    twice = runner.invoke(
        app, ["advise-check", str(pilot), "--truth", str(truth), "--truth", str(truth), "--data", "toy"]
    )
    assert twice.exit_code == 2 and "a second truth folder of regime 'shared'" in twice.output
    bare = runner.invoke(app, ["advise-check", str(pilot), "--data", "toy"])
    assert bare.exit_code == 2 and "--truth: give the truth folder of each regime" in bare.output
