"""The Ray executor on a local Ray instance that this module starts and stops (one CPU, no dashboard).

If these fail, a sweep on a Ray cluster stores other results than in process, stores a cell twice or loses one
after an interruption, or the executor ends a Ray session that its caller opened.
"""

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from crl.claims import Registry
from crl.sweep import Cell, InProcess, SweepStore, run_cells
from tests.sweep.helpers import grid, interrupt_then_resume, logged_cube

ray = pytest.importorskip("ray")  # in the dev extra; the missing-ray error is tested in test_executors

from crl.sweep.ray_executor import RayExecutor  # noqa: E402 (after the skip)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """One local Ray instance for the module (starting one takes ~8 s on a busy 2-core machine)."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_stores_the_same_results_as_in_process(tmp_path: Path, ray_session: None) -> None:
    cells = grid(tmp_path, 5)
    with SweepStore(tmp_path / "a.sqlite") as a, SweepStore(tmp_path / "b.sqlite") as b:
        serial = run_cells(a, "C0", cells, logged_cube, run_id="r", executor=InProcess())
        with RayExecutor() as executor:
            remote = run_cells(b, "C0", cells, logged_cube, run_id="r", executor=executor)
        assert len(b.records("C0")) == 5
    assert [r.result for r in remote] == [r.result for r in serial]
    assert ray.is_initialized(), "the executor ended the Ray session that its caller opened"


def test_ray_sweep_resumes_after_an_interruption(tmp_path: Path, ray_session: None) -> None:
    """A failing task ends the sweep (pending tasks cancelled); the rerun computes only what was not stored."""
    interrupt_then_resume(tmp_path, RayExecutor())


def test_crl_verify_runs_its_cells_on_ray(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_session: None
) -> None:
    """`crl verify --executor ray` computes a claim's cells as Ray tasks and stores what the cell function
    gives in process (the driver writes results.sqlite), leaving the caller's Ray session open."""
    from tests.test_verify import M_GRID, ToyRate, _invoke, decay_cell

    out = tmp_path / "v"
    result = _invoke(
        monkeypatch, Registry.of([ToyRate()]), "--fidelity", "quick", "--out", str(out), "--executor", "ray"
    )
    assert result.exit_code == 0, result.output
    with sqlite3.connect(out / "results.sqlite") as conn:
        rows = conn.execute("SELECT cell, seed, result FROM cells").fetchall()
    assert len(rows) == 2 * len(M_GRID)
    for key, seed, stored in rows:
        assert json.loads(stored) == decay_cell(Cell(json.loads(key), seed))
    assert ray.is_initialized()
