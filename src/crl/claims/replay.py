"""A claim re-judged from its committed per-seed cells, with this checkout's rule (docs/theory.md section 7,
"Confirmatory seeds": every confirmatory run's per-seed tables are committed, with a command that re-judges the
claim from them).

- :func:`export_cells`: every stored cell of one claim of a ``crl verify --out`` folder (the namespace with the most
  cells), one JSON object a line, gzip-compressed: the cell's parameters and seed, its result, the run that computed
  it, when, and its seconds.
- :func:`rejudge`: the claim's own ``run`` on a :class:`ReplayContext`, whose ``run_cells`` answers every cell the
  claim asks for from the table and computes none: the verdict, statistics and control come from this checkout's
  rule, and the random streams the rule draws (a bootstrap) from the run's seed (``crl verify --seed``), exactly
  as the run drew them. A cell the claim asks for that the table lacks is an error naming it: a table from other
  grids or seeds is refused, never re-judged on part of its cells.
"""

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from crl.claims.budget import part_level
from crl.claims.context import ClaimContext, Fidelity
from crl.claims.registry import default_registry
from crl.claims.result import ClaimResult
from crl.sweep import Cell, CellFn, CellRecord, SweepStore


def stored_records(run_dir: Path, claim: str) -> list[CellRecord]:
    """Every record of ``claim`` in a run folder's store (the namespace with the most cells)."""
    path = run_dir / "results.sqlite"
    if not path.is_file():
        raise ValueError(f"run_dir={str(run_dir)!r} has no results.sqlite; pass a `crl verify --out` folder.")
    with SweepStore(path) as store:
        spaces = [name for name in store.namespaces() if name.split("@")[0] == claim]
        if not spaces:
            raise ValueError(
                f"claim={claim!r} has no cells in {path}; run `crl verify --claims {claim}` first."
            )
        return max((store.records(name) for name in spaces), key=len)


def export_cells(run_dir: Path, claim: str, path: Path) -> int:
    """Write ``claim``'s stored cells of ``run_dir`` to ``path`` (JSON lines, gzip); returns how many."""
    records = stored_records(run_dir, claim)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for record in records:
            row = {
                "claim": record.claim,
                "params": dict(record.cell.params),
                "seed": record.cell.seed,
                "result": record.result,
                "run_id": record.run_id,
                "created": record.created,
                "wall_s": record.wall_s,
            }
            handle.write(json.dumps(row, sort_keys=True) + "\n")
    return len(records)


def read_cells(path: Path) -> list[CellRecord]:
    """The records of a table written by :func:`export_cells`.

    Raises:
        ValueError: naming the file and the line when a line is not such a record.
    """
    records = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                row = json.loads(line)
                cell = Cell(row["params"], int(row["seed"]))
                records.append(
                    CellRecord(
                        row["claim"], cell, row["result"], row["run_id"], row["created"], float(row["wall_s"])
                    )
                )
            except (KeyError, TypeError, ValueError) as error:
                raise ValueError(
                    f"{path}:{number} is not a cell record ({error}); write it with --export-cells"
                ) from None
    return records


@dataclass
class ReplayContext(ClaimContext):
    """A :class:`ClaimContext` whose cells come from a table (:attr:`table`, keyed by the cell's key and seed)."""

    table: dict[tuple[str, int], CellRecord] | None = None

    def run_cells(self, cells: Sequence[Cell], fn: CellFn) -> list[CellRecord]:
        """The table's record of every cell asked for, in ``cells`` order; ``fn`` is never called.

        Raises:
            ValueError: naming the first cell the table lacks.
        """
        table = self.table or {}
        found = []
        for cell in cells:
            record = table.get((cell.key, cell.seed))
            if record is None:
                raise ValueError(
                    f"the table has no cell {cell.key} (seed {cell.seed}): it holds another grid, fidelity or run "
                    "seed; pass the --fidelity and --seed of the run that wrote it"
                )
            found.append(record)
        self.cell_runs.update(record.run_id for record in found)
        return found


def rejudge(path: Path, claim_id: str, fidelity: Fidelity, seed: int) -> ClaimResult:
    """``claim_id`` judged by this checkout's rule on the cells of the table at ``path``, as a run of ``crl verify
    --fidelity FIDELITY --seed SEED`` judges them (module docstring)."""
    claim = next((c for c in default_registry().claims if c.id == claim_id), None)
    if claim is None:
        raise ValueError(f"claim={claim_id!r} is not a shipped claim; pass one of C1-C10.")
    records: dict[tuple[str, int], CellRecord] = {
        (record.cell.key, record.cell.seed): record
        for record in read_cells(path)
        if record.claim.split("@")[0] == claim_id
    }
    with TemporaryDirectory() as folder, SweepStore(Path(folder) / "unused.sqlite") as store:
        context = ReplayContext(
            claim_id,
            fidelity,
            store,
            seed,
            "rejudged",
            level=part_level(claim.parts),
            module=type(claim).__module__,
            table=records,
        )
        return claim.run(context)


def verdict_lines(result: ClaimResult) -> list[str]:
    """The re-judged claim as Markdown lines: verdict (a PASS whose power gate failed says so, naming the parts),
    control, and every statistic with its interval."""
    lines = [
        f"{result.claim_id}: {result.verdict_text} (control {result.control.verdict}), level {result.level:g}",
        "",
        "| statistic | value | CI |",
        "|---|---|---|",
    ]
    rows: list[Any] = [*result.statistics, *result.control.statistics]
    lines += [f"| {s.name} | {s.value:.4g} | [{s.ci_low!r}, {s.ci_high!r}] |" for s in rows]
    return lines
