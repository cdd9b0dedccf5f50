"""TREC qrels and run files, as trec_eval reads them.

- qrels: one judgement per line, ``query_id iteration doc_id relevance`` (iteration is ignored, written 0);
  ``read_qrels`` gives ``{query_id: {doc_id: relevance}}``; relevance > 0 means relevant. Relevance is an integer
  of ASCII digits with an optional sign (as trec_eval reads it: ``1_0`` and Arabic-Indic ``١`` are errors, which
  Python's ``int`` would read as 10 and 1), and a (query, document) pair judged on several lines must be judged
  alike: a conflicting repeat is an error naming both lines.
- run: one retrieved item per line, ``query_id Q0 doc_id rank score tag``; ``read_run`` gives
  ``{query_id: [(doc_id, score), ...]}`` in file order (trec_eval re-sorts by score; so does
  :func:`crl.metrics.ir.ir_metrics_from_ranking`). A document listed twice for one query keeps its line of
  highest score (the first of equal ones), with a warning counting the lines dropped.

Ids are strings (whitespace-free); the readers name the file and line of any malformed line or byte that is not
UTF-8.
"""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from crl._lines import split_lines

__all__ = ["JudgedPairs", "read_qrels", "read_run", "relevant_sets", "write_qrels", "write_run"]

RELEVANCE = re.compile(r"[+-]?[0-9]+")
"""A relevance as trec_eval reads one: ASCII digits, an optional sign."""


def _check_id(value: object, what: str) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text):
        raise ValueError(f"{what} {text!r} is empty or holds whitespace; TREC ids are single tokens")
    return text


def _lines(path: Path) -> list[str]:
    """The lines of the UTF-8 file at ``path``; a byte that is not UTF-8 is an error naming its line."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}:{line}: not UTF-8 text ({error.reason} at byte {error.start}); save the file as UTF-8"
        ) from None
    return split_lines(text)


def _fields(path: Path, count: int) -> list[tuple[int, list[str]]]:
    rows = []
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != count:
            raise ValueError(f"{path}:{number}: expected {count} fields, got {len(parts)}: {line!r}")
        rows.append((number, parts))
    return rows


class JudgedPairs:
    """Judgements read line by line: ``qrels`` ``{query_id: {doc_id: relevance}}``, each pair judged once or alike."""

    def __init__(self) -> None:
        self.qrels: dict[str, dict[str, int]] = {}
        self._where: dict[tuple[str, str], str] = {}

    def add(self, query: str, doc: str, relevance: str, where: str, field: str = "relevance") -> None:
        """Record the judgement of line ``where`` (``"file:line"``), whose column ``field`` holds ``relevance``.

        Raises:
            ValueError: naming the line, for a relevance that is not an integer of ASCII digits
                (:data:`RELEVANCE`), or a pair judged otherwise on an earlier line (naming both).
        """
        if not RELEVANCE.fullmatch(relevance):
            raise ValueError(
                f"{where}: {field} {relevance!r} is not an integer of ASCII digits; write it as one (1, not 1.0,"
                " 1_0 or an Arabic-Indic digit)"
            )
        value = int(relevance)
        docs = self.qrels.setdefault(query, {})
        if doc in docs and docs[doc] != value:
            raise ValueError(
                f"{where}: ({query!r}, {doc!r}) is judged {value} here and {docs[doc]} at {self._where[(query, doc)]};"
                " keep one judgement per pair"
            )
        docs[doc] = value
        self._where.setdefault((query, doc), where)


def read_qrels(path: str | Path) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: relevance}}`` of a TREC qrels file (:class:`JudgedPairs`: integer relevance, one
    judgement per pair)."""
    source = Path(path)
    judged = JudgedPairs()
    for number, (query, _iteration, doc, relevance) in _fields(source, 4):
        judged.add(query, doc, relevance, f"{source}:{number}")
    return judged.qrels


def write_qrels(path: str | Path, qrels: Mapping[Any, Mapping[Any, int]]) -> None:
    """Write ``{query_id: {doc_id: relevance}}`` as a TREC qrels file."""
    lines = []
    for query, docs in qrels.items():
        for doc, relevance in docs.items():
            if isinstance(relevance, bool) or not isinstance(relevance, int):
                raise ValueError(f"qrels[{query!r}][{doc!r}] = {relevance!r}; relevance is an integer")
            lines.append(f"{_check_id(query, 'query id')} 0 {_check_id(doc, 'doc id')} {relevance}")
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def read_run(path: str | Path) -> dict[str, list[tuple[str, float]]]:
    """``{query_id: [(doc_id, score), ...]}`` of a TREC run file, in the order documents first appear.

    A document listed more than once for a query keeps its line of highest score (the first of equal ones);
    a ``UserWarning`` names the file and counts the lines dropped.
    """
    source = Path(path)
    run: dict[str, dict[str, float]] = {}
    dropped = 0
    for number, (query, _q0, doc, _rank, score, _tag) in _fields(source, 6):
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"{source}:{number}: score {score!r} is not a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{source}:{number}: score {score!r} is not finite")
        docs = run.setdefault(query, {})
        if doc in docs:
            dropped += 1
            value = max(docs[doc], value)
        docs[doc] = value
    if dropped:
        warnings.warn(
            f"{source}: {dropped} lines repeat a (query, document) pair; kept each document's highest score",
            stacklevel=2,
        )
    return {query: list(docs.items()) for query, docs in run.items()}


def write_run(path: str | Path, run: Mapping[Any, Sequence[tuple[object, float]]], tag: str = "crl") -> None:
    """Write ``{query_id: [(doc_id, score), ...]}`` as a TREC run, each query's items by decreasing score."""
    tag = _check_id(tag, "tag")
    lines = []
    for query, hits in run.items():
        ordered = sorted(hits, key=lambda hit: -float(hit[1]))
        for rank, (doc, score) in enumerate(ordered, start=1):
            if not math.isfinite(float(score)):
                raise ValueError(f"run[{query!r}] holds score {score!r} for {doc!r}; scores must be finite")
            line = (
                f"{_check_id(query, 'query id')} Q0 {_check_id(doc, 'doc id')} {rank} {float(score)!r} {tag}"
            )
            lines.append(line)
    Path(path).write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def relevant_sets(qrels: Mapping[str, Mapping[str, int]]) -> dict[str, set[str]]:
    """``{query_id: {doc_id with relevance > 0}}`` for :func:`crl.metrics.ir.ir_metrics_from_ranking`."""
    return {query: {doc for doc, rel in docs.items() if rel > 0} for query, docs in qrels.items()}
