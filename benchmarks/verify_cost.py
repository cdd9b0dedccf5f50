"""Where a `crl verify` run spends its time: the cost table per claim and per cell kind, read from the run's store.

Every stored cell carries the seconds its worker spent computing it (``wall_s``, one process, one thread per worker
as `crl verify` runs them), and every claim result the seconds its claim took in the parent (cells, waiting for the
pool and judging). The table groups a run's cells by claim and by *kind*: the cell's string-valued params (arm,
regime, estimator, ...), its numeric params (n, m, k, seed index) being the grid inside a kind. Per kind it prints
the cells, the grid points (distinct numeric params without the seed index), the cell-seconds (CPU time in the
workers), the mean milliseconds per cell, the kind's share of the run's cell-seconds, the *floor* (the mean cell at
the kind's cheapest grid point: at most the fixed cost every cell of the kind pays) and the *batching ceiling*
(cells x floor / cell-seconds: the most that computing a point's seeds as one tensor problem could save, since the
arithmetic stays the same); per claim, its wall time
and the part of it not spent in cells (``wall - cell-seconds / workers``: judging, figures, pool start-up, load
imbalance).

A cell of a few milliseconds is per-cell overhead (Python, the pool, the store); one of seconds is arithmetic, which
batching seeds into one tensor problem cannot shorten on the same cores.

Run: ``.venv/bin/python benchmarks/verify_cost.py RUN_FOLDER [--run-id ID] [--workers 2] [--markdown]``
(the run id defaults to the store's latest run; ``RUN_FOLDER`` is `crl verify --out`), or the same on a cell table
``FILE.jsonl.gz`` (``crl power RUN --export-cells``). ``--time-sample FN --per-kind K`` recomputes, in this process
on one thread, the K cells of each kind at the kind's largest grid point (first seeds) with the cell function FN
(``module:function``) and prints their seconds beside the table's: run it under two checkouts
(``PYTHONPATH=OTHER/src``) to measure a change's speedup per kind on the same cells.
"""

import argparse
import gzip
import importlib
import json
import sqlite3
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

SEED_KEYS = frozenset({"index", "seed", "replicate", "pair_seed", "chunk"})
"""Numeric params that name a seed replicate, not a grid point."""


@dataclass
class KindCost:
    """The cells of one (claim, kind) in a run: their count and seconds, in all and per grid point."""

    cells: int = 0
    seconds: float = 0.0
    points: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, params: dict[str, object], seconds: float) -> None:
        """Count one cell of ``params`` that took ``seconds``."""
        self.cells += 1
        self.seconds += seconds
        self.points[point_of(params)].append(seconds)

    @property
    def floor_s(self) -> float:
        """The mean seconds of a cell at the kind's cheapest grid point: an upper bound on the fixed cost a cell of
        this kind pays whatever its size (Python, sampling set-up, the worker's call)."""
        return min(sum(times) / len(times) for times in self.points.values())

    @property
    def batching_ceiling(self) -> float:
        """The share of the kind's seconds that computing all seeds of a point at once could save at most: every
        cell's fixed cost, ``cells floor_s / seconds`` (the arithmetic itself is the same batched or not)."""
        return min(1.0, self.cells * self.floor_s / self.seconds) if self.seconds > 0 else 0.0


def kind_of(params: dict[str, object]) -> str:
    """The cell's kind: its string-valued params as ``key=value`` joined by ``/`` (``-`` when it has none)."""
    parts = [f"{key}={value}" for key, value in sorted(params.items()) if isinstance(value, str)]
    return "/".join(parts) or "-"


def point_of(params: dict[str, object]) -> str:
    """The cell's grid point: its numeric params other than the seed replicate's, as canonical JSON."""
    numeric = {
        key: value for key, value in params.items() if not isinstance(value, str) and key not in SEED_KEYS
    }
    return json.dumps(numeric, sort_keys=True)


def latest_run(conn: sqlite3.Connection) -> str:
    """The run id of the store's most recently started run."""
    row = conn.execute("SELECT run_id FROM runs ORDER BY started DESC LIMIT 1").fetchone()
    if row is None:
        raise SystemExit("the store holds no run; pass a `crl verify --out` folder that has run")
    return str(row[0])


def cell_costs(conn: sqlite3.Connection, run_id: str) -> dict[tuple[str, str], KindCost]:
    """(claim id, kind) -> the cells computed in ``run_id`` (cells reused from an earlier run are not its cost)."""
    costs: dict[tuple[str, str], KindCost] = defaultdict(KindCost)
    rows = conn.execute("SELECT claim, cell, wall_s FROM cells WHERE run_id = ?", (run_id,))
    for namespace, cell, wall_s in rows:
        params = json.loads(cell)
        costs[(namespace.split("@")[0], kind_of(params))].add(params, float(wall_s))
    return costs


def table_costs(path: Path) -> dict[tuple[str, str], KindCost]:
    """(claim id, kind) -> the cells of an exported cell table (``crl power RUN --export-cells``, JSON lines)."""
    costs: dict[tuple[str, str], KindCost] = defaultdict(KindCost)
    with gzip.open(path, "rt") as lines:
        for line in lines:
            record = json.loads(line)
            costs[(record["claim"].split("@")[0], kind_of(record["params"]))].add(
                record["params"], float(record["wall_s"])
            )
    return costs


def sampled_cells(path: Path, per_kind: int) -> dict[str, list[dict[str, object]]]:
    """Kind -> the first ``per_kind`` records (file order) of the kind's costliest grid point in a cell table."""
    by_point: dict[str, dict[str, list[dict[str, object]]]] = defaultdict(lambda: defaultdict(list))
    with gzip.open(path, "rt") as lines:
        for line in lines:
            record = json.loads(line)
            by_point[kind_of(record["params"])][point_of(record["params"])].append(record)
    chosen: dict[str, list[dict[str, object]]] = {}
    for kind, points in by_point.items():
        costliest = max(points.values(), key=lambda records: sum(float(r["wall_s"]) for r in records))  # type: ignore[arg-type]
        chosen[kind] = costliest[:per_kind]
    return chosen


def time_sample(path: Path, function: str, per_kind: int) -> None:
    """Recompute :func:`sampled_cells` with ``function`` (``module:name``) on one thread; print seconds per kind."""
    # Loaded only for --time-sample: the cost table reads SQLite or a JSON table and needs neither torch nor crl.
    import torch

    from crl.sweep import Cell

    torch.set_num_threads(1)
    module, _, name = function.partition(":")
    fn = getattr(importlib.import_module(module), name)
    print("kind  point  stored s  now s")
    for kind, records in sampled_cells(path, per_kind).items():
        for record in records:
            cell = Cell(record["params"], int(record["seed"]))  # type: ignore[arg-type]
            started = time.perf_counter()
            fn(cell)
            seconds = time.perf_counter() - started
            stored = float(record["wall_s"])  # type: ignore[arg-type]
            print(f"{kind}  {point_of(record['params'])}  {stored:.2f}  {seconds:.2f}")  # type: ignore[arg-type]


def claim_walls(conn: sqlite3.Connection, run_id: str) -> dict[str, float]:
    """Claim id -> the claim's wall time in the run (its stored result's ``wall_s``)."""
    walls: dict[str, float] = {}
    for claim, result in conn.execute("SELECT claim, result FROM claim_results WHERE run_id = ?", (run_id,)):
        walls[claim] = float(json.loads(result).get("wall_s") or 0.0)
    return walls


def run_span(conn: sqlite3.Connection, run_id: str) -> str:
    """The run's start and finish times as stored."""
    started, finished = conn.execute(
        "SELECT started, finished FROM runs WHERE run_id = ?", (run_id,)
    ).fetchone()
    return f"{started} -> {finished or 'unfinished'}"


def table_rows(
    costs: dict[tuple[str, str], KindCost], walls: dict[str, float], workers: int
) -> list[tuple[str, ...]]:
    """The cost table's rows: per claim a total row (wall, cell-seconds, the rest), then its kinds by cost."""
    total = sum(cost.seconds for cost in costs.values()) or 1.0
    claims = sorted({claim for claim, _ in costs} | set(walls), key=lambda c: (len(c), c))
    rows: list[tuple[str, ...]] = []
    for claim in claims:
        kinds = sorted(
            ((kind, cost) for (owner, kind), cost in costs.items() if owner == claim),
            key=lambda item: -item[1].seconds,
        )
        seconds = sum(cost.seconds for _, cost in kinds)
        cells = sum(cost.cells for _, cost in kinds)
        saved = sum(cost.seconds * cost.batching_ceiling for _, cost in kinds)
        wall = walls.get(claim)
        rest = "" if wall is None else f"{wall - seconds / workers:.1f}"
        rows.append(
            (
                claim,
                "(all)",
                str(cells),
                "",
                f"{seconds:.1f}",
                f"{1000 * seconds / cells:.1f}" if cells else "",
                f"{100 * seconds / total:.1f}",
                "",
                f"{100 * saved / seconds:.1f}" if seconds else "",
                "" if wall is None else f"{wall:.1f}",
                rest,
            )
        )
        for kind, cost in kinds:
            rows.append(
                (
                    "",
                    kind,
                    str(cost.cells),
                    str(len(cost.points)),
                    f"{cost.seconds:.1f}",
                    f"{1000 * cost.seconds / cost.cells:.1f}",
                    f"{100 * cost.seconds / total:.1f}",
                    f"{1000 * cost.floor_s:.1f}",
                    f"{100 * cost.batching_ceiling:.1f}",
                    "",
                    "",
                )
            )
    return rows


HEADER = (
    "claim",
    "cell kind",
    "cells",
    "points",
    "cell-s",
    "ms/cell",
    "% cell-s",
    "floor ms",
    "batch ceiling %",
    "claim wall s",
    "not in cells s",
)


def main(argv: list[str] | None = None) -> None:
    """Print the cost table of one run of a `crl verify` folder."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "folder",
        type=Path,
        help="a `crl verify --out` folder, or a cell table FILE.jsonl.gz (`crl power --export-cells`)",
    )
    parser.add_argument("--run-id", default=None, help="the run to cost (default: the latest)")
    parser.add_argument("--workers", type=int, default=2, help="the run's --workers (default 2)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--time-sample", metavar="MODULE:FUNCTION", help="recompute sampled cells of a cell table"
    )
    parser.add_argument(
        "--per-kind", type=int, default=2, help="cells per kind for --time-sample (default 2)"
    )
    args = parser.parse_args(argv)
    if args.folder.name.endswith(".jsonl.gz") and args.time_sample:
        time_sample(args.folder, args.time_sample, args.per_kind)
        return
    if args.folder.name.endswith(".jsonl.gz"):
        costs = table_costs(args.folder)
        print(f"cell table {args.folder}: cell-seconds {sum(c.seconds for c in costs.values()):.1f}")
        print_rows(table_rows(costs, {}, args.workers), markdown=args.markdown)
        return
    store = args.folder / "results.sqlite"
    if not store.is_file():
        raise SystemExit(
            f"folder={str(args.folder)!r} holds no results.sqlite; pass a `crl verify --out` folder"
        )
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    run_id = args.run_id or latest_run(conn)
    costs = cell_costs(conn, run_id)
    walls = claim_walls(conn, run_id)
    rows = table_rows(costs, walls, args.workers)
    print(f"run {run_id} ({run_span(conn, run_id)}), {args.workers} workers")
    print(
        f"cell-seconds {sum(c.seconds for c in costs.values()):.1f} over {sum(c.cells for c in costs.values())} cells; "
        f"claims' wall {sum(walls.values()):.1f} s"
    )
    print_rows(rows, markdown=args.markdown)


def print_rows(rows: list[tuple[str, ...]], *, markdown: bool) -> None:
    """Print the table as Markdown or as aligned columns."""
    if markdown:
        print("| " + " | ".join(HEADER) + " |")
        print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(HEADER))) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        return
    widths = [max(len(row[i]) for row in [HEADER, *rows]) for i in range(len(HEADER))]
    for row in [HEADER, *rows]:
        print(
            "  ".join(
                value.ljust(width) if i < 2 else value.rjust(width)
                for i, (value, width) in enumerate(zip(row, widths, strict=True))
            )
        )


if __name__ == "__main__":
    sys.exit(main())
