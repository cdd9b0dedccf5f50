"""Where a sweep's cells are computed: the :class:`Executor` protocol and the executors of one machine.

An executor only computes: it receives the cell function and the cells the store lacks, and yields
``(cell, result, seconds)`` as each cell finishes. It never sees the :class:`~crl.sweep.store.SweepStore`:
:func:`crl.sweep.run_cells` (the driver) is its single writer and commits each result the moment the executor
hands it back, so an interrupted sweep loses at most the cells in flight, whichever executor computed them.

- :class:`InProcess`: one cell after another in this process.
- :class:`ProcessPool`: a ``spawn`` process pool of this machine (the default for ``workers > 1``); on Linux its
  workers die with the process that started them, even one killed with SIGKILL.
- :class:`WarmPool`: the same pool kept up across sweeps until closed (`crl verify`'s, one for the whole run).
- :class:`crl.sweep.ray_executor.RayExecutor`: the tasks of a Ray cluster (the optional extra ``crl[ray]``).
"""

import ctypes
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from crl._validate import Integer, check
from crl.sweep.store import Cell, CellFn

CellOutcome = tuple[Cell, Mapping[str, Any], float]
"""A finished cell: the cell, what its function returned, and the seconds it took."""

__all__ = [
    "CellOutcome",
    "Executor",
    "InProcess",
    "ProcessPool",
    "WarmPool",
    "check_workers",
    "default_executor",
    "die_with_parent",
    "timed_cell",
]

_PR_SET_PDEATHSIG = 1
"""``prctl``'s option: the signal a process receives when the thread that started it ends (linux/prctl.h)."""


@runtime_checkable
class Executor(Protocol):
    """Computes cells and hands their results back; the caller alone stores them.

    ``run(fn, cells)`` yields one :data:`CellOutcome` per cell, in the order they finish. Whatever ``fn`` raises
    propagates out of the iteration (cells handed back before it stay handed back); closing the iterator early
    abandons the cells not yet finished.
    """

    def run(self, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
        """Yield ``(cell, fn(cell), seconds)`` for every cell as it finishes."""
        ...

    def close(self) -> None:
        """Release what the executor holds between sweeps (e.g. a Ray session it started)."""
        ...


def timed_cell(fn: CellFn, cell: Cell) -> tuple[Mapping[str, Any], float]:
    """``fn(cell)`` and the seconds it took, in whatever process computes the cell.

    Raises:
        TypeError: if ``fn`` returns something other than a mapping.
    """
    start = time.perf_counter()
    result = fn(cell)
    if not isinstance(result, Mapping):
        raise TypeError(
            f"the cell function returned {type(result).__name__}; return a dict of JSON-able values."
        )
    return result, time.perf_counter() - start


@dataclass(frozen=True)
class InProcess:
    """Computes the cells one after another in this process."""

    def run(self, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
        """Yield each cell's outcome in the order of ``cells``."""
        for cell in cells:
            yield (cell, *timed_cell(fn, cell))

    def close(self) -> None:
        """Nothing to release."""


@dataclass(frozen=True)
class ProcessPool:
    """Computes the cells in a ``spawn`` process pool of ``workers`` processes, one torch thread each.

    ``fn`` must be a module-level function (it reaches the workers by reference). On Linux the workers die with
    the process that runs the sweep, even one killed with SIGKILL (:func:`die_with_parent`: with the thread that
    iterates :meth:`run`, precisely), and multiprocessing's resource tracker ends once they are gone.
    """

    workers: int

    def __post_init__(self) -> None:
        check_workers(self.workers)

    def run(self, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
        """Yield each cell's outcome as its worker finishes it (in process for fewer than two cells)."""
        if self.workers == 1 or len(cells) <= 1:
            yield from InProcess().run(fn, cells)
            return
        with _spawn_pool(min(self.workers, len(cells))) as pool:
            yield from _as_finished(pool, fn, cells)

    def close(self) -> None:
        """Nothing to release (each :meth:`run` starts and ends its own pool)."""


class WarmPool:
    """A ``spawn`` process pool of ``workers`` processes that stays up across :meth:`run` calls until :meth:`close`.

    :class:`ProcessPool` starts and ends a pool per sweep, so each sweep pays the workers' start (a fresh
    interpreter importing torch and crl: seconds); a run of many short sweeps (`crl verify`: every claim, often
    several sweeps each) pays it once here. Workers are started and die as :class:`ProcessPool`'s; a cell must not
    leave state behind in its worker (crl's cells take their randomness from their own generators).
    """

    def __init__(self, workers: int) -> None:
        self.workers = check_workers(workers)
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
        """Yield each cell's outcome as a worker finishes it (in process for one worker or fewer than two cells)."""
        if self.workers == 1 or len(cells) <= 1:
            yield from InProcess().run(fn, cells)
            return
        if self._pool is None:
            self._pool = _spawn_pool(self.workers)
        yield from _as_finished(self._pool, fn, cells)

    def close(self) -> None:
        """End the workers (cells not started are cancelled; a running one is waited for)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _spawn_pool(workers: int) -> ProcessPoolExecutor:
    """A ``spawn`` pool of ``workers`` processes that die with this one and use one torch thread each."""
    return ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(os.getpid(),),
    )


def _as_finished(pool: ProcessPoolExecutor, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
    """Submit every cell to ``pool`` and yield each outcome as it finishes; leaving early cancels the cells not
    started yet."""
    futures: dict[Future[tuple[Mapping[str, Any], float]], Cell] = {
        pool.submit(timed_cell, fn, cell): cell for cell in cells
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


def _start_worker(parent_pid: int) -> None:
    """A pool worker's start: die with the driver ``parent_pid``, and use one intra-op thread."""
    die_with_parent(parent_pid)
    _one_thread_per_worker()


def die_with_parent(parent_pid: int) -> None:
    """End this process with SIGKILL when its parent dies; at once if the parent ``parent_pid`` is gone already.

    On Linux the kernel sends the signal (``prctl(PR_SET_PDEATHSIG)``) when the *thread* that started this
    process ends. The parent may die before the signal is set, so this process then checks that its parent is
    still ``parent_pid`` (an orphan's parent is init or a subreaper). Elsewhere only that check is made.

    Raises:
        OSError: if Linux refuses ``prctl``.
    """
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    if os.getppid() != parent_pid:
        os._exit(1)


def _one_thread_per_worker() -> None:
    """Pool workers share the cores: one intra-op thread each (torch's default would oversubscribe them).

    Set through ``OMP_NUM_THREADS`` / ``MKL_NUM_THREADS``, which torch reads when a cell first imports it, so a
    worker whose cells need no torch does not pay for importing it; a torch already imported is set directly.
    """
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def default_executor(workers: int) -> Executor:
    """The executor of ``workers`` processes on this machine: :class:`InProcess` for 1, else :class:`ProcessPool`.

    Raises:
        ValueError: if ``workers < 1``.
    """
    return InProcess() if check_workers(workers) == 1 else ProcessPool(workers)


def check_workers(workers: object) -> int:
    """``workers`` as an int >= 1 (``ValueError`` naming it otherwise)."""
    return check("workers", workers, Integer(1, example=" (1 runs the cells in this process)"))
