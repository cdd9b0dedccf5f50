"""Tests of crl.sweep.store: cell identity and seeds, one stored row per cell, a file plain SQLite reads."""

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crl.sweep import Cell, SweepStore, derive_seed


def test_cell_key_is_canonical_json() -> None:
    """If this fails, the same parameters in another order or as numpy scalars would be stored twice."""
    a = Cell({"m": 4, "tau": 0.5, "form": "dcl"}, seed=1)
    b = Cell({"form": "dcl", "tau": np.float64(0.5), "m": np.int64(4)}, seed=1)
    assert a.key == b.key == '{"form":"dcl","m":4,"tau":0.5}'
    assert json.loads(a.key) == {"m": 4, "tau": 0.5, "form": "dcl"}


@pytest.mark.parametrize(
    ("params", "seed", "error"),
    [({"x": float("nan")}, 0, ValueError), ({"x": object()}, 0, TypeError), ({"x": 1}, -1, ValueError)],
)
def test_bad_cells_are_rejected(params: dict[str, Any], seed: int, error: type[Exception]) -> None:
    """If this fails, NaN or unserialisable parameters or a negative seed would reach the store."""
    with pytest.raises(error):
        Cell(params, seed)


def test_derive_seed_is_stable_and_distinguishes_keys() -> None:
    """If this fails, seeds depend on hash randomisation, or different cells share a seed."""
    assert derive_seed(3, "C3", {"m": 4}) == derive_seed(3, "C3", {"m": 4})
    seeds = {derive_seed(3, "C3", {"m": m}) for m in range(1000)}
    assert len(seeds) == 1000
    assert all(0 <= s < 2**63 for s in seeds)
    script = "from crl.sweep import derive_seed; print(derive_seed(3, 'C3', {'m': 4}))"
    other = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert int(other.stdout) == derive_seed(3, "C3", {"m": 4})


def test_store_holds_one_row_per_cell_and_reads_without_crl(tmp_path: Path) -> None:
    """If this fails, a stored cell is overwritten or duplicated, or the file is not plain SQLite with JSON."""
    path = tmp_path / "r.sqlite"
    cell = Cell({"i": 2}, seed=5)
    with SweepStore(path) as store:
        assert store.put("C1", cell, {"v": 1.5}, run_id="a", wall_s=0.1)
        assert not store.put("C1", cell, {"v": 9.0}, run_id="b", wall_s=0.1)
        assert store.put("C2", cell, {"v": 2.5}, run_id="a", wall_s=0.1)
        kept = store.get("C1", cell)
        assert kept is not None and (kept.result, kept.run_id) == ({"v": 1.5}, "a")
        assert store.get("C1", Cell({"i": 3}, seed=5)) is None
        store.put_claim_result("a", "C1", verdict="PASS", control_verdict="FAIL", result={"claim_id": "C1"})
        store.put_claim_result("a", "C1", verdict="FAIL", control_verdict="FAIL", result={"claim_id": "C1*"})
        assert store.claim_results("a") == [{"claim_id": "C1*"}]
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT claim, json_extract(cell, '$.i'), seed, json_extract(result, '$.v'), run_id FROM cells ORDER BY id"
        ).fetchall()
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert rows == [("C1", 2, 5, 1.5, "a"), ("C2", 2, 5, 2.5, "a")]
    assert mode == "wal"
