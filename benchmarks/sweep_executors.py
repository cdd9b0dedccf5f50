"""What each sweep executor costs: Ray's start-up, and the wall time of a grid of equal cells per executor.

Ray's start-up is split into ``import ray``, ``ray.init`` (a local instance: GCS, raylet, object store) and
``ray.shutdown``. Then a grid of ``--cells`` cells, each sleeping ``--cell-s`` seconds (so the figure is the
executor's overhead and parallelism, not arithmetic), runs through :func:`crl.sweep.run_cells` into a fresh
SQLite file with each executor: in process, the process pool and Ray (on the instance started above, with
``--workers`` CPUs). Nothing is asserted: this prints. The machine's load average is printed too, since on a
shared machine it changes every figure.

Run: ``.venv/bin/python benchmarks/sweep_executors.py [--cells 40] [--cell-s 0.25] [--workers 2]``.
"""

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from crl.sweep import Cell, Executor, InProcess, ProcessPool, SweepStore, run_cells


def sleepy_cell(cell: Cell) -> dict[str, Any]:
    """Sleeps ``params["seconds"]`` and returns the cell's index (a cell whose cost is known exactly)."""
    time.sleep(cell.params["seconds"])
    return {"i": cell.params["i"]}


def sweep_seconds(executor: Executor, cells: list[Cell], folder: Path, name: str) -> float:
    """Wall seconds of one sweep of ``cells`` with ``executor`` into a fresh store."""
    start = time.perf_counter()
    with SweepStore(folder / f"{name}.sqlite") as store:
        run_cells(store, "B", cells, sleepy_cell, run_id=name, executor=executor)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=40)
    parser.add_argument("--cell-s", type=float, default=0.25)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    cells = [Cell({"i": i, "seconds": args.cell_s}, seed=i) for i in range(args.cells)]
    serial = args.cells * args.cell_s
    start = time.perf_counter()
    # ray is crl's optional extra: the serial and process rows run without it.
    import ray

    from crl.sweep.ray_executor import RayExecutor

    imported = time.perf_counter()
    ray.init(num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    started = time.perf_counter()
    print(f"ray: import {imported - start:.2f} s, init {started - imported:.2f} s")
    with tempfile.TemporaryDirectory() as folder:
        for name, executor in (
            ("in process", InProcess()),
            (f"process pool x{args.workers}", ProcessPool(args.workers)),
            (f"ray x{args.workers}", RayExecutor()),
        ):
            seconds = sweep_seconds(executor, cells, Path(folder), name.split()[0])
            print(
                f"{name:>18}: {args.cells} cells of {args.cell_s} s in {seconds:.2f} s (serial sum {serial:.2f} s)"
            )
    stop = time.perf_counter()
    ray.shutdown()
    print(f"ray: shutdown {time.perf_counter() - stop:.2f} s")


if __name__ == "__main__":
    main()
