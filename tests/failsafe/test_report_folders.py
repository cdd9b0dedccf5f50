"""One writer per results folder, and no report replaced by an emptier one, for crl verify, crl experiment and
crl advise.

If these fail, ``crl verify --out`` would replace an mstar experiment's report, ``--report-only`` with the wrong
``--fidelity`` or ``--data`` (or a store whose ``cells`` table was dropped) would write an empty report over a
good one with exit 0, a report of fewer cells would replace a fuller one without a word, or two runs would write
into one folder at once.
"""

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import crl.experiments.mstar.experiment as mstar_experiment
import crl.experiments.mstar.report as mstar_report
import crl.experiments.mstar.summary as mstar_summary
from crl._lock import KIND_FILE, FolderLock, check_report_items
from crl.commands import app
from crl.sweep import SweepStore
from tests.advise.conftest import CONFIG
from tests.advise.test_command import ARGS

GOOD_REPORT = "# m*(n) fashion tiny\n\n40 cells\n"


@pytest.fixture
def mstar_folder(tmp_path: Path) -> Path:
    """A finished mstar experiment's folder, as crl experiment leaves it: its store, report and figures."""
    folder = tmp_path / "mstar"
    folder.mkdir()
    with SweepStore(folder / "results.sqlite"):
        pass
    (folder / "report.md").write_text(GOOD_REPORT, encoding="utf-8")
    (folder / "mstar.png").write_bytes(b"\x89PNG")
    return folder


@pytest.fixture
def no_features(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The locked features taken as ready, so a report-only run needs no data set."""
    monkeypatch.setattr(mstar_experiment, "prepare_features", lambda *args: 0)
    yield


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_verify_refuses_a_folder_holding_an_mstar_experiment(mstar_folder: Path) -> None:
    """crl verify --out over an mstar folder replaced its report.md with the claims' report."""
    code, output = _run("verify", "--fidelity", "quick", "--claims", "C3", "--out", str(mstar_folder))
    assert code == 2 and "holds the results of crl experiment mstar" in output, output
    assert (mstar_folder / "report.md").read_text(encoding="utf-8") == GOOD_REPORT


def test_report_only_covering_no_cell_is_refused(mstar_folder: Path, no_features: None) -> None:
    """--report-only with a --fidelity whose cells the store does not hold wrote an empty report over one of 40
    cells, exit 0."""
    (mstar_folder / KIND_FILE).write_text(json.dumps({"command": "crl experiment mstar", "report_items": 40}))
    args = ["experiment", "mstar", "--data", "fashion", "--fidelity", "tiny", "--report-only"]
    code, output = _run(*args, "--out", str(mstar_folder))
    assert code == 2 and "would cover no cells" in output, output
    assert (mstar_folder / "report.md").read_text(encoding="utf-8") == GOOD_REPORT


def test_a_report_of_fewer_cells_keeps_the_fuller_one_aside(
    mstar_folder: Path, no_features: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--report-only --n-max (12 of the 40 cells) replaced the report of 40 cells without a word."""
    monkeypatch.setattr(mstar_experiment, "stored_records", lambda *args: [object()] * 12)
    monkeypatch.setattr(mstar_experiment, "scrl_overlaps", lambda *args: [])
    monkeypatch.setattr(mstar_summary, "summarise", lambda *args, **kwargs: None)
    monkeypatch.setattr(mstar_report, "render_figures", lambda *args, **kwargs: [])
    monkeypatch.setattr(mstar_report, "markdown_report", lambda *args, **kwargs: "# 12 cells\n")
    (mstar_folder / KIND_FILE).write_text(json.dumps({"command": "crl experiment mstar", "report_items": 40}))
    args = ["experiment", "mstar", "--data", "fashion", "--fidelity", "tiny", "--report-only"]
    code, output = _run(*args, "--out", str(mstar_folder))
    assert code == 0, output
    assert "warning: this report covers 12 cells, the one before 40" in output
    assert (mstar_folder / "report.40-cells.md").read_text(encoding="utf-8") == GOOD_REPORT
    assert (mstar_folder / "report.md").read_text(encoding="utf-8") == "# 12 cells\n"


def test_a_store_whose_cells_table_was_dropped_gives_no_empty_report(
    mstar_folder: Path, no_features: None
) -> None:
    """A results.sqlite without its cells table (recreated empty on open) gave an empty report, exit 0."""
    args = ["experiment", "mstar", "--data", "fashion", "--fidelity", "tiny", "--report-only"]
    code, output = _run(*args, "--out", str(mstar_folder))
    assert code == 2 and "would cover no cells" in output, output
    assert (mstar_folder / "report.md").read_text(encoding="utf-8") == GOOD_REPORT


def test_a_second_experiment_on_a_folder_in_use_stops_at_once(mstar_folder: Path) -> None:
    """Two crl experiment mstar runs on one folder both ran, interleaving their cells and reports."""
    with FolderLock(mstar_folder, command="crl experiment mstar"):
        code, output = _run(
            "experiment", "mstar", "--data", "fashion", "--fidelity", "tiny", "--out", str(mstar_folder)
        )
    assert code == 2 and "is in use by crl experiment mstar" in output, output


def test_a_second_advise_on_a_folder_in_use_stops_at_once(tmp_path: Path) -> None:
    """Two crl advise runs on one folder both ran their pilots into one store."""
    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG, encoding="utf-8")
    out = tmp_path / "advise"
    with FolderLock(out, command="crl advise"):
        code, output = _run("advise", str(config), *ARGS, "--out", str(out))
    assert code == 2 and "is in use by crl advise" in output, output
    assert not (out / "advise.sqlite").exists()


def test_a_report_covering_fewer_items_is_reported_and_none_is_refused(tmp_path: Path) -> None:
    """The counts behind the rules: no item is refused and leaves the record alone; fewer than the last report
    return its count (the command keeps that report aside); as many or more return None."""
    assert check_report_items(tmp_path, 40, "cells") is None
    with pytest.raises(ValueError, match="would cover no cells"):
        check_report_items(tmp_path, 0, "cells")
    assert check_report_items(tmp_path, 39, "cells") == 40
    assert check_report_items(tmp_path, 39, "cells") is None
    assert check_report_items(tmp_path, 41, "cells") is None
    assert json.loads((tmp_path / KIND_FILE).read_text())["report_items"] == 41


@pytest.mark.slow  # two verify runs of real claims: 46 s under load
def test_verify_of_fewer_claims_keeps_the_fuller_report_aside(tmp_path: Path) -> None:
    """crl verify --claims C3 into a folder whose report covered 9 claims replaced it by one of 1, silently."""
    out = tmp_path / "verify"
    out.mkdir()
    (out / "report.md").write_text("# nine claims\n", encoding="utf-8")
    (out / KIND_FILE).write_text(json.dumps({"command": "crl verify", "report_items": 9}))
    code, output = _run("verify", "--fidelity", "quick", "--claims", "C8", "--out", str(out))
    assert code == 0, output
    assert "warning: this report covers 1 claims, the one before 9" in output, output
    assert (out / "report.9-claims.md").read_text(encoding="utf-8") == "# nine claims\n"
    assert "C8" in (out / "report.md").read_text(encoding="utf-8")
