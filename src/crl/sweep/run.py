"""Running a sweep's cells: only those the store lacks, on an executor, stored by this process (see crl.sweep);
:func:`executor_named` is the executor ``crl verify --executor`` names."""

from collections.abc import Generator, Sequence

from crl.sweep.executors import Executor, InProcess, WarmPool, check_workers, default_executor
from crl.sweep.ray_executor import RayExecutor
from crl.sweep.store import Cell, CellFn, CellRecord, ProgressHook, StoreError, SweepStore

EXECUTORS = ("process", "ray")
"""The executors ``crl verify --executor`` knows."""


def run_cells(
    store: SweepStore,
    claim: str,
    cells: Sequence[Cell],
    fn: CellFn,
    *,
    run_id: str,
    workers: int = 1,
    executor: Executor | None = None,
    progress: ProgressHook | None = None,
) -> list[CellRecord]:
    """Compute the cells the store lacks, storing each result as it finishes; return all records in order.

    Cells already stored under ``claim`` are not recomputed. Each new result is committed in its own
    transaction as soon as its cell finishes, so a killed sweep loses at most the cells in flight, and a
    rerun continues from there. The executor only computes; this process is the store's single writer. ``fn``
    must be deterministic given the cell (draw randomness from ``cell.numpy_rng()`` or ``cell.seed``) and return
    a JSON-able mapping of finite numbers.

    Args:
        store: where results live.
        claim: the claim id the cells belong to.
        cells: the grid; no two cells may share ``(key, seed)``.
        fn: computes one cell. With another executor than :class:`~crl.sweep.executors.InProcess` it must be
            a module-level function (it is sent to worker processes by reference).
        run_id: recorded with every newly computed cell.
        workers: 1 runs the cells in this process; more uses a process pool of that size
            (:func:`~crl.sweep.executors.default_executor`; ignored when ``executor`` is given).
        executor: where the cells are computed, e.g. :class:`~crl.sweep.ray_executor.RayExecutor`.
        progress: called as ``progress(done, total)`` once at the start (done = cells already stored) and
            after each cell.

    Returns:
        One :class:`CellRecord` per cell, in the order of ``cells``.

    Raises:
        ValueError: on duplicate cells or ``workers < 1``; whatever ``fn`` raises propagates (cells finished
            before it stay stored).
        StoreError: if SQLite fails on the store's file, or the store does not give back a cell it stored.
    """
    executor = executor if executor is not None else default_executor(workers)
    _check_unique(claim, cells)
    stored = store.stored_keys(claim)
    pending = [cell for cell in cells if (cell.key, cell.seed) not in stored]
    done, total = len(cells) - len(pending), len(cells)
    if progress is not None:
        progress(done, total)
    outcomes = executor.run(fn, pending)
    try:
        for cell, result, wall_s in outcomes:
            store.put(claim, cell, result, run_id=run_id, wall_s=wall_s)
            done += 1
            if progress is not None:
                progress(done, total)
    finally:
        if isinstance(outcomes, Generator):  # abandon the cells in flight now, not when garbage-collected
            outcomes.close()
    by_ident = {(record.cell.key, record.cell.seed): record for record in store.records(claim)}
    lost = [cell for cell in cells if (cell.key, cell.seed) not in by_ident]
    if lost:
        raise StoreError(
            f"the results store {store.path} does not give back {claim} cell {lost[0].key} seed {lost[0].seed} "
            f"(and {len(lost) - 1} more) after storing it: the file is damaged; move it away or delete it to "
            "recompute its cells"
        )
    return [by_ident[(cell.key, cell.seed)] for cell in cells]


def _check_unique(claim: str, cells: Sequence[Cell]) -> None:
    """Raise ``ValueError`` if two cells share ``(key, seed)``."""
    seen: set[tuple[str, int]] = set()
    for cell in cells:
        ident = (cell.key, cell.seed)
        if ident in seen:
            raise ValueError(
                f"{claim}: cell {cell.key} seed {cell.seed} is listed twice; list every cell once."
            )
        seen.add(ident)


def executor_named(name: str, *, workers: int = 1, address: str | None = None) -> Executor:
    """The executor of ``crl verify --executor NAME --workers W --address A``.

    ``"process"``: ``workers`` processes of this machine, one :class:`~crl.sweep.executors.WarmPool` for the whole
    run (in process for 1); the caller closes it. ``"ray"``:
    :class:`~crl.sweep.ray_executor.RayExecutor`, joining the cluster at ``address``, or starting a local Ray
    instance of ``workers`` CPUs when there is none.

    Raises:
        ValueError: for an unknown name, an address without Ray, ``workers`` with a cluster address, or
            ``workers < 1``.
        RayNotInstalledError: for ``"ray"`` when ray is not installed (a ``ValueError`` too).
    """
    if name not in EXECUTORS:
        raise ValueError(f"--executor {name!r} is not known; use one of {', '.join(EXECUTORS)}.")
    if name == "process":
        if address is not None:
            raise ValueError(
                f"--address {address!r} names a Ray cluster; add --executor ray, or leave out --address"
            )
        return InProcess() if check_workers(workers) == 1 else WarmPool(workers)
    if address is None:
        return RayExecutor(num_cpus=check_workers(workers))
    if workers != 1:
        raise ValueError(
            f"--workers {workers} sizes the process pool or a local Ray instance; the cluster at {address!r} "
            "schedules its own CPUs: leave out --workers"
        )
    return RayExecutor(address)
