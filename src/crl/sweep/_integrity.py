"""A check of ``results.sqlite`` before a sweep opens it: a damaged or foreign file is named, with the fix.

SQLite reports a file of random bytes as ``sqlite3.DatabaseError: file is not a database`` from deep inside the
store, and a database of another program (a table ``cells`` with other columns) as an ``OperationalError`` on the
first write, after the claims have started. :func:`check_results_file` opens the file read-only first and raises
one :class:`ResultsFileError` that names it and says that ``crl verify --fresh`` deletes it and recomputes.
"""

import sqlite3
from pathlib import Path

from crl.sweep.store import _SCHEMA, LATER_COLUMNS, StoreError

__all__ = ["ResultsFileError", "check_results_file"]


class ResultsFileError(StoreError):
    """``results.sqlite`` cannot be used: not an SQLite database, damaged, or with other tables' columns."""


def _columns(conn: sqlite3.Connection) -> dict[str, set[str]]:
    """Table name -> its column names, for every table of the database."""
    tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        table: {row[0] for row in conn.execute("SELECT name FROM pragma_table_info(?)", (table,))}
        for table in tables
    }


def _expected_columns() -> dict[str, set[str]]:
    """The store's own tables and the columns each must have, read from its schema (one source of truth); the
    columns that the store adds to a store of an earlier crl (:data:`LATER_COLUMNS`) may be missing."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(_SCHEMA)
        columns = _columns(conn)
    finally:
        conn.close()
    columns["cells"] -= set(LATER_COLUMNS)
    return columns


def _problem(path: Path) -> str | None:
    """What is wrong with the database at ``path`` (None: usable, its store tables missing or as expected)."""
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error as error:
        return f"it cannot be opened: {error}"
    try:
        verdict = conn.execute("PRAGMA integrity_check(1)").fetchone()[0]
        if verdict != "ok":
            return f"SQLite's integrity_check reports damage: {' '.join(verdict.split())}"
        found = _columns(conn)
    except sqlite3.Error as error:
        return f"it is not a readable SQLite database: {error}"
    finally:
        conn.close()
    for table, expected in _expected_columns().items():
        missing = expected - found.get(table, expected)
        if missing:
            return f"its table {table!r} lacks the column(s) {', '.join(sorted(missing))} that crl writes"
    return None


def check_results_file(path: Path) -> None:
    """Raise :class:`ResultsFileError` unless ``path`` is missing or a usable crl results database.

    Usable: SQLite's ``integrity_check`` passes (pages, records, and each index against its table) and each of
    the store's tables (cells, runs, claim_results) that exists has the store's columns; missing tables and later
    columns are added by the store. Nothing is written.

    Raises:
        ResultsFileError: naming ``path``, what is wrong, and the fix (``--fresh`` deletes the file).
    """
    if not path.exists():
        return
    problem = _problem(path)
    if problem is not None:
        raise ResultsFileError(
            f"{path} is not a usable crl results database ({problem}); rerun crl verify with --fresh to "
            "delete it and recompute every cell (or move it away to keep it)"
        )
