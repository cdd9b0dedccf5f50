"""Your own text pairs from a JSONL or TSV file: a query, its positive, and optional hard negatives.

- JSONL (``.jsonl``): one object per line, ``{"query": ..., "positive": ..., "negatives": [...], "group": ...}``;
  ``negatives`` and ``group`` are optional (the group defaults to the query, see :mod:`crl.data.text.pairs`).
- TSV (``.tsv``): ``query<TAB>positive[<TAB>negative ...]``, no header. Every TAB separates two columns, except
  inside a quoted field: a field that starts with a double quote runs to the next lone double quote and may hold
  TABs, with ``""`` for a double quote inside it (``"a<TAB>b"`` is the text a<TAB>b); a field that starts with a
  double quote but is not such a quoted field is an error naming its line.

The file must be UTF-8; a blank line is skipped, and an empty query or positive, or a text holding a lone
surrogate (a JSON escape such as ``"\\ud800"`` that encodes no character), is an error naming its line.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from crl.data.text.pairs import TextPair

__all__ = ["read_pairs_file"]


def _text(value: object, what: str, where: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: {what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{where}: {what} is empty; every query and positive needs text")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{where}: {what} holds the lone surrogate {value[error.start]!r} at character {error.start}, which"
            " encodes no character; fix the escape (a pair such as \\ud83d\\ude00, or the character itself)"
        ) from None
    return value.strip()


def _jsonl_pair(line: str, where: str) -> TextPair:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not a JSON object ({error.msg})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a JSONL line must be an object with 'query' and 'positive'")
    unknown = sorted(set(record) - {"query", "positive", "negatives", "group"})
    if unknown or "query" not in record or "positive" not in record:
        raise ValueError(
            f"{where}: keys {sorted(record)}; a line needs 'query' and 'positive' (optional 'negatives', 'group')"
        )
    negatives = record.get("negatives", [])
    if not isinstance(negatives, list):
        raise ValueError(f"{where}: 'negatives' must be a list of strings")
    query = _text(record["query"], "query", where)
    group = record.get("group", query)
    return TextPair(
        query,
        _text(record["positive"], "positive", where),
        _text(group, "group", where),
        tuple(_text(n, "a negative", where) for n in negatives),
    )


def _tsv_pair(line: str, where: str) -> TextPair:
    try:
        columns = next(csv.reader([line], delimiter="\t", quotechar='"', strict=True))
    except csv.Error:
        raise ValueError(
            f'{where}: a field starting with a double quote must be quoted whole, "text" with "" for each double'
            " quote inside it; quote the field or drop its leading double quote"
        ) from None
    if len(columns) < 2:
        raise ValueError(f"{where}: a TSV line needs query<TAB>positive, got one column")
    query = _text(columns[0], "query", where)
    return TextPair(
        query,
        _text(columns[1], "positive", where),
        query,
        tuple(_text(n, "a negative", where) for n in columns[2:]),
    )


def read_pairs_file(path: str | Path) -> list[TextPair]:
    """The pairs of a ``.jsonl`` or ``.tsv`` file.

    Raises:
        ValueError: for a missing file, another suffix, non-UTF-8 bytes (naming the byte offset), a malformed
            line or an empty text (naming the line), or a file without pairs.
    """
    file = Path(path)
    if file.suffix not in (".jsonl", ".tsv"):
        raise ValueError(f"text pairs file {str(file)!r}: use a .jsonl or .tsv file")
    if not file.is_file():
        raise ValueError(f"text pairs file {str(file)!r} does not exist")
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{file}: not UTF-8 text ({error.reason} at byte {error.start}); save the file as UTF-8"
        ) from None
    parse = _jsonl_pair if file.suffix == ".jsonl" else _tsv_pair
    pairs = [
        parse(line, f"{file}:{number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]
    if not pairs:
        raise ValueError(f"{file}: no pairs in the file")
    return pairs
