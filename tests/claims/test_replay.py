"""crl.claims.replay: a table of cells re-judged by the claim's own run, computing nothing."""

import gzip
import json
from pathlib import Path

import pytest

from crl.claims.context import Fidelity
from crl.claims.replay import ReplayContext, read_cells, rejudge
from crl.sweep import Cell, CellRecord, SweepStore


def test_a_cell_the_table_lacks_is_refused_naming_it(tmp_path: Path) -> None:
    """If this fails, a table of another grid or seed is judged on part of its cells (or its missing cells are
    computed) instead of refused with the cell named."""
    record = CellRecord("C9@x", Cell({"a": 1}, 5), {"v": 1.0}, "run", "now", 0.1)
    with SweepStore(tmp_path / "s.sqlite") as store:
        context = ReplayContext(
            "C9", Fidelity.QUICK, store, 0, "r", level=0.99, table={(record.cell.key, 5): record}
        )
        assert context.run_cells([Cell({"a": 1}, 5)], _never) == [record]
        with pytest.raises(ValueError, match=r'no cell \{"a":2\} \(seed 5\)'):
            context.run_cells([Cell({"a": 2}, 5)], _never)


def _never(cell: Cell) -> dict[str, float]:
    raise AssertionError("a replayed claim must not compute a cell")


def test_bad_lines_and_unknown_claims_are_named(tmp_path: Path) -> None:
    """If this fails, a damaged table or a claim id that is not shipped gives a traceback instead of an error."""
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps({"claim": "C9", "params": {}, "seed": -1}) + "\n")
    with pytest.raises(
        ValueError, match=r"t.jsonl.gz:1 is not a cell record \(it lacks the field 'result'\)"
    ):
        read_cells(path, "C9")
    with pytest.raises(ValueError, match="claim='C11'"):
        rejudge(path, "C11", Fidelity.QUICK, 0)
