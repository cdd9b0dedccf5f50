"""The Fashion-MNIST m*(n) experiment: cells resume without loss or double counting, summaries, one real cell."""

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crl.experiments.fashion_cell import run_cell
from crl.experiments.fashion_mstar import FIDELITIES, grid_cells, run_experiment, summarise
from crl.experiments.fashion_report import markdown_report
from crl.sweep import Cell, SweepStore

TINY = FIDELITIES["tiny"]


def _fake_metrics(cell: Cell) -> dict[str, Any]:
    """A curve that saturates at m = n / 4: a deterministic stand-in for training."""
    params = cell.params
    if params["kind"] == "pixels":
        return {"knn_accuracy": 0.5, "recall_at_1": 0.2}
    level = min(1.0, 4 * params["m"] / params["n"])
    wobble = (cell.seed % 7) * 1e-4
    return {
        "status": "ok",
        "knn_accuracy": 0.6 + 0.2 * level + wobble,
        "recall_at_1": 0.3 + 0.1 * level + wobble,
    }


class _KilledError(RuntimeError):
    pass


def test_an_interrupted_run_resumes_without_recomputing_or_double_counting(tmp_path: Path) -> None:
    calls: list[str] = []

    def dying_after_five(cell: Cell) -> dict[str, Any]:
        if len(calls) == 5:
            raise _KilledError("the session ended")
        calls.append(cell.key + str(cell.seed))
        return _fake_metrics(cell)

    database = tmp_path / "results.sqlite"
    with pytest.raises(_KilledError):
        run_experiment(database, TINY, run_id="first", compute=dying_after_five)

    def counting(cell: Cell) -> dict[str, Any]:
        calls.append(cell.key + str(cell.seed))
        return _fake_metrics(cell)

    records = run_experiment(database, TINY, run_id="second", compute=counting)
    cells = grid_cells(TINY)
    assert len(calls) == len(set(calls)) == len(cells) == len(records)
    with SweepStore(database) as store:
        assert len(store.records("fashion-mstar")) == len(cells)
    assert {record.run_id for record in records} == {"first", "second"}
    assert run_experiment(database, TINY, run_id="third", compute=counting) == records
    assert len(calls) == len(cells)


def test_grid_pairs_seeds_across_regimes_and_m() -> None:
    """The seed of a cell depends on (seed index, n) only; every (regime, n, m, index) appears once."""
    cells = [cell for cell in grid_cells(TINY) if cell.params["kind"] == "train"]
    assert len(cells) == 2 * TINY.seeds * sum(len(TINY.m_values(n)) for n in TINY.ns)
    by_n: dict[int, set[int]] = {}
    for cell in cells:
        by_n.setdefault(cell.params["n"], set()).add(cell.seed)
    assert all(len(seeds) == TINY.seeds for seeds in by_n.values())
    assert TINY.m_values(40) == [2, 10, 20, 40]


def test_summary_finds_the_saturation_and_counts_failures(tmp_path: Path) -> None:
    """The fake curve is flat from m = n/4: m* = n/4, steep and flat; a diverged cell is counted, not used."""

    def one_diverged(cell: Cell) -> dict[str, Any]:
        params = cell.params
        if (
            params["kind"] == "train"
            and params["regime"] == "independent"
            and params["n"] == 80
            and params["m"] == 4
        ):
            return {"status": "diverged", "reason": "loss nan at step 3", "steps": 3}
        return _fake_metrics(cell)

    records = run_experiment(tmp_path / "r.sqlite", TINY, run_id="r", compute=one_diverged)
    curves, baseline = summarise(records, TINY, resamples=50)
    assert baseline == {"knn_accuracy": 0.5, "recall_at_1": 0.2}
    shared_80 = next(c for c in curves if (c.regime, c.n, c.metric) == ("shared", 80, "knn_accuracy"))
    assert shared_80.saturation is not None
    assert (
        shared_80.saturation.saturation.m_star == 20 and shared_80.saturation.saturation.censoring == "none"
    )
    assert shared_80.steep is True and shared_80.flat is True and shared_80.failed == 0
    independent_80 = next(
        c for c in curves if (c.regime, c.n, c.metric) == ("independent", 80, "knn_accuracy")
    )
    assert independent_80.failed == TINY.seeds and 4 not in independent_80.m
    table = markdown_report(curves, baseline, TINY, run_id="r", commit="abc1234")
    assert "`r` at commit `abc1234`" in table and "| knn_accuracy | SSCRL | 80 |" in table


@pytest.mark.parametrize("regime", ["shared", "independent"])
def test_a_real_tiny_cell_trains_and_scores(regime: str) -> None:
    """m > k: the moving-average estimator; the scores are finite accuracies."""
    params = {
        "regime": regime,
        "n": 32,
        "m": 16,
        "budget": 32,
        "batch": 8,
        "neg_batch": 4,
        "tau": 0.2,
        "lr": 2e-3,
        "gamma_floor": 0.2,
        "hidden": 16,
        "dim": 8,
        "bank": 100,
        "n_test": 50,
    }
    result = run_cell(params, seed=3)
    assert result["status"] == "ok" and result["estimator"] == "fastclip" and result["steps"] == 4
    assert math.isfinite(result["final_loss"])
    assert 0.0 <= result["knn_accuracy"] <= 1.0 and 0.0 <= result["recall_at_1"] <= 1.0
    np.testing.assert_equal(run_cell(params, seed=3)["knn_accuracy"], result["knn_accuracy"])


def test_a_cell_with_bad_sizes_is_refused() -> None:
    params = {"regime": "shared", "n": 10, "m": 20, "batch": 4}
    with pytest.raises(ValueError, match="m <= n"):
        run_cell(params, seed=0)
    with pytest.raises(ValueError, match="regime='both'"):
        run_cell({**params, "regime": "both"}, seed=0)
