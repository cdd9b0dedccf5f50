"""Cell functions for the executor tests (module level, so worker processes import them by reference)."""

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
