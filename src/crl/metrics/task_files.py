"""A retrieval task from your own files, laid out as BEIR lays them out: queries, a corpus and qrels.

- queries and corpus: ``.jsonl``, one object per line with ``"_id"`` and ``"text"`` (a corpus line may add
  ``"title"``, embedded as ``title + " " + text``, as BEIR's dense retrieval does; other keys are ignored), or
  ``.tsv``, ``id<TAB>text`` per line without a header (quoted fields as in :mod:`crl.data.text.pairs_file`; a
  first line that names columns, such as ``id<TAB>text`` or ``doc_no<TAB>Body`` (:func:`is_header`), is an error,
  never a document);
- qrels: TREC (``query_id iteration doc_id relevance``, :func:`crl.metrics.trec.read_qrels`) or BEIR's TSV
  (``query-id<TAB>corpus-id<TAB>score``, its header line optional: a first line of exactly those names), told
  apart by the first line's fields. Every score is an integer (``1.0`` is an error naming its line, on the first
  line too), and a (query, document) pair judged twice must be judged alike (else an error naming both lines).

A document is relevant to a query when its judgement is > 0. Qrels whose judgements are all 0 or 1 are binary and
scored as sentence-transformers' evaluator scores them; a judgement above 1 makes them graded, scored with graded
gains as trec_eval (pytrec_eval, BEIR, MTEB) scores them (:mod:`crl.metrics.ir`). Only the queries with a
relevant document are evaluated (a queries file may hold the queries of other splits, as BEIR's does); every
document of the corpus is searched. Every error names the file, the line or id, and the fix: a missing file, a
malformed line, a repeated id, an empty text, a qrels id absent from the queries or the corpus, and a task without
a query to evaluate.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from crl.data.text import RetrievalTask
from crl.data.text.pairs_file import checked_text, text_file_lines, tsv_fields
from crl.metrics.trec import JudgedPairs, read_qrels

__all__ = ["is_header", "read_qrels_file", "read_task", "read_texts"]


def _jsonl_entry(line: str, where: str, what: str) -> tuple[object, str]:
    """(id, text) of one JSONL line: ``_id`` and ``text``, the text after ``title`` when there is one."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not a JSON object ({error.msg})") from None
    if not isinstance(record, dict) or "_id" not in record or "text" not in record:
        raise ValueError(f'{where}: a {what} line must be an object with "_id" and "text"')
    title = record.get("title") or ""
    text = record["text"]
    if not isinstance(title, str) or not isinstance(text, str):
        raise ValueError(f'{where}: "title" and "text" must be strings')
    return record["_id"], f"{title} {text}".strip()


def _tsv_entry(line: str, where: str, what: str) -> tuple[object, str]:
    """(id, text) of one ``id<TAB>text`` line."""
    fields = tsv_fields(line, where)
    if len(fields) != 2:
        raise ValueError(f"{where}: a {what} line of a .tsv file is id<TAB>text, got {len(fields)} fields")
    return fields[0], fields[1]


def _check_no_header(line: str, where: str, what: str) -> None:
    """Refuse a first ``.tsv`` line that names columns (:func:`is_header`)."""
    fields = line.split("\t")
    if len(fields) == 2 and is_header(*fields):
        raise ValueError(
            f"{where}: {line!r} is a header; a .tsv {what} file has none (each line is id<TAB>text): remove the line"
        )


def is_header(id_field: str, text_field: str) -> bool:
    """Whether a first ``id<TAB>text`` line names columns rather than holding a document: both fields are column
    names (:data:`COLUMN_NAME`: a word or a few joined by ``_`` or ``-``), the first names ids (its last
    word is one of :data:`ID_WORDS` or ends in "id": ``id``, ``_id``, ``docid``, ``query-id``, ``doc_no``) and the
    second names texts (one of its words is one of :data:`TEXT_WORDS`: ``text``, ``body``, ``passage_text``)."""
    id_words, text_words = _column_words(id_field), _column_words(text_field)
    names_ids = bool(id_words) and (id_words[-1] in ID_WORDS or id_words[-1].endswith("id"))
    return names_ids and any(word in TEXT_WORDS for word in text_words)


def _column_words(field: str) -> list[str]:
    """The lower-case words of ``field`` when it is a column name (:data:`COLUMN_NAME`), else none."""
    name = field.strip()
    if not COLUMN_NAME.fullmatch(name):
        return []
    return [word for word in re.split(r"[_-]+", name.lower()) if word]


def read_texts(path: str | Path, what: str) -> dict[str, str]:
    """``{id: text}`` of a queries or corpus file (``what``: ``"queries"`` or ``"corpus"``), in file order.

    Raises:
        ValueError: for a missing file or another suffix, a header line of a .tsv, a malformed line, an id that
            is empty, holds whitespace or repeats, an empty text (each naming its line), or a file without
            entries.
    """
    entry = _jsonl_entry if Path(path).suffix == ".jsonl" else _tsv_entry
    texts: dict[str, str] = {}
    lines = text_file_lines(path, f"{what} file")
    if lines and entry is _tsv_entry:
        _check_no_header(lines[0][1], lines[0][0], what)
    for where, line in lines:
        raw_id, text = entry(line, where, what)
        name = str(raw_id) if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else ""
        if not name or any(ch.isspace() for ch in name):
            raise ValueError(f"{where}: id {raw_id!r} is empty or holds whitespace; ids are single tokens")
        if name in texts:
            raise ValueError(f"{where}: id {name!r} appears twice in the {what} file; give each its own id")
        texts[name] = checked_text(text, f"the text of {name!r}", where)
    if not texts:
        raise ValueError(f"{what} file {str(path)!r} holds no {what}; pass a file with one entry per line")
    return texts


BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")
"""The column names of BEIR's qrels header line, the only first line skipped."""

COLUMN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9]*(?:[_-]+[A-Za-z0-9]+){0,3}")
"""A column name: one to four words of letters and digits joined by ``_`` or ``-`` (no spaces: a text has them)."""
ID_WORDS = frozenset({"id", "ids", "no", "num", "number", "key", "docno", "qno"})
"""Last words of a column of ids (beside any word ending in "id": ``docid``, ``qid``, ``pid``)."""
TEXT_WORDS = frozenset(
    {
        "text",
        "texts",
        "title",
        "query",
        "question",
        "document",
        "doc",
        "passage",
        "content",
        "contents",
        "body",
        "sentence",
        "abstract",
        "string",
        "description",
        "caption",
    }
)
"""Words of a column of texts: a first ``.tsv`` line whose text names such a column is a header (:func:`is_header`)."""


def _beir_qrels(lines: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: score}}`` of BEIR's ``query-id<TAB>corpus-id<TAB>score`` lines (the first may be
    the header :data:`BEIR_QRELS_HEADER`)."""
    judged = JudgedPairs()
    for number, (where, line) in enumerate(lines):
        fields = line.split("\t")
        if len(fields) != 3:
            raise ValueError(f"{where}: a BEIR qrels line is query-id<TAB>corpus-id<TAB>score: {line!r}")
        query, doc, score = (field.strip() for field in fields)
        if number == 0 and tuple(field.lower() for field in (query, doc, score)) == BEIR_QRELS_HEADER:
            continue
        judged.add(query, doc, score, where, "score")
    return judged.qrels


def read_qrels_file(path: str | Path) -> dict[str, dict[str, int]]:
    """``{query_id: {doc_id: relevance}}`` of a TREC qrels file (4 fields a line) or a BEIR qrels TSV (3
    TAB-separated fields a line, header optional).

    Raises:
        ValueError: for a missing file, a first line of neither layout, or a malformed line (naming it).
    """
    lines = text_file_lines(path, "qrels file", suffixes=())
    if not lines:
        raise ValueError(f"qrels file {str(path)!r} is empty; pass one judgement per line")
    where, first = lines[0]
    if len(first.split("\t")) == 3:
        return _beir_qrels(lines)
    if len(first.split()) == 4:
        return read_qrels(path)
    raise ValueError(
        f"{where}: a qrels line is TREC's 'query_id 0 doc_id relevance' or BEIR's "
        f"'query-id<TAB>corpus-id<TAB>score', got {first!r}"
    )


def read_task(queries: str | Path, corpus: str | Path, qrels: str | Path) -> RetrievalTask:
    """The task of a queries file, a corpus file and a qrels file: the queries with a relevant document (in the
    queries file's order) against the whole corpus, ids kept.

    Raises:
        ValueError: for a bad file (:func:`read_texts`, :func:`read_qrels_file`), a qrels query id absent from
            the queries file or document id absent from the corpus file, or no query with a relevant document.
    """
    query_texts, documents = read_texts(queries, "queries"), read_texts(corpus, "corpus")
    judgements = read_qrels_file(qrels)
    for query, docs in judgements.items():
        if query not in query_texts:
            raise ValueError(
                f"qrels file {str(qrels)!r}: query id {query!r} is not in the queries file {str(queries)!r}; "
                "add that query or drop its judgements"
            )
        for doc in docs:
            if doc not in documents:
                raise ValueError(
                    f"qrels file {str(qrels)!r}: document id {doc!r} (judged for query {query!r}) is not in the "
                    f"corpus file {str(corpus)!r}; add that document or drop the judgement"
                )
    relevant = {
        query: [doc for doc, relevance in judgements.get(query, {}).items() if relevance > 0]
        for query in query_texts
    }
    kept = [query for query, docs in relevant.items() if docs]
    if not kept:
        raise ValueError(
            f"no query of the queries file {str(queries)!r} has a relevant document (relevance > 0) in the qrels "
            f"file {str(qrels)!r}; check that the qrels name the queries' and the corpus' ids"
        )
    index = {doc: position for position, doc in enumerate(documents)}
    grades = tuple({index[doc]: judgements[query][doc] for doc in relevant[query]} for query in kept)
    return RetrievalTask(
        tuple(query_texts[query] for query in kept),
        tuple(documents.values()),
        tuple(frozenset(index[doc] for doc in relevant[query]) for query in kept),
        tuple(kept),
        tuple(documents),
        grades if any(grade > 1 for entry in grades for grade in entry.values()) else (),
    )
