"""The Ray executor: a sweep's cells as the tasks of a Ray cluster, stored by the driver alone.

Needs the optional extra ``crl[ray]`` (``pip install 'crl[ray]'``). Each pending cell becomes one Ray task
(one CPU each) that runs the cell function and returns its result; the driver, the process that called
:func:`crl.sweep.run_cells`, waits for the tasks as they finish and writes every result into the SQLite store
itself, so the workers never open the database (they may be other machines, and SQLite over a network file
system is unsafe). A killed driver loses only the results not yet handed back; the rerun computes just those.

``RayExecutor()`` starts a local Ray instance on first use (``num_cpus`` CPUs) and stops it on :meth:`close`;
``RayExecutor("auto")`` or ``RayExecutor("10.0.0.5:6379")`` joins a running cluster (``ray start --head`` on
one machine, ``ray start --address=...`` on the others) and leaves it running. A Ray session that the caller
started already (``ray.init(...)`` before the sweep) is used as it is.
"""

from collections.abc import Iterator, Sequence
from types import ModuleType, TracebackType
from typing import Any

from crl.sweep.executors import CellOutcome, timed_cell
from crl.sweep.store import Cell, CellFn

__all__ = ["SETTLE_S", "RayExecutor", "RayNotInstalledError", "import_ray"]

SETTLE_S = 30.0
"""Seconds a stopped sweep waits for its cancelled tasks to end."""


class RayNotInstalledError(ImportError, ValueError):
    """The Ray executor was asked for, but ray is not installed; the message names the fix."""


def import_ray() -> ModuleType:
    """The ``ray`` module.

    Raises:
        RayNotInstalledError: if ray cannot be imported, naming ``pip install 'crl[ray]'``.
    """
    try:
        # Deferred: ray is an optional extra (crl[ray]) and slow to import; only the Ray executor needs it.
        import ray
    except ImportError:
        raise RayNotInstalledError(
            "the Ray executor (--executor ray) needs ray, an optional dependency: pip install 'crl[ray]'; "
            "or leave out --executor to use the process pool of this machine"
        ) from None
    return ray


class RayExecutor:
    """Computes cells as Ray tasks and hands each result back to the driver as it finishes.

    Args:
        address: the cluster to join (``"auto"``, ``"host:port"``), or ``None`` to start a local instance.
        num_cpus: CPUs of a local instance (``None``: all of this machine's); not used with ``address``.

    Raises:
        RayNotInstalledError: if ray is not installed.
        ValueError: if ``num_cpus`` is given with ``address`` or is not a positive int.

    Examples:
        >>> with RayExecutor(num_cpus=2) as executor:  # doctest: +SKIP
        ...     records = run_cells(store, "C5", cells, fit_cell, run_id=run_id, executor=executor)
    """

    def __init__(self, address: str | None = None, *, num_cpus: int | None = None) -> None:
        if num_cpus is not None and (
            isinstance(num_cpus, bool) or not isinstance(num_cpus, int) or num_cpus < 1
        ):
            raise ValueError(f"num_cpus={num_cpus!r} must be an int >= 1 (CPUs of the local Ray instance).")
        if address is not None and num_cpus is not None:
            raise ValueError(
                f"num_cpus={num_cpus} applies to a local Ray instance only; the cluster at {address!r} has its own"
            )
        self.address = address
        self.num_cpus = num_cpus
        self._ray = import_ray()
        self._started = False

    def _connect(self) -> None:
        """Join or start Ray once (a session already open in this process is used as it is)."""
        ray = self._ray
        if ray.is_initialized():
            return
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": True}
        if self.address is None:
            options["num_cpus"] = self.num_cpus
        ray.init(address=self.address, **options)
        self._started = True

    def run(self, fn: CellFn, cells: Sequence[Cell]) -> Iterator[CellOutcome]:
        """Submit one task per cell and yield ``(cell, result, seconds)`` as the tasks finish.

        ``fn`` must be importable by the workers (a module-level function of an installed package). A task's
        error propagates as Ray's ``RayTaskError``, an instance of the cell function's exception type; the
        tasks not yet finished are cancelled when the iteration stops early, and awaited for up to
        :data:`SETTLE_S` seconds (a cancelled task that is running receives ``KeyboardInterrupt``).
        """
        if not cells:
            return
        self._connect()
        ray = self._ray
        task = ray.remote(num_cpus=1)(timed_cell)
        shared_fn = ray.put(fn)
        cell_of = {task.remote(shared_fn, cell): cell for cell in cells}
        pending = list(cell_of)
        try:
            while pending:
                finished, pending = ray.wait(pending, num_returns=1)
                for ref in finished:
                    result, seconds = ray.get(ref)
                    yield (cell_of[ref], result, seconds)
        finally:
            for ref in pending:
                ray.cancel(ref)
            if pending:  # let cancelled tasks end, so no task of this sweep outlives it
                ray.wait(pending, num_returns=len(pending), timeout=SETTLE_S)

    def close(self) -> None:
        """End the Ray session this executor opened: stop its local instance, or leave the joined cluster (which
        keeps running); a session the caller opened is left alone."""
        if self._started:
            self._ray.shutdown()
            self._started = False

    def __enter__(self) -> "RayExecutor":
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
