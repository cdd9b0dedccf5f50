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
from crl.sweep import Cell
from tests.sweep.helpers import interrupt_then_resume, kill_driver_then_resume

ray = pytest.importorskip("ray")  # in the dev extra; the missing-ray error is tested in test_executors

from crl.sweep.ray_executor import RayExecutor  # noqa: E402 (after the skip)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """One local Ray instance for the module (it starts in ~8 s on an idle 2-core machine, 18-26 s under load)."""
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


def test_ray_sweep_resumes_after_an_interruption(tmp_path: Path, ray_session: None) -> None:
    """A failing task ends the sweep (pending tasks cancelled); the rerun computes only what was not stored."""
    interrupt_then_resume(tmp_path, RayExecutor())


def test_a_killed_ray_driver_resumes_without_loss_or_double_counting(
    tmp_path: Path, ray_session: None
) -> None:
    """SIGKILL a driver that joined the module's Ray instance mid-sweep: its tasks die with it, the results it
    stored stay, and the rerun (here, on the same instance) stores every missing cell once."""
    address = ray.get_runtime_context().gcs_address
    kill_driver_then_resume(tmp_path, address, RayExecutor())


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
