"""``crl advise`` end to end on a tiny synthetic truth: plan, pilot, fit, advice, files, resume, bad input."""

import json
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.advise.validate import load_session
from crl.commands import app

CONFIG = """
[data]
source = "synthetic"
truth = "vmf"
dim = 4
kappa = 5.0
n_train = 512
batch_size = 16

[model]
encoder = "mlp"
hidden = [8]
embedding_dim = 4

[loss]
negatives = "shared_pool"
n_negatives = 8
tau = 0.2

[optim]
lr = 0.01
total_steps = 10
warmup_steps = 2
"""

ARGS = [
    "--budget",
    "1000000",
    "--seeds",
    "3",
    "--levels",
    "3",
    "--fractions",
    "0.05,0.3,1",
    "--eval-queries",
    "200",
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.toml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


def _stored_runs(out: Path) -> list[tuple[int, str]]:
    with sqlite3.connect(out / "advise.sqlite") as connection:
        return connection.execute("select count(*), group_concat(distinct run_id) from cells").fetchall()


def test_dry_run_shows_design_and_wall_time_and_writes_nothing(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "advise"
    result = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--out", str(out), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "pilot: n in {64, 128, 256}" in result.output
    assert "timing probe" in result.output and "min for the pilot" in result.output
    assert not out.exists()


@pytest.mark.slow
def test_advise_runs_end_to_end_and_resumes(config: Path, tmp_path: Path, one_thread: None) -> None:
    out = tmp_path / "advise"
    result = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "pilot and check cells: 27/27" in result.output, (
        "a log must show the pilot's progress line by line"
    )
    document = json.loads((out / "advice.json").read_text(encoding="utf-8"))
    assert document["metric"] == "excess_risk" and document["n_full"] == 512 and document["m_now"] == 8
    assert len(document["pilot"]["points"]) == 9 and len(document["fit"]["replicates"]) == 3
    assert document["advice"]["recommendation"] in result.output.replace("\n", " ") or "advice" in document
    assert {"m_star", "gain_double_m", "gain_double_n", "alpha", "supported"} <= set(document["advice"])
    assert document["check"] is None
    assert (out / "advice.png").stat().st_size > 10_000
    first = _stored_runs(out)
    assert first[0][0] == 9 * 3
    session = load_session(out)
    assert session.fit.full is not None and session.fit.full.as_dict() == document["fit"]["full"]
    assert session.reach["pilot_n_max"] == 256 and session.regime == document["regime"]
    again = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert _stored_runs(out) == first, "a rerun must recompute nothing and store nothing twice"


def test_too_small_budget_is_one_line_and_exit_2(config: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["advise", str(config), "--budget", "10", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "--budget 10 processed samples is too small" in result.output
    assert "Traceback" not in result.output


def test_unknown_metric_is_named(config: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["advise", str(config), *ARGS, "--metric", "knn_error", "--dry-run"])
    assert result.exit_code == 2
    assert "--metric 'knn_error' is not available" in result.output
