"""Your own queries, corpus and qrels (BEIR's layout, TREC qrels): every layout gives the same task, and bad
input is one line naming the file and the fix.

If these fail, ``crl eval --queries --corpus --qrels`` reads a BEIR data set wrongly (a title lost, a header
taken for a judgement, a zero judgement counted as relevant), or answers bad files with a traceback.
"""

import json
from pathlib import Path

import pytest

from crl.metrics.task_files import read_task

QUERIES = {"q1": "what is a dog", "q2": "large body of water", "q3": "a query of another split"}
CORPUS = {"d1": ("Dog", "a domesticated canine"), "d2": ("", "the sea"), "d3": ("Cat", "a small feline")}
JUDGEMENTS = [("q1", "d1", 1), ("q2", "d2", 2), ("q2", "d3", 0)]


def _write(folder: Path, layout: str, qrels: str) -> tuple[Path, Path, Path]:
    """The three files of the task above in one layout (jsonl or tsv) with TREC or BEIR qrels."""
    if layout == "jsonl":
        queries, corpus = folder / "queries.jsonl", folder / "corpus.jsonl"
        queries.write_text("".join(json.dumps({"_id": q, "text": t}) + "\n" for q, t in QUERIES.items()))
        corpus.write_text(
            "".join(
                json.dumps({"_id": d, "title": title, "text": text, "metadata": {}}) + "\n"
                for d, (title, text) in CORPUS.items()
            )
        )
    else:
        queries, corpus = folder / "queries.tsv", folder / "corpus.tsv"
        queries.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
        corpus.write_text(
            "".join(f"{d}\t{f'{title} {text}'.strip()}\n" for d, (title, text) in CORPUS.items())
        )
    if qrels == "trec":
        judged = folder / "qrels.txt"
        judged.write_text("".join(f"{q} 0 {d} {r}\n" for q, d, r in JUDGEMENTS))
    else:
        judged = folder / "test.tsv"
        judged.write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in JUDGEMENTS)
        )
    return queries, corpus, judged


@pytest.mark.parametrize("layout", ["jsonl", "tsv"])
@pytest.mark.parametrize("qrels", ["trec", "beir"])
def test_every_layout_gives_the_same_task(tmp_path: Path, layout: str, qrels: str) -> None:
    task = read_task(*_write(tmp_path, layout, qrels))
    assert task.query_ids == ("q1", "q2")  # q3 has no judgement: another split's query
    assert task.queries == ("what is a dog", "large body of water")
    assert task.doc_ids == ("d1", "d2", "d3")
    assert task.corpus == ("Dog a domesticated canine", "the sea", "Cat a small feline")
    assert task.relevant == (frozenset({0}), frozenset({1}))  # relevance 0 is not relevant
    assert task.graded and task.grades == ({0: 1}, {1: 2})  # q2's grade 2 kept for graded gains


def test_qrels_of_grades_0_and_1_are_binary(tmp_path: Path) -> None:
    """A binary task carries no grades, so crl eval scores it with sentence-transformers' definitions."""
    queries, corpus, qrels = _write(tmp_path, "jsonl", "trec")
    qrels.write_text("q1 0 d1 1\nq2 0 d2 1\nq2 0 d3 0\n")
    task = read_task(queries, corpus, qrels)
    assert not task.graded and task.grades == () and task.qrels() == [[0], [1]]


def _break(files: tuple[Path, Path, Path], which: int, text: str) -> tuple[Path, Path, Path]:
    files[which].write_text(text)
    return files


BAD = [
    (
        lambda f: (f[0].with_name("missing.jsonl"), f[1], f[2]),
        r"queries file '.*missing.jsonl' does not exist",
    ),
    (
        lambda f: (f[0], f[1].with_suffix(".csv"), f[2]),
        r"corpus file '.*corpus.csv': use a .jsonl or .tsv file",
    ),
    (
        lambda f: _break(f, 2, "q1 0 d9 1\n"),
        r"document id 'd9' \(judged for query 'q1'\) is not in the corpus",
    ),
    (lambda f: _break(f, 2, "q7 0 d1 1\n"), r"query id 'q7' is not in the queries file"),
    (lambda f: _break(f, 2, "q1 0 d1 0\n"), r"no query of the queries file .* has a relevant document"),
    (lambda f: _break(f, 2, "q1 d1 1\n"), r"qrels.txt:1: a qrels line is TREC's"),
    (lambda f: _break(f, 2, "q1 0 d1 1\nq2 0 d2\n"), r"qrels.txt:2: expected 4 fields"),
    (lambda f: _break(f, 2, "\n"), r"qrels file .* is empty"),
    (
        lambda f: _break(f, 0, '{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n'),
        r"queries.jsonl:2: id 'q1'",
    ),
    (lambda f: _break(f, 0, '{"_id": "q 1", "text": "a"}\n'), r"queries.jsonl:1: id 'q 1' is empty or holds"),
    (
        lambda f: _break(f, 0, '{"id": "q1", "text": "a"}\n'),
        r"queries.jsonl:1: a queries line must be an object",
    ),
    (lambda f: _break(f, 1, '{"_id": "d1", "text": " "}\n'), r"corpus.jsonl:1: the text of 'd1' is empty"),
    (lambda f: _break(f, 1, "{oops\n"), r"corpus.jsonl:1: not a JSON object"),
    (lambda f: _break(f, 0, ""), r"queries file .* holds no queries"),
]


@pytest.mark.parametrize(("spoil", "match"), BAD)
def test_bad_files_are_one_line_naming_the_file(tmp_path: Path, spoil, match: str) -> None:  # type: ignore[no-untyped-def]
    files = spoil(_write(tmp_path, "jsonl", "trec"))
    with pytest.raises(ValueError, match=match) as caught:
        read_task(*files)
    assert "\n" not in str(caught.value)


def test_a_bad_beir_score_names_its_line(tmp_path: Path) -> None:
    queries, corpus, _ = _write(tmp_path, "tsv", "trec")
    qrels = tmp_path / "test.tsv"
    qrels.write_text("query-id\tcorpus-id\tscore\nq1\td1\thigh\n")
    with pytest.raises(ValueError, match=r"test.tsv:2: score 'high' is not an integer"):
        read_task(queries, corpus, qrels)
