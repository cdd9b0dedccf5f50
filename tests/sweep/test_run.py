"""Tests of crl.sweep.run: each cell computed once, failures and kills resumed, the process pool."""

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from crl.sweep import Cell, SweepStore, derive_seed, run_cells


def square(cell: Cell) -> dict[str, Any]:
    """Module-level cell function (picklable for the spawn pool): the square of params["i"] plus a draw."""
    i = cell.params["i"]
    return {"i": i, "square": i * i, "draw": float(cell.numpy_rng().standard_normal())}


def _grid(n: int) -> list[Cell]:
    return [Cell({"i": i, "arm": "claim"}, seed=derive_seed(0, i)) for i in range(n)]


def test_each_cell_is_computed_once_and_reruns_compute_nothing(tmp_path: Path) -> None:
    """If this fails, a rerun recomputes stored cells, or records come back in the wrong order."""
    calls: Counter[int] = Counter()

    def counted(cell: Cell) -> dict[str, Any]:
        calls[cell.params["i"]] += 1
        return square(cell)

    cells = _grid(6)
    seen: list[tuple[int, int]] = []
    with SweepStore(tmp_path / "r.sqlite") as store:
        first = run_cells(
            store, "C3", cells, counted, run_id="run-1", progress=lambda d, t: seen.append((d, t))
        )
        second = run_cells(store, "C3", cells + _grid(8)[6:], counted, run_id="run-2")
    assert seen == [(k, 6) for k in range(7)]
    assert calls == Counter(range(8))
    assert [r.result["square"] for r in second] == [i * i for i in range(8)]
    assert [r.run_id for r in second] == ["run-1"] * 6 + ["run-2"] * 2
    assert [r.cell for r in first] == cells


def test_a_failing_cell_keeps_the_finished_ones_and_a_rerun_continues(tmp_path: Path) -> None:
    """If this fails, an exception in one cell loses the cells finished before it, or they are recomputed."""
    calls: Counter[int] = Counter()

    def fails_at_3(cell: Cell) -> dict[str, Any]:
        calls[cell.params["i"]] += 1
        if cell.params["i"] == 3:
            raise RuntimeError("boom")
        return square(cell)

    cells = _grid(6)
    with SweepStore(tmp_path / "r.sqlite") as store:
        with pytest.raises(RuntimeError, match="boom"):
            run_cells(store, "C3", cells, fails_at_3, run_id="r1")
        assert len(store.records("C3")) == 3
        records = run_cells(store, "C3", cells, square, run_id="r2")
    assert calls == Counter({0: 1, 1: 1, 2: 1, 3: 1})
    assert [r.run_id for r in records] == ["r1"] * 3 + ["r2"] * 3


def test_results_that_are_not_json_or_not_finite_are_refused(tmp_path: Path) -> None:
    """If this fails, a NaN result would be stored silently (and reused forever)."""
    with SweepStore(tmp_path / "r.sqlite") as store:
        with pytest.raises(ValueError, match="NaN"):
            run_cells(store, "C1", _grid(1), lambda c: {"v": float("nan")}, run_id="r")
        with pytest.raises(TypeError, match="dict"):
            run_cells(store, "C1", _grid(1), lambda c: [1.0], run_id="r")  # type: ignore[arg-type, return-value]
        with pytest.raises(ValueError, match="twice"):
            run_cells(store, "C1", _grid(2) + _grid(1), square, run_id="r")
        assert store.records("C1") == []


def test_process_pool_stores_the_same_results_as_in_process(tmp_path: Path) -> None:
    """If this fails, cells computed in spawn-ed workers differ from in-process ones or are stored twice."""
    cells = _grid(5)
    with SweepStore(tmp_path / "a.sqlite") as a, SweepStore(tmp_path / "b.sqlite") as b:
        serial = run_cells(a, "C4", cells, square, run_id="r")
        pooled = run_cells(b, "C4", cells, square, run_id="r", workers=2)
        assert len(b.records("C4")) == 5
    assert [r.result for r in pooled] == [r.result for r in serial]


_SWEEP_SCRIPT = """
import sys, time
from crl.sweep import Cell, SweepStore, run_cells

def slow(cell):
    with open(sys.argv[2], "a") as log:
        log.write(f"{sys.argv[3]} {cell.params['i']}\\n")
    time.sleep(0.04)
    return {"i": cell.params["i"], "cube": cell.params["i"] ** 3}

if __name__ == "__main__":
    with SweepStore(sys.argv[1]) as store:
        run_cells(store, "C9", [Cell({"i": i}, seed=i) for i in range(40)], slow, run_id=sys.argv[3])
"""


def test_a_killed_sweep_resumes_without_recomputing_or_duplicating(tmp_path: Path) -> None:
    """If this fails, `kill -9` during a sweep loses finished cells, or the rerun recomputes or duplicates them."""
    script, db, log = tmp_path / "sweep.py", tmp_path / "r.sqlite", tmp_path / "calls.log"
    script.write_text(textwrap.dedent(_SWEEP_SCRIPT))
    first = subprocess.Popen(
        [sys.executable, str(script), str(db), str(log), "first"], start_new_session=True
    )
    try:
        deadline = time.monotonic() + 60.0
        while _stored_count(db) < 10:
            assert first.poll() is None, "the sweep finished before it could be killed"
            assert time.monotonic() < deadline, "the sweep stored nothing within 60 s"
            time.sleep(0.01)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    with sqlite3.connect(db) as conn:
        before = dict(conn.execute("SELECT json_extract(cell, '$.i'), run_id FROM cells").fetchall())
    assert 10 <= len(before) < 40 and set(before.values()) == {"first"}

    subprocess.run([sys.executable, str(script), str(db), str(log), "second"], check=True, timeout=60)

    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT json_extract(cell, '$.i'), json_extract(result, '$.cube'), run_id FROM cells"
        )
        stored = [(i, cube, run) for i, cube, run in rows]
    assert sorted(i for i, _, _ in stored) == list(range(40))
    assert all(cube == i**3 for i, cube, _ in stored)
    assert all(run == "first" for i, _, run in stored if i in before)
    calls = [line.split() for line in log.read_text().splitlines()]
    recomputed = Counter(int(i) for tag, i in calls if tag == "second")
    assert not set(recomputed) & set(before)
    assert recomputed == Counter({i: 1 for i in range(40) if i not in before})


def _stored_count(db: Path) -> int:
    """Rows in the cells table, 0 while the database does not exist yet."""
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(db, timeout=1.0) as conn:
            return int(conn.execute("SELECT count(*) FROM cells").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
