"""A claim re-judged from its committed per-seed cells, with this checkout's rule (docs/theory.md section 7,
"Confirmatory seeds": every confirmatory run's per-seed tables are committed, with a command that re-judges the
claim from them).

- :func:`export_cells`: every stored cell of one claim of a ``crl verify --out`` folder (the namespace with the most
  cells), one JSON object a line, gzip-compressed: the cell's parameters and seed, its result, the run that computed
  it, when, and its seconds.
- :func:`read_cells`: one claim's records of such a table, checked as every input of crl is (a regular file, whole
  gzip, finite numbers, each cell once) and filtered while they are read; the one reader of these tables, for
  ``crl power --rejudge`` and for the power tables.
- :func:`rejudge`: the claim's own ``run`` on a :class:`ReplayContext`, whose ``run_cells`` answers every cell the
  claim asks for from the table and computes none: the verdict, statistics and control come from this checkout's
  rule, and the random streams the rule draws (a bootstrap) from the run's seed (``crl verify --seed``), exactly
  as the run drew them. A cell the claim asks for that the table lacks is an error naming it: a table from other
  grids or seeds is refused, never re-judged on part of its cells.
"""

import gzip
import json
import math
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from crl._validate import missing_file
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
    """Write ``claim``'s stored cells of ``run_dir`` to ``path`` (JSON lines, gzip); returns how many.

    Raises:
        ValueError: naming ``path`` when it is a folder or another kind of file than a regular one (a FIFO would
            block the writer until something reads it).
    """
    if path.exists() and not path.is_file():
        raise ValueError(f"path={str(path)!r} {missing_file(path)}; pass the path of a new .jsonl.gz file.")
    return write_cells(stored_records(run_dir, claim), path)


def write_cells(records: Sequence[CellRecord], path: Path) -> int:
    """``records`` written as a cell table at ``path`` (gzip JSON lines, one record a line, the form
    :func:`read_cells` reads); returns how many."""
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


def read_cells(path: Path, claim: str) -> list[CellRecord]:
    """The records of ``claim`` (a claim id such as ``"C6"``: its cells of every namespace) in a table written by
    :func:`export_cells`, checked line by line as every input of crl is; the other claims' records are checked
    and dropped as they are read, so a large table of other cells costs no memory.

    A line is a cell record when it is a JSON object whose numbers are all finite (crl never stores NaN or
    infinity), with the record's fields, and, for ``claim``'s records, a result that is a JSON object in which no
    list mixes numbers with null (numpy reads such a null as NaN). Each (cell, seed) of ``claim`` appears once.

    Raises:
        ValueError: naming the file when it is not a regular file (a folder, a FIFO) or holds no cell of
            ``claim``; naming the file and the line when the gzip stream is truncated or damaged, a line is not
            such a record, or a line repeats the cell of an earlier one (naming both lines).
    """
    if not path.is_file():
        raise ValueError(
            f"cell table {str(path)!r} {missing_file(path)}; pass a .jsonl.gz table written by "
            "`crl power --export-cells`"
        )
    records: list[CellRecord] = []
    lines: dict[tuple[str, int], int] = {}
    others: set[str] = set()
    for number, line in _numbered_lines(path):
        try:
            row = _row(line)
            if row["claim"].split("@")[0] != claim:
                others.add(row["claim"].split("@")[0])
                continue
            record = _record(row)
        except (KeyError, TypeError, ValueError, RecursionError) as error:
            reason = f"it lacks the field {error}" if isinstance(error, KeyError) else str(error)
            raise ValueError(
                f"{path}:{number} is not a cell record ({reason}); export the table again with "
                "`crl power --export-cells`"
            ) from None
        identity = (record.cell.key, record.cell.seed)
        if identity in lines:
            raise ValueError(
                f"{path}:{number} repeats the cell {record.cell.key} (seed {record.cell.seed}) of line "
                f"{lines[identity]}; a table holds each cell once: export it again with `crl power --export-cells`"
            )
        lines[identity] = number
        records.append(record)
    if not records:
        held = f"it holds cells of {', '.join(sorted(others))}" if others else "it is empty"
        raise ValueError(
            f"{path} holds no cells of {claim} ({held}); pass a table of {claim}'s cells "
            f"(`crl power --claim {claim} --export-cells`)."
        )
    return records


def _numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    r"""The lines of a gzip file, numbered from 1 and split at "\n" only.

    Raises:
        ValueError: naming the file and the line being read when the gzip stream ends early or is damaged.
    """
    number = 0
    try:
        with gzip.open(path, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                yield number, line
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise ValueError(
            f"{path}:{number + 1} cannot be read ({error}): the table is truncated or damaged, or not gzip; "
            "export it again with `crl power --export-cells`"
        ) from None


def _row(line: bytes) -> dict[str, Any]:
    """A line as a JSON object with a claim id, every number in it finite."""
    row = json.loads(line.decode("utf-8"), parse_constant=_not_finite, parse_float=_finite_float)
    if not isinstance(row, dict) or not isinstance(row.get("claim"), str):
        raise ValueError("it is not a JSON object with a string 'claim'")
    return row


def _not_finite(constant: str) -> float:
    raise ValueError(f"it holds {constant}; a cell's numbers are finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"it holds {text}, beyond a finite float; a cell's numbers are finite")
    return value


def _record(row: dict[str, Any]) -> CellRecord:
    """The :class:`CellRecord` a row holds, its result a JSON object without null among numbers."""
    result = row["result"]
    if not isinstance(result, dict):
        raise ValueError(f"its result is {json.dumps(result)}, not a JSON object")
    _refuse_null_among_numbers(result, "result")
    cell = Cell(row["params"], int(row["seed"]))
    return CellRecord(row["claim"], cell, result, row["run_id"], row["created"], float(row["wall_s"]))


def _refuse_null_among_numbers(value: Any, where: str) -> None:
    """Raise naming ``where`` (e.g. ``result["excess"]``) when a list inside ``value`` holds numbers and null."""
    if isinstance(value, dict):
        for name, item in value.items():
            _refuse_null_among_numbers(item, f"{where}[{json.dumps(name)}]")
    elif isinstance(value, list):
        if None in value and any(_is_number(item) for item in value):
            raise ValueError(
                f"its {where} holds null among numbers (read as NaN); a cell's numbers are finite"
            )
        for index, item in enumerate(value):
            _refuse_null_among_numbers(item, f"{where}[{index}]")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@contextmanager
def missing_fields_named(table: str, claim: str) -> Iterator[None]:
    """Inside, a ``KeyError`` or ``TypeError`` of ``claim``'s rule reading the cells of ``table`` becomes one
    ``ValueError`` naming the table and the missing field (or the wrong type): :func:`read_cells` checks what
    every cell holds, the rule what it reads.
    """
    try:
        yield
    except KeyError as error:
        raise ValueError(
            f"{table}: a cell lacks the field {error} that {claim}'s rule reads; pass a table of a run of "
            f"{claim} (`crl power --claim {claim} --export-cells`)"
        ) from error
    except TypeError as error:
        raise ValueError(
            f"{table}: a cell holds a value of another type than {claim}'s rule reads ({error}); pass a table of "
            f"a run of {claim} (`crl power --claim {claim} --export-cells`)"
        ) from error


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


SEED_FIELDS = {"C5": "index", "C6": "replicate", "C10": "replicate"}
"""The cell parameter that numbers a trained claim's seeds (their designs' seed counts changed with contract v4)."""


def table_seeds(records: Sequence[CellRecord], claim_id: str) -> int | None:
    """The number of seeds of a trained claim's table (the claim's own arms: C5's control keeps its own count), or
    None for a claim whose seeds the table need not say."""
    field = SEED_FIELDS.get(claim_id)
    if field is None:
        return None
    numbers = [
        int(r.cell.params[field])
        for r in records
        if field in r.cell.params and r.cell.params.get("arm") not in ("control",)
    ]
    return 1 + max(numbers) if numbers else None


def records_of(source: Path, claim: str) -> list[CellRecord]:
    """A claim's cells from a run folder's store or from a table written by ``crl power --export-cells``
    (:func:`crl.claims.replay.read_cells`: the table's other claims' cells are dropped as they are read).

    Raises:
        ValueError: when the table holds no cells of ``claim``, or is not a table (:func:`read_cells`).
    """
    if source.is_dir() or not source.exists():
        return stored_records(source, claim)
    return read_cells(source, claim)


def rejudge(path: Path, claim_id: str, fidelity: Fidelity, seed: int) -> ClaimResult:
    """``claim_id`` judged by this checkout's rule on the cells of the table at ``path``, as a run of ``crl verify
    --fidelity FIDELITY --seed SEED`` judges them (module docstring), at the table's own seed count (a table of an
    earlier design holds fewer seeds than today's; its verdict carries its own design's gate, docs/power_v4)."""
    claim = next((c for c in default_registry().claims if c.id == claim_id), None)
    if claim is None:
        raise ValueError(f"claim={claim_id!r} is not a shipped claim; pass one of C1-C10.")
    found = read_cells(path, claim_id)
    records = {(record.cell.key, record.cell.seed): record for record in found}
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
            seeds=table_seeds(found, claim_id),
        )
        with missing_fields_named(str(path), claim_id):
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
