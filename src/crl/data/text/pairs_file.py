"""Your own text pairs from a JSONL or TSV file: a query, its positive, and optional hard negatives.

- JSONL (``.jsonl``): one object per line, ``{"query": ..., "positive": ..., "negatives": [...], "group": ...}``;
  ``negatives`` and ``group`` are optional (the group defaults to the query, see :mod:`crl.data.text.pairs`).
- TSV (``.tsv``): ``query<TAB>positive[<TAB>negative ...]``, no header. Every TAB separates two columns, except
  inside a quoted field: a field that starts with a double quote runs to the next lone double quote and may hold
  TABs, with ``""`` for a double quote inside it (``"a<TAB>b"`` is the text a<TAB>b); a field that starts with a
  double quote but is not such a quoted field is an error naming its line.

The file must be UTF-8 and is split into lines at "\\n" only (:func:`crl._lines.split_lines`: U+2028, U+0085 and the
other characters ``str.splitlines`` breaks at are text inside a line, as JSON allows them); a blank line is skipped,
and an empty query or positive, or a text holding a lone surrogate (a JSON escape such as ``"\\ud800"`` that encodes
no character), is an error naming its line. Its line reading, TSV fields and text checks (:func:`text_file_lines`,
:func:`tsv_fields`, :func:`checked_text`) read other text files too (a retrieval task's queries and corpus).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from crl._lines import split_lines
from crl._validate import missing_file
from crl.data.text.pairs import TextPair

__all__ = ["checked_text", "read_pairs_file", "text_file_lines", "tsv_fields"]


def checked_text(value: object, what: str, where: str) -> str:
    """``value`` stripped, if it is a non-empty string that encodes as UTF-8 (an error naming ``where`` and
    ``what`` otherwise)."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: {what} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{where}: {what} is empty; give it text or remove that line")
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
    query = checked_text(record["query"], "query", where)
    group = record.get("group", query)
    return TextPair(
        query,
        checked_text(record["positive"], "positive", where),
        checked_text(group, "group", where),
        tuple(checked_text(n, "a negative", where) for n in negatives),
    )


def tsv_fields(line: str, where: str) -> list[str]:
    """The TAB-separated fields of ``line``; a field that starts with a double quote is quoted whole, may hold
    TABs and writes a double quote as ``""`` (an error naming ``where`` otherwise)."""
    try:
        return next(csv.reader([line], delimiter="\t", quotechar='"', strict=True))
    except csv.Error:
        raise ValueError(
            f'{where}: a field starting with a double quote must be quoted whole, "text" with "" for each double'
            " quote inside it; quote the field or drop its leading double quote"
        ) from None


def _tsv_pair(line: str, where: str) -> TextPair:
    columns = tsv_fields(line, where)
    if len(columns) < 2:
        raise ValueError(f"{where}: a TSV line needs query<TAB>positive, got one column")
    query = checked_text(columns[0], "query", where)
    return TextPair(
        query,
        checked_text(columns[1], "positive", where),
        query,
        tuple(checked_text(n, "a negative", where) for n in columns[2:]),
    )


def text_file_lines(
    path: str | Path, what: str, suffixes: tuple[str, ...] = (".jsonl", ".tsv")
) -> list[tuple[str, str]]:
    """The non-blank lines of a UTF-8 file, each with its place ``"file:line"``.

    Args:
        path: the file.
        what: what the file is, for the messages (``"text pairs file"``).
        suffixes: the suffixes allowed (empty: any).

    Raises:
        ValueError: for another suffix, a missing file, or non-UTF-8 bytes (naming the byte offset).
    """
    file = Path(path)
    if suffixes and file.suffix not in suffixes:
        raise ValueError(f"{what} {str(file)!r}: use a {' or '.join(suffixes)} file")
    if not file.is_file():
        raise ValueError(f"{what} {str(file)!r} {missing_file(file)}; pass the path of the file")
    try:
        text = file.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{file}: not UTF-8 text ({error.reason} at byte {error.start}); save the file as UTF-8"
        ) from None
    return [
        (f"{file}:{number}", line) for number, line in enumerate(split_lines(text), start=1) if line.strip()
    ]


def read_pairs_file(path: str | Path) -> list[TextPair]:
    """The pairs of a ``.jsonl`` or ``.tsv`` file.

    Raises:
        ValueError: for a missing file, another suffix, non-UTF-8 bytes (naming the byte offset), a malformed
            line or an empty text (naming the line), or a file without pairs.
    """
    lines = text_file_lines(path, "text pairs file")
    parse = _jsonl_pair if Path(path).suffix == ".jsonl" else _tsv_pair
    pairs = [parse(line, where) for where, line in lines]
    if not pairs:
        raise ValueError(f"{Path(path)}: no pairs in the file")
    return pairs
