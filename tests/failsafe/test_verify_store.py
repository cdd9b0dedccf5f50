"""`crl verify`'s results.sqlite when it is damaged or edited outside crl, and when an earlier crl wrote it."""

import re
import sqlite3
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, ClassVar

import pytest

import crl.verify
from crl.claims import Claim, ClaimContext, ClaimResult, Registry, Verdict
from crl.commands.verify import verify_command
from crl.sweep import Cell, StoreError, SweepStore, run_cells

CELLS = [Cell({"i": i}, seed=i) for i in range(4)]


def cube(cell: Cell) -> dict[str, Any]:
    """The cube of the cell's i."""
    return {"cube": cell.params["i"] ** 3}


class Cubes(Claim):
    """A toy claim over :data:`CELLS`: PASS when every stored cube is right."""

    id: ClassVar[str] = "C3"
    title: ClassVar[str] = "Toy cubes"
    source: ClassVar[str] = "a failsafe test"
    evidence: ClassVar[str] = "the sweep store (a toy)"
    statement: ClassVar[str] = "the stored cube of i is i**3"
    rule: ClassVar[str] = "every stored cube is i**3"
    parts: ClassVar[int] = 1
    control_description: ClassVar[str] = "none (a toy)"

    def run(self, ctx: ClaimContext) -> ClaimResult:
        right = all(r.result == cube(r.cell) for r in ctx.run_cells(CELLS, cube))
        return self.result(
            ctx,
            verdict=Verdict.PASS if right else Verdict.FAIL,
            statistics=(),
            control_verdict=Verdict.FAIL,
            control_statistics=(),
        )


class StoreFails(Cubes):
    """A toy claim whose store fails under it (as a disk error would)."""

    def run(self, ctx: ClaimContext) -> ClaimResult:
        raise StoreError(f"the results store {ctx.store.path} failed: disk I/O error (SQLite)")


def _verify(out: Path, claim: Claim, monkeypatch: pytest.MonkeyPatch) -> int:
    """`crl verify --fidelity quick --out OUT` over ``claim`` alone; its exit status."""
    monkeypatch.setattr(crl.verify, "default_registry", lambda: Registry.of([claim]))
    return verify_command(fidelity="quick", claims=None, out=out, seed=0, workers=1, threads=1, fresh=False)


def _sweep(path: Path, calls: Counter[int]) -> list[dict[str, Any]]:
    """Run :data:`CELLS` into the store at ``path``, counting the cells computed; their stored results."""

    def counted(cell: Cell) -> dict[str, Any]:
        calls[cell.params["i"]] += 1
        return cube(cell)

    with SweepStore(path) as store:
        return [record.result for record in run_cells(store, "C0", CELLS, counted, run_id="r")]


def _flip_in_cells_table(path: Path, old: bytes, new: bytes) -> None:
    """Overwrite ``old`` with ``new`` (as a flipped bit would) where it occurs first in the cells table's page."""
    with sqlite3.connect(path) as conn:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'cells'").fetchone()[0]
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    at = data.index(old, start, start + page_size)
    data[at : at + len(old)] = new
    path.write_bytes(bytes(data))


def test_a_flipped_byte_in_results_sqlite_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bit flipped in a stored cell's key (table and index now disagree) passed quick_check and went unnoticed
    (exit 0); now integrity_check finds it: one line naming the file and --fresh, exit 2, no claim run."""
    out = tmp_path / "v"
    assert _verify(out, Cubes(), monkeypatch) == 0
    _flip_in_cells_table(out / "results.sqlite", b'{"i":2}', b'{"i":3}')  # '2' ^ 1 == '3'
    capsys.readouterr()
    assert _verify(out, Cubes(), monkeypatch) == 2
    captured = capsys.readouterr()
    error = captured.err
    assert "C3 Toy cubes" not in captured.out
    assert len(error.strip().splitlines()) == 1
    assert f"{out / 'results.sqlite'} is not a usable crl results database (SQLite's integrity_check" in error
    assert "rerun crl verify with --fresh" in error


def test_a_failing_store_stops_the_run_instead_of_failing_the_claim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store's SQLite errors inside a claim were that claim's ERROR (exit 1); now one line, exit 2."""
    assert _verify(tmp_path / "v", StoreFails(), monkeypatch) == 2
    assert "failed: disk I/O error (SQLite)" in capsys.readouterr().err


def test_a_store_on_a_damaged_file_names_it(tmp_path: Path) -> None:
    """SweepStore on a file that is no database raised sqlite3.DatabaseError naming no file."""
    path = tmp_path / "results.sqlite"
    path.write_bytes(bytes(range(256)) * 16)
    with pytest.raises(StoreError, match=rf"the results store {path} failed: file is not a database"):
        SweepStore(path)


def test_an_edited_digit_in_a_stored_cell_is_recomputed_with_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An edited result (the cube of 2: 8 -> 9) was used as stored: the claim FAILed on a value nobody
    computed. Now the cell fails its checksum, is named in one warning line, and is recomputed by the next run
    (the other cells are kept from the first)."""
    out = tmp_path / "v"
    assert _verify(out, Cubes(), monkeypatch) == 0
    with sqlite3.connect(out / "results.sqlite") as conn:
        conn.execute("""UPDATE cells SET result = '{"cube":9}' WHERE json_extract(cell, '$.i') = 2""")
    capsys.readouterr()
    assert _verify(out, Cubes(), monkeypatch) == 0
    warnings_given = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings_given) == 1
    assert re.search(
        r'the stored result of C3@\w+ cell \{"i":2\} seed \d+ fails its checksum', warnings_given[0]
    )
    assert "it is treated as missing and recomputed" in warnings_given[0]
    with sqlite3.connect(out / "results.sqlite") as conn:
        rows = conn.execute(
            "SELECT json_extract(cell, '$.i'), result, run_id FROM cells ORDER BY id"
        ).fetchall()
        first, second = (row[0] for row in conn.execute("SELECT run_id FROM runs ORDER BY started"))
    assert sorted((i, result) for i, result, _ in rows) == [(i, f'{{"cube":{i**3}}}') for i in range(4)]
    assert {i: run for i, _, run in rows} == {0: first, 1: first, 2: second, 3: first}


def test_a_truncated_stored_cell_is_recomputed_with_a_warning(tmp_path: Path) -> None:
    """A result cut short ('{"cube":') raised JSONDecodeError inside the claim (its ERROR); now it is named in a
    warning and recomputed."""
    path, calls = tmp_path / "r.sqlite", Counter[int]()
    _sweep(path, calls)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE cells SET result = substr(result, 1, 8) WHERE json_extract(cell, '$.i') = 3")
    with pytest.warns(UserWarning, match=r'C0 cell \{"i":3\} seed 3 fails its checksum.*recomputed'):
        results = _sweep(path, calls)
    assert results == [cube(cell) for cell in CELLS]
    assert calls == Counter({0: 1, 1: 1, 2: 1, 3: 2})


_EARLIER_CELLS = """CREATE TABLE cells (
    id INTEGER PRIMARY KEY, claim TEXT NOT NULL, cell TEXT NOT NULL, seed INTEGER NOT NULL, result TEXT NOT NULL,
    run_id TEXT NOT NULL, created TEXT NOT NULL, wall_s REAL NOT NULL, UNIQUE (claim, cell, seed)
)"""


def test_a_store_without_checksums_loads_with_one_warning(tmp_path: Path) -> None:
    """A store of the crl before checksums: its cells are used as stored, after one warning; the store
    checksums them, so the next open says nothing."""
    path, calls = tmp_path / "r.sqlite", Counter[int]()
    with sqlite3.connect(path) as conn:
        conn.execute(_EARLIER_CELLS)
        conn.executemany(
            "INSERT INTO cells (claim, cell, seed, result, run_id, created, wall_s) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [("C0", c.key, c.seed, f'{{"cube":{c.params["i"] ** 3}}}', "old", "2025", 0.1) for c in CELLS],
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = _sweep(path, calls)
    assert [str(w.message) for w in caught] == [
        f"{path} holds 4 cell(s) stored without a checksum by an earlier crl: they are used as stored and "
        "checksummed from now on (delete the file to recompute them instead)"
    ]
    assert results == [cube(cell) for cell in CELLS] and calls == Counter()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _sweep(path, calls)
