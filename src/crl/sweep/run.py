"""Running a sweep's cells: only those the store lacks, in this process or a process pool (see crl.sweep)."""

import multiprocessing
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from crl.sweep.store import Cell, CellFn, CellRecord, ProgressHook, SweepStore


def run_cells(
    store: SweepStore,
    claim: str,
    cells: Sequence[Cell],
    fn: CellFn,
    *,
    run_id: str,
    workers: int = 1,
    progress: ProgressHook | None = None,
) -> list[CellRecord]:
    """Compute the cells the store lacks, storing each result as it finishes; return all records in order.

    Cells already stored under ``claim`` are not recomputed. Each new result is committed in its own
    transaction as soon as its cell finishes, so a killed sweep loses at most the cells in flight, and a
    rerun continues from there. ``fn`` must be deterministic given the cell (draw randomness from
    ``cell.numpy_rng()`` or ``cell.seed``) and return a JSON-able mapping of finite numbers.

    Args:
        store: where results live.
        claim: the claim id the cells belong to.
        cells: the grid; no two cells may share ``(key, seed)``.
        fn: computes one cell. With ``workers > 1`` it must be a module-level function (it is sent to
            ``spawn``-ed worker processes by reference).
        run_id: recorded with every newly computed cell.
        workers: 1 runs the cells in this process; more uses a process pool of that size.
        progress: called as ``progress(done, total)`` once at the start (done = cells already stored) and
            after each cell.

    Returns:
        One :class:`CellRecord` per cell, in the order of ``cells``.

    Raises:
        ValueError: on duplicate cells or ``workers < 1``; whatever ``fn`` raises propagates (cells finished
            before it stay stored).
    """
    if workers < 1:
        raise ValueError(f"workers={workers!r} must be >= 1 (1 runs the cells in this process).")
    _check_unique(claim, cells)
    stored = store.stored_keys(claim)
    pending = [cell for cell in cells if (cell.key, cell.seed) not in stored]
    done, total = len(cells) - len(pending), len(cells)
    if progress is not None:
        progress(done, total)
    for cell, result, wall_s in _compute(pending, fn, workers):
        store.put(claim, cell, result, run_id=run_id, wall_s=wall_s)
        done += 1
        if progress is not None:
            progress(done, total)
    by_ident = {(record.cell.key, record.cell.seed): record for record in store.records(claim)}
    return [by_ident[(cell.key, cell.seed)] for cell in cells]


def _compute(
    cells: Sequence[Cell], fn: CellFn, workers: int
) -> Iterator[tuple[Cell, Mapping[str, Any], float]]:
    """Yield ``(cell, fn(cell), seconds)`` as each cell finishes, in this process or in a pool."""
    if workers == 1 or len(cells) <= 1:
        for cell in cells:
            yield (cell, *_timed(fn, cell))
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(workers, len(cells)), mp_context=context, initializer=_one_thread_per_worker
    ) as pool:
        futures: dict[Future[tuple[Mapping[str, Any], float]], Cell] = {
            pool.submit(_timed, fn, cell): cell for cell in cells
        }
        try:
            remaining = set(futures)
            while remaining:
                finished, remaining = wait(remaining, return_when=FIRST_COMPLETED)
                for future in finished:
                    yield (futures[future], *future.result())
        finally:
            for future in futures:
                future.cancel()


def _one_thread_per_worker() -> None:
    """Pool workers share the cores: one intra-op thread each (torch's default would oversubscribe them)."""
    import torch

    torch.set_num_threads(1)


def _timed(fn: CellFn, cell: Cell) -> tuple[Mapping[str, Any], float]:
    """``fn(cell)`` and the seconds it took."""
    start = time.perf_counter()
    result = fn(cell)
    if not isinstance(result, Mapping):
        raise TypeError(
            f"the cell function returned {type(result).__name__}; return a dict of JSON-able values."
        )
    return result, time.perf_counter() - start


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
