"""A killed sweep leaves no process behind: its pool workers (and multiprocessing's resource tracker) die with it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sweep.helpers import children_of, kill_all, wait_until_gone

_DRIVER = """
import sys
from pathlib import Path

from crl.sweep import Cell, ProcessPool, SweepStore, run_cells
from tests.sweep.helpers import pid_then_sleep

if __name__ == "__main__":
    folder = Path(sys.argv[1])
    cells = [Cell({"i": i, "folder": str(folder)}, seed=i) for i in range(2)]
    with SweepStore(folder / "r.sqlite") as store:
        run_cells(store, "C0", cells, pid_then_sleep, run_id="killed", executor=ProcessPool(2))
"""


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc; the parent-death signal is Linux's"
)
def test_pool_workers_die_with_a_driver_killed_by_sigkill(tmp_path: Path) -> None:
    """`kill -9` of a `crl verify --workers 2` left both workers (360-435 MB each) and the resource tracker
    running 13 minutes later; now every child of the killed driver is gone within 5 s."""
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    root = Path(__file__).resolve().parents[2]
    environment = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    driver = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path)], cwd=root, env=environment, start_new_session=True
    )
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 30.0
        while len(list(tmp_path.glob("worker-*.pid"))) < 2:
            assert driver.poll() is None, "the driver ended before its workers started"
            assert time.monotonic() < deadline, "the two workers did not start within 30 s"
            time.sleep(0.05)
        time.sleep(0.1)  # both pid files written in full
        workers = {int(path.read_text()) for path in tmp_path.glob("worker-*.pid")}
        children = children_of(driver.pid)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children]
        assert workers <= children and any(b"resource_tracker" in command for command in commands)
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
        assert wait_until_gone(children, 5.0) == [], "children of the killed driver still run"
    finally:
        kill_all(children | {driver.pid})
        driver.wait()
