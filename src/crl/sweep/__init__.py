"""Resumable grid runs: one SQLite row per (claim, cell, seed), committed as each cell finishes.

A *cell* is one point of an experiment's grid: a JSON-able mapping of parameters (say ``{"m": 64, "tau": 0.5,
"n_draws": 4000}``) and a seed. :func:`run_cells` computes only the cells that the :class:`SweepStore` does
not hold yet and commits each result the moment it is ready; if the process is killed, running the same sweep
again recomputes nothing that was stored and stores nothing twice (the table's UNIQUE constraint on
``(claim, cell, seed)`` guarantees the latter even against a concurrent writer).

The database is plain SQLite (WAL journal) with JSON text columns, so it reads without crl, e.g.::

    sqlite3 results.sqlite "select json_extract(cell, '$.m'), json_extract(result, '$.gap') from cells"
    pandas.read_sql("select * from cells where claim like 'C3@%'", sqlite3.connect("results.sqlite"))

Cells are computed by an executor (:mod:`crl.sweep.executors`: in process, a process pool of this machine,
or :class:`crl.sweep.ray_executor.RayExecutor` on a Ray cluster) and stored by the calling process alone.

Tables: ``cells(claim, cell, seed, result, run_id, created, wall_s, checksum)`` (checksum: the SHA-256 of the
other fields but the row id, checked on every read); ``runs(run_id, started, finished,
meta)``; ``claim_results(run_id, claim, verdict, control_verdict, result, created)``.
"""

from crl.sweep._integrity import check_results_file
from crl.sweep.executors import Executor, InProcess, ProcessPool, WarmPool, default_executor
from crl.sweep.run import run_cells
from crl.sweep.store import (
    Cell,
    CellFn,
    CellRecord,
    JSONDict,
    ProgressHook,
    StoreError,
    SweepStore,
    canonical_json,
    derive_seed,
    new_run_id,
)

__all__ = [
    "Cell",
    "CellFn",
    "CellRecord",
    "Executor",
    "InProcess",
    "JSONDict",
    "ProcessPool",
    "ProgressHook",
    "StoreError",
    "SweepStore",
    "WarmPool",
    "canonical_json",
    "check_results_file",
    "default_executor",
    "derive_seed",
    "new_run_id",
    "run_cells",
]
