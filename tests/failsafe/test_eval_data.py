"""``crl eval`` on a text run trained on a relative ``[data] path``, run from another folder or after the file
changed.

If these fail, crl eval would score another file's test split than the run was trained on (from another folder:
65 queries instead of 67, nDCG@10 0.977 instead of 0.868, exit 0), because data.json held no hash of the pairs
and no absolute path of the file.
"""

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crl.commands import app
from crl.train.trainer import RunResult
from tests.train.helpers import TEXT_PAIRS, fit, tiny_text_config


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> RunResult:
    """A tiny text run trained from ``tmp_path`` on ``[data] path = "pairs.jsonl"`` (relative)."""
    monkeypatch.chdir(tmp_path)
    return fit(tiny_text_config(tmp_path, "relative", data={"path": "pairs.jsonl"}))


def _scored_queries(run_dir: Path) -> tuple[int, int, str]:
    """crl eval of ``run_dir``: (exit status, queries scored or -1, output)."""
    result = CliRunner().invoke(app, ["eval", str(run_dir), "--out", str(run_dir / "eval-test.json")])
    if result.exit_code != 0:
        return result.exit_code, -1, result.output
    return 0, json.loads((run_dir / "eval-test.json").read_text())["n_queries"], result.output


def test_data_json_records_the_absolute_file_and_its_sha256(run: RunResult, tmp_path: Path) -> None:
    """data.json stored "sha256": "" for a text source and no file at all."""
    recorded = json.loads((run.run_dir / "data.json").read_text())
    expected = hashlib.sha256((tmp_path / "pairs.jsonl").read_bytes()).hexdigest()
    assert recorded["file"] == {"path": str((tmp_path / "pairs.jsonl").resolve()), "sha256": expected}
    assert all(array["sha256"] for array in recorded["arrays"])


def test_eval_from_another_folder_scores_the_file_the_run_was_trained_on(
    run: RunResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From a folder holding another pairs.jsonl, crl eval read that file's test split, exit 0."""
    code, here, output = _scored_queries(run.run_dir)
    assert code == 0, output
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = [{"query": q, "positive": p} for q, p in TEXT_PAIRS[:-12]]
    (elsewhere / "pairs.jsonl").write_text("".join(json.dumps(pair) + "\n" for pair in other))
    monkeypatch.chdir(elsewhere)
    code, there, output = _scored_queries(run.run_dir)
    assert code == 0, output
    assert there == here


def test_eval_refuses_a_file_changed_since_training(run: RunResult, tmp_path: Path) -> None:
    """A pairs file edited after training gave another test split, scored without a word, exit 0."""
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(pairs.read_text().splitlines(keepends=True)[:-6]))
    code, _, output = _scored_queries(run.run_dir)
    assert code == 2
    assert "not what it was trained on" in output and "sha256" in output


def test_eval_refuses_a_run_whose_data_json_is_gone(run: RunResult, tmp_path: Path) -> None:
    """Without data.json, crl eval read [data] path = "pairs.jsonl" in the current folder: another file's test
    split (8 queries instead of 42), exit 0."""
    (run.run_dir / "data.json").unlink()
    code, _, output = _scored_queries(run.run_dir)
    assert code == 2, output
    assert f"{run.run_dir / 'data.json'} is missing" in output.replace("\n", "") and "--queries" in output
