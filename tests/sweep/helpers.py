"""Cell functions for the executor tests (module level, so worker processes import them by reference)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest

from crl.sweep import Cell, Executor, SweepStore, derive_seed, run_cells

N_CELLS = 8


def logged_cube(cell: Cell) -> dict[str, Any]:
    """i**3 and one draw of the cell's rng; appends i to the call log, and fails at the cell named in the stop
    file while that file exists (an interruption in mid-sweep)."""
    i, folder = cell.params["i"], Path(cell.params["folder"])
    with (folder / "calls.log").open("a", encoding="utf-8") as log:
        log.write(f"{i}\n")
    stop = folder / "stop"
    if stop.exists() and int(stop.read_text()) == i:
        raise RuntimeError(f"interrupted at cell {i}")
    return {"i": i, "cube": i**3, "draw": float(cell.numpy_rng().standard_normal())}


def logged_nan(cell: Cell) -> dict[str, Any]:
    """Appends i to the call log and returns a NaN result (which the store refuses)."""
    with (Path(cell.params["folder"]) / "calls.log").open("a", encoding="utf-8") as log:
        log.write(f"{cell.params['i']}\n")
    return {"v": float("nan")}


def grid(folder: Path, n: int) -> list[Cell]:
    """n cells of :func:`logged_cube` logging into ``folder``."""
    return [Cell({"i": i, "folder": str(folder)}, seed=derive_seed(0, i)) for i in range(n)]


def calls(folder: Path) -> list[int]:
    """The cells computed so far, one entry per call, in call order."""
    log = folder / "calls.log"
    return [int(line) for line in log.read_text().split()] if log.exists() else []


def interrupt_then_resume(folder: Path, executor: Executor) -> None:
    """Run a sweep that fails at its sixth cell, then rerun it without the failure; check that every cell is
    stored once, that the rerun computed exactly the cells the first run had not stored, and that every stored
    result equals the in-process result."""
    cells = grid(folder, N_CELLS)
    (folder / "stop").write_text("5")
    with SweepStore(folder / "r.sqlite") as store:
        with pytest.raises(RuntimeError, match="interrupted at cell 5"):
            run_cells(store, "C0", cells, logged_cube, run_id="first", executor=executor)
        first = {record.cell.params["i"] for record in store.records("C0")}
        assert 5 not in first and len(first) < N_CELLS
        (folder / "stop").unlink()
        (folder / "calls.log").unlink()
        records = run_cells(store, "C0", cells, logged_cube, run_id="second", executor=executor)
        assert len(store.records("C0")) == N_CELLS
    assert sorted(calls(folder)) == sorted(set(range(N_CELLS)) - first)
    assert {r.cell.params["i"] for r in records if r.run_id == "first"} == first
    assert [r.result for r in records] == [logged_cube(cell) for cell in cells]


def slow_cube(cell: Cell) -> dict[str, Any]:
    """:func:`logged_cube` after a 0.2 s pause (so that a driver can be killed mid-sweep)."""
    time.sleep(0.2)
    return logged_cube(cell)


_DRIVER = """
import sys
from pathlib import Path

from crl.sweep import ProcessPool, SweepStore, run_cells
from crl.sweep.ray_executor import RayExecutor
from tests.sweep.helpers import grid, slow_cube

if __name__ == "__main__":
    folder, kind = Path(sys.argv[1]), sys.argv[2]
    executor = ProcessPool(2) if kind == "pool" else RayExecutor(kind)
    with SweepStore(folder / "r.sqlite") as store:
        run_cells(store, "C0", grid(folder, int(sys.argv[3])), slow_cube, run_id="killed", executor=executor)
"""


def kill_driver_then_resume(folder: Path, kind: str, executor: Executor, n_cells: int = 12) -> None:
    """Start a sweep in a driver process (``kind``: "pool", or the address of a Ray cluster), SIGKILL the driver
    once it has stored 3 cells, rerun the sweep here with ``executor``, and check the store: every cell once, the
    in-process result, and the killed run's cells kept as it stored them."""
    root = Path(__file__).resolve().parents[2]
    script = folder / "driver.py"
    script.write_text(_DRIVER)
    environment = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": "1"}
    errors = folder / "driver.err"  # a file, not a pipe: a full pipe would stall the driver
    with errors.open("wb") as stderr:
        driver = subprocess.Popen(
            [sys.executable, str(script), str(folder), kind, str(n_cells)],
            cwd=root,
            env=environment,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 60.0
        while stored_count(folder / "r.sqlite") < 3:
            assert driver.poll() is None, f"the driver ended before it was killed: {errors.read_text()}"
            assert time.monotonic() < deadline, "the driver did not store 3 cells within 60 s"
            time.sleep(0.01)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    killed = _rows(folder / "r.sqlite")
    assert 3 <= len(killed) < n_cells
    cells = grid(folder, n_cells)
    with SweepStore(folder / "r.sqlite") as store:
        records = run_cells(store, "C0", cells, logged_cube, run_id="rerun", executor=executor)
        assert len(store.records("C0")) == n_cells
    assert [r.result for r in records] == [logged_cube(cell) for cell in cells]
    assert {r.cell.params["i"]: r.result for r in records if r.run_id == "killed"} == killed


def stored_count(db: Path) -> int:
    """Rows in the cells table, 0 while the database does not exist yet."""
    return len(_rows(db))


def _rows(db: Path) -> dict[int, dict[str, Any]]:
    """Stored results by i ({} while the database does not exist yet or is locked)."""
    if not db.exists():
        return {}
    try:
        with sqlite3.connect(db, timeout=1.0) as conn:
            rows = conn.execute("SELECT json_extract(cell, '$.i'), result FROM cells").fetchall()
    except sqlite3.OperationalError:
        return {}
    return {int(i): json.loads(result) for i, result in rows}


def pid_then_sleep(cell: Cell) -> dict[str, Any]:
    """Writes this worker's pid to ``folder/worker-<i>.pid``, then sleeps a minute (a cell still running when its
    driver is killed)."""
    folder = Path(cell.params["folder"])
    (folder / f"worker-{cell.params['i']}.pid").write_text(str(os.getpid()))
    time.sleep(60.0)
    return {"i": cell.params["i"]}


def worker_pid(cell: Cell) -> dict[str, Any]:
    """The cell's i, one draw of its rng, and the pid of the process that computed it (after a short sleep, so
    that both workers of a pool take cells)."""
    time.sleep(0.05)
    return {"i": cell.params["i"], "draw": float(cell.numpy_rng().standard_normal()), "pid": os.getpid()}


def children_of(pid: int) -> set[int]:
    """The pids of the processes whose parent is ``pid``, read from /proc (Linux)."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(stat.parent.name))
    return found


def descendants_of(pid: int) -> set[int]:
    """The pids of ``pid``'s children, their children, and so on."""
    found: set[int] = set()
    parents = [pid]
    while parents:
        children = children_of(parents.pop()) - found
        found |= children
        parents.extend(children)
    return found


def running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, ended but not reaped by its new parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until_gone(pids: set[int], seconds: float) -> list[int]:
    """Wait up to ``seconds`` for every process of ``pids`` to end; the pids still running then."""
    deadline = time.monotonic() + seconds
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return sorted(pid for pid in pids if running(pid))


def kill_all(pids: set[int]) -> None:
    """SIGKILL each process of ``pids`` that still exists (the test's own processes, after a check)."""
    for pid in pids:
        with suppress(OSError):
            os.kill(pid, signal.SIGKILL)
