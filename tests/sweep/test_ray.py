"""The Ray executor on a local Ray instance that this module starts and stops (one CPU, no dashboard).

If these fail, a sweep on a Ray cluster stores other results than in process, stores a cell twice or loses one
after an interruption, or the executor ends a Ray session that its caller opened.
"""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from crl.claims import Registry
from crl.sweep import Cell
from tests.sweep.helpers import (
    children_of,
    descendants_of,
    interrupt_then_resume,
    kill_all,
    kill_driver_then_resume,
    wait_until_gone,
)

ray = pytest.importorskip("ray")  # in the dev extra; the missing-ray error is tested in test_executors
pytestmark = pytest.mark.slow  # each test starts a local Ray instance (5-11 s under load)

from crl.sweep.ray_executor import RayExecutor  # noqa: E402 (after the skip)


@pytest.fixture(scope="module")
def ray_session() -> Iterator[None]:
    """One local Ray instance for the module (it starts in ~8 s on an idle 2-core machine, 18-26 s under load; its
    GCS server once took over Ray's default 30 s to publish its port beside the rest of the suite, so the wait is
    Ray's own setting raised to 120 s)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_gcs_server_port_wait_time_s", "120")
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
    from tests.verify.test_verify import M_GRID, ToyRate, _invoke, decay_cell

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


_LOCAL_DRIVER = """
import sys
from pathlib import Path

from crl.sweep import Cell, SweepStore, run_cells
from crl.sweep.ray_executor import RayExecutor
from tests.sweep.helpers import pid_then_sleep

if __name__ == "__main__":
    folder = Path(sys.argv[1])
    with SweepStore(folder / "r.sqlite") as store, RayExecutor(num_cpus=1) as executor:
        cells = [Cell({"i": 0, "folder": str(folder)}, seed=0)]
        run_cells(store, "C0", cells, pid_then_sleep, run_id="killed", executor=executor)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_local_ray_instance_dies_with_its_driver_killed_by_sigkill(tmp_path: Path) -> None:
    """SIGKILL a driver whose RayExecutor started a local Ray instance: the task worker computing the cell and
    the instance's processes (GCS, raylet, monitors) end within 15 s. Ray binds them to the driver itself (kernel
    fate-sharing, PR_SET_PDEATHSIG); its dashboard and runtime-env agents follow about a minute later, after
    their report to the dead GCS times out, and are killed here instead of awaited."""
    script = tmp_path / "driver.py"
    script.write_text(_LOCAL_DRIVER)
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    environment.pop("RAY_ADDRESS", None)
    driver = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)],
        cwd=root,
        env=environment,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    descendants: set[int] = set()
    try:
        deadline = time.monotonic() + 120.0
        while not (tmp_path / "worker-0.pid").exists():
            assert driver.poll() is None, "the driver ended before its task started"
            assert time.monotonic() < deadline, "the Ray task did not start within 120 s"
            time.sleep(0.1)
        time.sleep(0.1)  # the pid file written in full
        worker = int((tmp_path / "worker-0.pid").read_text())
        descendants = descendants_of(driver.pid)
        bound = children_of(driver.pid) | {worker}
        assert worker in descendants
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert wait_until_gone(bound, 15.0) == [], "processes of the killed driver's Ray still run"
    finally:
        kill_all(descendants | {driver.pid})
        driver.wait()


def test_crl_advise_truth_cells_run_on_ray_as_in_process(tmp_path: Path, ray_session: None) -> None:
    """`crl advise --mstar-truth --executor ray` stores what the cells give in process: the two truth.json agree."""
    from typer.testing import CliRunner

    from crl.commands import app
    from tests.advise.conftest import CONFIG
    from tests.advise.test_mstar_command import ARGS

    config = tmp_path / "tiny.toml"
    config.write_text(CONFIG, encoding="utf-8")
    documents = []
    for executor in ("process", "ray"):
        out = tmp_path / executor
        result = CliRunner().invoke(
            app,
            ["advise", str(config), *ARGS, "--mstar-truth", "64", "--executor", executor, "--out", str(out)],
        )
        assert result.exit_code == 0, result.output
        documents.append(json.loads((out / "truth.json").read_text(encoding="utf-8")))
    assert documents[0] == documents[1]
    assert ray.is_initialized(), "the caller's Ray session must stay open"
