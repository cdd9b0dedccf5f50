"""The SQLite store of a sweep: one row per (claim, cell, seed), committed as each cell finishes (see crl.sweep)."""

import hashlib
import json
import math
import secrets
import sqlite3
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

JSONDict = dict[str, Any]
CellFn = Callable[["Cell"], Mapping[str, Any]]
ProgressHook = Callable[[int, int], None]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cells (
    id INTEGER PRIMARY KEY,
    claim TEXT NOT NULL,
    cell TEXT NOT NULL,
    seed INTEGER NOT NULL,
    result TEXT NOT NULL,
    run_id TEXT NOT NULL,
    created TEXT NOT NULL,
    wall_s REAL NOT NULL,
    checksum TEXT,
    UNIQUE (claim, cell, seed)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    finished TEXT,
    meta TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS claim_results (
    run_id TEXT NOT NULL,
    claim TEXT NOT NULL,
    verdict TEXT NOT NULL,
    control_verdict TEXT NOT NULL,
    result TEXT NOT NULL,
    created TEXT NOT NULL,
    PRIMARY KEY (run_id, claim)
);
"""

LATER_COLUMNS = {"checksum": "TEXT"}
"""Columns of ``cells`` that stores written by an earlier crl lack; :class:`SweepStore` adds them on opening."""

_FIELDS = "claim, cell, seed, result, run_id, created, wall_s"
"""The stored fields of a cell, in the order of :func:`_record` and :func:`checksum`."""


class StoreError(ValueError):
    """The store's SQLite file cannot be read or written (damaged, locked, not a database); names the file."""


@dataclass(frozen=True)
class Cell:
    """One grid point: its parameters and its seed.

    Everything the result depends on must be in ``params`` (sizes that change with the fidelity included):
    the store recognises a cell only by ``(claim, key, seed)``.

    Attributes:
        params: JSON-able parameters (str, int, float, bool, None, lists and string-keyed dicts of these;
            numpy scalars are converted).
        seed: the seed from which the cell's function draws all its randomness.
        key: canonical JSON of ``params`` (sorted keys, no spaces), the cell's identity in the store.
    """

    params: Mapping[str, Any]
    seed: int
    key: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer) or self.seed < 0:
            raise ValueError(f"seed={self.seed!r} must be an int >= 0 (derive one with derive_seed).")
        if not isinstance(self.params, Mapping):
            raise TypeError(f"params must be a mapping of parameter names to values, got {self.params!r}.")
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "key", canonical_json(self.params, name="params"))

    def numpy_rng(self) -> np.random.Generator:
        """A fresh ``numpy.random.Generator`` (PCG64) seeded with the cell's seed."""
        return np.random.default_rng(self.seed)


@dataclass(frozen=True)
class CellRecord:
    """A stored cell result and where it came from.

    Attributes:
        claim: the claim id the cell belongs to.
        cell: the cell.
        result: the JSON result its function returned.
        run_id: the run that computed it (may be an earlier, interrupted run).
        created: ISO 8601 UTC time at which it was stored.
        wall_s: seconds its function took.
    """

    claim: str
    cell: Cell
    result: JSONDict
    run_id: str
    created: str
    wall_s: float


def canonical_json(value: Any, *, name: str = "value") -> str:
    """``value`` as canonical JSON: sorted keys, ``(",", ":")`` separators, numpy scalars/arrays as lists.

    Raises:
        TypeError: if something in ``value`` is not JSON-able.
        ValueError: if it contains NaN or infinity (these are never stored silently).
    """
    try:
        return json.dumps(
            value, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_json_default
        )
    except TypeError as error:
        raise TypeError(
            f"{name} is not JSON-able ({error}); use str, int, float, bool, None, lists, dicts."
        ) from None
    except ValueError as error:
        raise ValueError(
            f"{name} contains NaN or infinity ({error}); store finite numbers or None."
        ) from None


def derive_seed(base_seed: int, *keys: Any) -> int:
    """A seed in [0, 2**63) derived from ``base_seed`` and JSON-able ``keys`` by SHA-256.

    Distinct keys give (with overwhelming probability) independent seeds; the same keys always give the same
    seed, across processes and Python versions (no ``hash()`` randomisation).
    """
    digest = hashlib.sha256(canonical_json([int(base_seed), *keys], name="keys").encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def new_run_id() -> str:
    """A run id: UTC time to the second plus 6 hex digits, e.g. ``20260101T120000Z-3fa2c1``."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


class SweepStore(AbstractContextManager["SweepStore"]):
    """The SQLite file holding a sweep's cells, runs and claim results (WAL journal, synchronous=FULL).

    Each cell row carries the SHA-256 of its fields (:func:`checksum`), checked on every read: a row changed or
    damaged outside crl (an edited digit, a truncated result) is treated as missing, with a warning naming the
    cell, so the sweep recomputes it and :meth:`put` replaces it. Rows that an earlier crl stored without a
    checksum are used as they are and checksummed when the store opens, with one warning.

    Args:
        path: the database file; created with its parent folder when missing.

    Raises:
        StoreError: whenever SQLite fails on the file (this and every method), naming it and the fix.

    Example:
        >>> with SweepStore(tmp / "results.sqlite") as store:  # doctest: +SKIP
        ...     records = run_cells(store, "C3", cells, measure_gap, run_id=new_run_id())
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._warned: set[int] = set()
        with self._storage_errors():
            self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.executescript(_SCHEMA)
            self._checksum_earlier_rows()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (every write is already committed)."""
        self._conn.close()

    def put(self, claim: str, cell: Cell, result: Mapping[str, Any], *, run_id: str, wall_s: float) -> bool:
        """Store one cell's result in its own transaction; False if it was stored already (kept as is).

        A stored row of the cell that fails its checksum is replaced.
        """
        payload = canonical_json(dict(result), name=f"result of {claim} cell {cell.key} seed {cell.seed}")
        fields = (claim, cell.key, cell.seed, payload, run_id, _now(), float(wall_s))
        with self._storage_errors(), self._transaction():
            stored = self._conn.execute(
                f"SELECT id, {_FIELDS}, checksum FROM cells WHERE claim = ? AND cell = ? AND seed = ?",
                (claim, cell.key, cell.seed),
            ).fetchone()
            if stored is not None and self._intact(stored) is not None:
                return False
            self._conn.execute(
                f"INSERT OR REPLACE INTO cells ({_FIELDS}, checksum) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (*fields, checksum(fields)),
            )
        return True

    def get(self, claim: str, cell: Cell) -> CellRecord | None:
        """The stored record of ``cell`` under ``claim``, or ``None`` (also when its row fails its checksum)."""
        rows = self._rows("claim = ? AND cell = ? AND seed = ?", (claim, cell.key, cell.seed))
        return rows[0] if rows else None

    def records(self, claim: str) -> list[CellRecord]:
        """Every intact stored record of ``claim``, in the order they were stored."""
        return self._rows("claim = ?", (claim,))

    def namespaces(self) -> list[str]:
        """The distinct claim namespaces with stored cells (e.g. ``"C5@<code fingerprint>"``), sorted."""
        with self._storage_errors():
            rows = self._conn.execute("SELECT DISTINCT claim FROM cells ORDER BY claim").fetchall()
        return [str(row[0]) for row in rows]

    def stored_keys(self, claim: str) -> set[tuple[str, int]]:
        """The ``(cell key, seed)`` pairs stored intact under ``claim`` (a damaged row's cell is missing)."""
        return {(record.cell.key, record.cell.seed) for record in self.records(claim)}

    def begin_run(self, run_id: str, meta: Mapping[str, Any]) -> None:
        """Record that run ``run_id`` started, with JSON-able metadata (fidelity, version, command, ...)."""
        with self._storage_errors(), self._transaction():
            self._conn.execute(
                "INSERT INTO runs (run_id, started, meta) VALUES (?, ?, ?)",
                (run_id, _now(), canonical_json(dict(meta), name="meta")),
            )

    def finish_run(self, run_id: str) -> None:
        """Record the time at which run ``run_id`` finished."""
        with self._storage_errors(), self._transaction():
            self._conn.execute("UPDATE runs SET finished = ? WHERE run_id = ?", (_now(), run_id))

    def put_claim_result(
        self, run_id: str, claim: str, *, verdict: str, control_verdict: str, result: Mapping[str, Any]
    ) -> None:
        """Store a claim's outcome in run ``run_id`` (replacing an earlier outcome of the same run)."""
        with self._storage_errors(), self._transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO claim_results"
                " (run_id, claim, verdict, control_verdict, result, created)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    claim,
                    verdict,
                    control_verdict,
                    canonical_json(dict(result), name="result"),
                    _now(),
                ),
            )

    def claim_results(self, run_id: str) -> list[JSONDict]:
        """The claim outcomes stored for run ``run_id`` (the dicts given to :meth:`put_claim_result`)."""
        with self._storage_errors():
            rows = self._conn.execute(
                "SELECT result FROM claim_results WHERE run_id = ? ORDER BY created", (run_id,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]

    def _rows(self, where: str, parameters: Sequence[Any]) -> list[CellRecord]:
        """The intact records of the ``cells`` rows matching ``where``, in the order they were stored."""
        with self._storage_errors():
            rows = self._conn.execute(
                f"SELECT id, {_FIELDS}, checksum FROM cells WHERE {where} ORDER BY id", parameters
            ).fetchall()
        return [record for record in map(self._intact, rows) if record is not None]

    def _intact(self, row: Sequence[Any]) -> CellRecord | None:
        """The record of a ``(id, fields..., checksum)`` row, or ``None`` with a warning (once per row) when the
        row fails its checksum or does not decode."""
        row_id, *fields, stored = row
        try:
            if stored is None or stored == checksum(fields):
                return _record(fields)
            problem = "fails its checksum"
        except (TypeError, ValueError) as error:
            problem = f"does not decode ({error})"
        if row_id not in self._warned:
            self._warned.add(row_id)
            claim, key, seed = fields[:3]
            warnings.warn(
                f"{self.path}: the stored result of {claim} cell {key!s:.200} seed {seed} {problem}, changed "
                "or damaged outside crl; it is treated as missing and recomputed",
                stacklevel=3,
            )
        return None

    def _checksum_earlier_rows(self) -> None:
        """Add the columns a store of an earlier crl lacks, and checksum its rows as they are (one warning)."""
        with self._transaction():
            found = {row[0] for row in self._conn.execute("SELECT name FROM pragma_table_info('cells')")}
            for column, kind in LATER_COLUMNS.items():
                if column not in found:
                    self._conn.execute(f"ALTER TABLE cells ADD COLUMN {column} {kind}")
            rows = self._conn.execute(f"SELECT id, {_FIELDS} FROM cells WHERE checksum IS NULL").fetchall()
            checked = 0
            for row_id, *fields in rows:
                with suppress(TypeError, ValueError):  # a row that does not decode stays unchecked: damaged
                    _record(fields)
                    self._conn.execute(
                        "UPDATE cells SET checksum = ? WHERE id = ?", (checksum(fields), row_id)
                    )
                    checked += 1
        if checked:
            warnings.warn(
                f"{self.path} holds {checked} cell(s) stored without a checksum by an earlier crl: they are "
                "used as stored and checksummed from now on (delete the file to recompute them instead)",
                stacklevel=3,
            )

    @contextmanager
    def _storage_errors(self) -> Iterator[None]:
        """Raise SQLite's errors inside as a :class:`StoreError` naming the file and the fix."""
        try:
            yield
        except sqlite3.DatabaseError as error:
            raise StoreError(
                f"the results store {self.path} failed: {error} (SQLite); if the file is damaged, move it "
                "away or delete it to recompute its cells"
            ) from error

    def _transaction(self) -> "_Transaction":
        return _Transaction(self._conn)


class _Transaction(AbstractContextManager["_Transaction"]):
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error) on an autocommit connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> "_Transaction":
        self._conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


def checksum(fields: Sequence[Any]) -> str:
    """SHA-256 (hex) of a cell's stored fields (claim, cell, seed, result, run_id, created, wall_s) as canonical
    JSON: a change to any of them, e.g. a digit of its result, changes it."""
    return hashlib.sha256(canonical_json(list(fields), name="row").encode()).hexdigest()


def _record(fields: Sequence[Any]) -> CellRecord:
    """A :class:`CellRecord` from a ``cells`` row's fields.

    Raises:
        ValueError, TypeError: if the cell or its result is not the JSON the store writes.
    """
    claim, key, seed, result, run_id, created, wall_s = fields
    decoded = json.loads(result)
    if not isinstance(decoded, dict):
        raise TypeError(f"the result is {type(decoded).__name__}, not a JSON object")
    return CellRecord(
        claim=str(claim),
        cell=Cell(json.loads(key), int(seed)),
        result=decoded,
        run_id=str(run_id),
        created=str(created),
        wall_s=float(wall_s),
    )


def _json_default(value: Any) -> Any:
    """JSON encoding of numpy scalars and arrays (``TypeError`` for anything else)."""
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"non-finite number {number!r}")
        return number
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _now() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")
