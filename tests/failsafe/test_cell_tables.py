"""Cell tables (``crl power --rejudge TABLE`` and ``crl power TABLE``) checked like every other input, by the one
reader :func:`crl.claims.replay.read_cells`.

If these fail, a truncated gzip, a record without a field the claim reads or with a null result ends in a
traceback; NaN cells are judged (a PASS with a CI up to inf); a cell repeated with another result silently
replaces the first (DD moved from 0.54 to 0.87, still PASS); a table of many other claims' cells is held whole in
memory (850 MB for 150k records); or a FIFO given as the table hangs the command.
"""

import gzip
import json
import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crl.claims.replay import export_cells, read_cells
from crl.commands import app

TABLE = Path(__file__).resolve().parents[2] / "results" / "c6" / "full_0.jsonl.gz"
"""C6's committed cells of the timed full run at seed 0 (2,304 records)."""


def _rows() -> list[dict[str, Any]]:
    with gzip.open(TABLE, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle]


def _write(path: Path, lines: list[str]) -> Path:
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in lines)
    return path


def _table(path: Path, rows: list[dict[str, Any]]) -> Path:
    return _write(path, [json.dumps(row) for row in rows])


def _one_error_line(*args: str) -> str:
    """Run crl; assert exit status 2 and one ``error:`` line, and return it."""
    result = CliRunner().invoke(app, list(args))
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def _rejudge_error(table: Path) -> str:
    return _one_error_line("power", "--claim", "C6", "--rejudge", str(table), "--fidelity", "full")


def _power_error(table: Path) -> str:
    return _one_error_line(
        "power", str(table), "--claim", "C6", "--fidelity", "standard", "--seeds", "32", "--resamples", "4"
    )


@pytest.mark.parametrize("command", [_rejudge_error, _power_error])
def test_a_truncated_table_is_one_line_naming_file_and_line(tmp_path: Path, command: Any) -> None:
    """The gzip stream's EOFError ended `crl power --rejudge` in "Aborted." (exit 1), naming nothing."""
    data = TABLE.read_bytes()
    table = tmp_path / "cut.jsonl.gz"
    table.write_bytes(data[: len(data) // 2])
    line = command(table)
    assert f"{table}:" in line and "cannot be read" in line and "truncated" in line


@pytest.mark.parametrize("command", [_rejudge_error, _power_error])
def test_a_null_result_is_refused_naming_file_and_line(tmp_path: Path, command: Any) -> None:
    """A record whose result is null gave a TypeError traceback ('NoneType' object is not subscriptable)."""
    rows = _rows()
    rows[4]["result"] = None
    table = _table(tmp_path / "null.jsonl.gz", rows)
    assert f"{table}:5 is not a cell record (its result is null, not a JSON object)" in command(table)


@pytest.mark.parametrize("command", [_rejudge_error, _power_error])
def test_a_field_the_claim_reads_is_named_when_missing(tmp_path: Path, command: Any) -> None:
    """A record without 'excess' gave a KeyError traceback; the error names the field and the table."""
    rows = _rows()
    del rows[4]["result"]["excess"]
    table = _table(tmp_path / "no-excess.jsonl.gz", rows)
    assert f"{table}: a cell lacks the field 'excess' that C6's rule reads" in command(table)


@pytest.mark.parametrize(
    ("excess", "shown"),
    [
        ("NaN", "it holds NaN"),
        ("Infinity", "it holds Infinity"),
        ("-Infinity", "it holds -Infinity"),
        ("1e999", "it holds 1e999"),
        ("null", 'result["excess"] holds null among numbers'),
    ],
)
def test_a_non_finite_cell_is_refused_naming_file_and_line(tmp_path: Path, excess: str, shown: str) -> None:
    """NaN in 50 cells printed PASS (DD 0.78 [0.36, inf]); numpy reads a null among numbers as NaN too."""
    rows = _rows()
    lines = [json.dumps(row) for row in rows]
    for index in range(600, 650):
        values = ", ".join([excess, *map(repr, rows[index]["result"]["excess"][1:])])
        lines[index] = lines[index].replace(json.dumps(rows[index]["result"]["excess"]), f"[{values}]")
    table = _write(tmp_path / "nan.jsonl.gz", lines)
    line = _rejudge_error(table)
    assert f"{table}:601 is not a cell record" in line and shown in line


def test_a_non_finite_number_inside_a_nested_list_is_refused(tmp_path: Path) -> None:
    """Every number of a result is read, lists inside lists included."""
    row = {**_rows()[0], "result": {"grid": [[1.0, 2.0], [3.0, float("nan")]]}}
    table = _table(tmp_path / "nested.jsonl.gz", [row])
    with pytest.raises(ValueError, match=r"nested\.jsonl\.gz:1 is not a cell record \(it holds NaN"):
        read_cells(table, "C6")


@pytest.mark.parametrize("command", [_rejudge_error, _power_error])
def test_a_repeated_cell_is_refused_naming_both_lines(tmp_path: Path, command: Any) -> None:
    """The last of two records of one (cell, seed) won: another result moved DD from 0.54 to 0.87, still PASS."""
    rows = _rows()
    again = {
        **rows[10],
        "result": {**rows[10]["result"], "excess": [2.0] * len(rows[10]["result"]["excess"])},
    }
    table = _table(tmp_path / "twice.jsonl.gz", [*rows, again])
    line = command(table)
    assert f"{table}:{len(rows) + 1} repeats the cell" in line and "of line 11" in line


def test_other_claims_cells_are_dropped_while_reading(tmp_path: Path) -> None:
    """Every record was kept before the claim's were picked: 150k records of another claim took 850 MB. Here 5,000
    records of C5 whose results hold 200 numbers each (tens of MB once parsed) are read within 5 MB."""
    rows = _rows()[:3]
    other = {**rows[0], "claim": "C5@x", "result": {"values": [0.5] * 200}}
    table = _table(tmp_path / "mixed.jsonl.gz", [rows[0], *[other] * 5000, *rows[1:]])
    tracemalloc.start()
    try:
        records = read_cells(table, "C6")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [r.cell.seed for r in records] == [row["seed"] for row in rows]
    assert peak < 5 * 2**20, peak
    with pytest.raises(
        ValueError, match=r"mixed\.jsonl\.gz holds no cells of C10 \(it holds cells of C5, C6\)"
    ):
        read_cells(table, "C10")


@pytest.mark.timeout(30)
@pytest.mark.parametrize("command", [_rejudge_error, _power_error])
def test_a_fifo_table_is_refused_before_it_is_opened(tmp_path: Path, command: Any) -> None:
    """`crl power --rejudge FIFO` blocked in open() forever, waiting for a writer."""
    fifo = tmp_path / "table.jsonl.gz"
    os.mkfifo(fifo)
    assert f"cell table {str(fifo)!r} is not a regular file (a FIFO" in command(fifo)


@pytest.mark.timeout(30)
def test_a_fifo_is_refused_as_the_export_path(tmp_path: Path) -> None:
    """Writing the exported cells to a FIFO blocked until something read it."""
    fifo = tmp_path / "out.jsonl.gz"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"out\.jsonl\.gz' is not a regular file \(a FIFO"):
        export_cells(tmp_path, "C6", fifo)
