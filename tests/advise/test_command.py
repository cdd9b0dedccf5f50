"""``crl advise`` end to end on a tiny synthetic truth: plan, pilot, answer, files, resume, bad input."""

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app

ARGS = ["--seeds", "3", "--epochs", "1", "--eval-queries", "200"]


def _stored_runs(out: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(out / "advise.sqlite") as connection:
        return connection.execute("select count(*), group_concat(distinct run_id) from cells").fetchall()


def test_dry_run_states_the_cells_and_the_wall_time_and_writes_nothing(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "advise"
    result = CliRunner().invoke(
        app, ["advise", str(config), *ARGS, "--out", str(out), "--dry-run", "--check"]
    )
    assert result.exit_code == 0, result.output
    assert "pilot cells (n, m): (512, 4), (256, 8), (256, 4), (256, 2), (128, 4) x 3 seeds" in result.output
    assert "check cells: (1,024, 8), (512, 16)" in result.output
    assert "timing probe" in result.output and "for the pilot's cells" in result.output
    assert (
        "to make the data every cell reads ready" in result.output and "in all with the data" in result.output
    )
    assert not out.exists()


@pytest.mark.slow
def test_advise_runs_end_to_end_and_resumes(config: Path, tmp_path: Path, one_thread: None) -> None:
    out = tmp_path / "advise"
    result = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--out", str(out), "--check"])
    assert result.exit_code == 0, result.output
    assert "cells: 21/21" in result.output, "a log must show the cells' progress line by line"
    document = json.loads((out / "advice.json").read_text(encoding="utf-8"))
    answer = document["answer"]
    assert next(iter(document)) == "answer" and next(iter(answer)) == "sentence"
    assert answer["sentence"] in result.output.replace("\n", " ")
    assert answer["double"] in ("m", "n") and answer["decided"] == (answer["low"] > 0 or answer["high"] < 0)
    assert answer["recommendation"] in ("m", "n", "neither")
    assert (answer["p_right"] is None) == (answer["recommendation"] == "neither")
    assert answer["p_right"] is None or 0.5 <= answer["p_right"] <= 1.0
    assert (
        "the whole mlp model" in answer["sentence"]
        and "heads on locked features (LiT-style)" in answer["sentence"]
    )
    assert "Baseline: the untrained model the pilot's runs start from scores" in answer["sentence"]
    assert "baseline beside the cells: the untrained model" in result.output
    assert (document["n"], document["m"], document["metric"]) == (512, 8, "excess_risk")
    assert document["recipe"]["128"] == {"batch": 16, "steps": 8, "epochs": 1}
    assert answer["check"] is not None and len(document["cells"]) == 7
    assert (out / "advice.png").stat().st_size > 10_000
    first = _stored_runs(out)
    assert first[0][0] == 7 * 3
    again = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--out", str(out), "--check"])
    assert again.exit_code == 0, again.output
    assert _stored_runs(out) == first, "a rerun must recompute nothing and store nothing twice"
    assert json.loads((out / "advice.json").read_text(encoding="utf-8")) == document


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--set", "loss.n_negatives=6"], "m = 6: the pilot halves m twice"),
        (["--set", "data.n_train=200"], "n = 200: the pilot halves n twice"),
        (["--seeds", "1"], "--seeds 1 must be >= 2"),
        (["--epochs", "0"], "--epochs 0 must be >= 1"),
        (["--metric", "knn_error"], "--metric 'knn_error' is not available"),
        (["--workers", "0"], "--workers 0 must be >= 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_argument_and_exit_2(
    config: Path, tmp_path: Path, extra: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app, ["advise", str(config), *ARGS, *extra, "--dry-run", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")
    assert "Traceback" not in result.output
